package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kvs/cluster"
	"kvs/fsm"
	"kvs/server"
	"kvs/wal"
)

// kvsCollector exports the counters the server, the store, the wal and raft
// keep anyway: it reads them at scrape time, so serving costs nothing more
// than the atomics those packages update (the server's per-command counters
// are described in server/metrics.go). The figures are the ones INFO
// reports; CONFIG RESETSTAT resets the server's, which Prometheus sees as a
// counter reset.
type kvsCollector struct {
	srv   *server.Server
	store *fsm.Store
	log   *wal.Log      // durable mode, else nil
	node  *cluster.Node // cluster mode, else nil
	lw    *leaderWatch  // cluster mode, else nil
	logs  *logState     // durable and cluster mode, else nil
	mode  string

	descs []*prometheus.Desc // every desc below that this mode reports
}

// The collector's metric descriptions, by the mode that reports them.
var (
	descInfo = prometheus.NewDesc("kvs_build_info", "Always 1; labels say kvs's version and mode (memory, durable, cluster).", []string{"version", "mode"}, nil)

	descCommands     = prometheus.NewDesc("kvs_commands_total", "Commands received, by command name (\"unknown\" for names kvs does not know), rejected ones included.", []string{"command"}, nil)
	descCommandErrs  = prometheus.NewDesc("kvs_command_errors_total", "Commands answered with an error, by command name: rejected (unknown name, wrong number of arguments) or failed.", []string{"command"}, nil)
	descCommandTime  = prometheus.NewDesc("kvs_command_duration_seconds", "Time from the server turning to a command to its reply being queued; the writes of a pipelined batch each count the batch's time.", []string{"command"}, nil)
	descClients      = prometheus.NewDesc("kvs_connected_clients", "Client connections open now.", nil, nil)
	descConnections  = prometheus.NewDesc("kvs_connections_received_total", "Client connections accepted.", nil, nil)
	descRejectedConn = prometheus.NewDesc("kvs_rejected_connections_total", "Client connections refused because maxclients was reached or protected mode refused them.", nil, nil)
	descOutputLimit  = prometheus.NewDesc("kvs_output_buffer_limit_disconnections_total", "Clients closed because their pending output broke client-output-buffer-limit.", nil, nil)
	descErrorReplies = prometheus.NewDesc("kvs_error_replies_total", "Error replies sent, for every reason.", nil, nil)
	descHits         = prometheus.NewDesc("kvs_keyspace_hits_total", "GET and MGET keys found.", nil, nil)
	descMisses       = prometheus.NewDesc("kvs_keyspace_misses_total", "GET and MGET keys not found.", nil, nil)
	descKeys         = prometheus.NewDesc("kvs_keys", "Keys in the store, expired ones not yet deleted excluded.", nil, nil)
	descExpiring     = prometheus.NewDesc("kvs_keys_with_expiry", "Keys in the store that have a TTL.", nil, nil)
	descMemory       = prometheus.NewDesc("kvs_memory_bytes", "The store's estimate of the memory its keys and values hold.", nil, nil)
	descExpired      = prometheus.NewDesc("kvs_expired_keys_total", "Keys deleted by this node's active and passive expiry (on a cluster, the leader's).", nil, nil)
	descACLDenied    = prometheus.NewDesc("kvs_acl_denied_total", "Commands and logins refused by the ACL on this node, by reason: command, key, channel (NOPERM) and auth (a failed AUTH or HELLO AUTH); ACL LOG lists the recent ones.", []string{"reason"}, nil)
	descEvicted      = prometheus.NewDesc("kvs_evicted_keys_total", "Keys this node evicted for maxmemory (on a cluster, the leader's decisions).", nil, nil)

	descWALAppends     = prometheus.NewDesc("kvs_wal_appends_total", "Records appended to the append log (one per batch of writes).", nil, nil)
	descWALFsyncs      = prometheus.NewDesc("kvs_wal_fsyncs_total", "Fsyncs of append log segments.", nil, nil)
	descWALLastFsync   = prometheus.NewDesc("kvs_wal_last_fsync_duration_seconds", "Duration of the most recent append log fsync.", nil, nil)
	descWALFsynced     = prometheus.NewDesc("kvs_wal_records_fsynced_total", "Records made durable by fsyncs; its rate over that of kvs_wal_fsyncs_total is the group-commit batch size.", nil, nil)
	descWALPerFsync    = prometheus.NewDesc("kvs_wal_records_per_fsync", "Mean records made durable per fsync since start.", nil, nil)
	descWALBytes       = prometheus.NewDesc("kvs_wal_bytes_total", "Bytes written to append log segments, record headers included.", nil, nil)
	descWALSegments    = prometheus.NewDesc("kvs_wal_segments", "Append log segment files.", nil, nil)
	descWALLastIndex   = prometheus.NewDesc("kvs_wal_last_index", "Index of the last record appended.", nil, nil)
	descWALDurable     = prometheus.NewDesc("kvs_wal_durable_index", "Index of the last record known fsynced.", nil, nil)
	descWALCompactions = prometheus.NewDesc("kvs_wal_compactions_total", "Snapshots written by append log compaction.", nil, nil)
	descWALCompactErrs = prometheus.NewDesc("kvs_wal_compaction_errors_total", "Append log compactions that failed.", nil, nil)

	descLogFailed   = prometheus.NewDesc("kvs_log_write_failed", "1 while this node cannot write its log (durable mode: the append log, whose writes are then refused with MISCONF until it is repaired; cluster mode: raft's log store, until a write succeeds again), else 0.", nil, nil)
	descLogFailures = prometheus.NewDesc("kvs_log_write_failures_total", "Times a write or fsync of this node's log failed after it had been working.", nil, nil)

	descRaftState     = prometheus.NewDesc("kvs_raft_state", "1 for this node's current raft state, 0 for the others.", []string{"state"}, nil)
	descRaftLeader    = prometheus.NewDesc("kvs_raft_is_leader", "1 when this node is the raft leader.", nil, nil)
	descRaftTerm      = prometheus.NewDesc("kvs_raft_term", "Current raft term.", nil, nil)
	descRaftLast      = prometheus.NewDesc("kvs_raft_last_index", "Last index in this node's raft log (or snapshot).", nil, nil)
	descRaftCommit    = prometheus.NewDesc("kvs_raft_commit_index", "Highest raft index this node knows committed.", nil, nil)
	descRaftApplied   = prometheus.NewDesc("kvs_raft_applied_index", "Last raft index applied to this node's store.", nil, nil)
	descRaftChanges   = prometheus.NewDesc("kvs_raft_leader_changes_total", "Leaders this node has seen elected since it started (itself included).", nil, nil)
	descRaftForwarded = prometheus.NewDesc("kvs_forwarded_commands_total", "Commands this node, as a follower, sent to the leader.", nil, nil)
	descApplyDelay    = prometheus.NewDesc("kvs_raft_apply_delay_seconds", "Time from the leader's append of a batch's last entry to its apply on this node: the commit round on the leader, plus learning of the commit on a follower.", nil, nil)
)

// raftStates are the values of kvs_raft_state's label.
var raftStates = []string{"follower", "candidate", "leader", "shutdown"}

func newKVSCollector(srv *server.Server, store *fsm.Store, log *wal.Log, node *cluster.Node, lw *leaderWatch, logs *logState, mode string) *kvsCollector {
	c := &kvsCollector{srv: srv, store: store, log: log, node: node, lw: lw, logs: logs, mode: mode}
	c.descs = []*prometheus.Desc{
		descInfo, descCommands, descCommandErrs, descCommandTime, descClients, descConnections,
		descRejectedConn, descErrorReplies, descHits, descMisses, descKeys, descExpiring,
		descMemory, descExpired, descEvicted, descOutputLimit, descACLDenied,
	}
	if log != nil {
		c.descs = append(c.descs, descWALAppends, descWALFsyncs, descWALLastFsync,
			descWALFsynced, descWALPerFsync, descWALBytes, descWALSegments, descWALLastIndex,
			descWALDurable, descWALCompactions, descWALCompactErrs)
	}
	if logs != nil {
		c.descs = append(c.descs, descLogFailed, descLogFailures)
	}
	if node != nil {
		c.descs = append(c.descs, descRaftState, descRaftLeader, descRaftTerm, descRaftLast,
			descRaftCommit, descRaftApplied, descRaftChanges, descRaftForwarded, descApplyDelay)
	}
	return c
}

func (c *kvsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *kvsCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descInfo, 1, version, c.mode)

	c.collectCommands(ch)
	st := c.srv.Stats()
	gauge(descClients, float64(st.ConnectedClients))
	counter(descConnections, float64(st.ConnectionsReceived))
	counter(descRejectedConn, float64(st.RejectedConnections))
	counter(descOutputLimit, float64(st.OutputLimitDisconnections))
	counter(descErrorReplies, float64(st.ErrorReplies))
	counter(descHits, float64(st.KeyspaceHits))
	counter(descMisses, float64(st.KeyspaceMisses))
	counter(descExpired, float64(st.ExpiredKeys))
	counter(descEvicted, float64(st.EvictedKeys))
	for reason, n := range c.srv.ACLDenials() {
		counter(descACLDenied, float64(n), reason)
	}
	ks := c.store.Stats(time.Now().UnixMilli())
	gauge(descKeys, float64(ks.Keys))
	gauge(descExpiring, float64(ks.Expires))
	gauge(descMemory, float64(ks.Bytes))

	if c.log != nil {
		ws := c.log.Stats()
		counter(descWALAppends, float64(ws.Appends))
		counter(descWALFsyncs, float64(ws.Fsyncs))
		gauge(descWALLastFsync, float64(ws.LastFsyncNanos)/1e9)
		counter(descWALFsynced, float64(ws.RecordsFsynced))
		gauge(descWALPerFsync, ws.RecordsPerFsync())
		counter(descWALBytes, float64(ws.Bytes))
		gauge(descWALSegments, float64(ws.Segments))
		gauge(descWALLastIndex, float64(ws.LastIndex))
		gauge(descWALDurable, float64(ws.DurableIndex))
		counter(descWALCompactions, float64(ws.Compactions))
		counter(descWALCompactErrs, float64(ws.CompactionErrors))
	}

	if c.logs != nil {
		gauge(descLogFailed, boolFloat(c.logs.err() != nil))
		counter(descLogFailures, float64(c.logs.failures()))
	}

	if c.node != nil {
		rs := c.node.Status()
		for _, s := range raftStates {
			gauge(descRaftState, boolFloat(rs.State == s), s)
		}
		gauge(descRaftLeader, boolFloat(rs.State == "leader"))
		gauge(descRaftTerm, float64(rs.Term))
		gauge(descRaftLast, float64(rs.LastIndex))
		gauge(descRaftCommit, float64(rs.CommitIndex))
		gauge(descRaftApplied, float64(rs.AppliedIndex))
		counter(descRaftChanges, float64(c.lw.count()))
		counter(descRaftForwarded, float64(st.ForwardedCommands))
		ch <- applyDelayHistogram(c.node.ApplyDelay())
	}
}

// applyDelayHistogram is the node's apply delays as a Prometheus histogram.
func applyDelayHistogram(d cluster.ApplyDelay) prometheus.Metric {
	buckets := make(map[float64]uint64, len(cluster.ApplyDelayBuckets))
	var cum uint64
	for i, n := range d.Counts {
		cum += n
		if i < len(cluster.ApplyDelayBuckets) {
			buckets[cluster.ApplyDelayBuckets[i]] = cum
		}
	}
	return prometheus.MustNewConstHistogram(descApplyDelay, cum, d.Sum.Seconds(), buckets)
}

// collectCommands reports the per-command counters and histograms.
func (c *kvsCollector) collectCommands(ch chan<- prometheus.Metric) {
	bounds := server.LatencyBounds()
	for _, cs := range c.srv.CommandStats() {
		ch <- prometheus.MustNewConstMetric(descCommands, prometheus.CounterValue, float64(cs.Calls+cs.Rejected), cs.Name)
		ch <- prometheus.MustNewConstMetric(descCommandErrs, prometheus.CounterValue, float64(cs.Rejected+cs.Failed), cs.Name)
		buckets := make(map[float64]uint64, len(bounds))
		var cum, count uint64
		for i, n := range cs.Buckets {
			cum += uint64(n)
			if i < len(bounds) {
				buckets[bounds[i].Seconds()] = cum
			}
		}
		count = cum
		ch <- prometheus.MustNewConstHistogram(descCommandTime, count, cs.Duration.Seconds(), buckets, cs.Name)
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
