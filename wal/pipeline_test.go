package wal

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hookFS is a MemFS whose segment fsyncs go through a test hook. sync is
// called with the 1-based number of the fsync (counted over all files, in
// the order the calls begin) and the real fsync, which the hook calls or
// not; it may block, so a test can decide the order in which concurrent
// fsyncs return.
type hookFS struct {
	*MemFS
	calls atomic.Int64
	sync  func(n int64, sync func() error) error
}

type hookFile struct {
	File
	fs *hookFS
}

func (f hookFile) Sync() error {
	return f.fs.sync(f.fs.calls.Add(1), f.File.Sync)
}

func (f *hookFS) Create(name string) (File, error) {
	file, err := f.MemFS.Create(name)
	if err != nil {
		return nil, err
	}
	return hookFile{file, f}, nil
}

func (f *hookFS) OpenAppend(name string) (File, error) {
	file, err := f.MemFS.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return hookFile{file, f}, nil
}

// pipelineOptions opens a log on fs with depth fsyncs at once, no
// compaction and no preallocation, so that every fsync is a batch's and
// the segment holds only records.
func pipelineOptions(t *testing.T, fs FS, m *model, depth int) Options {
	opts := memOptions(t, fs, m)
	opts.Snapshot = nil
	opts.prealloc = -1
	opts.SyncDepth = depth
	return opts
}

// guard is how long a test hook waits for an event that must happen before
// it gives up and lets the test fail; it is never reached when the log works.
const guard = 10 * time.Second

// TestPipelineReleasesInOrder makes the second of two concurrent fsyncs
// return first. Its batch must still wait for the first: nothing is
// applied or acknowledged before the first fsync has returned, and apply
// order stays index order.
func TestPipelineReleasesInOrder(t *testing.T) {
	fs := &hookFS{MemFS: NewMemFS()}
	var (
		firstEntered  = make(chan struct{})
		secondDone    = make(chan struct{})
		firstReturned atomic.Bool
	)
	fs.sync = func(n int64, sync func() error) error {
		switch n {
		case 1:
			close(firstEntered)
			select {
			case <-secondDone:
			case <-time.After(guard):
				t.Error("no second fsync ran while the first was running")
			}
			err := sync()
			firstReturned.Store(true)
			return err
		case 2:
			defer close(secondDone)
		}
		return sync()
	}
	m := &model{}
	l := mustOpen(t, pipelineOptions(t, fs, m, 2))

	var wg sync.WaitGroup
	appendOne := func() {
		_, err := l.Append([]byte("x"))
		if err != nil {
			t.Error(err)
		}
		if !firstReturned.Load() {
			t.Error("an Append returned before the first fsync did")
		}
	}
	wg.Go(appendOne)
	<-firstEntered // the first batch is in its fsync; what follows is a later batch
	for range 8 {
		wg.Go(func() {
			for range 20 {
				appendOne()
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	m.check(t)
	if got := m.last(); got != 161 {
		t.Fatalf("%d records applied, want 161", got)
	}
	s := l.Stats()
	if s.DurableIndex != 161 || s.RecordsFsynced != 161 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestPipelineFailedFsync fails one fsync while later ones succeed. No
// record at or after the failed batch is acknowledged, and the log stays
// failed. In the "held" case the failed fsync is the first one, and it
// returns only after a later batch's fsync has succeeded: that success
// must not stand in for the failure.
func TestPipelineFailedFsync(t *testing.T) {
	for _, tc := range []struct {
		depth  int
		failAt int64
		held   bool
	}{
		{1, 1, false}, {1, 2, false}, {1, 7, false},
		{2, 1, false}, {2, 2, false}, {2, 7, false},
		{2, 1, true}, {3, 1, true},
	} {
		name := fmt.Sprintf("depth=%d/fail=%d", tc.depth, tc.failAt)
		if tc.held {
			name += "/held"
		}
		t.Run(name, func(t *testing.T) {
			testPipelineFailedFsync(t, tc.depth, tc.failAt, tc.held)
		})
	}
}

// wantRecordsX checks that m holds exactly want, in order.
func wantRecordsX(t *testing.T, m *model, want [][]byte) {
	t.Helper()
	m.check(t)
	got := m.all()
	if len(got) != len(want) {
		t.Fatalf("recovered %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if string(got[i]) != string(want[i]) {
			t.Fatalf("record %d = %q, want %q", i+1, got[i], want[i])
		}
	}
}

func testPipelineFailedFsync(t *testing.T, depth int, failAt int64, held bool) {
	fs := &hookFS{MemFS: NewMemFS()}
	var (
		failEntered = make(chan struct{})
		laterDone   = make(chan struct{})
		laterOnce   sync.Once
		// failedSize is the segment's size when the failed fsync began:
		// every record from there on was written after the failed batch.
		failedSize atomic.Int64
	)
	failedSize.Store(-1)
	fs.sync = func(n int64, sync func() error) error {
		switch {
		case n < failAt:
			return sync()
		case n == failAt:
			data, err := fs.MemFS.ReadFile(segPath(1))
			if err != nil {
				t.Error(err)
			}
			failedSize.Store(int64(len(data)))
			close(failEntered)
			if held {
				select {
				case <-laterDone:
				case <-time.After(guard):
					t.Error("no later fsync ran while the failing one was running")
				}
			}
			return errInjected
		default:
			err := sync() // a later fsync succeeds
			laterOnce.Do(func() { close(laterDone) })
			return err
		}
	}
	m := &model{}
	opts := pipelineOptions(t, fs, m, depth)
	opts.retryMin = time.Hour // stays failed until Close repairs it
	l := mustOpen(t, opts)

	const writers = 16
	var (
		mu    sync.Mutex
		acked []uint64
		wg    sync.WaitGroup
	)
	appendUntilFailure := func() {
		for {
			res, err := l.Append([]byte("x"))
			if err != nil {
				if !errors.Is(err, errInjected) {
					t.Errorf("Append = %v, want the injected failure", err)
				}
				return
			}
			mu.Lock()
			acked = append(acked, res.(uint64))
			mu.Unlock()
		}
	}
	if held {
		// The first batch, alone in the first fsync; the writers' records
		// come after it.
		wg.Go(appendUntilFailure)
		<-failEntered
	}
	for range writers {
		wg.Go(appendUntilFailure)
	}
	wg.Wait()
	<-failEntered

	// Failed: everything after gets the error until the log is repaired.
	for range 3 {
		if _, err := l.Append([]byte("y")); !errors.Is(err, errInjected) || !errors.Is(err, ErrWriteFailed) {
			t.Fatalf("Append after the failure = %v", err)
		}
	}
	if err := l.Sync(); !errors.Is(err, errInjected) {
		t.Fatalf("Sync after the failure = %v", err)
	}
	if err := l.Err(); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("Err after the failure = %v", err)
	}
	data, err := fs.MemFS.ReadFile(segPath(1))
	if err != nil {
		t.Fatal(err)
	}
	// Later fsyncs succeed: Close repairs the log, cutting away every
	// record that was not acknowledged.
	if err := l.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	m.check(t)
	m2 := &model{}
	l2 := mustOpen(t, pipelineOptions(t, fs.MemFS.CrashClone(), m2, depth))
	wantRecordsX(t, m2, m.all())
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}

	// The first record written after the failed fsync began bounds what
	// may have been acknowledged.
	firstAfter := uint64(0) // 0: none was written
	for off := 0; off < len(data); {
		index, _, n, err := decodeRecord(data[off:])
		if err != nil {
			t.Fatalf("segment at %d: %v", off, err)
		}
		if int64(off) >= failedSize.Load() {
			firstAfter = index
			break
		}
		off += n
	}
	if got := uint64(len(acked)); got != m.last() {
		t.Fatalf("%d Appends acknowledged, %d records applied", got, m.last())
	}
	for _, index := range acked {
		if firstAfter != 0 && index >= firstAfter {
			t.Fatalf("record %d acknowledged, but it was written after the failed fsync began (first such record: %d)", index, firstAfter)
		}
	}
	// Only with one fsync at a time is the first fsync call the first
	// batch's: with two syncers the second batch's fsync may begin first
	// and take the injected failure while the first batch's succeeds and is
	// rightly acknowledged (the bound above still holds for it).
	if failAt == 1 && depth == 1 && len(acked) != 0 {
		t.Fatalf("%d records acknowledged though the first fsync failed", len(acked))
	}
	t.Logf("%d acknowledged before the failure; first record written after it: %d", len(acked), firstAfter)
}

// TestMemFSSyncDuringWrite runs Sync and Write on one MemFS file at once
// (the race detector checks the locking) and then cuts power: exactly the
// bytes some Sync saw survive.
func TestMemFSSyncDuringWrite(t *testing.T) {
	fs := NewMemFS()
	fs.MkdirAll(testDir)
	f, err := fs.Create(segPath(1))
	if err != nil {
		t.Fatal(err)
	}
	fs.SyncDir(testDir)
	var (
		wg     sync.WaitGroup
		synced atomic.Int64 // the size at the start of the latest Sync that returned
		stop   atomic.Bool
	)
	wg.Go(func() {
		for i := 0; i < 2000; i++ {
			if _, err := f.Write([]byte{byte(i)}); err != nil {
				t.Error(err)
			}
		}
		stop.Store(true)
	})
	wg.Go(func() {
		for !stop.Load() {
			size, _ := f.Size()
			if err := f.Sync(); err != nil {
				t.Error(err)
			}
			synced.Store(size)
		}
	})
	wg.Wait()
	atLeast := synced.Load()
	cut := fs.CrashClone()
	data, err := cut.ReadFile(segPath(1))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) < atLeast {
		t.Fatalf("%d bytes survived, %d were synced", len(data), atLeast)
	}
	for i, b := range data {
		if b != byte(i) {
			t.Fatalf("byte %d = %d after the power cut", i, b)
		}
	}
	// Without a final Sync, what was written after the last one is lost.
	if _, err := f.Write([]byte("unsynced")); err != nil {
		t.Fatal(err)
	}
	fs.ResetToSyncedState()
	if after, _ := fs.ReadFile(segPath(1)); len(after) != len(data) {
		t.Fatalf("%d bytes after reset, want the %d synced", len(after), len(data))
	}
}
