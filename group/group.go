package group

import (
	"errors"

	"kvs/cluster"
	"kvs/fsm"
	"kvs/wal"
)

// Proposer orders a group's writes: it returns one reply per command, in
// order, once the batch is applied, or an error of this package's kinds.
type Proposer interface {
	Propose(cmds []fsm.Command) ([]fsm.Reply, error)
}

// A Group is one replication group on this node: its store and what
// orders the writes to it. Build one with Memory, OpenDurable, OpenRaft
// or Node.OpenGroup; Close it once the server no longer proposes to it.
type Group struct {
	id       uint32
	store    *fsm.Store
	proposer Proposer // nil in memory mode
	log      *wal.Log // durable mode
	node     *cluster.Node
	raft     *raftProposer // raft mode
	owner    *Node         // the node a raft group was opened on
	// closeOwner: the group's Close closes owner too (OpenRaft's node,
	// which holds this group alone).
	closeOwner bool
}

// Memory is a group without a log: nothing survives a restart, and the
// server applies writes to the store itself.
func Memory(store *fsm.Store) *Group { return &Group{store: store} }

// ID is the group's id: 0 for memory and durable groups, which are a
// node's only group.
func (g *Group) ID() uint32 { return g.id }

// Store is the group's state machine.
func (g *Group) Store() *fsm.Store { return g.store }

// Proposer orders the group's writes; nil for a memory group, whose
// writes the server applies directly.
func (g *Group) Proposer() Proposer { return g.proposer }

// Log is a durable group's append log, or nil.
func (g *Group) Log() *wal.Log { return g.log }

// Node is a raft group's replica on this node, or nil.
func (g *Group) Node() *cluster.Node { return g.node }

// Save writes the group's state to its data dir now (SAVE, BGSAVE): a
// compaction of a durable group's log, a raft group's snapshot. A memory
// group has nowhere to save to.
func (g *Group) Save() error {
	switch {
	case g.log != nil:
		return g.log.Compact()
	case g.node != nil:
		return g.node.Snapshot()
	}
	return errors.New("a memory group has no data dir")
}

// Close stops the group's proposer, letting it finish what is queued, and
// then closes its log or raft replica (which hands its leadership over
// first). Idempotent.
func (g *Group) Close() error {
	if g.raft != nil {
		g.raft.stop()
	}
	switch {
	case g.log != nil:
		return g.log.Close()
	case g.node != nil:
		err := g.node.Close()
		g.owner.forget(g)
		if g.closeOwner {
			g.owner.Close()
		}
		return err
	}
	return nil
}
