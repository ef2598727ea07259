package wal

import (
	"errors"
	"fmt"
	"io"
)

// Write failures: the failed state and the repair that ends it. See "Write
// failures" in the package doc for what is promised.

// Err returns the log's current write failure, wrapping ErrWriteFailed, or
// nil while the log accepts appends. It takes no lock.
func (l *Log) Err() error {
	if p := l.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// wrapFailure makes err, a failed write, fsync or file operation of the
// log, wrap ErrWriteFailed.
func wrapFailure(err error) error {
	if errors.Is(err, ErrWriteFailed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrWriteFailed, err)
}

// pageSize is the unit in which the kernel writes file data back; repair
// rewrites the page that holds the end of the kept records.
const pageSize = 4096

// repair brings a failed log back to a known-good state and clears the
// failure, or returns why it could not (the log stays failed and the flush
// goroutine tries again later). It runs on the flush goroutine with the
// pipeline drained and every batch released. closing: Close called it,
// holding compactSem.
//
// Nothing written after the last batch that was applied is kept: under
// FsyncAlways those records were never applied or acknowledged, so the
// active segment is cut back to the end of that batch and fsynced (and
// their indexes are given out again). Under FsyncEverySec and FsyncNo a
// failed write is handled the same way, but after a failed fsync records
// already applied may be missing from the disk even where a later fsync
// succeeds, so the applied state is written as a snapshot instead and the
// log goes on in a new segment after it.
func (l *Log) repair(closing bool) error {
	l.repairAttempts.Add(1)
	if err := l.removeStray(); err != nil {
		return err
	}
	var err error
	if l.w.lost {
		err = l.resnapshot(closing)
	} else {
		err = l.cutBack()
	}
	if err != nil {
		return err
	}
	// A full segment is closed now, as the turn would next: a rotation
	// that failed must work before the log counts as repaired.
	if l.w.size >= l.opts.SegmentSize {
		if err := l.rotate(); err != nil {
			l.w.lost = l.w.lost || l.opts.Fsync != FsyncAlways
			return err
		}
	}
	if err := l.probeRoom(); err != nil {
		return err
	}
	l.mu.Lock()
	if len(l.mu.buf) > 0 {
		// Cannot happen: nothing is appended while the log is failed, and
		// this turn took what came before.
		l.mu.Unlock()
		return errors.New("wal: records appended while the log was failed")
	}
	cause := l.mu.err
	l.mu.nextIndex = l.w.goodIndex + 1
	l.mu.err = nil
	l.failure.Store(nil)
	l.mu.Unlock()
	l.w.failed, l.w.lost = nil, false
	l.stats.writeRecovered.Add(1)
	l.logger.Warn("wal: repaired after write failure; appends are accepted again",
		"last_index", l.w.goodIndex, "was", cause)
	return nil
}

// removeStray removes the segment a failed rotation may have left, so that
// a crash cannot leave a segment whose name says it follows records that
// went on into the old one.
func (l *Log) removeStray() error {
	if l.w.stray == "" {
		return nil
	}
	if err := l.fs.Remove(l.w.stray); err != nil && !errors.Is(err, errNotExist) {
		return fmt.Errorf("wal: remove %s left by a failed rotation: %w", l.w.stray, err)
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		return fmt.Errorf("wal: sync dir after removing %s: %w", l.w.stray, err)
	}
	l.w.stray = ""
	return nil
}

// cutBack truncates the active segment to the end of the last batch
// applied and fsyncs it. The page holding that end is written again first:
// it was fsynced when its records were, but the failed write-back of the
// records after them may have left that page on disk in any state.
func (l *Log) cutBack() error {
	end := l.w.goodEnd
	name := l.path(segmentName(l.w.first))
	if err := l.rewritePage(end); err != nil {
		return fmt.Errorf("wal: rewrite the last page of %s before offset %d: %w", name, end, err)
	}
	if err := l.w.file.Truncate(end); err != nil {
		return fmt.Errorf("wal: cut %s back to offset %d: %w", name, end, err)
	}
	if err := l.w.file.Sync(); err != nil {
		// Under FsyncEverySec and FsyncNo the records before end are
		// applied: this fsync failing leaves them in doubt.
		l.w.lost = l.w.lost || l.opts.Fsync != FsyncAlways
		return fmt.Errorf("wal: fsync %s cut back to offset %d: %w", name, end, err)
	}
	l.w.size, l.w.alloc = end, end
	l.w.lastWritten, l.w.unsynced = l.w.goodIndex, 0
	l.stats.durableIndex.Store(l.w.goodIndex)
	return nil
}

// probeRoom checks that the log has room to go on, so that a disk still
// full keeps the log failed instead of failing the next append again:
// cutting back frees what the failed batch took, often just enough for the
// rest of the current chunk, and a log that failed at the next one would
// go back and forth between failed and repaired. Under FsyncAlways it
// preallocates a whole chunk past the kept records, which covers the
// extension that failed; otherwise it writes that much in zeros after the
// records and cuts them off again (zeros after the last record of the
// newest segment are what recovery expects anyway).
func (l *Log) probeRoom() error {
	name := l.path(segmentName(l.w.first))
	n := l.opts.prealloc
	if n <= 0 {
		n = defaultPrealloc
	}
	if l.opts.Fsync == FsyncAlways && l.opts.prealloc > 0 {
		if l.w.size+n <= l.w.alloc {
			return nil
		}
		return l.extend(l.w.size + n)
	}
	zeros := make([]byte, n)
	if _, err := l.w.file.WriteAt(zeros, l.w.size); err != nil {
		return fmt.Errorf("wal: no room after %s: %w", name, err)
	}
	if err := l.w.file.Truncate(l.w.size); err != nil {
		return fmt.Errorf("wal: cut room probe off %s: %w", name, err)
	}
	return nil
}

// rewritePage writes the bytes of the active segment from the start of the
// page holding end up to end again, as they read back.
func (l *Log) rewritePage(end int64) error {
	start := end &^ (pageSize - 1)
	if start == end {
		return nil
	}
	buf := make([]byte, end-start)
	if n, err := l.w.file.ReadAt(buf, start); n < len(buf) {
		return err
	}
	_, err := l.w.file.WriteAt(buf, start)
	return err
}

// resnapshot makes the applied state durable again after a failed fsync
// under FsyncEverySec or FsyncNo: it writes a snapshot of it through
// Options.Snapshot, goes on in a new segment after it, and deletes the
// segments it covers, the one whose fsync failed among them, so that no
// byte written before the failure is read again.
func (l *Log) resnapshot(closing bool) error {
	if l.opts.Snapshot == nil {
		return errors.New("wal: records applied before the failed fsync may be missing from the disk, and without Options.Snapshot they cannot be written again")
	}
	if !closing { // Close holds compactSem, so no compaction runs then
		select {
		case l.compactSem <- struct{}{}:
			defer func() { <-l.compactSem }()
		default:
			return errors.New("wal: a compaction is running; the repair waits for it")
		}
	}
	index, write, err := l.opts.Snapshot()
	if err != nil {
		return fmt.Errorf("wal: snapshot: %w", err)
	}
	called := false
	defer func() {
		if !called {
			abandon(write)
		}
	}()
	if index != l.w.goodIndex {
		return fmt.Errorf("wal: snapshot covers index %d but index %d was the last applied", index, l.w.goodIndex)
	}
	bytesAtSnap := l.stats.bytes.Load()
	size, err := l.writeSnapshot(index, func(w io.Writer) error {
		called = true
		return write(w)
	})
	if err != nil {
		return err
	}
	l.stats.snapshotIndex.Store(index)
	l.stats.snapshotBytes.Store(uint64(size))
	l.stats.compactions.Add(1)
	l.snapBytes.Store(bytesAtSnap)
	if err := l.restartAfter(index); err != nil {
		return err
	}
	return l.deleteCovered(index)
}

// restartAfter makes the active segment an empty one whose first record
// will have index+1: a new file, or the active one emptied if it already
// starts there (it then holds no record the snapshot at index needs).
func (l *Log) restartAfter(index uint64) error {
	first := index + 1
	if first == l.w.first {
		name := l.path(segmentName(first))
		if err := l.w.file.Truncate(0); err != nil {
			return fmt.Errorf("wal: empty %s: %w", name, err)
		}
		if err := l.w.file.Sync(); err != nil {
			return fmt.Errorf("wal: fsync emptied %s: %w", name, err)
		}
	} else if err := l.newSegment(first); err != nil {
		return err
	}
	l.w.size, l.w.alloc, l.w.goodEnd = 0, 0, 0
	l.w.lastWritten, l.w.unsynced, l.w.goodIndex = index, 0, index
	l.stats.durableIndex.Store(index)
	return nil
}
