package server

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"kvs/fsm"
)

// defaultInfoSections are the sections of a bare INFO, in Redis's order.
var defaultInfoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "cpu", "cluster", "keyspace"}

// allInfoSections are the sections "INFO all" adds to the default ones,
// as Redis does: long, so not in a bare INFO.
var allInfoSections = []string{"commandstats", "errorstats", "latencystats"}

// runInfo answers INFO [section ...]: "all", "everything" and "default"
// select sets of sections, other names select themselves; unknown names
// select nothing, as in Redis.
func runInfo(c *client, args [][]byte) {
	s := c.s
	defaults := append(append([]string(nil), defaultInfoSections...), s.cfg.InfoSections...)
	all := append(append([]string(nil), defaults...), allInfoSections...)
	var want []string
	if len(args) == 1 {
		want = defaults
	} else {
		picked := map[string]bool{}
		for _, a := range args[1:] {
			name := strings.ToLower(string(a))
			switch name {
			case "all", "everything":
				for _, n := range all {
					picked[n] = true
				}
			case "default":
				for _, n := range defaults {
					picked[n] = true
				}
			default:
				picked[name] = true
			}
		}
		for _, n := range all {
			if picked[n] {
				want = append(want, n)
			}
		}
	}
	// What the sections read of the store, read once and without waiting
	// behind a busy script, which would hold the store (busy.go).
	var st storeStats
	ok := true
	if slices.Contains(want, "memory") {
		st.scripts, ok = s.scriptStore().ScriptStatsServing()
	}
	if ok && slices.Contains(want, "keyspace") {
		// The groups this node leads, as DBSIZE counts them (keyless.go).
		now := time.Now().UnixMilli()
		for _, g := range s.router.ledGroups() {
			var gs fsm.Stats
			if gs, ok = g.store.StatsServing(now); !ok {
				break
			}
			st.keys.Keys += gs.Keys
			st.keys.Expires += gs.Expires
			st.keys.Bytes += gs.Bytes
		}
		if ok && !s.router.sharded() {
			st.dbs, ok = s.router.home.store.OtherDBStatsServing(now)
		}
	}
	if !ok {
		c.out = appendError(c.out, errBusy(s.scriptBusy()))
		return
	}
	var b strings.Builder
	for i, name := range want {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# ")
		b.WriteString(sectionTitle(name))
		b.WriteString("\r\n")
		for _, f := range s.infoSection(name, &st) {
			b.WriteString(f.Name)
			b.WriteByte(':')
			b.WriteString(f.Value)
			b.WriteString("\r\n")
		}
	}
	c.out = appendVerbatim(c.out, b.String(), c.proto)
}

// sectionTitle is a section's header as Redis writes it: capitalised,
// and CPU in capitals.
func sectionTitle(name string) string {
	if name == "cpu" {
		return "CPU"
	}
	return strings.ToUpper(name[:1]) + name[1:]
}

// storeStats is what INFO's sections read of the store under its lock,
// read once before they are written (runInfo).
type storeStats struct {
	keys    fsm.Stats       // keyspace: database 0
	dbs     []fsm.DBStats   // keyspace: the other databases holding keys
	scripts fsm.ScriptStats // memory
}

func (s *Server) infoSection(name string, st *storeStats) []InfoField {
	var fs []InfoField
	add := func(n string, v any) {
		var sv string
		switch v := v.(type) {
		case string:
			sv = v
		case int:
			sv = strconv.Itoa(v)
		case int64:
			sv = strconv.FormatInt(v, 10)
		case uint64:
			sv = strconv.FormatUint(v, 10)
		}
		fs = append(fs, InfoField{n, sv})
	}
	now := time.Now()
	switch name {
	case "server":
		up := now.Sub(s.started)
		add("redis_version", s.cfg.RedisVersion)
		if s.cfg.Version != "" {
			add("kvs_version", s.cfg.Version)
		}
		if s.router.clustered() {
			add("redis_mode", "cluster")
		} else {
			add("redis_mode", "standalone")
		}
		add("os", runtime.GOOS+" "+runtime.GOARCH)
		add("arch_bits", strconv.Itoa(strconv.IntSize))
		add("go_version", runtime.Version())
		add("gomaxprocs", runtime.GOMAXPROCS(0))
		if n := s.eventLoops(); n > 0 {
			add("multiplexing_api", "epoll")
			add("kvs_io", "loop")
			add("kvs_event_loops", n)
		} else {
			add("kvs_io", "goroutines")
		}
		add("process_id", os.Getpid())
		add("tcp_port", s.port())
		add("server_time_usec", now.UnixMicro())
		add("uptime_in_seconds", int64(up/time.Second))
		add("uptime_in_days", int64(up/(24*time.Hour)))
		add("hz", 10)
		if exe, err := os.Executable(); err == nil {
			add("executable", exe)
		}
	case "clients":
		add("connected_clients", s.connectedClients())
		add("maxclients", s.maxClients.Load())
		add("blocked_clients", s.blocked.count()+int(s.pausedClients.Load()))
		add("tracking_clients", s.trk.clients.Load())
	case "memory":
		fs = s.memoryInfo(st.scripts)
	case "persistence":
		add("loading", 0)
		add("async_loading", 0)
		last, running, lastErr := s.saves.status()
		add("rdb_changes_since_last_save", s.changesSinceSave())
		add("rdb_bgsave_in_progress", boolInt(running))
		add("rdb_last_save_time", last.Unix())
		add("rdb_last_bgsave_status", okErr(lastErr))
	case "stats":
		add("total_connections_received", s.stats.connectionsReceived.Load())
		add("total_commands_processed", s.stats.commands.Load())
		add("instantaneous_ops_per_sec", s.stats.opsPerSec())
		add("rejected_connections", s.stats.rejectedConnections.Load())
		add("client_query_buffer_limit_disconnections", s.stats.queryLimitKills.Load())
		add("client_output_buffer_limit_disconnections", s.stats.outputLimitKills.Load())
		add("expired_keys", s.stats.expiredKeys.Load())
		add("evicted_keys", s.stats.evictedKeys.Load())
		add("keyspace_hits", s.stats.hits.Load())
		add("keyspace_misses", s.stats.misses.Load())
		add("migrate_cached_sockets", s.migrates.count())
		tk, ti, tp := s.trackingStats()
		add("tracking_total_keys", tk)
		add("tracking_total_items", ti)
		add("tracking_total_prefixes", tp)
		add("total_error_replies", s.stats.errors.total.Load())
		if s.router.clustered() {
			add("kvs_forwarded_commands", s.stats.forwarded.Load())
			add("kvs_forwards_relayed_unapplied", s.stats.staleForwards.Load())
			add("kvs_replica_reads_unsynced", s.stats.unsyncedReplicaReads.Load())
			if s.router.sharded() {
				add("kvs_commands_rerouted", s.stats.rerouted.Load())
			}
		}
	case "commandstats":
		fs = s.commandStatsInfo()
	case "latencystats":
		fs = s.latencyStatsInfo()
	case "errorstats":
		for _, e := range s.ErrorStats() {
			add("errorstat_"+e.Prefix, "count="+strconv.FormatInt(e.Count, 10))
		}
	case "replication":
		if r := s.replicaOf(); r != nil {
			fs = r.info(s)
			break
		}
		if s.router.clustered() {
			fs = s.replicationInfo()
			break
		}
		fs = s.standaloneReplicationInfo()
	case "cpu":
		fs = s.cpuInfo()
	case "cluster":
		if s.router.clustered() {
			add("cluster_enabled", 1)
		} else {
			add("cluster_enabled", 0)
		}
	case "keyspace":
		if st.keys.Keys > 0 {
			add("db0", "keys="+strconv.Itoa(st.keys.Keys)+",expires="+strconv.Itoa(st.keys.Expires)+",avg_ttl=0")
		}
		for _, d := range st.dbs {
			add("db"+strconv.Itoa(d.DB), "keys="+strconv.Itoa(d.Keys)+",expires="+strconv.Itoa(d.Expires)+",avg_ttl=0")
		}
	}
	if s.cfg.Info != nil {
		fs = mergeFields(fs, s.cfg.Info(name))
	}
	return fs
}

// standaloneReplicationInfo is INFO replication of a node outside a
// cluster: a master with no replicas and no backlog, as redis-server
// reports one (its master_repl_offset stays 0 without a backlog).
func (s *Server) standaloneReplicationInfo() []InfoField {
	fs := []InfoField{
		{"role", "master"},
		{"connected_slaves", "0"},
	}
	fs = s.addGoodReplicas(fs)
	return append(fs, []InfoField{
		{"master_failover_state", "no-failover"},
		{"master_replid", s.replID},
		{"master_replid2", "0000000000000000000000000000000000000000"},
		{"master_repl_offset", "0"},
		{"second_repl_offset", "-1"},
		{"repl_backlog_active", "0"},
		{"repl_backlog_size", "1048576"},
		{"repl_backlog_first_byte_offset", "0"},
		{"repl_backlog_histlen", "0"},
	}...)
}

// randomHex is n random bytes in hex (crypto/rand.Read never fails).
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// commandStatsInfo is INFO commandstats, in Redis's format; like Redis it
// does not list commands it does not know.
func (s *Server) commandStatsInfo() []InfoField {
	var fs []InfoField
	for _, cs := range s.CommandStats() {
		if cs.Name == unknownCommand {
			continue
		}
		usec := cs.Duration.Microseconds()
		perCall := 0.0
		if cs.Calls > 0 {
			perCall = float64(usec) / float64(cs.Calls)
		}
		v := "calls=" + strconv.FormatInt(cs.Calls, 10) +
			",usec=" + strconv.FormatInt(usec, 10) +
			",usec_per_call=" + strconv.FormatFloat(perCall, 'f', 2, 64) +
			",rejected_calls=" + strconv.FormatInt(cs.Rejected, 10) +
			",failed_calls=" + strconv.FormatInt(cs.Failed, 10)
		fs = append(fs, InfoField{"cmdstat_" + cs.Name, v})
	}
	return fs
}

func (s *Server) port() string {
	s.mu.Lock()
	closed := s.portClosed
	s.mu.Unlock()
	if s.cfg.PlainDisabled || closed {
		return "0"
	}
	if a := s.Addr(); a != nil {
		if _, p, err := splitHostPort(a.String()); err == nil {
			return p
		}
	}
	_, p, _ := splitHostPort(s.cfg.Addr)
	return p
}

// humanBytes formats n as Redis's bytesToHuman does.
func humanBytes(n uint64) string {
	f := float64(n)
	switch {
	case n < 1024:
		return strconv.FormatUint(n, 10) + "B"
	case n < 1024*1024:
		return strconv.FormatFloat(f/1024, 'f', 2, 64) + "K"
	case n < 1024*1024*1024:
		return strconv.FormatFloat(f/(1024*1024), 'f', 2, 64) + "M"
	default:
		return strconv.FormatFloat(f/(1024*1024*1024), 'f', 2, 64) + "G"
	}
}

// mergeFields adds extra to fs; an extra field named like one of fs replaces
// its value in place (the wiring knows better, e.g. role in a cluster).
func mergeFields(fs, extra []InfoField) []InfoField {
	for _, e := range extra {
		replaced := false
		for i := range fs {
			if fs[i].Name == e.Name {
				fs[i].Value = e.Value
				replaced = true
				break
			}
		}
		if !replaced {
			fs = append(fs, e)
		}
	}
	return fs
}
