package server

import (
	"slices"
	"strconv"
	"strings"

	"kvs/fsm"
)

// Redis Cluster's view of a sharded node's cluster: each group that holds
// slots (not the cluster's meta group) is a shard,
// its leader the master of the group's slots and its other members the
// replicas. Redis Cluster has a node be the master of one shard or the
// replica of one; a kvs node may lead one group and follow another. CLUSTER
// SLOTS and SHARDS say exactly that (a node appears in every shard it holds
// a replica of, master of some, replica of others), which cluster clients
// route by; CLUSTER NODES, which has one line per node, calls a node master
// when it leads a group and lists the slots of the groups it leads, and
// calls a node that leads none the replica of its first group's master.
// CLUSTER REPLICAS, ROLE and INFO replication say the same (nodeRole).

// shard is one group as the topology commands show it.
type shard struct {
	index    int      // the group's; 0 for the meta group, and for no group
	ranges   [][2]int // the group's slots, as ranges, in order
	master   *topoNode
	replicas []*topoNode
	status   ClusterStatus
}

// serving reports whether the shard is a data group with a known master:
// what the topology commands list. A cluster's meta group holds no slots
// and is not listed; a data group without slots (one just added, or being
// emptied to be removed) is, as Redis Cluster lists a master without
// slots: in CLUSTER SHARDS and NODES, not in SLOTS.
func (sh *shard) serving() bool { return sh.master != nil && (len(sh.ranges) > 0 || sh.index > 0) }

// shards returns the groups of a sharded node as shards, over t's nodes,
// their slots by map m.
func (s *Server) shards(t *topology, m *slotMap) []shard {
	byID := map[string]*topoNode{}
	for i := range t.nodes {
		byID[t.nodes[i].ID] = &t.nodes[i]
	}
	out := make([]shard, len(s.router.table()))
	for _, run := range s.router.slotRuns(m) {
		out[run.g.index].ranges = append(out[run.g.index].ranges, [2]int{run.first, run.last})
	}
	for g := range s.router.all() {
		sh := &out[g.index]
		sh.index = g.index
		var members []Member
		var leader Member
		var hasLeader bool
		if g.remote() {
			members = s.router.remote.Members(g.index)
			leader, hasLeader = s.router.remote.Leader(g.index)
		} else {
			sh.status = g.raft.Status()
			var err error
			if members, err = g.raft.Members(); err != nil {
				continue
			}
			leader, hasLeader = g.raft.Leader()
		}
		for _, m := range members {
			if !m.Voter {
				continue // catching up: not a replica to read from yet
			}
			n := byID[m.ID]
			if n == nil {
				continue // no client address known yet
			}
			if hasLeader && m.ID == leader.ID {
				sh.master = n
			} else {
				sh.replicas = append(sh.replicas, n)
			}
		}
	}
	return out
}

// clusterSlotsSharded answers CLUSTER SLOTS on a sharded node: a range per
// run of slots of one group with a known leader, by first slot.
func (c *client) clusterSlotsSharded(shards []shard) {
	type entry struct {
		r  [2]int
		sh *shard
	}
	var entries []entry
	for i := range shards {
		if shards[i].master == nil {
			continue
		}
		for _, r := range shards[i].ranges {
			entries = append(entries, entry{r, &shards[i]})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return a.r[0] - b.r[0] })
	b := appendArrayLen(c.out, len(entries))
	for _, e := range entries {
		b = appendArrayLen(b, 3+len(e.sh.replicas))
		b = appendInt(b, int64(e.r[0]))
		b = appendInt(b, int64(e.r[1]))
		for _, n := range append([]*topoNode{e.sh.master}, e.sh.replicas...) {
			b = appendArrayLen(b, 4)
			b = appendBulkString(b, n.host)
			b = appendInt(b, int64(n.port))
			b = appendBulkString(b, n.nodeID)
			b = appendMapLen(b, 0, c.proto)
		}
	}
	c.out = b
}

// clusterShardsSharded answers CLUSTER SHARDS on a sharded node: a shard
// per group with a known leader, its master first.
func (c *client) clusterShardsSharded(shards []shard) {
	n := 0
	for i := range shards {
		if shards[i].serving() {
			n++
		}
	}
	b := appendArrayLen(c.out, n)
	for i := range shards {
		sh := &shards[i]
		if !sh.serving() {
			continue
		}
		b = appendMapLen(b, 2, c.proto)
		b = appendBulkString(b, "slots")
		b = appendArrayLen(b, 2*len(sh.ranges))
		for _, r := range sh.ranges {
			b = appendInt(b, int64(r[0]))
			b = appendInt(b, int64(r[1]))
		}
		b = appendBulkString(b, "nodes")
		nodes := append([]*topoNode{sh.master}, sh.replicas...)
		b = appendArrayLen(b, len(nodes))
		for _, node := range nodes {
			role, offset := "replica", int64(sh.status.CommitIndex)
			if node == sh.master {
				role = "master"
			}
			if node.self {
				offset = int64(sh.status.AppliedIndex)
			}
			b = appendShardNode(b, c.proto, node, role, offset)
		}
	}
	c.out = b
}

// nodeRole is what the topology commands of a sharded node call one
// node: the master of the slots of the groups it leads, or else the
// replica of the master of its first group. Groups are taken in the order
// of the lowest slot each holds (slotMap.bySlot), so a node's first group
// is the one its keyless scripts run in (scriptGroup), when it holds it.
type nodeRole struct {
	// leads says the node leads a data group, with slots or not: a
	// master.
	leads bool
	led   [][2]int // the slots of the groups it leads, in order
	// own is the group the node is described by: the first it leads,
	// else the first it is a replica of; nil: neither.
	own *shard
	// master is own's master for a node that leads no group: the master
	// it is the replica of.
	master *topoNode
}

// roles returns the role of each of t's nodes, by index in t.nodes; order
// is the groups' order (slotMap.bySlot), followed here by the data groups
// without slots, by id.
func (t *topology) roles(shards []shard, order []int) []nodeRole {
	order = slices.Clone(order)
	for i := range shards {
		if sh := &shards[i]; sh.index > 0 && len(sh.ranges) == 0 {
			order = append(order, i)
		}
	}
	out := make([]nodeRole, len(t.nodes))
	for i := range t.nodes {
		n, r := &t.nodes[i], &out[i]
		var follows *shard
		for _, j := range order {
			sh := &shards[j]
			switch {
			case sh.master == n:
				r.leads = r.leads || sh.serving()
				r.led = append(r.led, sh.ranges...)
				if r.own == nil {
					r.own = sh
				}
			case follows == nil && sh.serving() && slices.Contains(sh.replicas, n):
				follows = sh
			}
		}
		slices.SortFunc(r.led, func(a, b [2]int) int { return a[0] - b[0] })
		if r.own == nil && follows != nil {
			r.own, r.master = follows, follows.master
		}
	}
	return out
}

// nodesSharded is CLUSTER NODES's text on a sharded node.
func (t *topology) nodesSharded(roles []nodeRole) string {
	var b strings.Builder
	for i := range t.nodes {
		b.WriteString(t.lineSharded(&t.nodes[i], &roles[i]))
		b.WriteByte('\n')
	}
	return b.String()
}

// lineSharded is n's line of CLUSTER NODES on a sharded node (without the
// newline), r its role.
func (t *topology) lineSharded(n *topoNode, r *nodeRole) string {
	var b strings.Builder
	b.WriteString(n.nodeID)
	b.WriteByte(' ')
	b.WriteString(n.host + ":" + strconv.Itoa(n.port) + "@" + strconv.Itoa(n.cport))
	b.WriteByte(' ')
	if n.self {
		b.WriteString("myself,")
	}
	switch {
	case r.leads:
		b.WriteString("master - ")
	case r.master != nil:
		b.WriteString("slave " + r.master.nodeID + " ")
	default:
		b.WriteString("slave - ")
	}
	b.WriteString("0 0 ")
	b.WriteString(strconv.FormatUint(t.status.Term, 10))
	b.WriteString(" connected")
	for _, rg := range r.led {
		b.WriteByte(' ')
		if rg[0] == rg[1] {
			b.WriteString(strconv.Itoa(rg[0]))
		} else {
			b.WriteString(strconv.Itoa(rg[0]) + "-" + strconv.Itoa(rg[1]))
		}
	}
	return b.String()
}

// clusterReplicasSharded answers CLUSTER REPLICAS|SLAVES <node-id> on a
// sharded node: the nodes CLUSTER NODES shows as the node's replicas.
func (c *client) clusterReplicasSharded(t *topology, roles []nodeRole, id string) {
	i := slices.IndexFunc(t.nodes, func(n topoNode) bool { return n.nodeID == id })
	switch {
	case i < 0:
		c.out = appendError(c.out, errUnknownNode(id))
	case !roles[i].leads:
		c.out = appendError(c.out, errNotMaster)
	default:
		var lines []string
		for j := range t.nodes {
			if roles[j].master == &t.nodes[i] {
				lines = append(lines, t.lineSharded(&t.nodes[j], &roles[j]))
			}
		}
		c.out = appendArrayLen(c.out, len(lines))
		for _, l := range lines {
			c.out = appendBulkString(c.out, l)
		}
	}
}

// replicationSharded is what ROLE and INFO replication say of a sharded
// node, as CLUSTER NODES does: a node that leads a group is a master, at
// its applied index of the first group it leads, and its replicas are the
// nodes CLUSTER NODES shows as its replicas, each at the commit index of
// its own group (which this node leads); a node that leads none is a
// replica of its first group's master, at its applied index of that
// group, or, holding no group, a replica of no known master at 0.
func (s *Server) replicationSharded(t *topology) replication {
	m := s.router.slotMap()
	roles := t.roles(s.shards(t, m), m.bySlot)
	me := slices.IndexFunc(t.nodes, func(n topoNode) bool { return n.self })
	if me < 0 {
		// This node's client address is not known yet: no group names it.
		return replication{}
	}
	r := &roles[me]
	var rp replication
	if r.own != nil {
		rp.offset = int64(r.own.status.AppliedIndex)
	}
	if !r.leads {
		rp.of = r.master
		return rp
	}
	rp.master = true
	for i := range t.nodes {
		if roles[i].master == &t.nodes[me] {
			rp.replicas = append(rp.replicas, replicaOffset{&t.nodes[i], int64(roles[i].own.status.CommitIndex)})
		}
	}
	return rp
}

// infoSharded is CLUSTER INFO's text on a sharded node: ok while every
// group has a leader; the cluster's size is the number of nodes that lead
// a group.
func (t *topology) infoSharded(shards []shard) string {
	ok, masters := 0, map[*topoNode]bool{}
	for i := range shards {
		if m := shards[i].master; shards[i].serving() && len(shards[i].ranges) > 0 {
			// Redis's cluster_size: the masters serving a slot.
			masters[m] = true
			for _, r := range shards[i].ranges {
				ok += r[1] - r[0] + 1
			}
		}
	}
	state := "ok"
	if ok != fsm.ClusterSlots {
		state = "fail"
	}
	return t.infoText(state, fsm.ClusterSlots, ok, len(masters))
}
