package wal

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Log is an open append log. Its methods are safe for concurrent use.
type Log struct {
	opts   Options
	fs     FS
	logger *slog.Logger
	stats  counters

	// work wakes the flush goroutine; capacity 1, so a wake-up is never lost
	// and never blocks an appender.
	work chan struct{}
	// flushDone is closed when the flush goroutine has exited.
	flushDone chan struct{}

	// mu guards the append side: the framed records the flush goroutine has
	// not taken yet and who is waiting for them. It is held only to assign
	// an index and copy a record in (and, with FsyncEverySec and FsyncNo, to
	// call Apply, so that apply order is log order).
	mu struct {
		sync.Mutex
		// taken is signalled when the flush goroutine takes the buffer or
		// the log closes; appenders that apply at once wait on it while the
		// buffer is over maxPending, so a disk slower than the appenders
		// slows them down instead of growing memory without bound.
		taken     *sync.Cond
		nextIndex uint64
		buf       []byte
		waiters   []*waiter    // FsyncAlways: one per record in buf, in order
		syncers   []chan error // Sync calls waiting for buf to be durable
		rotate    bool         // close the active segment after the next write
		// err is the log's current failure (wrapping ErrWriteFailed): the
		// first write, fsync or rotation failure since the log was last
		// healthy. While set, nothing more is written or acknowledged;
		// only the flush goroutine's repair clears it.
		err error
		// closed rejects Appends; stop makes the flush goroutine do a last
		// flush and exit. Close sets closed first and stop only after
		// compactions (which need the flush goroutine) are done.
		closed, stop bool
	}

	// failure is mu.err, readable without the mutex: what Err returns to
	// INFO, /healthz and the metrics.
	failure atomic.Pointer[error]
	// repairAttempts counts the repairs tried, for tests.
	repairAttempts atomic.Uint64

	// w is owned by the flush goroutine; no lock. (The syncer goroutines
	// see only the batches handed to them.)
	w struct {
		file  File
		first uint64 // first index of the active segment
		size  int64  // bytes of records in the active segment: where the next is written
		// alloc is the active segment's file size: size plus the zeros
		// preallocated after it, durable (see extend).
		alloc       int64
		zeros       []byte // a chunk of zeros for extend, allocated once
		lastWritten uint64
		unsynced    uint64 // records written but no fsync started for them
		// queue holds the batches written but not yet released, in log
		// order; at most SyncDepth of them wait for an fsync.
		queue []*batch
		free  []*batch // released batches, reused with their waiter slices
		// failed is the first failure in log order, as batches are
		// released: every batch released after it gets it too, until
		// repair succeeds.
		failed error
		// goodEnd is where the records of the last batch applied end in
		// the active segment, goodIndex that batch's last index: what a
		// repair cuts the segment back to (see fail.go).
		goodEnd   int64
		goodIndex uint64
		// lost: under FsyncEverySec or FsyncNo an fsync (or a rotation or
		// trim) failed, so records already applied may not be on disk,
		// and repair must write a snapshot rather than cut back.
		lost bool
		// stray names a segment a failed rotation created but could not
		// make durable; repair removes it.
		stray string
	}

	// segs guards the list of live segments, shared by the flush goroutine
	// (which adds at rotation) and compaction (which deletes the oldest).
	segs struct {
		sync.Mutex
		firsts []uint64 // first index of each segment, oldest first; last is active
	}

	// compactSem holds one token while a compaction runs; Close takes it
	// for good once compactions are done.
	compactSem chan struct{}
	// closing is closed when Close begins, so a Compact waiting for
	// compactSem gives up.
	closing chan struct{}
	// bg tracks background compactions so Close can wait for them.
	bg struct {
		sync.Mutex
		closed bool
		wg     sync.WaitGroup
	}
	// snapBytes is stats.bytes when the last snapshot was taken.
	snapBytes atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

type waiter struct {
	index uint64
	rec   []byte
	res   any
	err   error
	done  chan struct{}
	fn    func(any, error) // AppendFunc's callback, called instead of done
}

// maxPending bounds the bytes appended but not yet taken by the flush
// goroutine under FsyncEverySec and FsyncNo. (With FsyncAlways every
// appender waits anyway.)
var maxPending = 16 << 20 // a variable so that tests can make it small

var waiterPool = sync.Pool{New: func() any { return &waiter{done: make(chan struct{}, 1)} }}

// Open opens or creates the log in opts.Dir, restores the newest snapshot,
// replays the records after it through opts.Apply, truncates a torn tail,
// and starts the flush goroutine.
func Open(opts Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	l := &Log{
		opts:       opts,
		fs:         opts.FS,
		logger:     opts.Logger.With("component", "wal", "dir", opts.Dir),
		work:       make(chan struct{}, 1),
		flushDone:  make(chan struct{}),
		compactSem: make(chan struct{}, 1),
		closing:    make(chan struct{}),
	}
	l.mu.taken = sync.NewCond(&l.mu.Mutex)
	if err := l.recover(); err != nil {
		return nil, err
	}
	l.w.goodEnd, l.w.goodIndex = l.w.size, l.w.lastWritten
	go l.flushLoop()
	return l, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.opts.Dir, name) }

func (l *Log) wake() {
	select {
	case l.work <- struct{}{}:
	default:
	}
}

// Append writes rec as the next record and returns Apply's result for it.
// With FsyncAlways it returns once the record is fsynced and applied; with
// the other policies, once it is written to the segment file (in the OS's
// page cache, where a crash of the process cannot take it) and applied.
// rec must not be modified until Append returns.
func (l *Log) Append(rec []byte) (any, error) {
	w := waiterPool.Get().(*waiter)
	if err := l.enqueue(rec, w); err != nil {
		waiterPool.Put(w)
		return nil, err
	}
	l.Kick()
	<-w.done
	res, err := w.res, w.err
	*w = waiter{done: w.done}
	waiterPool.Put(w)
	return res, err
}

// AppendFunc adds rec as the next record without writing it or waiting:
// the record goes out with the next write the log makes, which Kick,
// Sync or any Append causes. Once Append would have returned, done is
// called, on a goroutine of the log, with what Append would have
// returned; Sync returns only after done has been called for every record
// added before it. done must not block. An error AppendFunc returns itself
// (a record too large, a closed or failed log) means the record was not
// added and done is not called. rec must not be modified until done is
// called. Under FsyncEverySec and FsyncNo, AppendFunc waits for room as
// Append does.
//
// It lets an event loop add the records of one round and start their
// write once, with Kick, as redis-server writes its append-only file once
// per event-loop iteration, without waiting for it.
func (l *Log) AppendFunc(rec []byte, done func(any, error)) error {
	return l.enqueue(rec, &waiter{fn: done})
}

// enqueue adds rec to the records to write, with w to be answered once it
// is as durable as the policy promises.
func (l *Log) enqueue(rec []byte, w *waiter) error {
	if err := checkRecordSize(len(rec)); err != nil {
		return err
	}
	pcrc := payloadCRC(rec) // outside the lock: it does not need the index
	l.mu.Lock()
	for l.opts.Fsync != FsyncAlways && len(l.mu.buf) >= maxPending && !l.mu.closed && l.mu.err == nil {
		l.wake() // AppendFunc's records may not have woken the flush goroutine
		l.mu.taken.Wait()
	}
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if err := l.mu.err; err != nil {
		l.mu.Unlock()
		return err
	}
	index := l.mu.nextIndex
	l.mu.nextIndex++
	l.mu.buf = appendRecord(l.mu.buf, index, rec, pcrc)
	l.stats.appends.Add(1)
	w.index, w.rec = index, rec
	l.mu.waiters = append(l.mu.waiters, w)
	l.mu.Unlock()
	return nil
}

func checkRecordSize(n int) error {
	if n > MaxRecordSize {
		return fmt.Errorf("%w: %d bytes", ErrRecordTooLarge, n)
	}
	return nil
}

// Sync writes and fsyncs everything appended so far. While the log is
// failed it returns the failure at once.
func (l *Log) Sync() error {
	l.mu.Lock()
	closed := l.mu.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return l.sync(false)
}

// SyncUntil is Sync that stops waiting once stop is closed, returning
// nil: the write and fsync go on, and AppendFunc's callbacks are called
// as they would have been.
func (l *Log) SyncUntil(stop <-chan struct{}) error {
	l.mu.Lock()
	closed := l.mu.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	ch, err := l.addSyncer(false)
	if err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-stop:
		return nil
	}
}

// Kick starts the write (and fsync, as the policy asks) of the records
// AppendFunc added, without waiting.
func (l *Log) Kick() {
	l.wake()
	pollSyncs()
}

// sync waits until everything appended so far is durable, and, if rotate,
// until the active segment has been closed. Unlike Sync it works while
// Close waits for compactions.
func (l *Log) sync(rotate bool) error {
	ch, err := l.addSyncer(rotate)
	if err != nil {
		return err
	}
	return <-ch
}

// addSyncer asks the flush goroutine to sync (and rotate) and returns the
// channel its answer comes on, which has room for it: a waiter may leave.
func (l *Log) addSyncer(rotate bool) (chan error, error) {
	ch := make(chan error, 1)
	l.mu.Lock()
	if err := l.mu.err; err != nil {
		l.mu.Unlock()
		return nil, err
	}
	if l.mu.stop {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	l.mu.syncers = append(l.mu.syncers, ch)
	l.mu.rotate = l.mu.rotate || rotate
	l.mu.Unlock()
	l.wake()
	return ch, nil
}

// Close stops accepting appends, waits for a running compaction, writes and
// fsyncs what is pending, stops the flush goroutine and closes the active
// segment. A log that is failed makes one last repair attempt first; Close
// returns the failure (wrapping ErrWriteFailed) if that did not succeed.
// Close is idempotent.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		// 1. Refuse new appends and compactions.
		l.mu.Lock()
		l.mu.closed = true
		l.mu.taken.Broadcast()
		l.mu.Unlock()
		close(l.closing)

		// 2. Let a running compaction finish: it needs the flush goroutine.
		l.bg.Lock()
		l.bg.closed = true
		l.bg.Unlock()
		l.bg.wg.Wait()
		l.compactSem <- struct{}{} // an explicit Compact too

		// 3. Last flush and fsync, then stop the flush goroutine.
		l.mu.Lock()
		l.mu.stop = true
		l.mu.Unlock()
		l.wake()
		<-l.flushDone

		// 4. Close the active segment.
		l.mu.Lock()
		err := l.mu.err
		l.mu.Unlock()
		if l.w.file != nil {
			if cerr := l.w.file.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("wal: close segment: %w", cerr)
			}
		}
		l.closeErr = err
	})
	return l.closeErr
}
