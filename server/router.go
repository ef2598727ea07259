package server

import (
	"strconv"

	"kvs/fsm"
)

// The router is the one place that knows how this node is deployed: alone
// (memory or durable mode) or as a member of a cluster, and which
// replication group holds a slot. Everything else asks it, never the
// configuration: whether there is a cluster at all (CLUSTER, READONLY,
// INFO, the KVS.* commands, pub/sub links), and, of the group a command's
// keys belong to, whether this node leads it (run the command here) or
// where its leader is (forward, or answer MOVED).
//
// A node holds one group, which owns all 16384 slots (its home), unless it
// was given several (Config.Groups): then each slot belongs to one group,
// the keys of one command must share a slot (CROSSSLOT otherwise, as in
// Redis Cluster), and the command runs on that slot's group. The home
// group also holds what the node shares (ACL users, functions). The group
// is the unit that proposes writes, answers for its leadership and read
// barrier, and expires and evicts its keys.
type router struct {
	// cluster is the node's cluster (members, their addresses, joins and
	// removals); nil: standalone.
	cluster Cluster
	home    groupRef
	// groups are the node's groups, groups[0] the home; slots maps a
	// slot to its index in groups, nil with one group.
	groups []*groupRef
	slots  []uint16
}

// Group is one replication group a node holds (Config.Groups).
type Group struct {
	Store    *fsm.Store
	Proposer Proposer
	// Raft is the group's replication (leader, read barrier, applied
	// index); nil: a group without replicas, which this node leads.
	Raft Cluster
}

// groupRef is one replication group as the server uses it: its store, the
// proposer of its writes, and its replication.
type groupRef struct {
	store    *fsm.Store
	proposer Proposer
	// raft is the group's replication (leader, read barrier, applied
	// index); nil: a group without replicas, which this node leads.
	raft Cluster
	// index is the group's place in router.groups, the same on every
	// node of a cluster.
	index int
	// rsync is the READONLY reads' questions to the group's leader
	// (replicasync.go).
	rsync replicaSync
}

// leads reports whether this node decides the group's writes: it leads
// the group, or the group has no replicas.
func (g *groupRef) leads() bool { return g.raft == nil || g.raft.Self().Leader }

// replicated reports whether the group has replicas (and so a leader,
// followers, a read barrier).
func (g *groupRef) replicated() bool { return g.raft != nil }

// caughtUp reports whether the group's store may serve reads: it has
// applied what its log held when the node started.
func (g *groupRef) caughtUp() bool { return g.raft == nil || g.raft.CaughtUp() }

// init sets the router up for cfg, in place: the groups point at its
// home.
func (r *router) init(cfg *Config) {
	r.cluster = cfg.Cluster
	r.home.store, r.home.proposer, r.home.raft = cfg.Store, cfg.Proposer, cfg.Cluster
	r.groups = []*groupRef{&r.home}
	if len(cfg.Groups) > 1 {
		r.slots = cfg.Slots
		for i, g := range cfg.Groups[1:] {
			r.groups = append(r.groups, &groupRef{store: g.Store, proposer: g.Proposer, raft: g.Raft, index: i + 1})
		}
	}
}

// clustered reports whether the node is a member of a cluster.
func (r *router) clustered() bool { return r.cluster != nil }

// sharded reports whether the node's slots are spread over several groups.
func (r *router) sharded() bool { return r.slots != nil }

// groupOf returns the group that holds slot.
func (r *router) groupOf(slot int) *groupRef {
	if r.slots == nil || slot < 0 {
		return &r.home
	}
	return r.groups[r.slots[slot]]
}

// stores calls f with each group's store.
func (r *router) stores(f func(*fsm.Store)) {
	for _, g := range r.groups {
		f(g.store)
	}
}

// dataBytes is the size of the data of all the node's groups (used
// memory's data part).
func (s *Server) dataBytes() int64 {
	var n int64
	s.router.stores(func(st *fsm.Store) { n += st.DataBytes() })
	return n
}

// lazyFreedObjects is how many objects the groups' stores freed lazily.
func (s *Server) lazyFreedObjects() int64 {
	var n int64
	s.router.stores(func(st *fsm.Store) { n += st.LazyFreed() })
	return n
}

// dirty is the changes the groups' stores applied since they started.
func (s *Server) dirty() int64 {
	var n int64
	s.router.stores(func(st *fsm.Store) { n += st.Dirty() })
	return n
}

// groupArg returns the group a node request names by its index (KVS.SYNC,
// KVS.FORWARD), the home group when args is empty.
func (r *router) groupArg(args [][]byte) (*groupRef, string) {
	if len(args) == 0 {
		return &r.home, ""
	}
	i, err := strconv.Atoi(string(args[0]))
	if err != nil || i < 0 || i >= len(r.groups) {
		return nil, "ERR no such group: " + string(args[0])
	}
	return r.groups[i], ""
}

// scriptBusy is the busy script of the node's groups, if one is: a sharded
// node refuses commands while a script of any group is busy, as Redis
// does while its one script is.
func (s *Server) scriptBusy() fsm.Busy {
	if !s.router.sharded() {
		return s.cfg.Store.ScriptBusy()
	}
	for _, g := range s.router.groups {
		if b := g.store.ScriptBusy(); b != fsm.NotBusy {
			return b
		}
	}
	return fsm.NotBusy
}

// slotRun is a run of consecutive slots of one group.
type slotRun struct {
	first, last int
	g           *groupRef
}

// slotRuns returns the slot map as runs, in slot order.
func (r *router) slotRuns() []slotRun {
	if r.slots == nil {
		return []slotRun{{0, fsm.ClusterSlots - 1, &r.home}}
	}
	var runs []slotRun
	for s := 0; s < fsm.ClusterSlots; {
		e := s
		for e+1 < fsm.ClusterSlots && r.slots[e+1] == r.slots[s] {
			e++
		}
		runs = append(runs, slotRun{s, e, r.groups[r.slots[s]]})
		s = e + 1
	}
	return runs
}
