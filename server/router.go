package server

import "kvs/fsm"

// The router is the one place that knows how this node is deployed: alone
// (memory or durable mode) or as a member of a cluster, and which
// replication group holds a slot. Everything else asks it, never the
// configuration: whether there is a cluster at all (CLUSTER, READONLY,
// INFO, the KVS.* commands, pub/sub links), and, of the group a command's
// keys belong to, whether this node leads it (run the command here) or
// where its leader is (forward, or answer MOVED).
//
// A node holds one group today, which owns all 16384 slots: the router's
// home. The group is the unit that proposes writes, answers for its
// leadership and read barrier, and expires and evicts its keys.
type router struct {
	// cluster is the node's cluster (members, their addresses, joins and
	// removals); nil: standalone.
	cluster Cluster
	home    groupRef
}

// groupRef is one replication group as the server uses it: its store, the
// proposer of its writes, and its replication.
type groupRef struct {
	store    *fsm.Store
	proposer Proposer
	// raft is the group's replication (leader, read barrier, applied
	// index); nil: a group without replicas, which this node leads.
	raft Cluster
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

func newRouter(cfg *Config) router {
	return router{cluster: cfg.Cluster, home: groupRef{store: cfg.Store, proposer: cfg.Proposer, raft: cfg.Cluster}}
}

// clustered reports whether the node is a member of a cluster.
func (r *router) clustered() bool { return r.cluster != nil }

// groupOf returns the group that holds slot.
func (r *router) groupOf(slot int) *groupRef { return &r.home }
