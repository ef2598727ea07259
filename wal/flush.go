package wal

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

// batch is what one turn of the flush goroutine took from the appenders:
// records written with one write call, the fsync that makes them durable,
// and the appenders waiting for it.
type batch struct {
	waiters []*waiter // FsyncAlways: one per record, in index order
	// The fsync this batch waits for; file is nil when it needs none.
	file    File
	first   uint64 // first index of file's segment, for errors
	last    uint64 // last index the fsync covers
	records uint64 // records the fsync makes durable
	nanos   uint64 // how long the fsync took
	// err is the batch's own write or fsync failure. Set by whoever ran
	// the fsync; read by the flush goroutine once synced.
	err error
	// fsyncFailed: err is the fsync's failure, not the write's.
	fsyncFailed bool
	// synced: the fsync returned, or none was needed. Flush goroutine only.
	synced bool
	// written: the batch's records are in the active segment, ending at
	// end, the last with index top. Flush goroutine only.
	written bool
	end     int64
	top     uint64
}

// flushLoop is the one goroutine that writes segments and releases
// appenders. Each turn takes everything appenders added since the last turn
// and makes it one write and at most one fsync; records that arrive
// meanwhile wait for a later turn. That is group commit: the longer an fsync
// takes, the more records the next one covers.
//
// The fsyncs run on syncer goroutines, so the next turn can write and start
// its fsync while up to SyncDepth-1 earlier fsyncs still run. Batches are
// released strictly in log order: a batch is applied and its appenders
// answered only once its own fsync has returned and every earlier batch has
// been released. With SyncDepth 1 a turn starts when the running fsync
// returns: it writes what arrived meanwhile and starts its fsync first, and
// only then applies and answers the batch just made durable, so applying
// it is not on the way to the next fsync.
func (l *Log) flushLoop() {
	defer close(l.flushDone)
	depth := l.opts.SyncDepth
	// done carries batches whose fsync returned; it has room for every
	// fsync that can be running, so a syncer never blocks on it.
	done := make(chan *batch, depth)
	jobs := make(chan *batch, depth)
	var syncers sync.WaitGroup
	for range depth {
		syncers.Go(func() {
			for b := range jobs {
				l.fsyncBatch(b)
				done <- b
			}
		})
	}
	// The turn that stops the loop waited for every fsync first, so the
	// syncers are idle here.
	defer func() {
		close(jobs)
		syncers.Wait()
	}()
	var tick <-chan time.Time
	if l.opts.Fsync == FsyncEverySec {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	// The buffer of the previous write is handed back to appenders, so a
	// steady load allocates nothing per batch.
	var spare []byte
	syncDue := false
	syncing := 0 // fsyncs started on the syncers and not yet returned
	// While the log is failed a timer paces the repair attempts (fail.go);
	// retryDue makes the turn after it fires drain the pipeline and try.
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	backoff := l.opts.retryMin
	retryDue := false
	// Under FsyncEverySec and FsyncNo appenders wait only for the write,
	// so a running fsync must not hold up the next one: records are written
	// while it runs, and only the next fsync waits for room.
	lazy := l.opts.Fsync != FsyncAlways
	for {
		// Under FsyncAlways a full pipeline takes no new work: the wake-up
		// stays in l.work until an fsync returns and makes room, and the
		// records pile up into the next batch meanwhile.
		work := l.work
		if syncing >= depth && !lazy {
			work = nil
		}
		var retryC <-chan time.Time
		if l.w.failed != nil && !retryDue {
			if retry == nil {
				retry = time.NewTimer(backoff)
			}
			retryC = retry.C
		}
		select {
		case <-retryC:
			retry, retryDue = nil, true
		case <-work:
			if l.opts.Fsync != FsyncAlways {
				// An appender's wake-up puts this goroutine next in line,
				// ahead of the other connections about to append: yield
				// once so that their records go out in this write too,
				// instead of a write per record.
				runtime.Gosched()
			}
		case b := <-done:
			b.synced = true
			syncing--
		case <-tick:
			syncDue = true
		}
		if syncing >= depth && !lazy {
			continue
		}

		// 1. Take the batch. The last index is read under the same lock as
		// the buffer, so it names exactly the records in it.
		b := l.newBatch()
		l.mu.Lock()
		buf, syncers := l.mu.buf, l.mu.syncers
		b.waiters, l.mu.waiters = l.mu.waiters, b.waiters
		l.mu.buf, l.mu.syncers = spare[:0], nil
		last := l.mu.nextIndex - 1
		rotate, stop, err := l.mu.rotate, l.mu.stop, l.mu.err
		l.mu.rotate = false
		l.mu.taken.Broadcast()
		l.mu.Unlock()

		// 2. Write it and, if the policy or a waiter asks, start its fsync.
		// A write failure stops all further writes at once: nothing may
		// follow a record that did not make it into the file whole.
		needSync := stop || len(syncers) > 0 ||
			(l.opts.Fsync == FsyncAlways && len(b.waiters) > 0) ||
			(l.opts.Fsync == FsyncEverySec && syncDue)
		if needSync && syncing >= depth { // only when lazy
			if stop || len(syncers) > 0 {
				// Sync and Close need an fsync started after everything
				// before them: wait for room.
				for ; syncing > 0; syncing-- {
					(<-done).synced = true
				}
			} else {
				needSync = false // the periodic fsync waits for the running one
			}
		}
		if needSync {
			syncDue = false
		}
		if err == nil {
			start := l.w.size
			if err = l.writeBatch(buf, last); err != nil {
				err = wrapFailure(err)
				l.setErr(err)
			} else if l.w.size > start {
				b.written, b.end, b.top = true, l.w.size, last
			}
		}
		spare = buf
		b.err = err
		if l.opts.Fsync != FsyncAlways {
			// These appenders wait only for the write: their records are
			// in the page cache now, beyond a crash of the process.
			l.releaseWritten(b)
		}
		if err == nil && needSync && l.w.unsynced > 0 { // an fsync with nothing new to cover only costs time
			b.file, b.first, b.last, b.records = l.w.file, l.w.first, l.w.lastWritten, l.w.unsynced
			l.w.unsynced = 0
			jobs <- b
			syncing++
		} else {
			b.synced = true
		}
		if len(b.waiters) > 0 || b.file != nil || b.err != nil {
			l.w.queue = append(l.w.queue, b)
		} else {
			l.w.free = append(l.w.free, b)
		}

		// 3. A segment is closed only once every fsync on it has returned,
		// and Sync and Close answer only once everything before them is
		// durable: such a turn waits for the whole pipeline.
		full := l.w.size > 0 && (rotate || l.w.size >= l.opts.SegmentSize)
		barrier := stop || len(syncers) > 0 || full || retryDue
		if barrier {
			for ; syncing > 0; syncing-- {
				(<-done).synced = true
			}
		}
		// Released only now, after the next fsync has started: the records
		// that arrived during the fsync just returned are already on their
		// way to disk while these appenders are answered.
		l.releaseSynced()
		if !barrier {
			if l.w.failed == nil {
				l.maybeCompact()
			}
			continue
		}

		// 4. A failed log, its pipeline empty now, tries its repair when
		// the retry timer has fired, and once more when it closes. The
		// Sync calls of this turn came before the repair: if the log was
		// failed, some record before them was not written, and they get
		// the failure whatever the repair does.
		syncErr := l.w.failed
		if l.w.failed != nil && (retryDue || stop) {
			if rerr := l.repair(stop); rerr != nil {
				l.logger.Warn("wal: repair after write failure failed; appends stay refused",
					"err", rerr, "retry_in", backoff)
				backoff = min(2*backoff, l.opts.retryMax)
			} else {
				backoff = l.opts.retryMin
			}
		}
		retryDue = false

		// 5. Close the active segment if it is full or compaction asked,
		// after the waiters are released, since their records are durable.
		err = l.w.failed
		if err == nil && full {
			err = l.rotate()
		} else if err == nil && stop {
			// Leave the file ending at its last record, as a segment that
			// is not the newest must.
			err = l.trim()
		}
		if err != nil && l.w.failed == nil {
			err = wrapFailure(err)
			l.w.failed = err
			l.w.lost = l.opts.Fsync != FsyncAlways
			l.setErr(err)
		}
		if syncErr != nil {
			err = syncErr
		}
		for _, ch := range syncers {
			ch <- err
		}
		if stop {
			return
		}
		if l.w.failed == nil {
			l.maybeCompact()
		}
	}
}

// newBatch returns an empty batch, reusing a released one and its waiter
// slice when there is one.
func (l *Log) newBatch() *batch {
	n := len(l.w.free)
	if n == 0 {
		return &batch{}
	}
	b := l.w.free[n-1]
	l.w.free = l.w.free[:n-1]
	*b = batch{waiters: b.waiters[:0]}
	return b
}

// releaseSynced releases the batches at the head of the queue whose fsync
// has returned, in log order, stopping at the first still running. With
// FsyncAlways their records are durable now: it applies them in order and
// releases their appenders. After a failure, in this batch or an earlier
// one, every waiter gets the error instead, and nothing is applied: a later
// fsync's success never stands in for an earlier one's failure.
func (l *Log) releaseSynced() {
	n := 0
	for _, b := range l.w.queue {
		if !b.synced {
			break
		}
		n++
		if b.err != nil && l.w.failed == nil {
			l.w.failed = b.err
			l.setErr(b.err)
		}
		if b.fsyncFailed && l.opts.Fsync != FsyncAlways {
			// The records this fsync covered are applied already.
			l.w.lost = true
		}
		err := l.w.failed
		if err == nil && b.file != nil {
			l.countFsync(b)
		}
		if err == nil && b.written && len(b.waiters) > 0 { // FsyncAlways: applied now
			l.w.goodEnd, l.w.goodIndex = b.end, b.top
		}
		l.answer(b.waiters, err)
		b.file = nil
		l.w.free = append(l.w.free, b)
	}
	l.w.queue = append(l.w.queue[:0], l.w.queue[n:]...)
}

// releaseWritten applies b's records and releases their appenders as
// soon as they are written, under FsyncEverySec and FsyncNo, whose
// appenders do not wait for an fsync. Batches are written in log order, so
// this applies in log order too. After a failed write, or a failed fsync
// released earlier, the appenders get the error and nothing is applied.
func (l *Log) releaseWritten(b *batch) {
	err := l.w.failed
	if err == nil {
		err = b.err
	}
	if err == nil && b.written {
		l.w.goodEnd, l.w.goodIndex = b.end, b.top
	}
	l.answer(b.waiters, err)
	b.waiters = b.waiters[:0]
}

// answer applies the waiters' records in order and releases them, or,
// given an error, releases them with it and applies nothing. It drops the
// slice's references to the pooled waiters.
func (l *Log) answer(waiters []*waiter, err error) {
	for _, w := range waiters {
		if err == nil {
			w.res = l.opts.Apply(w.index, w.rec)
		}
		w.err = err
		if w.fn != nil {
			w.fn(w.res, w.err)
		} else {
			w.done <- struct{}{}
		}
	}
	clear(waiters)
}

// setErr puts the log in its failed state, if it is not already: every
// Append fails at once with err (which wraps ErrWriteFailed) until repair
// clears it.
func (l *Log) setErr(err error) {
	l.mu.Lock()
	l.mu.taken.Broadcast()
	if l.mu.err == nil {
		l.mu.err = err
		l.failure.Store(&err)
		l.stats.writeFailures.Add(1)
		l.logger.Error("wal: write failed; appends are refused until the log is repaired", "err", err)
	}
	l.mu.Unlock()
}

// writeBatch writes buf, whose last record is last, to the active segment
// at the end of its records: over preallocated zeros under FsyncAlways, so
// the batch's fdatasync has no new file size to write.
func (l *Log) writeBatch(buf []byte, last uint64) error {
	if len(buf) == 0 {
		return nil
	}
	if l.opts.Fsync == FsyncAlways && l.opts.prealloc > 0 && l.w.size+int64(len(buf)) > l.w.alloc {
		if err := l.extend(l.w.size + int64(len(buf))); err != nil {
			return err
		}
	}
	n, err := l.w.file.WriteAt(buf, l.w.size)
	l.w.size += int64(n)
	l.w.alloc = max(l.w.alloc, l.w.size)
	l.stats.bytes.Add(uint64(n))
	if err != nil {
		return fmt.Errorf("wal: write %s: %w", l.path(segmentName(l.w.first)), err)
	}
	l.w.unsynced += last - l.w.lastWritten
	l.w.lastWritten = last
	return nil
}

// extend grows the active segment to hold at least need bytes, by whole
// preallocation chunks but not far past the segment's size limit, by
// writing zeros and fdatasyncing them. Zeros really written, unlike
// fallocate's unwritten extents, need no metadata change when a record
// later overwrites them, so each batch's fdatasync writes data only; it is
// the growing file size that makes an fdatasync of appended data also
// write the inode, which costs most of its time. The extension is durable
// before any record is written into it, so a crash leaves the segment
// either at its old size or with a zero tail, which recovery recognises.
func (l *Log) extend(need int64) error {
	chunk := l.opts.prealloc
	target := (need + chunk - 1) / chunk * chunk
	// The segment closes at SegmentSize, and its tail is cut then.
	target = min(target, max(need, l.opts.SegmentSize))
	if l.w.zeros == nil {
		l.w.zeros = make([]byte, min(chunk, 1<<20))
	}
	name := l.path(segmentName(l.w.first))
	for off := l.w.alloc; off < target; {
		n, err := l.w.file.WriteAt(l.w.zeros[:min(int64(len(l.w.zeros)), target-off)], off)
		off += int64(n)
		if err != nil {
			return fmt.Errorf("wal: preallocate %s: %w", name, err)
		}
	}
	if err := l.w.file.Sync(); err != nil {
		return fmt.Errorf("wal: fsync preallocated %s: %w", name, err)
	}
	l.w.alloc = target
	return nil
}

// trim cuts the preallocated zeros off the active segment and fsyncs it,
// so that the file ends at its last record. A segment is trimmed before it
// is closed: recovery treats anything but records in a segment that is not
// the newest as corruption.
func (l *Log) trim() error {
	if l.w.alloc == l.w.size {
		return nil
	}
	name := l.path(segmentName(l.w.first))
	if err := l.w.file.Truncate(l.w.size); err != nil {
		return fmt.Errorf("wal: trim %s: %w", name, err)
	}
	l.w.alloc = l.w.size
	if err := l.w.file.Sync(); err != nil {
		return fmt.Errorf("wal: fsync trimmed %s: %w", name, err)
	}
	// Any records written are durable now, with the size.
	l.w.unsynced = 0
	return nil
}

// fsyncBatch runs b's fsync and records its outcome in b. It runs on a
// syncer goroutine.
func (l *Log) fsyncBatch(b *batch) {
	start := time.Now()
	if err := b.file.Sync(); err != nil {
		b.err = wrapFailure(fmt.Errorf("wal: fsync %s: %w", l.path(segmentName(b.first)), err))
		b.fsyncFailed = true
		return
	}
	b.nanos = uint64(time.Since(start))
}

// countFsync adds b's successful fsync to the stats. Called in log order,
// so the durable index only grows.
func (l *Log) countFsync(b *batch) {
	l.stats.fsyncs.Add(1)
	l.stats.fsyncNanos.Add(b.nanos)
	l.stats.lastFsyncNanos.Store(b.nanos)
	l.stats.recordsFsynced.Add(b.records)
	l.stats.durableIndex.Store(b.last)
	if l.opts.OnFsync != nil {
		l.opts.OnFsync(time.Duration(b.nanos), int(b.records))
	}
}

// rotate closes the active segment (fsynced) and starts the next one, named
// by the index its first record will have. The directory is fsynced after
// the new file is created, so the new segment's entry survives a crash
// before any record in it is acknowledged. No fsync of the old segment may
// be running: the caller drained the pipeline.
func (l *Log) rotate() error {
	// Trim before the next segment exists: until the trim is durable this
	// segment is still the newest, where a zero tail is expected.
	if l.w.alloc > l.w.size {
		b := &batch{last: l.w.lastWritten, records: l.w.unsynced}
		start := time.Now()
		if err := l.trim(); err != nil {
			return err
		}
		if b.records > 0 {
			b.nanos = uint64(time.Since(start))
			l.countFsync(b)
		}
	}
	if l.w.unsynced > 0 {
		b := &batch{file: l.w.file, first: l.w.first, last: l.w.lastWritten, records: l.w.unsynced}
		if l.fsyncBatch(b); b.err != nil {
			return b.err
		}
		l.w.unsynced = 0
		l.countFsync(b)
	}
	if err := l.newSegment(l.w.lastWritten + 1); err != nil {
		return err
	}
	l.w.size, l.w.alloc, l.w.goodEnd = 0, 0, 0
	return nil
}

// newSegment creates the segment whose first record is first, makes its
// name durable and makes it the active one, closing the old. On an error
// the old segment stays active.
func (l *Log) newSegment(first uint64) error {
	name := l.path(segmentName(first))
	f, err := l.fs.Create(name)
	if err != nil {
		return fmt.Errorf("wal: create segment %s: %w", name, err)
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		f.Close()
		// The new file may or may not survive a crash: repair removes it
		// before records go on into the old segment.
		l.w.stray = name
		return fmt.Errorf("wal: sync dir after creating %s: %w", name, err)
	}
	old := l.w.file
	l.w.file, l.w.first = f, first
	l.segs.Lock()
	l.segs.firsts = append(l.segs.firsts, first)
	l.stats.segments.Store(uint64(len(l.segs.firsts)))
	l.segs.Unlock()
	if err := old.Close(); err != nil {
		l.logger.Warn("wal: close old segment", "err", err)
	}
	return nil
}
