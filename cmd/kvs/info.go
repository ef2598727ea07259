package main

import (
	"fmt"
	"strconv"

	"kvs/cluster"
	"kvs/server"
	"kvs/wal"
)

// infoFuncs combines the wiring's INFO field sources into one
// server.Config.Info.
func infoFuncs(fns ...func(section string) []server.InfoField) func(section string) []server.InfoField {
	return func(section string) []server.InfoField {
		var out []server.InfoField
		for _, fn := range fns {
			out = append(out, fn(section)...)
		}
		return out
	}
}

// raftInfo returns INFO raft (cluster mode, listed in
// server.Config.InfoSections): this node's raft state, term and indexes,
// the leader it knows, and the leader changes it has seen.
func raftInfo(node *cluster.Node, lw *leaderWatch) func(section string) []server.InfoField {
	return func(section string) []server.InfoField {
		if section != "raft" {
			return nil
		}
		st := node.Status()
		u := func(v uint64) string { return strconv.FormatUint(v, 10) }
		return []server.InfoField{
			{Name: "raft_node_id", Value: st.ID},
			{Name: "raft_state", Value: st.State},
			{Name: "raft_term", Value: u(st.Term)},
			{Name: "raft_last_index", Value: u(st.LastIndex)},
			{Name: "raft_commit_index", Value: u(st.CommitIndex)},
			{Name: "raft_applied_index", Value: u(st.AppliedIndex)},
			{Name: "raft_leader_id", Value: st.LeaderID},
			{Name: "raft_leader_raft_addr", Value: st.LeaderRaftAddr},
			{Name: "raft_leader_changes", Value: u(lw.count())},
		}
	}
}

// persistenceInfo returns the INFO persistence fields that only the wiring
// knows: whether there is a log, its fsync policy and what the log did.
// Names follow Redis's (aof_*) where Redis has one, kvs's (wal_*) where not.
func persistenceInfo(f serveFlags, log *wal.Log) func(section string) []server.InfoField {
	return func(section string) []server.InfoField {
		if section != "persistence" {
			return nil
		}
		if log == nil {
			return []server.InfoField{{Name: "aof_enabled", Value: "0"}}
		}
		st := log.Stats()
		u := func(v uint64) string { return strconv.FormatUint(v, 10) }
		bgrewrite := "ok"
		if st.LastCompactionFailed {
			bgrewrite = "err"
		}
		out := []server.InfoField{{Name: "aof_enabled", Value: "1"}}
		out = append(out, durableLogState(log).infoFields()...)
		return append(out, []server.InfoField{
			{Name: "aof_last_bgrewrite_status", Value: bgrewrite},
			{Name: "kvs_fsync_policy", Value: f.fsync},
			{Name: "wal_fsync_method", Value: log.FsyncMethod()},
			{Name: "wal_dir", Value: f.dataDir},
			{Name: "wal_appends", Value: u(st.Appends)},
			{Name: "wal_fsyncs", Value: u(st.Fsyncs)},
			{Name: "wal_records_per_fsync", Value: fmt.Sprintf("%.2f", st.RecordsPerFsync())},
			{Name: "wal_last_fsync_usec", Value: u(st.LastFsyncNanos / 1000)},
			{Name: "wal_bytes_written", Value: u(st.Bytes)},
			{Name: "wal_segments", Value: u(st.Segments)},
			{Name: "wal_last_index", Value: u(st.LastIndex)},
			{Name: "wal_durable_index", Value: u(st.DurableIndex)},
			{Name: "wal_snapshot_index", Value: u(st.SnapshotIndex)},
			{Name: "wal_snapshot_bytes", Value: u(st.SnapshotBytes)},
			{Name: "wal_compactions", Value: u(st.Compactions)},
			{Name: "wal_compaction_errors", Value: u(st.CompactionErrors)},
			{Name: "wal_last_compaction_usec", Value: u(st.LastCompactionNanos / 1000)},
			{Name: "wal_write_repairs", Value: u(st.WriteRecovered)},
		}...)
	}
}

// configParams are the read-only parameters CONFIG GET reports for the mode.
func configParams(f serveFlags) map[string]string {
	p := map[string]string{"appendonly": "yes", "appendfsync": f.fsync, "dir": f.dataDir}
	if f.dataDir == "" {
		p = map[string]string{"appendonly": "no", "dir": ""}
	}
	p["unixsocket"] = f.unixSocket
	perm, _ := parseSocketPerm(f.unixSocketPerm)
	p["unixsocketperm"] = strconv.FormatUint(uint64(perm), 8)
	return p
}
