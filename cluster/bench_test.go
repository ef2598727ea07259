package cluster

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
)

// The benchmarks write through the leader of a three-node cluster on
// loopback with the default tuning and the log fdatasynced at every write: one op
// is one SET entry committed by a quorum and applied on the leader. Besides
// ops/s they report, from raft's and the log store's metrics (all three
// nodes together), the mean log entries per write (logs/batch) and the mean
// time of one write with its fdatasync (storeLogs-ms).

func benchCluster(b *testing.B) (*testNode, *metrics.InmemSink) {
	h := newHarness(b, func(c *Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 0, 0, 0
	})
	lead := h.cluster3()
	put(b, lead, "warm", "up")
	sink := metrics.NewInmemSink(time.Hour, time.Hour)
	conf := metrics.DefaultConfig("")
	conf.EnableHostname, conf.EnableRuntimeMetrics = false, false
	if _, err := metrics.NewGlobal(conf, sink); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { metrics.NewGlobal(conf, &metrics.BlackholeSink{}) })
	return lead, sink
}

func benchEntries() [][]byte {
	entries := make([][]byte, 1024)
	for i := range entries {
		entries[i] = setEntry("key:"+strconv.Itoa(i), "value-0123456789")
	}
	return entries
}

func reportRaft(b *testing.B, sink *metrics.InmemSink, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
	mean := func(name string) float64 {
		var sum float64
		var n int
		for _, iv := range sink.Data() {
			iv.RLock()
			if s, ok := iv.Samples[name]; ok {
				sum += s.Sum
				n += s.Count
			}
			iv.RUnlock()
		}
		if n == 0 {
			return 0
		}
		return sum / float64(n)
	}
	// The log is raftlog's, or bolt's on a node from before it.
	b.ReportMetric(mean("raft.raftlog.logsPerBatch")+mean("raft.boltdb.logsPerBatch"), "logs/batch")
	b.ReportMetric(mean("raft.raftlog.storeLogs")+mean("raft.boltdb.storeLogs"), "storeLogs-ms")
}

func BenchmarkClusterPut(b *testing.B) {
	lead, sink := benchCluster(b)
	entries := benchEntries()
	b.ReportAllocs()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		if _, err := lead.n.Apply(entries[i%len(entries)]); err != nil {
			b.Fatal(err)
		}
	}
	reportRaft(b, sink, start)
}

func BenchmarkClusterPutParallel(b *testing.B) {
	lead, sink := benchCluster(b)
	entries := benchEntries()
	var next atomic.Uint64
	b.ReportAllocs()
	// About 50 writers whatever GOMAXPROCS is.
	b.SetParallelism(max(1, 50/runtime.GOMAXPROCS(0)))
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			if _, err := lead.n.Apply(entries[i%uint64(len(entries))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRaft(b, sink, start)
}
