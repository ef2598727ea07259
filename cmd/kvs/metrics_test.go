package main

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"kvs/fsm"
	"kvs/group"
	"kvs/server"
	"kvs/wal"
)

func TestHealth(t *testing.T) {
	var h health
	if err := h.check(); err == nil || !strings.HasPrefix(err.Error(), "starting") {
		t.Errorf("starting: %v", err)
	}
	h.phase.Store(phaseServing)
	if err := h.check(); err != nil {
		t.Errorf("serving, no cluster: %v", err)
	}
	leaderErr := errors.New("no leader known")
	h.leader = func() error { return leaderErr }
	if err := h.check(); err != leaderErr {
		t.Errorf("serving, no leader: %v", err)
	}
	h.phase.Store(phaseStopping)
	if err := h.check(); err == nil || err.Error() != "shutting down" {
		t.Errorf("stopping: %v", err)
	}
}

// TestCollectorGather: the collector's metrics agree with its descriptions
// (the registry checks names, types and labels) in memory and durable mode,
// and carry the expected families.
func TestCollectorGather(t *testing.T) {
	store := fsm.NewStore()
	srv, err := server.New(server.Config{Store: store, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := group.OpenDurable(store, group.DurableOptions{Dir: t.TempDir(), Fsync: wal.FsyncAlways,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	log, p := g.Log(), g.Proposer()
	if _, err := p.Propose([]fsm.Command{{Op: fsm.OpSet, Args: [][]byte{[]byte("k"), []byte("v")}}}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		mode string
		log  *wal.Log
		want []string
		not  []string
	}{
		{"memory", nil, []string{"kvs_keys", "kvs_memory_bytes", "kvs_evicted_keys_total", "kvs_acl_denied_total"}, []string{"kvs_wal_fsyncs_total", "kvs_raft_term", "kvs_log_write_failed"}},
		{"durable", log, []string{"kvs_keys", "kvs_wal_fsyncs_total", "kvs_wal_records_per_fsync", "kvs_log_write_failed", "kvs_log_write_failures_total"}, []string{"kvs_raft_term"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			var logs *logState
			if tc.log != nil {
				logs = durableLogState(tc.log)
			}
			reg.MustRegister(newKVSCollector(srv, store, tc.log, nil, nil, logs, tc.mode))
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, mf := range mfs {
				if len(mf.GetMetric()) == 1 {
					m := mf.GetMetric()[0]
					got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetSummary().GetSampleCount())
				} else {
					got[mf.GetName()] = -1
				}
			}
			for _, name := range tc.want {
				if _, ok := got[name]; !ok {
					t.Errorf("%s missing", name)
				}
			}
			for _, name := range tc.not {
				if _, ok := got[name]; ok {
					t.Errorf("%s reported in %s mode", name, tc.mode)
				}
			}
			if got["kvs_keys"] != 1 {
				t.Errorf("kvs_keys %v, want 1", got["kvs_keys"])
			}
			if tc.log != nil && got["kvs_wal_fsyncs_total"] < 1 {
				t.Errorf("kvs_wal_fsyncs_total %v after a durable write", got["kvs_wal_fsyncs_total"])
			}
		})
	}
}
