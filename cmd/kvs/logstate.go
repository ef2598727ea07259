package main

import (
	"fmt"
	"strconv"
	"strings"

	"kvs/cluster"
	"kvs/server"
	"kvs/wal"
)

// logState is what the node says about writing its log, the same way in
// INFO persistence, on /healthz and in the metrics: the append log in
// durable mode, raft's bolt log store in cluster mode. A nil *logState
// (memory mode) reports nothing and is always healthy.
type logState struct {
	// err returns the current failure, nil while writes succeed.
	err func() error
	// failures counts the failures so far (each until it was repaired
	// counts once).
	failures func() uint64
	// refusal says, for /healthz, what the failure means for clients.
	refusal string
}

func durableLogState(log *wal.Log) *logState {
	return &logState{
		err:      log.Err,
		failures: func() uint64 { return log.Stats().WriteFailures },
		refusal:  "writes refused: the append log cannot be written",
	}
}

func clusterLogState(node *cluster.Node) *logState {
	return &logState{
		err:      node.LogStoreErr,
		failures: node.LogStoreFailures,
		refusal:  "this node cannot write its raft log, so it cannot lead or take new entries",
	}
}

// check returns nil while the log can be written, or why not, in one line.
func (s *logState) check() error {
	if s == nil {
		return nil
	}
	if err := s.err(); err != nil {
		return fmt.Errorf("%s: %w", s.refusal, err)
	}
	return nil
}

// infoFields are the INFO persistence fields about log writes: Redis's
// aof_last_write_status, and kvs's own kvs_log_write_error (the failure,
// empty while writes succeed) and kvs_log_write_failures.
func (s *logState) infoFields() []server.InfoField {
	status, text := "ok", ""
	if err := s.err(); err != nil {
		status = "err"
		text = strings.NewReplacer("\r", " ", "\n", " ").Replace(err.Error())
	}
	return []server.InfoField{
		{Name: "aof_last_write_status", Value: status},
		{Name: "kvs_log_write_error", Value: text},
		{Name: "kvs_log_write_failures", Value: strconv.FormatUint(s.failures(), 10)},
	}
}

// clusterPersistenceInfo is INFO persistence in cluster mode: no append
// log of kvs's own, but raft's log writes reported as durable mode's.
func clusterPersistenceInfo(f serveFlags, s *logState) func(section string) []server.InfoField {
	base := persistenceInfo(f, nil)
	return func(section string) []server.InfoField {
		out := base(section)
		if section == "persistence" {
			out = append(out, s.infoFields()...)
		}
		return out
	}
}
