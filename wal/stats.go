package wal

import "sync/atomic"

// Stats is a point-in-time copy of the log's counters. Counters are
// cumulative since Open unless noted.
type Stats struct {
	Appends         uint64 // records appended (Append calls that got an index)
	Fsyncs          uint64 // fsyncs of segment files
	RecordsFsynced  uint64 // records made durable by those fsyncs; RecordsFsynced/Fsyncs is the group-commit batch size
	FsyncNanosTotal uint64 // total time spent in fsync
	LastFsyncNanos  uint64 // duration of the most recent fsync
	Bytes           uint64 // bytes written to segments, headers included
	Segments        uint64 // live segment files (gauge)
	LastIndex       uint64 // index of the last record appended or replayed (gauge)
	DurableIndex    uint64 // index of the last record known fsynced (gauge)

	SnapshotIndex       uint64 // index the newest snapshot covers (gauge)
	SnapshotBytes       uint64 // size of the newest snapshot file written (gauge)
	Compactions         uint64 // snapshots written
	CompactionErrors    uint64 // compactions that failed
	LastCompactionNanos uint64 // wall time of the most recent compaction, snapshot capture to last deletion
	SegmentsDeleted     uint64 // segments deleted by compaction

	LastCompactionFailed bool // the most recent compaction failed

	WriteFailures  uint64 // times a failed write or fsync put the log in its failed state
	WriteRecovered uint64 // times the log left its failed state again
}

// Policy is the log's fsync policy.
func (l *Log) Policy() Policy { return l.opts.Fsync }

// FsyncMethod names how the log makes its records durable: "io_uring" (an
// fdatasync submitted to an io_uring), "fdatasync" (the system call, where
// io_uring is unavailable), "fsync" (other systems), or "memory" for a test
// file system.
func (l *Log) FsyncMethod() string {
	if _, ok := l.fs.(OSFS); !ok {
		return "memory"
	}
	return fsyncMethod()
}

// RecordsPerFsync is the mean group-commit batch size.
func (s Stats) RecordsPerFsync() float64 {
	if s.Fsyncs == 0 {
		return 0
	}
	return float64(s.RecordsFsynced) / float64(s.Fsyncs)
}

type counters struct {
	appends, fsyncs, recordsFsynced, fsyncNanos, lastFsyncNanos, bytes atomic.Uint64
	segments, durableIndex                                             atomic.Uint64
	snapshotIndex, snapshotBytes, compactions, compactionErrors        atomic.Uint64
	lastCompactionNanos, segmentsDeleted                               atomic.Uint64
	writeFailures, writeRecovered                                      atomic.Uint64
	lastCompactionFailed                                               atomic.Bool
}

// noteCompaction records whether the compaction that returned err failed,
// and returns err.
func (l *Log) noteCompaction(err error) error {
	l.stats.lastCompactionFailed.Store(err != nil)
	return err
}

// Stats returns the log's counters. Apart from LastIndex, read under the
// append mutex, they are atomics, so a metrics scrape costs the write path
// next to nothing.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	last := l.mu.nextIndex - 1
	l.mu.Unlock()
	c := &l.stats
	return Stats{
		Appends:              c.appends.Load(),
		Fsyncs:               c.fsyncs.Load(),
		RecordsFsynced:       c.recordsFsynced.Load(),
		FsyncNanosTotal:      c.fsyncNanos.Load(),
		LastFsyncNanos:       c.lastFsyncNanos.Load(),
		Bytes:                c.bytes.Load(),
		Segments:             c.segments.Load(),
		LastIndex:            last,
		DurableIndex:         c.durableIndex.Load(),
		SnapshotIndex:        c.snapshotIndex.Load(),
		SnapshotBytes:        c.snapshotBytes.Load(),
		Compactions:          c.compactions.Load(),
		CompactionErrors:     c.compactionErrors.Load(),
		LastCompactionNanos:  c.lastCompactionNanos.Load(),
		SegmentsDeleted:      c.segmentsDeleted.Load(),
		LastCompactionFailed: c.lastCompactionFailed.Load(),
		WriteFailures:        c.writeFailures.Load(),
		WriteRecovered:       c.writeRecovered.Load(),
	}
}
