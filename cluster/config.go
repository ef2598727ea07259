package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Config configures one node. Open calls Validate. Tuning fields left zero
// take the defaults in parentheses, chosen for nodes on one machine or a LAN.
type Config struct {
	// NodeID names this node in the Raft configuration; required, unique,
	// and never reused for another node.
	NodeID string
	// RaftAddr is the host:port to bind and to advertise for Raft traffic;
	// required. The host must be an address the other nodes can reach
	// (not 0.0.0.0). Port 0 picks a free port (see Node.Addr), useful only
	// for a node that will not be restarted on the same Dir.
	RaftAddr string
	// Dir holds the Raft state: Dir/raft.db (a bolt file with the log and
	// the stable store) and Dir/snapshots/. Created if missing; required.
	Dir string
	// Bootstrap makes a new single-voter cluster of this node if Dir holds
	// no Raft state. If it does, Bootstrap is ignored (and Open logs so):
	// a restarted node finds its cluster in its own state.
	Bootstrap bool
	// BootstrapVoters, with Bootstrap, are the voters of the new
	// cluster's first configuration instead of this node alone (which
	// must be one of them): every one of them bootstraps with the same
	// list, as raft allows, and they elect a leader among them.
	BootstrapVoters []Voter
	// FSM is the state machine committed entries are applied to; required.
	// One with a SetReplayedThrough(index uint64) method is told, before
	// anything is applied, the last index of the log the node opened with.
	FSM raft.BatchingFSM
	// Logger receives the node's and raft's logs; nil means slog.Default().
	Logger *slog.Logger
	// TLS, when set, runs Raft's transport over mutual TLS (tls.go). Nil:
	// plain TCP.
	TLS *TLS
	// Mux, when set, carries the node's Raft traffic as group Group on a
	// port shared with the node's other groups (mux.go), instead of a
	// listener of its own on RaftAddr; RaftAddr must then be the Mux's
	// address, and TLS is the Mux's business.
	Mux   *Mux
	Group uint32

	HeartbeatTimeout   time.Duration // (500ms)
	ElectionTimeout    time.Duration // (500ms)
	LeaderLeaseTimeout time.Duration // (250ms)
	// CommitTimeout is how long a leader with nothing new to send waits
	// before sending each follower an AppendEntries anyway, which carries
	// its commit index (raft's default is 50ms). Followers learn of each
	// commit from the commit push (commitpush.go), so this is only its
	// fallback: a short one costs every group an RPC to each follower
	// twenty times a second while idle, as much as its heartbeats.
	CommitTimeout time.Duration // (500ms)
	// MaxAppendEntries bounds both the entries per AppendEntries RPC and the
	// Apply calls raft gathers into one batch (1024, raft's maximum).
	MaxAppendEntries int
	// SnapshotThreshold is how many log entries since the last snapshot
	// make raft take a new one, checked every SnapshotInterval; together
	// with TrailingLogs it bounds the log on disk and the replay at restart.
	SnapshotThreshold uint64        // (8192)
	SnapshotInterval  time.Duration // (30s)
	// SnapshotGrowth and SnapshotMinSize: a store whose last snapshot
	// holds SnapshotMinSize bytes or more is snapshotted again only once
	// the entries applied since add up to SnapshotGrowth percent of that
	// snapshot's size, as Redis rewrites its AOF once it grew by
	// auto-aof-rewrite-percentage over auto-aof-rewrite-min-size: a
	// snapshot writes the whole store, and a large one written to a
	// little at a time was written whole every SnapshotInterval, which
	// cost its node more than the writes did. Negative SnapshotGrowth
	// turns the rule off (snapshots by SnapshotThreshold alone).
	SnapshotGrowth  int   // (100)
	SnapshotMinSize int64 // (64 MiB)
	// TrailingLogs is how many entries a snapshot leaves in the log, so a
	// follower a little behind catches up from the log rather than by a
	// whole snapshot.
	TrailingLogs uint64 // (10240)
	// ApplyTimeout bounds how long Apply, AddVoter, Remove and the read
	// barrier wait for their round (5s).
	ApplyTimeout time.Duration
}

// Defaults for the zero-valued tuning fields of Config.
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
	DefaultCommitTimeout      = 500 * time.Millisecond
	DefaultMaxAppendEntries   = 1024
	DefaultSnapshotThreshold  = 8192
	DefaultSnapshotInterval   = 30 * time.Second
	DefaultTrailingLogs       = 10240
	DefaultSnapshotGrowth     = 100
	DefaultSnapshotMinSize    = 64 << 20
	DefaultApplyTimeout       = 5 * time.Second
)

// maxAppendEntries is raft's own limit (ValidateConfig rejects more).
const maxAppendEntries = 1024

// Validate reports the first problem with c: a missing required field, a
// malformed RaftAddr, a negative duration or MaxAppendEntries out of range.
// Relations between timeouts are checked by raft when Open builds its
// configuration.
func (c *Config) Validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("cluster: Config.NodeID is required")
	case c.RaftAddr == "":
		return errors.New("cluster: Config.RaftAddr is required")
	case c.Dir == "":
		return errors.New("cluster: Config.Dir is required")
	case c.FSM == nil:
		return errors.New("cluster: Config.FSM is required")
	}
	if _, _, err := net.SplitHostPort(c.RaftAddr); err != nil {
		return fmt.Errorf("cluster: Config.RaftAddr %q: %w", c.RaftAddr, err)
	}
	if c.Mux != nil {
		switch {
		case c.TLS != nil:
			return errors.New("cluster: Config.TLS with Config.Mux: the Mux's listener carries TLS")
		case c.RaftAddr != c.Mux.Addr().String():
			return fmt.Errorf("cluster: Config.RaftAddr %q is not the Mux's address %s", c.RaftAddr, c.Mux.Addr())
		}
	}
	for name, d := range map[string]time.Duration{
		"HeartbeatTimeout": c.HeartbeatTimeout, "ElectionTimeout": c.ElectionTimeout,
		"LeaderLeaseTimeout": c.LeaderLeaseTimeout, "CommitTimeout": c.CommitTimeout,
		"SnapshotInterval": c.SnapshotInterval, "ApplyTimeout": c.ApplyTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("cluster: Config.%s is negative (%v)", name, d)
		}
	}
	if c.SnapshotMinSize < 0 {
		return fmt.Errorf("cluster: Config.SnapshotMinSize is negative (%d)", c.SnapshotMinSize)
	}
	if c.MaxAppendEntries < 0 || c.MaxAppendEntries > maxAppendEntries {
		return fmt.Errorf("cluster: Config.MaxAppendEntries %d is not in [0, %d]", c.MaxAppendEntries, maxAppendEntries)
	}
	return nil
}

// withDefaults returns c with every zero tuning field set to its default.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	setDefault(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	setDefault(&c.ElectionTimeout, DefaultElectionTimeout)
	setDefault(&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	setDefault(&c.CommitTimeout, DefaultCommitTimeout)
	setDefault(&c.MaxAppendEntries, DefaultMaxAppendEntries)
	setDefault(&c.SnapshotThreshold, DefaultSnapshotThreshold)
	setDefault(&c.SnapshotInterval, DefaultSnapshotInterval)
	setDefault(&c.TrailingLogs, DefaultTrailingLogs)
	setDefault(&c.SnapshotGrowth, DefaultSnapshotGrowth)
	setDefault(&c.SnapshotMinSize, DefaultSnapshotMinSize)
	setDefault(&c.ApplyTimeout, DefaultApplyTimeout)
	return c
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// raftConfig is raft's configuration for c (defaults applied).
func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.MaxAppendEntries = c.MaxAppendEntries
	// Concurrent Apply calls queue in a buffered channel and the leader
	// takes up to MaxAppendEntries of them per log write (one fsync).
	rc.BatchApplyCh = true
	// The node takes its snapshots itself (snapshots.go), by entries and
	// bytes; raft's own check, by entries alone, never fires.
	rc.SnapshotThreshold = math.MaxUint64
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	// A restart restores the latest snapshot and replays only the log after
	// it.
	rc.NoSnapshotRestoreOnStart = false
	rc.Logger = newHCLogger(c.Logger, "raft")
	return rc
}

// A Voter is one voter of a bootstrapped configuration
// (Config.BootstrapVoters).
type Voter struct{ ID, Addr string }
