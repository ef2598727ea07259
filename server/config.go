package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"kvs/fsm"
)

// Defaults for the zero values of Config.
const (
	DefaultAddr             = "127.0.0.1:6379"
	DefaultMaxClients       = 10000
	DefaultProtoMaxBulkLen  = 512 << 20
	DefaultQueryBufferLimit = 1 << 30
	DefaultRedisVersion     = "7.2.4"
	DefaultForwardTimeout   = 10 * time.Second
	DefaultRerouteWait      = time.Second
)

// Config configures a Server. The zero value of every field is usable except
// Store, which is required; Proposer defaults to applying writes straight to
// Store (memory mode).
type Config struct {
	// Addr is the TCP address to listen on. Empty: DefaultAddr.
	Addr string

	// PlainDisabled turns the plain (non-TLS) listener off, as Redis's
	// port 0 does; TLS must then give an address. Zero: Addr is served.
	PlainDisabled bool

	// UnixSocket, when set, is the path of a Unix socket served besides
	// the TCP address (the file there is removed first, as Redis does),
	// with UnixSocketPerm's permission bits when they are not zero.
	UnixSocket     string
	UnixSocketPerm os.FileMode

	// TLS, when set, serves TLS clients on its Addr (if any) and, with its
	// Cluster parameter, makes this node dial other nodes over mutual TLS
	// and refuse node requests from connections without a certificate
	// signed by its CA (tls.go). Nil: no TLS.
	TLS *TLS

	// Store answers reads and, through the Proposer, applies writes. Required.
	Store *fsm.Store

	// Proposer makes batches of writes happen. Nil: MemoryProposer{Store}.
	Proposer Proposer

	// Cluster, when set, puts the server in cluster mode: Proposer is the
	// Raft-backed proposer of this node, writes on a follower are forwarded
	// to the leader (or redirected with MOVED), CLUSTER, READONLY,
	// READWRITE, ROLE and INFO replication describe the Raft cluster, and
	// the KVS.* admin commands work. Nil: standalone (memory or durable
	// mode), where those commands answer as a standalone redis-server does.
	Cluster Cluster

	// Groups, when it names more than one, are the data groups of a
	// sharded node: each holds the slots Slots gives it. Groups[0] is the
	// node's home group, whose Store, Proposer and Cluster are the fields
	// above (left zero, they are taken from it); it also holds what the
	// whole node shares (ACL users, functions). Nil or one group: the
	// node is one group that owns every slot, as in memory and durable
	// mode.
	//
	// Groups are indexed by their ids, which need not be consecutive once
	// groups are added to the cluster and removed from it: an id that is
	// no group's has an entry with Absent set. Server.SetGroups changes
	// the cluster's groups later.
	Groups []Group

	// Slots maps each of the 16384 hash slots to its group, an index into
	// Groups: the map the cluster was made with, which the node routes by
	// until SetSlotMap gives it a version of the cluster's stored map, and
	// which a script's calls are checked against as its entry applies.
	// Required with more than one group.
	Slots []uint16

	// A group of Groups past the first without a Store is one this node
	// holds no replica of (in a cluster): Remote tells where its leader
	// and replicas are, and SetLocalGroup hands the server a replica
	// opened later (or takes one away). Required when a group is
	// missing.
	Remote Remote
	// Mover runs the moves of slots between the groups of a sharded
	// cluster (KVS.SLOTS); nil: KVS.SLOTS is refused.
	Mover SlotMover
	// SlotMoveRate is the pace of the bulk copy of the moves of slots
	// this node drives, in bytes a second (0: no limit): CONFIG GET and
	// SET slot-move-rate read and change it, and the mover reads it as
	// it copies. nil: no such parameter (a node without groups).
	SlotMoveRate *atomic.Int64
	// GroupAdmin adds and removes the data groups of a sharded cluster
	// (KVS.GROUPS); nil: KVS.GROUPS is refused.
	GroupAdmin GroupAdmin

	// Databases is the number of databases SELECT may choose (Redis's
	// databases parameter; 0: 16). A cluster of several groups has
	// database 0 alone whatever it says.
	Databases int

	// MadeGroups is the number of Raft groups (the data groups and the
	// meta group) the cluster was made with, as each node keeps it: what
	// KVS.JOIN checks a joining node's against, and KVS.STATUS reports.
	// 0: len(Groups), with one for a node of one group.
	MadeGroups int

	// Replicas is the number of replicas of each group in the cluster,
	// which KVS.STATUS reports and KVS.JOIN checks (0: every node holds
	// every group). It decides nothing in the server.
	Replicas int

	// Saver takes the snapshots SAVE and BGSAVE ask for (durable and
	// cluster mode). Nil in memory mode: they save nothing and succeed. A
	// backup's header records durable mode when it is set and Cluster is
	// not.
	Saver Saver

	// RDBFile, when set, is where SAVE, BGSAVE and SHUTDOWN SAVE also
	// write the node's data in Redis's RDB format, after Saver's snapshot
	// (rdbsync.go). Empty: they do not.
	RDBFile string

	// LogWriteErr, when set, returns why the node cannot write its log
	// now (a full disk: durable mode's append log), or nil while it can.
	// While it cannot, writes are refused before they are proposed, with
	// Redis's MISCONF error, as redis-server refuses them while its AOF
	// cannot be written: inside MULTI too, where Redis refuses to queue
	// them. It is called from client goroutines before every write and
	// must be cheap and safe for concurrent use. Nil: writes go to the
	// Proposer, whose ErrLogWrite is answered the same way.
	LogWriteErr func() error

	// LinearizableReads makes reads linearizable in cluster mode: the
	// leader answers reads only after Cluster.ReadBarrier, and followers
	// forward reads to the leader. False: every node answers reads from
	// its own store, which on a follower may be stale. Ignored without
	// Cluster.
	LinearizableReads bool

	// ForwardTimeout bounds one request a follower sends to the leader
	// (forwarded batch, relayed admin command), and the leader's read
	// barrier and membership changes. Zero: DefaultForwardTimeout (10 s).
	ForwardTimeout time.Duration

	// LevelGate, in a cluster, returns an error (wrapping group.ErrLevel)
	// for a batch of commands the cluster's level does not allow yet
	// (fsm.Level), which a node then refuses rather than forwards: the
	// leader's proposer would refuse it, or, of an older kvs, not know
	// its ops. Nil: every batch is allowed.
	LevelGate func(cmds []fsm.Command) error

	// RerouteWait bounds how long a command a move of slots refused
	// waits for this node's slot map to name the slot's new group before
	// it is answered TRYAGAIN (reroute.go): about the write pause of a
	// move's hand-over. Zero: DefaultRerouteWait (1 s).
	RerouteWait time.Duration

	// MaxClients caps connected clients; a client beyond it is told
	// "-ERR max number of clients reached" and closed. Zero: DefaultMaxClients.
	// CONFIG SET maxclients changes it at run time.
	MaxClients int

	// ClientQueryBufferLimit closes a client whose request being received
	// holds more than this many bytes (Redis's client-query-buffer-limit).
	// Zero: DefaultQueryBufferLimit (1 GiB, Redis's). CONFIG SET changes it.
	ClientQueryBufferLimit int64

	// MaxMemory is maxmemory in bytes: past it, denyoom commands are
	// refused or keys evicted as MaxMemoryPolicy says (evict.go). Zero: no
	// limit, Redis's default. CONFIG SET maxmemory changes it.
	MaxMemory int64

	// MaxMemoryPolicy is maxmemory-policy, one of Redis's eight
	// (noeviction, allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru,
	// volatile-lfu, volatile-random, volatile-ttl). Empty: noeviction,
	// Redis's default.
	MaxMemoryPolicy string

	// DisableProtectedMode turns protected mode off (protected.go): with
	// it on, while the default user has no password, clients that are not
	// on the loopback interface are refused with Redis's DENIED message.
	// Zero: on, Redis's default. CONFIG SET protected-mode changes it.
	DisableProtectedMode bool

	// ProtoMaxBulkLen caps the length of one bulk string in a request (and
	// of a string built by SETRANGE). Zero: DefaultProtoMaxBulkLen (512 MB).
	ProtoMaxBulkLen int64

	// DisableActiveExpiry starts the server with the loop that proposes
	// deletions of expired keys turned off; reads still hide expired keys.
	// Only a cluster leader may propose deletions, so a cluster node starts
	// with it set and calls SetActiveExpiry as leadership comes and goes.
	// Zero: active expiry on.
	DisableActiveExpiry bool

	// ConnGoroutines serves every connection on a goroutine of its own
	// even where event loops (one per CPU, Linux only) would serve them:
	// in memory mode, and with a Proposer that works in rounds (durable
	// mode). Cluster mode and other proposers always
	// serve a goroutine per connection.
	ConnGoroutines bool

	// Logger receives connection panics and background errors.
	// Nil: slog.Default().
	Logger *slog.Logger

	// RedisVersion is the Redis version reported by HELLO and INFO
	// (redis_version); clients pick features by it. Empty:
	// DefaultRedisVersion.
	RedisVersion string

	// Version is kvs's own version, reported as kvs_version in INFO server.
	// Empty: not reported.
	Version string

	// Info, when set, is asked for extra fields of each INFO section
	// (lowercase name: "server", "persistence", "replication", ...) and of
	// every section named in InfoSections. A field named like one the
	// server reports replaces its value (role:slave on a follower). It is
	// called from client goroutines and must be safe for concurrent use.
	Info func(section string) []InfoField

	// InfoSections names extra INFO sections (lowercase, e.g. "raft") that
	// Info fills and that "INFO", "INFO all" and "INFO <name>" show.
	InfoSections []string

	// ConfigFile is the file kvs serve read with --config, which CONFIG
	// REWRITE writes back; empty when there is none (CONFIG REWRITE then
	// fails as Redis's does).
	ConfigFile string

	// RequirePass, when not empty, is the default user's password for a
	// new data dir or cluster (--requirepass): Server.ACLSeed proposes it,
	// and it applies only if the replicated ACL table was never written.
	// Empty: the default user needs no password until one is set.
	RequirePass string

	// ACLFile is the ACL file (--aclfile) that ACL LOAD reads and ACL
	// SAVE writes; its users seed a new data dir or cluster as
	// RequirePass does (and take precedence over it). Empty: none, and
	// ACL LOAD and SAVE answer as Redis does without one.
	ACLFile string

	// ConfigParams are extra read-only parameters CONFIG GET reports, such
	// as appendonly and appendfsync, which only the wiring knows. They
	// override the server's own read-only values of the same name.
	ConfigParams map[string]string
}

// InfoField is one "name:value" line of an INFO section.
type InfoField struct {
	Name  string
	Value string
}

// Validate reports whether c can be used; New calls it after applying the
// defaults.
func (c *Config) Validate() error {
	if c.Store == nil {
		return errors.New("server: Config.Store is required")
	}
	if len(c.Groups) > 1 {
		if len(c.Slots) != fsm.ClusterSlots {
			return fmt.Errorf("server: Config.Slots maps %d slots, want %d", len(c.Slots), fsm.ClusterSlots)
		}
		for slot, g := range c.Slots {
			if int(g) >= len(c.Groups) || c.Groups[g].Absent {
				return fmt.Errorf("server: Config.Slots gives slot %d to group %d of %d", slot, g, len(c.Groups))
			}
		}
		if c.Groups[0].Store != c.Store {
			return errors.New("server: Config.Store is not Config.Groups[0]'s")
		}
		for i, g := range c.Groups {
			switch {
			case g.Absent && i > 0:
			case g.Store == nil && i > 0 && c.Cluster != nil && c.Remote != nil:
				// Held elsewhere.
			case g.Store == nil || g.Proposer == nil:
				return fmt.Errorf("server: Config.Groups[%d] has no Store or Proposer (a group held elsewhere needs Cluster and Remote)", i)
			}
		}
	}
	if c.MaxClients < 0 {
		return fmt.Errorf("server: MaxClients %d is negative", c.MaxClients)
	}
	if c.ForwardTimeout < 0 {
		return fmt.Errorf("server: ForwardTimeout %v is negative", c.ForwardTimeout)
	}
	if c.RerouteWait < 0 {
		return fmt.Errorf("server: RerouteWait %v is negative", c.RerouteWait)
	}
	if c.MaxMemory < 0 {
		return fmt.Errorf("server: MaxMemory %d is negative", c.MaxMemory)
	}
	if c.MaxMemoryPolicy != "" && !ValidPolicy(c.MaxMemoryPolicy) {
		return fmt.Errorf("server: MaxMemoryPolicy %q is not a maxmemory-policy", c.MaxMemoryPolicy)
	}
	if c.ClientQueryBufferLimit < 0 {
		return fmt.Errorf("server: ClientQueryBufferLimit %d is negative", c.ClientQueryBufferLimit)
	}
	if c.ProtoMaxBulkLen < 0 {
		return fmt.Errorf("server: ProtoMaxBulkLen %d is negative", c.ProtoMaxBulkLen)
	}
	if c.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Addr); err != nil {
			return fmt.Errorf("server: Addr %q: %w", c.Addr, err)
		}
	}
	if c.PlainDisabled && (c.TLS == nil || c.TLS.Params().Addr == "") && c.UnixSocket == "" {
		return errors.New("server: PlainDisabled needs a TLS address or a Unix socket: nothing would be served")
	}
	return nil
}

// withDefaults returns c with every zero field that has a default set.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if len(c.Groups) > 0 {
		home := c.Groups[0]
		if c.Store == nil {
			c.Store = home.Store
		}
		if c.Proposer == nil {
			c.Proposer = home.Proposer
		}
		if c.Cluster == nil {
			c.Cluster = home.Raft
		}
		c.Groups = slices.Clone(c.Groups)
		for i := range c.Groups {
			if c.Groups[i].Proposer == nil && c.Groups[i].Store != nil {
				c.Groups[i].Proposer = MemoryProposer{Store: c.Groups[i].Store}
			}
		}
	}
	if c.Proposer == nil && c.Store != nil {
		c.Proposer = MemoryProposer{Store: c.Store}
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.ProtoMaxBulkLen == 0 {
		c.ProtoMaxBulkLen = DefaultProtoMaxBulkLen
	}
	if c.ClientQueryBufferLimit == 0 {
		c.ClientQueryBufferLimit = DefaultQueryBufferLimit
	}
	if c.RerouteWait == 0 {
		c.RerouteWait = DefaultRerouteWait
	}
	if c.ForwardTimeout == 0 {
		c.ForwardTimeout = DefaultForwardTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RedisVersion == "" {
		c.RedisVersion = DefaultRedisVersion
	}
	return c
}
