package wal

import (
	"fmt"
	"runtime"
	"time"
)

// flushLoop is the one goroutine that writes and fsyncs segments. Each turn
// takes everything appenders added since the last turn and makes it one
// write and at most one fsync; records that arrive meanwhile wait for the
// next turn. That is group commit: the longer an fsync takes, the more
// records the next one covers.
func (l *Log) flushLoop() {
	defer close(l.flushDone)
	var tick <-chan time.Time
	if l.opts.Fsync == FsyncEverySec {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	// The buffers of the previous batch are handed back to appenders, so a
	// steady load allocates nothing per batch.
	var spare []byte
	var spareWaiters []*waiter
	syncDue := false
	for {
		select {
		case <-l.work:
		case <-tick:
			syncDue = true
		}

		// 1. Take the batch. The last index is read under the same lock as
		// the buffer, so it names exactly the records in it.
		l.mu.Lock()
		buf, waiters, syncers := l.mu.buf, l.mu.waiters, l.mu.syncers
		l.mu.buf, l.mu.waiters, l.mu.syncers = spare[:0], spareWaiters[:0], nil
		last := l.mu.nextIndex - 1
		rotate, stop, err := l.mu.rotate, l.mu.stop, l.mu.err
		l.mu.rotate = false
		l.mu.taken.Broadcast()
		l.mu.Unlock()

		// 2. Write it and, if the policy or a waiter asks, fsync it.
		needSync := stop || len(syncers) > 0 ||
			(l.opts.Fsync == FsyncAlways && len(waiters) > 0) ||
			(l.opts.Fsync == FsyncEverySec && syncDue)
		if err == nil {
			err = l.writeBatch(buf, last, needSync)
			if needSync {
				syncDue = false
			}
		}

		// 3. With FsyncAlways the records are durable now: apply them in
		// order and release their appenders. After a failure every waiter
		// gets the error instead, and nothing of the batch is applied.
		for _, w := range waiters {
			if err == nil {
				w.res = l.opts.Apply(w.index, w.rec)
			}
			w.err = err
			w.done <- struct{}{}
		}
		// Let the appenders just released send their replies before this
		// goroutine blocks in the next write and fsync. With one core the
		// fsync syscall holds the only P until sysmon takes it back, which
		// can be milliseconds; yielding first measured as the difference
		// between ~40k and ~230k pipelined SETs a second on one core, with
		// no timer involved.
		runtime.Gosched()

		// 4. Close the active segment if it is full or compaction asked,
		// after the waiters are released, since their records are durable.
		if err == nil && l.w.size > 0 && (rotate || l.w.size >= l.opts.SegmentSize) {
			err = l.rotate()
		}
		if err != nil {
			l.setErr(err)
		}
		for _, ch := range syncers {
			ch <- err
		}
		clear(waiters) // drop the pooled waiters' references
		spare, spareWaiters = buf, waiters
		if stop {
			return
		}
		l.maybeCompact()
	}
}

func (l *Log) setErr(err error) {
	l.mu.Lock()
	l.mu.taken.Broadcast()
	if l.mu.err == nil {
		l.mu.err = err
		l.logger.Error("wal: write failed; the log refuses further appends", "err", err)
	}
	l.mu.Unlock()
}

// writeBatch writes buf, whose last record is last, to the active segment,
// and fsyncs it if sync.
func (l *Log) writeBatch(buf []byte, last uint64, sync bool) error {
	if len(buf) > 0 {
		n, err := l.w.file.Write(buf)
		l.w.size += int64(n)
		l.stats.bytes.Add(uint64(n))
		if err != nil {
			return fmt.Errorf("wal: write %s: %w", l.path(segmentName(l.w.first)), err)
		}
		l.w.unsynced += last - l.w.lastWritten
		l.w.lastWritten = last
	}
	if sync && l.w.unsynced > 0 { // an fsync with nothing new to cover only costs time
		return l.fsync()
	}
	return nil
}

// fsync fsyncs the active segment.
func (l *Log) fsync() error {
	start := time.Now()
	if err := l.w.file.Sync(); err != nil {
		return fmt.Errorf("wal: fsync %s: %w", l.path(segmentName(l.w.first)), err)
	}
	d := uint64(time.Since(start))
	l.stats.fsyncs.Add(1)
	l.stats.fsyncNanos.Add(d)
	l.stats.lastFsyncNanos.Store(d)
	l.stats.recordsFsynced.Add(l.w.unsynced)
	l.w.unsynced = 0
	l.stats.durableIndex.Store(l.w.lastWritten)
	return nil
}

// rotate closes the active segment (fsynced) and starts the next one, named
// by the index its first record will have. The directory is fsynced after
// the new file is created, so the new segment's entry survives a crash
// before any record in it is acknowledged.
func (l *Log) rotate() error {
	if l.w.unsynced > 0 {
		if err := l.fsync(); err != nil {
			return err
		}
	}
	first := l.w.lastWritten + 1
	name := l.path(segmentName(first))
	f, err := l.fs.Create(name)
	if err != nil {
		return fmt.Errorf("wal: create segment %s: %w", name, err)
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		f.Close()
		return fmt.Errorf("wal: sync dir after creating %s: %w", name, err)
	}
	old := l.w.file
	l.w.file, l.w.first, l.w.size = f, first, 0
	l.segs.Lock()
	l.segs.firsts = append(l.segs.firsts, first)
	l.stats.segments.Store(uint64(len(l.segs.firsts)))
	l.segs.Unlock()
	if err := old.Close(); err != nil {
		l.logger.Warn("wal: close old segment", "err", err)
	}
	return nil
}
