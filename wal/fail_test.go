package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// failFS is a MemFS with faults switched on and off by a test:
//   - full: a write that would make a file longer fails with ENOSPC (as on
//     a full disk, where space already allocated can still be written);
//   - ops: named operations ("write", "sync", "create", "syncdir",
//     "truncate", and "create-snapshot" for snapshot temp files only)
//     fail with errInjected.
//
// A failed Sync behaves as Linux's fsync does (fsyncgate): the write-back
// of the file's dirty bytes failed, the kernel forgets they were dirty, and
// no later Sync makes them durable unless they are written again. A power
// cut then shows what was durable before for those bytes (zeros past the
// old end).
type failFS struct {
	*MemFS
	mu   sync.Mutex
	full bool
	ops  map[string]bool
}

func newFailFS() *failFS { return &failFS{MemFS: NewMemFS(), ops: map[string]bool{}} }

func (f *failFS) set(op string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops[op] = on
}

func (f *failFS) setFull(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.full = on
}

func (f *failFS) failing(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ops[op] {
		return fmt.Errorf("%s: %w", op, errInjected)
	}
	return nil
}

func (f *failFS) isFull() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.full
}

func (f *failFS) Create(name string) (File, error) {
	if err := f.failing("create"); err != nil {
		return nil, err
	}
	if strings.HasSuffix(name, tmpExt) {
		if err := f.failing("create-snapshot"); err != nil {
			return nil, err
		}
	}
	file, err := f.MemFS.Create(name)
	if err != nil {
		return nil, err
	}
	return &failFile{File: file, fs: f}, nil
}

func (f *failFS) OpenAppend(name string) (File, error) {
	file, err := f.MemFS.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return &failFile{File: file, fs: f}, nil
}

func (f *failFS) SyncDir(dir string) error {
	if err := f.failing("syncdir"); err != nil {
		return err
	}
	return f.MemFS.SyncDir(dir)
}

// failFile is a file of a failFS. poisoned, when not nil, are the bytes a
// failed Sync covered and that were not written since: their durable
// content stays what it was before (old).
type failFile struct {
	File
	fs       *failFS
	poisoned []bool
	old      []byte
}

func (f *failFile) node() *memNode { return f.File.(*memFile).node }

func (f *failFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.failing("write"); err != nil {
		return 0, err
	}
	if size, _ := f.Size(); f.fs.isFull() && off+int64(len(p)) > size {
		n := max(0, int(size-off))
		if n > 0 {
			f.WriteAt(p[:n], off)
		}
		return n, &fs.PathError{Op: "write", Path: "memfs", Err: syscall.ENOSPC}
	}
	for i := off; i < off+int64(len(p)) && i < int64(len(f.poisoned)); i++ {
		f.poisoned[i] = false
	}
	return f.File.WriteAt(p, off)
}

func (f *failFile) Write(p []byte) (int, error) {
	size, _ := f.Size()
	return f.WriteAt(p, size)
}

func (f *failFile) Truncate(size int64) error {
	if err := f.fs.failing("truncate"); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *failFile) Sync() error {
	if err := f.fs.failing("sync"); err != nil {
		f.fs.MemFS.mu.Lock()
		n := f.node()
		if f.poisoned == nil {
			f.old = slices.Clone(n.synced)
		}
		for len(f.poisoned) < len(n.data) {
			f.poisoned = append(f.poisoned, false)
		}
		for i := range n.data {
			if i >= len(n.synced) || n.data[i] != n.synced[i] {
				f.poisoned[i] = true
			}
		}
		f.fs.MemFS.mu.Unlock()
		return err
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	if f.poisoned == nil {
		return nil
	}
	f.fs.MemFS.mu.Lock()
	defer f.fs.MemFS.mu.Unlock()
	n := f.node()
	synced := slices.Clone(n.synced)
	for i := range synced {
		if i < len(f.poisoned) && f.poisoned[i] {
			synced[i] = 0
			if i < len(f.old) {
				synced[i] = f.old[i]
			}
		}
	}
	n.synced = synced
	return nil
}

// failOptions opens a log on fs that retries its repair every millisecond.
func failOptions(t *testing.T, fs FS, m *model, p Policy) Options {
	opts := memOptions(t, fs, m)
	opts.Fsync = p
	opts.retryMin, opts.retryMax = time.Millisecond, time.Millisecond
	return opts
}

// acks collects what the log acknowledged: the records in index order.
type acks struct {
	t    *testing.T
	l    *Log
	recs [][]byte
	n    int
}

// add appends one record and reports whether it was acknowledged; a
// failure must wrap ErrWriteFailed.
func (a *acks) add() (bool, error) {
	a.n++
	r := fmt.Appendf(nil, "rec-%d", a.n)
	res, err := a.l.Append(r)
	if err != nil {
		if !errors.Is(err, ErrWriteFailed) {
			a.t.Fatalf("Append = %v, want an error wrapping ErrWriteFailed", err)
		}
		return false, err
	}
	if want := uint64(len(a.recs) + 1); res != want {
		a.t.Fatalf("acknowledged record got index %v, want %d", res, want)
	}
	a.recs = append(a.recs, r)
	return true, nil
}

func (a *acks) addN(n int) {
	for range n {
		if _, err := a.add(); err != nil {
			a.t.Fatalf("Append: %v", err)
		}
	}
}

// failUntil appends until an Append fails and returns that error.
func (a *acks) failUntil() error {
	for range 10000 {
		if _, err := a.add(); err != nil {
			return err
		}
	}
	a.t.Fatal("no Append failed")
	return nil
}

// checkRefused: while the fault lasts, the log stays failed, through
// several repair attempts.
func checkRefused(t *testing.T, l *Log, a *acks) {
	t.Helper()
	if l.Err() == nil {
		t.Fatal("Err() = nil after a failure")
	}
	attempts := l.Stats().WriteRecovered
	// Two repair attempts later, the log is still failed.
	tried := l.repairAttempts.Load()
	waitFor(t, "repair attempts", func() bool { return l.repairAttempts.Load() >= tried+2 })
	if l.Err() == nil {
		t.Fatal("Err() = nil while the fault lasts")
	}
	for range 5 {
		if ok, _ := a.add(); ok {
			t.Fatal("Append acknowledged while the fault lasts")
		}
		if err := l.Sync(); !errors.Is(err, ErrWriteFailed) {
			t.Fatalf("Sync while failed = %v", err)
		}
	}
	if got := l.Stats().WriteRecovered; got != attempts {
		t.Fatalf("WriteRecovered went from %d to %d while the fault lasts", attempts, got)
	}
}

// waitRepaired polls until an Append is acknowledged again.
func waitRepaired(t *testing.T, l *Log, a *acks) {
	t.Helper()
	waitFor(t, "appends accepted again", func() bool {
		ok, _ := a.add()
		return ok
	})
	if err := l.Err(); err != nil {
		t.Fatalf("Err() = %v after repair", err)
	}
	if st := l.Stats(); st.WriteFailures != 1 || st.WriteRecovered != 1 {
		t.Fatalf("WriteFailures %d, WriteRecovered %d; want 1 and 1", st.WriteFailures, st.WriteRecovered)
	}
}

// checkRecovered cuts power, reopens and checks that exactly the
// acknowledged records are there, in order with consecutive indexes (the
// model checks those), and that the log appends on from there.
func checkRecovered(t *testing.T, mfs *MemFS, a *acks, p Policy) {
	t.Helper()
	m := &model{}
	opts := memOptions(t, mfs, m)
	opts.Fsync = p
	l := mustOpen(t, opts)
	wantRecordsX(t, m, a.recs)
	if res, err := l.Append([]byte("after")); err != nil || res != uint64(len(a.recs)+1) {
		t.Fatalf("Append after recovery = %v, %v", res, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDiskFullPreallocate fills the disk under FsyncAlways: extending the
// active segment fails with ENOSPC, appends are refused while the disk is
// full, accepted again once it has room, and nothing acknowledged is lost
// or duplicated across a power cut.
func TestDiskFullPreallocate(t *testing.T) {
	ffs := newFailFS()
	m := &model{}
	opts := failOptions(t, ffs, m, FsyncAlways)
	opts.prealloc = 256
	l := mustOpen(t, opts)
	a := &acks{t: t, l: l}
	a.addN(10)
	ffs.setFull(true)
	err := a.failUntil()
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "preallocate") {
		t.Fatalf("first failure = %v, want ENOSPC while preallocating", err)
	}
	checkRefused(t, l, a)
	ffs.setFull(false)
	waitRepaired(t, l, a)
	a.addN(20)
	wantRecordsX(t, m, a.recs)
	checkRecovered(t, ffs.CrashClone(), a, FsyncAlways)
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
}

// TestWriteOrFsyncFailure injects a failed write or fsync under every
// policy. Records not acknowledged are never applied; after the fault is
// gone the log repairs itself, and a power cut keeps exactly what was
// acknowledged, also where the failed fsync dropped acknowledged records
// (FsyncEverySec, FsyncNo: the repair must write them again).
func TestWriteOrFsyncFailure(t *testing.T) {
	for _, p := range []Policy{FsyncAlways, FsyncEverySec, FsyncNo} {
		for _, op := range []string{"write", "sync"} {
			t.Run(p.String()+"/"+op, func(t *testing.T) {
				ffs := newFailFS()
				m := &model{}
				opts := failOptions(t, ffs, m, p)
				opts.prealloc = -1
				l := mustOpen(t, opts)
				a := &acks{t: t, l: l}
				a.addN(10)
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				// Under everysec and no: applied, not yet fsynced; more than
				// the page a cut back rewrites.
				a.addN(400)
				ffs.set(op, true)
				var err error
				if p == FsyncAlways || op == "write" {
					err = a.failUntil()
				} else {
					a.addN(1)
					err = l.Sync()
				}
				if !errors.Is(err, errInjected) || !errors.Is(err, ErrWriteFailed) {
					t.Fatalf("first failure = %v", err)
				}
				checkRefused(t, l, a)
				wantRecordsX(t, m, a.recs) // nothing refused was applied
				ffs.set(op, false)
				waitRepaired(t, l, a)
				a.addN(10)
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				wantRecordsX(t, m, a.recs)
				checkRecovered(t, ffs.CrashClone(), a, p)
				if err := l.Close(); err != nil {
					t.Fatalf("Close = %v", err)
				}
				checkRecovered(t, ffs.CrashClone(), a, p)
			})
		}
	}
}

// TestRotationFailure fails each step of closing a full segment and
// starting the next: trimming its preallocated tail, creating the new
// segment, syncing the directory after it. (A failed trim is
// TestRepairFailure's.) Records before the rotation
// were acknowledged and stay; a new segment a failed directory sync may
// have left is removed, so that a later power cut does not find a segment
// that claims to follow records which went on in the old one.
func TestRotationFailure(t *testing.T) {
	for _, op := range []string{"create", "syncdir"} {
		t.Run(op, func(t *testing.T) {
			ffs := newFailFS()
			m := &model{}
			opts := failOptions(t, ffs, m, FsyncAlways)
			opts.prealloc = 64
			opts.SegmentSize = 400
			opts.Snapshot = nil
			l := mustOpen(t, opts)
			a := &acks{t: t, l: l}
			a.addN(3)
			ffs.set(op, true)
			err := a.failUntil()
			if !errors.Is(err, errInjected) {
				t.Fatalf("first failure = %v", err)
			}
			checkRefused(t, l, a)
			ffs.set(op, false)
			waitRepaired(t, l, a)
			a.addN(60) // several more rotations
			if l.Stats().Segments < 4 {
				t.Fatalf("%d segments, want several rotations", l.Stats().Segments)
			}
			checkRecovered(t, ffs.CrashClone(), a, FsyncAlways)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCloseWhileFailed: Close repairs a failed log once more, and returns
// the failure if it cannot.
func TestCloseWhileFailed(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("fixed=%v", fixed), func(t *testing.T) {
			ffs := newFailFS()
			m := &model{}
			opts := failOptions(t, ffs, m, FsyncAlways)
			opts.retryMin, opts.retryMax = time.Hour, time.Hour
			l := mustOpen(t, opts)
			a := &acks{t: t, l: l}
			a.addN(5)
			ffs.set("sync", true)
			a.failUntil()
			if fixed {
				ffs.set("sync", false)
			}
			err := l.Close()
			if fixed && err != nil {
				t.Fatalf("Close after the fault went = %v", err)
			}
			if !fixed && !errors.Is(err, ErrWriteFailed) {
				t.Fatalf("Close while the fault lasts = %v", err)
			}
			ffs.set("sync", false)
			checkRecovered(t, ffs.CrashClone(), a, FsyncAlways)
		})
	}
}

// TestLostFsyncWithoutSnapshot: under everysec a failed fsync cannot be
// repaired without a snapshot function, and the log says so instead of
// trusting a later fsync.
func TestLostFsyncWithoutSnapshot(t *testing.T) {
	ffs := newFailFS()
	m := &model{}
	opts := failOptions(t, ffs, m, FsyncEverySec)
	opts.Snapshot = nil
	l := mustOpen(t, opts)
	a := &acks{t: t, l: l}
	a.addN(5)
	ffs.set("sync", true)
	if err := l.Sync(); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("Sync = %v", err)
	}
	ffs.set("sync", false)
	checkRefused(t, l, a)
	if err := l.Close(); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("Close = %v", err)
	}
}

// TestRepairFailure: a repair that fails itself (here the cut of the
// active segment) leaves the log failed, and a later attempt succeeds.
func TestRepairFailure(t *testing.T) {
	ffs := newFailFS()
	m := &model{}
	l := mustOpen(t, failOptions(t, ffs, m, FsyncAlways))
	a := &acks{t: t, l: l}
	a.addN(5)
	ffs.set("sync", true)
	ffs.set("truncate", true)
	a.failUntil()
	ffs.set("sync", false)
	checkRefused(t, l, a)
	ffs.set("truncate", false)
	waitRepaired(t, l, a)
	a.addN(5)
	checkRecovered(t, ffs.CrashClone(), a, FsyncAlways)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// A snapshot whose file cannot be created still has its write function
// run, once, so that it releases the view it holds; otherwise each failed
// compaction on a full disk would keep a copy of the store alive.
func TestSnapshotCreateFailureReleases(t *testing.T) {
	fs := newFailFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	var calls atomic.Int32
	opts.Snapshot = func() (uint64, func(io.Writer) error, error) {
		index, write, err := m.snapshot()
		return index, func(w io.Writer) error { calls.Add(1); return write(w) }, err
	}
	l := mustOpen(t, opts)
	defer l.Close()
	appendN(t, l, 1, 5)
	fs.set("create-snapshot", true)
	if err := l.Compact(); err == nil {
		t.Fatal("Compact succeeded with snapshot files impossible to create")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the snapshot's write function ran %d times, want once", n)
	}
}
