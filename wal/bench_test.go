package wal

import (
	"fmt"
	"testing"
)

// benchLog opens a log with fsync always on the real file system, running
// up to depth fsyncs at once.
func benchLog(b *testing.B, depth int) *Log {
	l, err := Open(Options{
		Dir:       b.TempDir(),
		SyncDepth: depth,
		Apply:     func(index uint64, rec []byte) any { return nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

func reportFsyncs(b *testing.B, l *Log) {
	s := l.Stats()
	b.ReportMetric(s.RecordsPerFsync(), "records/fsync")
	if s.Fsyncs > 0 {
		b.ReportMetric(float64(s.FsyncNanosTotal)/float64(s.Fsyncs), "ns/fsync")
	}
}

// BenchmarkAppend is one appender: every Append waits for its own fsync.
func BenchmarkAppend(b *testing.B) {
	l := benchLog(b, 0)
	rec := make([]byte, 100)
	b.ReportAllocs()
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if _, err := l.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
	reportFsyncs(b, l)
}

// BenchmarkAppendParallel is many appenders (32 per CPU): group commit lets
// them share fsyncs, so records/fsync rises and ns/op falls. The
// sub-benchmarks run one fsync at a time, and two at once (the default).
func BenchmarkAppendParallel(b *testing.B) {
	for _, depth := range []int{1, 2} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			l := benchLog(b, depth)
			b.ReportAllocs()
			b.SetBytes(100)
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				rec := make([]byte, 100)
				for pb.Next() {
					if _, err := l.Append(rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportFsyncs(b, l)
		})
	}
}
