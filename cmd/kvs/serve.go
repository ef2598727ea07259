package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"kvs/cluster"
	"kvs/config"
	"kvs/fsm"
	"kvs/group"
	"kvs/server"
	"kvs/wal"
)

// serveFlags are the flags of `kvs serve`.
type serveFlags struct {
	addr    string
	dataDir string
	fsync   string
	repair  bool
	// repairEmpty (--repair-allow-empty) lets --repair start an empty
	// store over a data dir that held data.
	repairEmpty bool
	logLevel    string
	segment     int64
	compact     int64
	metrics     string // --metrics-addr; empty: no metrics endpoint
	pprof       bool   // --pprof: Go's /debug/pprof on the metrics endpoint
	io          string // --io: loop or goroutines
	tls         tlsFlags
	// protectedMode is --protected-mode: yes (Redis's default) or no.
	protectedMode string
	// maxmemory (--maxmemory, Redis's size syntax) and its policy.
	maxmemory string
	// slotMoveRate (--slot-move-rate, Redis's size syntax) is the bulk
	// copy's pace of a move of slots, in bytes a second; 0: no limit.
	slotMoveRate    string
	maxmemoryPolicy string
	// saveRDB (--save-rdb) is where SAVE and BGSAVE also write a Redis
	// RDB file; empty: nowhere.
	saveRDB string

	// Cluster mode: set by --node-id and --raft-addr.
	nodeID          string
	raftAddr        string
	advertise       string
	bootstrap       bool
	join            string
	groups          int // --groups: 0 unless given
	databases       int // --databases
	replicas        int // --replicas
	replicasGiven   bool
	reads           string
	snapshotEntries uint64
	trailingLogs    uint64
	snapshotEvery   time.Duration
	snapshotGrowth  int

	// --config: the file (absolute), the Redis parameters it sets, and
	// what it said that kvs does not use.
	config     string
	directives []config.Directive
	ignored    []string

	// Passwords and users: --requirepass and --aclfile seed the
	// replicated ACL table (server.Config.RequirePass, ACLFile);
	// --masteruser and --masterauth are what this node authenticates
	// with to other nodes (forwarding, --join), CONFIG SET masteruser and
	// masterauth later.
	requirePass string
	aclFile     string
	masterUser  string
	masterAuth  string

	// --unixsocket and --unixsocketperm (octal, as redis.conf's): a Unix
	// socket served besides the TCP address; --port 0 leaves it alone.
	unixSocket     string
	unixSocketPerm string
	port           string
	// replicaOf is --replicaof "HOST PORT": a replica of a redis-server.
	replicaOf string
}

// masterAuthOrEnv is --masterauth, else $KVS_MASTERAUTH. Without either
// the node logs in with its own requirepass (server.Server.PeerLogin).
func (f serveFlags) masterAuthOrEnv() string {
	if f.masterAuth != "" {
		return f.masterAuth
	}
	return os.Getenv("KVS_MASTERAUTH")
}

// clustered reports whether the flags ask for cluster mode.
func (f serveFlags) clustered() bool { return f.nodeID != "" || f.raftAddr != "" }

func parseServeFlags(args []string, stderr io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("kvs serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "a config file in redis.conf's syntax: kvs serve's flags by name (addr, data-dir, fsync, node-id, ...; port and bind make addr, appendfsync fsync) and Redis's parameters; flags on the command line override it, and CONFIG REWRITE writes it back")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:6379", `address to serve RESP on, in plain text; "" turns the plain listener off (as Redis's port 0), leaving --tls-port`)
	fs.StringVar(&f.dataDir, "data-dir", "", "directory for the append log and snapshots (empty: memory mode, nothing survives a restart)")
	fs.StringVar(&f.fsync, "fsync", "always", "when the append log is fsynced: always (before every reply), everysec, or no")
	fs.BoolVar(&f.repair, "repair", false, "cut the append log at the first corrupt record (saying first exactly what is cut, and keeping a .broken copy) instead of refusing to start; in cluster mode, move damaged raft state aside so the node rejoins")
	fs.BoolVar(&f.repairEmpty, "repair-allow-empty", false, "with --repair: go ahead even when nothing would be left (no usable snapshot and no record kept) of a data dir that held data")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.io, "io", "loop", "how connections are served: loop (event loops, one per CPU; Linux only) or goroutines (one per connection)")
	fs.StringVar(&f.protectedMode, "protected-mode", "yes", "yes: while no password is set, refuse clients that are not on the loopback interface with Redis's DENIED error; no: accept them (CONFIG SET protected-mode changes it)")
	fs.StringVar(&f.maxmemory, "maxmemory", "0", "memory (bytes, or with a unit: 100mb, 2gb) past which writes are refused with OOM or keys evicted, as --maxmemory-policy says; used memory is INFO used_memory (the live heap, with data and clients' read buffers counted as they change); 0: no limit")
	fs.StringVar(&f.slotMoveRate, "slot-move-rate", "4mb", "cluster mode, with --groups: the bytes a second (or with a unit: 500kb, 32mb) a move of slots this node drives copies at, as the leader of the slots' group (kvs slots move); 0: no limit")
	fs.StringVar(&f.maxmemoryPolicy, "maxmemory-policy", "noeviction", "what to do past --maxmemory: noeviction (refuse writes), or evict: allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru, volatile-lfu, volatile-random, volatile-ttl")
	fs.StringVar(&f.saveRDB, "save-rdb", "", "a FILE that SAVE, BGSAVE and SHUTDOWN SAVE also write the data to in Redis's RDB format (redis-server loads it as its dump.rdb), after the snapshot kvs keeps its own state in; empty: they do not (redis-cli --rdb gets one at any time)")
	fs.StringVar(&f.metrics, "metrics-addr", "", "HOST:PORT to serve Prometheus /metrics and /healthz on (empty: off)")
	fs.BoolVar(&f.pprof, "pprof", false, "also serve Go's profiler at /debug/pprof/ on --metrics-addr (CPU, heap, goroutines; for diagnosing, not for an open network)")
	fs.Int64Var(&f.segment, "wal-segment-bytes", 0, "size at which the append log starts a new segment file (0: 64 MiB)")
	fs.Int64Var(&f.compact, "wal-compact-bytes", 0, "log bytes written since the last snapshot that trigger a new snapshot (0: 64 MiB)")
	fs.StringVar(&f.requirePass, "requirepass", "", "the default user's password for a new data dir or cluster (later changes by CONFIG SET requirepass or ACL SETUSER are replicated and win; see docs/security.md)")
	fs.StringVar(&f.aclFile, "aclfile", "", "ACL file in Redis's format: its users seed a new data dir or cluster, ACL LOAD proposes them, ACL SAVE writes the users to it")
	fs.StringVar(&f.masterUser, "masteruser", "", "the user this node authenticates as to other nodes (cluster mode: forwarded writes, pub/sub links, --join) and to the redis-server it replicates (--replicaof); empty: the default user; CONFIG SET masteruser changes it")
	fs.StringVar(&f.masterAuth, "masterauth", "", "that user's password (env KVS_MASTERAUTH; in cluster mode, empty: this node's requirepass); CONFIG SET masterauth changes it")
	fs.StringVar(&f.nodeID, "node-id", "", "cluster mode: this node's id, unique in the cluster and never reused")
	fs.StringVar(&f.raftAddr, "raft-addr", "", "cluster mode: HOST:PORT for Raft traffic between nodes")
	fs.StringVar(&f.advertise, "advertise-addr", "", "cluster mode: the client address other nodes and cluster clients use for this node (default: --addr)")
	fs.BoolVar(&f.bootstrap, "bootstrap", false, "cluster mode: start a new cluster with this node as its only member (ignored when --data-dir holds cluster state)")
	fs.IntVar(&f.databases, "databases", server.DefaultDatabases, "the number of databases SELECT may choose, 1 to 65536 (Redis's databases parameter); a cluster of several groups has database 0 alone")
	fs.IntVar(&f.groups, "groups", 0, "cluster mode: the number of Raft groups a new cluster's 16384 slots are spread over (with --bootstrap; a node added by kvs join is started with the count the cluster was made with; --join learns it; kvs groups add and remove change the groups later) (default 1)")
	fs.IntVar(&f.replicas, "replicas", defaultReplicas, "cluster mode, with --groups: the number of nodes that hold a replica of each group, or every node while there are fewer; 0: every node (set with --bootstrap; a node added by kvs join is started with the cluster's; --join learns it; fixed once the cluster is made)")
	fs.StringVar(&f.join, "join", "", "cluster mode: client address of any member; this node asks it to be added, retrying until it is (ignored when --data-dir holds cluster state)")
	fs.StringVar(&f.reads, "reads", "stale", "cluster mode: stale (answer reads locally) or linearizable (answer reads only as a confirmed leader; followers forward them)")
	fs.Uint64Var(&f.snapshotEntries, "raft-snapshot-entries", 0, "cluster mode: log entries since the last snapshot that trigger a new one (0: 8192)")
	fs.DurationVar(&f.snapshotEvery, "raft-snapshot-interval", 0, "cluster mode: how often to check whether a snapshot is due (0: 30s; raft adds up to as much again at random)")
	fs.IntVar(&f.snapshotGrowth, "raft-snapshot-growth", 100, "cluster mode: a store whose last snapshot holds 64 MiB or more is snapshotted again once the entries since add up to this percent of it (0: by entries alone)")
	fs.Uint64Var(&f.trailingLogs, "raft-trailing-logs", 0, "cluster mode: log entries kept after a snapshot for followers that lag (0: 10240)")
	fs.StringVar(&f.unixSocket, "unixsocket", "", "also serve RESP on a Unix socket at this path (removed first if it exists, and when kvs stops), as Redis's unixsocket")
	fs.StringVar(&f.unixSocketPerm, "unixsocketperm", "0", "the Unix socket's permission bits, in octal (700, 770); 0: as the umask leaves them")
	fs.StringVar(&f.replicaOf, "replicaof", "", "HOST PORT: start as a replica of the redis-server there (a full sync, then its command stream, through kvs's write path; client writes are refused with READONLY until REPLICAOF NO ONE); masterauth and masteruser log in to it")
	fs.StringVar(&f.port, "port", "", "the port of --addr; 0 turns the plain TCP listener off (as Redis's port 0), leaving --unixsocket or --tls-port")
	f.tls.register(fs)
	if err := fs.Parse(joinReplicaOf(args)); err != nil {
		return f, err
	}
	// The flag package has reported its own errors; these are ours.
	var err error
	if f.config != "" {
		f.ignored, err = f.readConfigFile(fs)
	}
	if err == nil {
		given := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
		f.replicasGiven = given["replicas"]
		if given["port"] {
			err = f.applyPort(f.port)
		}
		if err == nil {
			err = f.validate(given)
		}
	}
	if fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(stderr, "kvs serve: %v\n", err)
	}
	return f, err
}

// validate checks the flags that only make sense together.
func (f serveFlags) validate(given map[string]bool) error {
	if f.io != "loop" && f.io != "goroutines" {
		return fmt.Errorf("--io %q: want loop or goroutines", f.io)
	}
	if _, err := wal.ParsePolicy(f.fsync); err != nil {
		return fmt.Errorf("--fsync %q: want always, everysec or no", f.fsync)
	}
	// Flags that have nothing to act on in the mode asked for are errors
	// rather than silently ignored.
	for _, name := range []string{"fsync", "wal-segment-bytes", "wal-compact-bytes"} {
		switch {
		case !given[name]:
		case f.clustered():
			return fmt.Errorf("--%s is for durable mode's append log; a cluster node keeps raft's log, which is always fsynced (--raft-* set its snapshots)", name)
		case f.dataDir == "":
			return fmt.Errorf("--%s needs --data-dir: memory mode has no log (add --data-dir DIR for durable mode)", name)
		}
	}
	if (given["repair"] || given["repair-allow-empty"]) && f.dataDir == "" {
		return errors.New("--repair needs --data-dir: memory mode has nothing to repair")
	}
	if f.protectedMode != "yes" && f.protectedMode != "no" {
		return fmt.Errorf("--protected-mode %q: want yes or no", f.protectedMode)
	}
	if _, ok := server.ParseMemory(f.maxmemory); !ok {
		return fmt.Errorf("--maxmemory %q: want bytes, or a number with a unit (100mb, 2gb)", f.maxmemory)
	}
	if _, ok := server.ParseMemory(f.slotMoveRate); !ok {
		return fmt.Errorf("--slot-move-rate %q: want bytes a second, or a number with a unit (500kb, 32mb)", f.slotMoveRate)
	}
	if !server.ValidPolicy(f.maxmemoryPolicy) {
		return fmt.Errorf("--maxmemory-policy %q: want noeviction, allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru, volatile-lfu, volatile-random or volatile-ttl", f.maxmemoryPolicy)
	}
	if f.pprof && f.metrics == "" {
		return errors.New("--pprof needs --metrics-addr: the profiler is served on the metrics endpoint")
	}
	if f.metrics != "" {
		if _, _, err := net.SplitHostPort(f.metrics); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	if f.repairEmpty && !f.repair {
		return errors.New("--repair-allow-empty needs --repair")
	}
	if f.snapshotGrowth < 0 {
		return fmt.Errorf("--raft-snapshot-growth %d: want a percent, 0 or more", f.snapshotGrowth)
	}
	if _, err := parseSocketPerm(f.unixSocketPerm); err != nil {
		return err
	}
	if f.replicaOf != "" {
		if _, _, err := f.replicaOfAddr(); err != nil {
			return err
		}
	}
	if err := f.tls.validate(f.addr, f.unixSocket != "", f.clustered()); err != nil {
		return err
	}
	if f.databases < 1 || f.databases > fsm.MaxDB+1 {
		return fmt.Errorf("--databases %d: want 1 to %d", f.databases, fsm.MaxDB+1)
	}
	if !f.clustered() {
		if f.bootstrap || f.join != "" || f.advertise != "" || f.reads != "stale" || f.snapshotEntries != 0 || f.trailingLogs != 0 || f.snapshotEvery != 0 || given["raft-snapshot-growth"] || f.groups != 0 || given["replicas"] {
			return errors.New("--bootstrap, --join, --groups, --replicas, --advertise-addr, --reads and --raft-* need cluster mode (--node-id and --raft-addr)")
		}
		return nil
	}
	switch {
	case f.nodeID == "" || f.raftAddr == "":
		return errors.New("cluster mode needs both --node-id and --raft-addr")
	case f.dataDir == "":
		return errors.New("cluster mode needs --data-dir")
	case f.bootstrap && f.join != "":
		return errors.New("--bootstrap and --join exclude each other")
	case f.reads != "stale" && f.reads != "linearizable":
		return fmt.Errorf("--reads %q: want stale or linearizable", f.reads)
	case f.groups < 0 || f.groups > group.MaxGroups:
		return fmt.Errorf("--groups %d: want 1 to %d", f.groups, group.MaxGroups)
	case f.replicas < 0:
		return fmt.Errorf("--replicas %d: want 0 (every node) or more", f.replicas)
	}
	return nil
}

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func serve(args []string, stderr io.Writer) int {
	f, err := parseServeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	logger, err := newLogger(f.logLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "kvs: %v\n", err)
		return 2
	}
	if err := runServe(f, logger); err != nil {
		logger.Error("kvs stopped", "err", err)
		return 1
	}
	return 0
}

// runServe wires store, log or raft, and server, serves until SIGINT or
// SIGTERM, then stops in order: leadership handed over (cluster), client
// listener and in-flight commands, the metrics endpoint, then raft or the
// log (flushed and fsynced), so nothing acknowledged is left in a buffer.
//
// The data dir is locked first, so that a second process on it stops with
// that reason before it binds a port or opens a file of the holder's, and
// held until everything in it is closed. The metrics endpoint is bound
// next, so that a taken port stops startup before a long recovery, and
// /healthz says 503 until the node serves.
func runServe(f serveFlags, logger *slog.Logger) error {
	defer startGCTuner()()
	if f.dataDir != "" {
		lock, err := lockDataDir(f.dataDir)
		if err != nil {
			return err
		}
		defer lock.release()
	}
	hc := &health{}
	var metrics *metricsServer
	if f.metrics != "" {
		var err error
		if metrics, err = startMetrics(f.metrics, f.pprof, hc, logger); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		defer metrics.close()
	}
	for _, msg := range f.ignored {
		logger.Warn("config file: " + msg)
	}
	tlsState, err := f.tls.load(f.addr)
	if err != nil {
		return err
	}
	store := fsm.NewStore()
	// Encoding thresholds before recovery, so that collections are
	// restored as the config file says.
	if err := config.PrepareStore(store, f.directives); err != nil {
		return err
	}
	fsyncs := newFsyncHistograms()
	cfg := server.Config{
		Addr:         f.addr,
		Store:        store,
		Proposer:     server.MemoryProposer{Store: store},
		Logger:       logger,
		Version:      version,
		Info:         persistenceInfo(f, nil),
		ConfigParams: configParams(f),
		Databases:    f.databases,
		ConfigFile:   f.config,

		ConnGoroutines:       f.io == "goroutines",
		TLS:                  tlsState,
		PlainDisabled:        f.addr == "",
		UnixSocket:           f.unixSocket,
		DisableProtectedMode: f.protectedMode == "no",
		MaxMemoryPolicy:      f.maxmemoryPolicy,

		RequirePass: f.requirePass,
		ACLFile:     f.aclFile,
		RDBFile:     absPath(f.saveRDB),
	}
	cfg.MaxMemory, _ = server.ParseMemory(f.maxmemory)
	cfg.UnixSocketPerm, _ = parseSocketPerm(f.unixSocketPerm)
	// Recovery below replays scripts, whose commands the server parses.
	server.InstallScriptParser(cfg)
	var (
		log      *wal.Log
		node     *cluster.Node
		hadState bool // the cluster data dir held raft state at start
		view     *clusterView
		views    []*clusterView // the data groups' served at start
		gnode    *group.Node
		gmeta    *groupsMeta
		moveRate *atomic.Int64    // --slot-move-rate, and CONFIG SET slot-move-rate
		slotMaps *slotMapFollower // with several data groups
		leaders  *leaderWatch
		// sh is how the cluster's slots are spread over data groups
		// (groups.go).
		sh       = shape{groups: 1}
		newStore func() (*fsm.Store, error)
		logs     *logState // what the node says about writing its log
	)
	switch {
	case f.clustered():
		ensureProcs()
		start := time.Now()
		var err error
		o := group.RaftOptions{
			DataDir: f.dataDir, NodeID: f.nodeID, RaftAddr: f.raftAddr, Bootstrap: f.bootstrap, Logger: logger,
			SnapshotThreshold: f.snapshotEntries, TrailingLogs: f.trailingLogs, SnapshotInterval: f.snapshotEvery,
			SnapshotGrowth: snapshotGrowth(f.snapshotGrowth), Repair: f.repair, RepairAllowEmpty: f.repairEmpty,
		}
		if f.tls.clusterOn() {
			o.TLS = &cluster.TLS{Listener: tlsState.NodeListenerConfig(), Dial: tlsState.DialConfig}
		}
		if sh, err = resolveGroups(f, logger); err != nil {
			return err
		}
		// Each group's store is made before its replica replays its log:
		// scripts in it need the parser, collections the encoding
		// thresholds.
		newStore = func() (*fsm.Store, error) {
			st := fsm.NewStore()
			st.GateScriptCalls()
			return st, config.PrepareStore(st, f.directives)
		}
		store.GateScriptCalls()
		if sh.groups > 1 {
			if cfg.Slots, err = slotTable(sh.groups); err != nil {
				return err
			}
		}
		gnode, err = group.OpenNode(o)
		if err != nil {
			return err
		}
		defer gnode.Close()
		if sh.groups > 1 {
			// Before the meta group replays: the map its log holds.
			slotMaps = newSlotMapFollower(store, sh.groups, logger)
		}
		g, had, err := gnode.OpenGroup(0, store)
		if err != nil {
			return err
		}
		hadState = had
		var known []int // the groups the server starts with
		if sh.groups > 1 {
			// The list of data groups as the meta group's replica has it
			// by now (its snapshot at least): the server is given its
			// groups, and the meta group's later list once it applies it.
			set := group.DefaultGroupSet(sh.groups)
			if v, ok := store.Meta(group.GroupSetMeta); ok {
				if s, err := group.ParseGroupSet(v); err == nil {
					set = s
				}
			}
			if known, err = openDataGroups(gnode, sh, f.bootstrap && !hadState, newStore, store, cfg.Slots, set); err != nil {
				return err
			}
		}
		node = g.Node()
		leaders = watchLeader(node)
		defer leaders.stop()
		logger.Info("raft started", "node_id", f.nodeID, "raft_addr", f.raftAddr,
			"dir", f.dataDir, "groups", sh.groups, "replicas", sh.replicas, "took", time.Since(start).Round(time.Millisecond))
		view = &clusterView{node: node, store: store, id: f.nodeID, raftAddr: f.raftAddr}
		view.propose = g.Proposer().Propose
		view.keeper = newLevelKeeper(view)
		// No group proposes a command an older node of the cluster could
		// not apply before every node has said it can.
		gnode.SetLevelGate(view.keeper.levels.Allows)
		cfg.LevelGate = gnode.Allows
		cfg.Proposer = g.Proposer()
		cfg.Cluster = view
		cfg.Saver = g
		if sh.groups > 1 {
			gmeta = &groupsMeta{meta: view}
			cfg.Groups, views = servedGroups(gnode, sh, known, view, g.Proposer())
			cfg.Remote = remoteGroups{gmeta}
			rate, _ := server.ParseMemory(f.slotMoveRate)
			moveRate = new(atomic.Int64)
			moveRate.Store(rate)
			mover := &slotMoves{gm: gmeta, sh: sh, rate: moveRate}
			cfg.Mover = mover
			cfg.SlotMoveRate = moveRate
			cfg.GroupAdmin = &groupAdmin{gm: gmeta, sh: sh, moves: mover, logger: logger}
			cfg.MadeGroups = raftGroups(sh.groups)
			cfg.Replicas = sh.replicas
			cfg.Saver = nodeSaver{gnode}
		}
		cfg.LinearizableReads = f.reads == "linearizable"
		logs = clusterLogState(node)
		cfg.Info = infoFuncs(clusterPersistenceInfo(f, logs), raftInfo(node, leaders))
		cfg.InfoSections = []string{"raft"}
		hc.leader = func() error {
			if _, ok := view.Leader(); !ok {
				return errors.New("no leader known")
			}
			return nil
		}
	case f.dataDir != "":
		policy, err := wal.ParsePolicy(f.fsync)
		if err != nil {
			return fmt.Errorf("--fsync: %w", err)
		}
		start := time.Now()
		g, err := group.OpenDurable(store, group.DurableOptions{
			Dir: f.dataDir, Fsync: policy, SegmentSize: f.segment, CompactBytes: f.compact,
			Repair: f.repair, RepairAllowEmpty: f.repairEmpty, Logger: logger, OnFsync: fsyncs.observe,
		})
		if err != nil {
			return err
		}
		defer g.Close()
		log = g.Log()
		st := log.Stats()
		logger.Info("append log recovered", "dir", f.dataDir, "fsync", f.fsync,
			"last_index", st.LastIndex, "snapshot_index", st.SnapshotIndex,
			"keys", store.Stats(time.Now().UnixMilli()).Keys, "took", time.Since(start).Round(time.Millisecond))
		cfg.Proposer = g.Proposer()
		cfg.Saver = g
		cfg.LogWriteErr = log.Err
		cfg.Info = persistenceInfo(f, log)
		logs = durableLogState(log)
		if f.io != "loop" || log.FsyncMethod() != "io_uring" {
			// Connections on goroutines that wait for the log, or fsyncs
			// that block a thread: see minProcs. The event loops wait on
			// channels, and io_uring fsyncs block no thread, so one P (kvs
			// pinned to one core) serves them best.
			ensureProcs()
		}
	}

	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	if gmeta != nil {
		gmeta.srv = srv // before the first KVS.SLOTS
	}
	if slotMaps != nil {
		// Before the first client: the stored map, if the meta group
		// has applied it by now.
		slotMaps.attach(srv)
	}
	if err := srv.ApplyConfig(f.directives); err != nil {
		return err
	}
	seed, seeding, err := srv.ACLSeed()
	if err != nil {
		return err
	}
	if seeding && view == nil {
		// Before the first connection: no client may see the store
		// without the password it was started with.
		if _, err := srv.Propose([]fsm.Command{seed}); err != nil {
			return fmt.Errorf("seeding the ACL users: %w", err)
		}
	}
	if view == nil && (f.masterUser != "" || f.masterAuthOrEnv() != "") {
		// What a replica (--replicaof, REPLICAOF) logs in to its master
		// with.
		srv.SetPeerAuth(f.masterUser, f.masterAuthOrEnv())
	}
	if view != nil {
		srv.SetPeerAuth(f.masterUser, f.masterAuthOrEnv())
		// --join logs in as the node does, after a CONFIG SET too.
		adminLogin = srv.PeerLogin
	}
	// Caught before the port accepts: whoever connects may stop the node
	// at once, and SIGTERM's default action would skip the graceful stop.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	if err := srv.Listen(); err != nil {
		return err
	}
	if f.replicaOf != "" {
		host, port, _ := f.replicaOfAddr()
		srv.StartReplication(host, port)
	}
	logger.Info("kvs serving", "addr", srv.Addr().String(), "tls_addr", srv.TLSAddr(), "unixsocket", f.unixSocket, "version", version, "mode", mode(f))

	// Background work of a cluster node (--join, advertising the client
	// address) stops before raft does.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	stopBackground := sync.OnceFunc(func() { close(stop); bg.Wait() })
	defer stopBackground()
	if view != nil {
		view.respAddr = f.advertise
		if view.respAddr == "" {
			view.respAddr = srv.Addr().String()
			if f.tls.clusterOn() {
				// Other nodes forward to this address over TLS.
				view.respAddr = srv.TLSAddr()
			}
		}
		for _, v := range views {
			v.respAddr = view.respAddr
		}
		if f.bootstrap && hadState {
			logger.Info("--bootstrap ignored: the data dir already holds cluster state")
		}
		joining := f.join != "" && !hadState
		if f.join != "" && !joining {
			logger.Info("--join ignored: the data dir already holds cluster state", "join", f.join)
		}
		bg.Add(1)
		go func() {
			defer bg.Done()
			if joining {
				joinLoop(stop, f.join, view, sh, logger)
			}
			if seeding {
				seedLoop(stop, srv, seed, logger)
			}
			advertise(stop, view, srv, logger)
		}()
		bg.Add(1)
		go func() {
			defer bg.Done()
			keepLevel(stop, view.keeper, logger)
		}()
		if sh.groups > 1 {
			bg.Add(1)
			go func() {
				defer bg.Done()
				tendGroups(stop, gnode, sh, gmeta, slotMaps, newStore, logger)
			}()
			startMoves(&bg, &moveDriver{env: nodeMoveEnv{gm: gmeta, node: gnode}, sh: sh, rate: moveRate, logger: logger, stop: stop})
		}
	}

	metrics.register(newKVSCollector(srv, store, log, node, leaders, logs, mode(f)))
	if log != nil {
		metrics.register(fsyncs)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()
	hc.log = logs
	hc.phase.Store(phaseServing)

	select {
	case err := <-serveErr:
		return err
	case s := <-sig:
		logger.Info("shutting down", "signal", s.String())
	case <-srv.ShutdownRequested():
		if srv.ShutdownNow() {
			// A busy script holds the store, and the log's apply in
			// durable and cluster mode: a graceful stop would wait for
			// it. The process exits as after kill -9: what the log
			// holds is replayed at the next start, the script's entry
			// in full.
			logger.Warn("exiting at once: SHUTDOWN NOSAVE while a script is busy")
			os.Exit(0)
		}
		logger.Info("shutting down", "reason", "SHUTDOWN command")
	}
	hc.phase.Store(phaseStopping)
	if node != nil && node.IsLeader() {
		// Hand leadership over while still serving, so that clients and
		// followers find the new leader without waiting out an election;
		// writes in flight here are forwarded to it.
		if err := node.TransferLeadership(); err != nil {
			logger.Warn("leadership transfer failed", "err", err)
		} else if !node.IsLeader() {
			logger.Info("leadership transferred")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		logger.Warn("shutdown did not drain every connection", "err", err)
	}
	<-serveErr
	if err := metrics.shutdown(ctx); err != nil {
		logger.Warn("metrics endpoint did not stop cleanly", "err", err)
	}
	stopBackground()
	if node != nil {
		// Read before raft stops: whether this node could write its log.
		storeErr := node.LogStoreErr()
		if err := node.Close(); err != nil {
			return fmt.Errorf("closing raft: %w", err)
		}
		if storeErr != nil {
			return fmt.Errorf("stopped while the raft log could not be written (entries this node did not store are on the other nodes only if they committed them): %w", storeErr)
		}
	}
	if log != nil {
		// A failed log makes one last repair attempt in Close.
		if err := log.Close(); err != nil {
			if errors.Is(err, wal.ErrWriteFailed) {
				return fmt.Errorf("stopped while the append log could not be written (every write since the failure was refused; every write acknowledged before it is in the log): %w", err)
			}
			return fmt.Errorf("closing the append log: %w", err)
		}
	}
	logger.Info("kvs stopped")
	return nil
}

func mode(f serveFlags) string {
	if f.clustered() {
		return "cluster"
	}
	if f.dataDir == "" {
		return "memory"
	}
	return "durable"
}

// minProcs is the fewest Ps kvs runs with in cluster mode, and in durable
// mode unless it is served by event loops with io_uring fsyncs.
// A goroutine blocked in fsync holds its P until the runtime's monitor
// takes it back; with one P (kvs pinned to one core) that stalls every
// connection meanwhile. A second P lets connections run during the fsync
// even on one core, where it costs nothing while no fsync is running.
// Measured pinned to one core, durable SETs from 50 clients on goroutines:
// 31–34k a second with one P, 42–45k with two and one fsync at a time
// (wal.Options.SyncDepth 1). Where the wal submits its fsyncs through
// io_uring they block no thread, but the cluster's bolt fsyncs still do.
// With event loops (server.Config.ConnGoroutines unset) and fsync always,
// where a loop waits for its round's fsync on a channel, one P measured
// better than two: 46–60k SETs a second (median 52k) against 47–49k (a
// loop that waited for every fsync; one that serves on during it measured
// level, 30–46k against 33–39k).
const minProcs = 2

func ensureProcs() {
	if runtime.GOMAXPROCS(0) < minProcs {
		runtime.GOMAXPROCS(minProcs)
	}
}

// snapshotGrowth is cluster.Config.SnapshotGrowth for --raft-snapshot-growth
// pct: 0 turns the rule off, which the config says by a negative value.
func snapshotGrowth(pct int) int {
	if pct == 0 {
		return -1
	}
	return pct
}

// absPath is path made absolute (empty stays empty): the server's working
// directory is not the one a relative flag was given in, for a config file.
func absPath(path string) string {
	if path == "" {
		return ""
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// applyPort is --port (or a config file's port): the port of --addr, or
// with 0 no plain TCP listener, as Redis's port 0.
func (f *serveFlags) applyPort(port string) error {
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("--port %q: want a port number, 0 to 65535", port)
	}
	if port == "0" {
		f.addr = ""
		return nil
	}
	host := "127.0.0.1"
	if f.addr != "" {
		h, _, err := net.SplitHostPort(f.addr)
		if err != nil {
			return fmt.Errorf("--addr: %w", err)
		}
		host = h
	}
	f.addr = net.JoinHostPort(host, port)
	return nil
}

// parseSocketPerm is --unixsocketperm: octal permission bits, as
// redis.conf's unixsocketperm.
func parseSocketPerm(v string) (os.FileMode, error) {
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o777 {
		return 0, fmt.Errorf("--unixsocketperm %q: want octal permission bits (700, 770)", v)
	}
	return os.FileMode(n), nil
}

// joinReplicaOf lets --replicaof take Redis's two arguments, HOST PORT,
// as one flag value.
func joinReplicaOf(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if (a == "--replicaof" || a == "-replicaof" || a == "--slaveof" || a == "-slaveof") && i+2 < len(args) {
			if _, err := strconv.ParseUint(args[i+2], 10, 16); err == nil {
				out = append(out, "--replicaof="+args[i+1]+" "+args[i+2])
				i += 2
				continue
			}
		}
		if a == "--slaveof" || a == "-slaveof" {
			a = "--replicaof"
		}
		out = append(out, a)
	}
	return out
}

// replicaOfAddr is --replicaof's HOST and PORT (given as "HOST PORT" or
// HOST:PORT).
func (f serveFlags) replicaOfAddr() (string, int, error) {
	host, port, ok := strings.Cut(strings.TrimSpace(f.replicaOf), " ")
	if !ok {
		var err error
		if host, port, err = net.SplitHostPort(f.replicaOf); err != nil {
			return "", 0, fmt.Errorf("--replicaof %q: want HOST PORT", f.replicaOf)
		}
	}
	p, err := strconv.ParseUint(strings.TrimSpace(port), 10, 16)
	if err != nil || host == "" {
		return "", 0, fmt.Errorf("--replicaof %q: want HOST PORT", f.replicaOf)
	}
	return host, int(p), nil
}
