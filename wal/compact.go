package wal

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Compact takes a snapshot now, writes and verifies it, and deletes what
// the previous snapshot covers (segments and older snapshots): the previous
// snapshot and the log after it are kept as a fallback. It waits for a compaction already running.
func (l *Log) Compact() error {
	if l.opts.Snapshot == nil {
		return ErrNoSnapshot
	}
	select {
	case l.compactSem <- struct{}{}:
	case <-l.closing:
		return ErrClosed
	}
	defer func() { <-l.compactSem }()
	l.mu.Lock()
	closed := l.mu.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return l.noteCompaction(l.compact())
}

// maybeCompact starts a background compaction when enough log was written
// since the last snapshot and none is running. Called by the flush
// goroutine after each turn.
func (l *Log) maybeCompact() {
	if l.opts.Snapshot == nil || l.stats.bytes.Load()-l.snapBytes.Load() < uint64(l.opts.CompactBytes) {
		return
	}
	select {
	case l.compactSem <- struct{}{}:
	default:
		return // one is running
	}
	l.bg.Lock()
	defer l.bg.Unlock()
	if l.bg.closed {
		<-l.compactSem
		return
	}
	l.bg.wg.Add(1)
	go func() {
		defer l.bg.wg.Done()
		defer func() { <-l.compactSem }()
		if err := l.noteCompaction(l.compact()); err != nil {
			l.logger.Error("wal: background compaction failed", "err", err)
		}
	}()
}

// compact runs one compaction; the caller holds compactSem. Only the
// Snapshot call itself is on the caller's lock; the write runs while
// appends continue.
func (l *Log) compact() error {
	start := time.Now()
	bytesAtSnap := l.stats.bytes.Load()
	index, write, err := l.opts.Snapshot()
	if err != nil {
		l.stats.compactionErrors.Add(1)
		return fmt.Errorf("wal: snapshot: %w", err)
	}
	if index <= l.stats.snapshotIndex.Load() {
		abandon(write)
		return nil // nothing applied since the last snapshot
	}
	// The snapshot must never cover a record the log could lose: make
	// everything appended so far durable first (a no-op for FsyncAlways,
	// where applied implies fsynced). Closing the active segment puts the
	// covered records into segments compaction may delete.
	if err := l.sync(true); err != nil {
		abandon(write)
		l.stats.compactionErrors.Add(1)
		return err
	}
	if d := l.stats.durableIndex.Load(); index > d {
		abandon(write)
		l.stats.compactionErrors.Add(1)
		return fmt.Errorf("wal: snapshot covers index %d but the log holds only up to %d", index, d)
	}
	size, err := l.writeSnapshot(index, write)
	if err != nil {
		l.stats.compactionErrors.Add(1)
		return err
	}
	// The snapshot before this one, and the log after it, stay until the
	// next compaction: if this snapshot is damaged on disk later, recovery
	// falls back to that one and replays the log, losing nothing.
	prev := l.stats.snapshotIndex.Swap(index)
	l.stats.snapshotBytes.Store(uint64(size))
	l.snapBytes.Store(bytesAtSnap)
	err = l.deleteCovered(prev)
	l.stats.compactions.Add(1)
	l.stats.lastCompactionNanos.Store(uint64(time.Since(start)))
	l.logger.Info("wal: compacted", "index", index, "snapshot_bytes", size, "took", time.Since(start))
	return err
}

// deleteCovered deletes the segments whose records all have index <= index
// (never the active one) and the snapshots older than index's; index is the
// older of the two snapshots compaction keeps (0: none, delete nothing).
// Segments go oldest first, so a crash midway leaves a log that still
// starts at or before that snapshot.
func (l *Log) deleteCovered(index uint64) error {
	l.segs.Lock()
	var covered []uint64
	for i := 0; i+1 < len(l.segs.firsts) && l.segs.firsts[i+1]-1 <= index; i++ {
		covered = append(covered, l.segs.firsts[i])
	}
	l.segs.Unlock()

	var firstErr error
	deleted := 0
	for _, first := range covered {
		if err := l.fs.Remove(l.path(segmentName(first))); err != nil {
			firstErr = fmt.Errorf("wal: delete covered segment: %w", err)
			break
		}
		deleted++
	}
	l.segs.Lock()
	l.segs.firsts = l.segs.firsts[deleted:]
	l.stats.segments.Store(uint64(len(l.segs.firsts)))
	l.segs.Unlock()
	l.stats.segmentsDeleted.Add(uint64(deleted))

	c, err := listDir(l.fs, l.opts.Dir)
	if err != nil {
		return err
	}
	for _, s := range c.snapshots {
		if s < index {
			if err := l.fs.Remove(l.path(snapshotName(s))); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("wal: delete old snapshot: %w", err)
			}
		}
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil && firstErr == nil {
		firstErr = fmt.Errorf("wal: sync dir after compaction: %w", err)
	}
	return firstErr
}

// errAbandoned is what an abandoned snapshot's writer returns.
var errAbandoned = errors.New("wal: snapshot abandoned")

type abandonedWriter struct{}

func (abandonedWriter) Write([]byte) (int, error) { return 0, errAbandoned }

// abandon calls a snapshot's write function with a writer that fails at
// once, so that write still runs exactly once and can release what the
// snapshot holds (a copy-on-write view, a reference count).
func abandon(write func(io.Writer) error) {
	if write != nil {
		_ = write(abandonedWriter{})
	}
}
