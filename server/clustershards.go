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

// shard is one group as the topology commands show it.
type shard struct {
	ranges   [][2]int // the group's slots, as ranges, in order
	master   *topoNode
	replicas []*topoNode
	status   ClusterStatus
}

// serving reports whether the shard has slots and a known master: what
// the topology commands list. A cluster's meta group holds no slots.
func (sh *shard) serving() bool { return sh.master != nil && len(sh.ranges) > 0 }

// shards returns the groups of a sharded node as shards, over t's nodes.
func (s *Server) shards(t *topology) []shard {
	byID := map[string]*topoNode{}
	for i := range t.nodes {
		byID[t.nodes[i].ID] = &t.nodes[i]
	}
	out := make([]shard, len(s.router.groups))
	for _, run := range s.router.slotRuns() {
		out[run.g.index].ranges = append(out[run.g.index].ranges, [2]int{run.first, run.last})
	}
	for g := range s.router.all() {
		sh := &out[g.index]
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

// nodesSharded is CLUSTER NODES's text on a sharded node.
func (t *topology) nodesSharded(shards []shard) string {
	var b strings.Builder
	for i := range t.nodes {
		n := &t.nodes[i]
		var led [][2]int
		var masterOf *topoNode // the master of the first group n follows
		for j := range shards {
			sh := &shards[j]
			switch {
			case sh.master == n:
				led = append(led, sh.ranges...)
			case masterOf == nil && sh.serving() && slices.Contains(sh.replicas, n):
				masterOf = sh.master
			}
		}
		slices.SortFunc(led, func(a, b [2]int) int { return a[0] - b[0] })
		b.WriteString(n.nodeID)
		b.WriteByte(' ')
		b.WriteString(n.host + ":" + strconv.Itoa(n.port) + "@" + strconv.Itoa(n.cport))
		b.WriteByte(' ')
		if n.self {
			b.WriteString("myself,")
		}
		switch {
		case len(led) > 0:
			b.WriteString("master - ")
		case masterOf != nil:
			b.WriteString("slave " + masterOf.nodeID + " ")
		default:
			b.WriteString("slave - ")
		}
		b.WriteString("0 0 ")
		b.WriteString(strconv.FormatUint(t.status.Term, 10))
		b.WriteString(" connected")
		for _, r := range led {
			b.WriteByte(' ')
			if r[0] == r[1] {
				b.WriteString(strconv.Itoa(r[0]))
			} else {
				b.WriteString(strconv.Itoa(r[0]) + "-" + strconv.Itoa(r[1]))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// infoSharded is CLUSTER INFO's text on a sharded node: ok while every
// group has a leader; the cluster's size is the number of nodes that lead
// a group.
func (t *topology) infoSharded(shards []shard) string {
	ok, masters := 0, map[*topoNode]bool{}
	for i := range shards {
		if m := shards[i].master; shards[i].serving() {
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
