package server

import (
	"context"
	"time"

	"kvs/group"
)

// Cluster is the server's view of the Raft layer in cluster mode
// (Config.Cluster). cmd/kvs implements it over the cluster package; the
// server never imports that package. Every method must be safe for
// concurrent use and must not block for long: the server calls them from
// connection goroutines.
type Cluster interface {
	// Self describes this node (Leader set when it leads).
	Self() Member
	// Leader returns the current leader as this node knows it; ok is false
	// while no leader is known (an election, a partition).
	Leader() (m Member, ok bool)
	// Members lists every server in the Raft configuration, this node and
	// the leader included, in a stable order (by ID).
	Members() ([]Member, error)
	// ReadBarrier returns nil once this node is the leader and has applied
	// every write committed before the call (the Raft thesis's read index:
	// a commit in the current term, leadership confirmed by a quorum, the
	// commit index applied). On a node that is not the leader it returns an
	// error wrapping ErrNotLeader.
	ReadBarrier(ctx context.Context) error
	// Join adds the node id, reachable for Raft at raftAddr and for clients
	// at respAddr, as a voter, if it applies replicated entries of the
	// cluster's level (level: its fsm.ApplyLevel as it said, -1 when it did
	// not say, which the implementation finds out); else it returns an
	// error wrapping group.ErrLevel, which the client is told as it is.
	// Remove takes node id out of the
	// configuration. Both run on the leader and return an error wrapping
	// ErrNotLeader elsewhere (the server then relays the command to the
	// leader).
	Join(ctx context.Context, id, raftAddr, respAddr string, level int) error
	Remove(ctx context.Context, id string) error
	// Status is what KVS.STATUS reports about this node.
	Status() ClusterStatus
	// CaughtUp reports whether the store holds at least everything this
	// node had applied before it last started. Until it does (a restarted
	// node replaying its log, which it can do only once it hears from a
	// leader) local reads are refused with LOADING, as Redis refuses them
	// while it loads its dataset: they would go back in time. Once true it
	// stays true, and must then be cheap (it is asked on every read).
	CaughtUp() bool
	// AppliedIndex is the position of this node's store in the replicated
	// log: the last entry it applied that every replica's store applies
	// too. A leader reports it with the replies of a forwarded write and
	// answers KVS.SYNC with it, so a follower can wait for it.
	AppliedIndex() uint64
	// WaitApplied returns nil once this node's store has applied index (an
	// AppliedIndex of any member), or an error once ctx is done.
	WaitApplied(ctx context.Context, index uint64) error
	// GoodReplicas is how many of the other members, as this node leads,
	// have answered its replication within maxLag: Redis's good replicas
	// (min-replicas-to-write). 0 on a node that does not lead.
	GoodReplicas(maxLag time.Duration) int
}

// Member is one server of the cluster.
type Member struct {
	ID       string
	RaftAddr string
	// RESPAddr is the node's client address (host:port); empty until the
	// node's address has been replicated.
	RESPAddr string
	Leader   bool
	// Voter is false for a non-voting member (raft's nonvoter suffrage).
	Voter bool
}

// ClusterStatus is one node's view of the cluster.
type ClusterStatus struct {
	ID    string
	State string // "leader", "follower", "candidate" or "shutdown"
	Term  uint64
	// LastIndex is the node's last log index, CommitIndex the highest it
	// knows committed, AppliedIndex the last one applied to its store.
	LastIndex    uint64
	CommitIndex  uint64
	AppliedIndex uint64
	// ApplyDelayP50 and P99 are how long the node's recent writes took
	// from the leader's append to this node's store (zero when none).
	ApplyDelayP50, ApplyDelayP99 time.Duration
	LeaderID                     string // empty when no leader is known
	LeaderAddr                   string // the leader's RESP address, empty when unknown
	// ApplyLevel is the level of replicated entries this node applies
	// (fsm.ApplyLevel), ClusterLevel the level its cluster has recorded
	// (group.Levels): the node's own, of the meta group, only.
	ApplyLevel, ClusterLevel int
}

// Errors a cluster-mode Proposer (and Cluster) returns, wrapped with detail:
// a group's (package group). The server tells clients which case they are
// in, because a client must retry the first two and must not blindly retry
// the third.
var (
	// ErrNotLeader: this node is not the leader; the write was not
	// submitted, so it certainly did not apply.
	ErrNotLeader = group.ErrNotLeader
	// ErrNoLeader: no leader is known; the write certainly did not apply.
	ErrNoLeader = group.ErrNoLeader
	// ErrUnknownOutcome: the write was submitted but its fate is unknown
	// (leadership lost mid-round, timed out after submission, the leader's
	// connection dropped after the request was sent). It may have applied.
	ErrUnknownOutcome = group.ErrUnknownOutcome
)
