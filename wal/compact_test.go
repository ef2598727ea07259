package wal

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCompactThenRecover(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	opts.SegmentSize = 256
	l := mustOpen(t, opts)
	appendN(t, l, 1, 100)
	before, _ := listDir(fs, testDir)
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	after, _ := listDir(fs, testDir)
	if !slices.Equal(after.snapshots, []uint64{100}) {
		t.Fatalf("snapshots after compaction: %v", after.snapshots)
	}
	// The first snapshot has no snapshot before it: the whole log stays as
	// its fallback, and the active segment was closed.
	if want := append(before.segments, 101); !slices.Equal(after.segments, want) {
		t.Fatalf("segments before %v, after %v; want %v", before.segments, after.segments, want)
	}
	s := l.Stats()
	if s.SnapshotIndex != 100 || s.Compactions != 1 || s.Segments != uint64(len(before.segments)+1) {
		t.Fatalf("stats: %+v", s)
	}
	appendN(t, l, 101, 50)
	if err := l.Compact(); err != nil { // keeps the first snapshot and the log after it
		t.Fatal(err)
	}
	second, _ := listDir(fs, testDir)
	if !slices.Equal(second.snapshots, []uint64{100, 150}) || second.segments[0] != 101 {
		t.Fatalf("after the second compaction: %+v; want snapshots 100 and 150 and segments from 101", second)
	}
	appendN(t, l, 151, 10)
	if err := l.Compact(); err != nil { // now the first snapshot goes
		t.Fatal(err)
	}
	appendN(t, l, 161, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fs.ResetToSyncedState()
	final, _ := listDir(fs, testDir)
	if !slices.Equal(final.snapshots, []uint64{150, 160}) || final.segments[0] != 151 {
		t.Fatalf("dir: %+v; want snapshots 150 and 160 and segments from 151", final)
	}

	replayed := 0
	m2 := &model{}
	opts2 := memOptions(t, fs, m2)
	opts2.Apply = func(index uint64, rec []byte) any {
		replayed++
		return m2.apply(index, rec)
	}
	l2 := mustOpen(t, opts2)
	defer l2.Close()
	wantRecords(t, m2, 170)
	if replayed != 10 {
		t.Fatalf("replayed %d records after the snapshot, want 10", replayed)
	}
	appendN(t, l2, 171, 1)
}

// TestSnapshotCoversPartOfSegment: a snapshot in the middle of a segment
// (records appended after Snapshot captured its index but before the
// rotation) leaves that segment; replay skips its covered records.
func TestSnapshotCoversPartOfSegment(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	var l *Log
	opts.Snapshot = func() (uint64, func(io.Writer) error, error) {
		index, write, err := m.snapshot()
		// Appended after the capture: lands in the segment compaction closes.
		// With FsyncEverySec, Append applies without waiting for the flusher.
		if _, err := l.Append(rec(int(index) + 1)); err != nil {
			return 0, nil, err
		}
		return index, write, err
	}
	opts.Fsync = FsyncEverySec
	l = mustOpen(t, opts)
	appendN(t, l, 1, 10)
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	c, _ := listDir(fs, testDir)
	if !slices.Equal(c.segments, []uint64{1, 12}) || !slices.Equal(c.snapshots, []uint64{10}) {
		t.Fatalf("dir: %+v", c)
	}
	appendN(t, l, 12, 3)
	l.Close()
	l2, m2, err := reopen(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	wantRecords(t, m2, 14)
}

func TestAutoCompact(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	opts.SegmentSize = 1024
	opts.CompactBytes = 4096
	l := mustOpen(t, opts)
	appendN(t, l, 1, 500)
	// The first compaction keeps the whole log behind its snapshot; the
	// second deletes what the first snapshot covers. A compaction is
	// triggered by an append, and not while one runs, so appends go on
	// until the second has happened however the background work was
	// scheduled.
	next := 501
	waitFor(t, "two background compactions", func() bool {
		if l.Stats().Compactions > 1 {
			return true
		}
		appendN(t, l, next, 10)
		next += 10
		return false
	})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s := l.Stats()
	if s.SegmentsDeleted == 0 {
		t.Fatalf("no segments deleted: %+v", s)
	}
	l2, m2, err := reopen(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	wantRecords(t, m2, next-1)
}

func TestCompactWithoutSnapshot(t *testing.T) {
	m := &model{}
	l := mustOpen(t, Options{Dir: testDir, FS: NewMemFS(), Apply: m.apply, Logger: testLogger(t)})
	defer l.Close()
	if err := l.Compact(); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("Compact = %v", err)
	}
}

func TestCorruptSnapshotFallsBack(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	l := mustOpen(t, opts)
	appendN(t, l, 1, 10)
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 11, 10)
	l.Close()
	// A newer snapshot that is damaged must not be used; the older one and
	// the log still give the whole state.
	data, _ := fs.ReadFile(filepath.Join(testDir, snapshotName(10)))
	data[len(data)-20] ^= 1
	fs.WriteFile(filepath.Join(testDir, snapshotName(15)), data)
	l2, m2, err := reopen(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	wantRecords(t, m2, 20)
}

// TestCompactionStall measures the longest Append while a compaction writes
// a snapshot of about a million entries (~64 MB) on the real file system. A
// timing is never an assertion: the number is logged.
func TestCompactionStall(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 64 MB snapshot")
	}
	const entries, entrySize = 1 << 20, 64
	snapWritten := make(chan struct{})
	var applied atomic.Uint64
	opts := Options{
		Dir:    t.TempDir(),
		Apply:  func(index uint64, rec []byte) any { applied.Store(index); return nil },
		Logger: testLogger(t),
		Restore: func(r io.Reader) error {
			_, err := io.Copy(io.Discard, r)
			return err
		},
		Snapshot: func() (uint64, func(io.Writer) error, error) {
			return applied.Load(), func(w io.Writer) error {
				defer close(snapWritten)
				entry := make([]byte, entrySize)
				for i := range entries {
					entry[0] = byte(i)
					if _, err := w.Write(entry); err != nil {
						return err
					}
				}
				return nil
			}, nil
		},
	}
	l := mustOpen(t, opts)
	defer l.Close()
	for range 100 {
		l.Append([]byte("warm-up"))
	}

	// measure runs 8 appenders until during returns and reports the longest
	// Append and how many completed.
	measure := func(during func()) (longest time.Duration, count int) {
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			done atomic.Bool
		)
		for range 8 {
			wg.Go(func() {
				rec := make([]byte, 100)
				for !done.Load() {
					start := time.Now()
					if _, err := l.Append(rec); err != nil {
						t.Error(err)
						return
					}
					d := time.Since(start)
					mu.Lock()
					longest = max(longest, d)
					count++
					mu.Unlock()
				}
			})
		}
		during()
		done.Store(true)
		wg.Wait()
		return longest, count
	}

	var took time.Duration
	maxStall, count := measure(func() {
		start := time.Now()
		if err := l.Compact(); err != nil {
			t.Error(err)
		}
		took = time.Since(start)
	})
	<-snapWritten
	// The same load for as long without a compaction, for comparison.
	baseline, baseCount := measure(func() {
		<-time.After(took) // a measurement window, not synchronisation
	})
	s := l.Stats()
	t.Logf("compaction of a %d MB snapshot took %v; meanwhile 8 writers did %d appends, longest Append %v "+
		"(without compaction, same time: %d appends, longest %v); %.1f records per fsync",
		s.SnapshotBytes>>20, took.Round(time.Millisecond), count, maxStall.Round(time.Microsecond),
		baseCount, baseline.Round(time.Microsecond), s.RecordsPerFsync())
}

// TestAbandonedSnapshotIsReleased: write runs exactly once even when the
// log does not need the snapshot, so the caller can release it.
func TestAbandonedSnapshotIsReleased(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	var taken, released atomic.Int64
	opts.Snapshot = func() (uint64, func(io.Writer) error, error) {
		index, write, err := m.snapshot()
		taken.Add(1)
		return index, func(w io.Writer) error {
			defer released.Add(1)
			return write(w)
		}, err
	}
	l := mustOpen(t, opts)
	defer l.Close()
	appendN(t, l, 1, 5)
	for range 3 { // the second and third find nothing new
		if err := l.Compact(); err != nil {
			t.Fatal(err)
		}
	}
	if taken.Load() != 3 || released.Load() != 3 {
		t.Fatalf("%d snapshots taken, %d released", taken.Load(), released.Load())
	}
}

// TestCompactRacingClose: Compact and Close at once neither hang nor leave
// the log inconsistent.
func TestCompactRacingClose(t *testing.T) {
	for range 20 {
		fs := NewMemFS()
		m := &model{}
		l := mustOpen(t, memOptions(t, fs, m))
		appendN(t, l, 1, 20)
		done := make(chan error, 1)
		go func() { done <- l.Compact() }()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("Compact = %v", err)
		}
		fs.ResetToSyncedState()
		l2, m2, err := reopen(t, fs, false)
		if err != nil {
			t.Fatal(err)
		}
		wantRecords(t, m2, 20)
		l2.Close()
	}
}

// FuzzSnapshotFile opens a log whose newest snapshot file holds arbitrary
// bytes. A damaged snapshot is skipped (an older one and the log still
// give every record); one that verifies is restored. Never a panic.
func FuzzSnapshotFile(f *testing.F) {
	valid := func(index uint64, body string) []byte {
		var b bytes.Buffer
		writeSnapshotBody(&b, index, func(w io.Writer) error {
			_, err := io.WriteString(w, body)
			return err
		})
		return b.Bytes()
	}
	f.Add(valid(3, "state"))
	f.Add(valid(3, ""))
	f.Add(valid(4, "wrong index"))
	f.Add([]byte("kvs-snap"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := NewMemFS()
		fs.MkdirAll(testDir)
		for i := 1; i <= 3; i++ {
			prev, _ := fs.ReadFile(segPath(1))
			fs.WriteFile(segPath(1), append(prev, encode(uint64(i), rec(i))...))
		}
		fs.WriteFile(filepath.Join(testDir, snapshotName(3)), data)
		var restored []byte
		applied := 0
		l, err := Open(Options{
			Dir: testDir, FS: fs, Logger: slog.New(slog.DiscardHandler),
			Apply: func(uint64, []byte) any { applied++; return nil },
			Restore: func(r io.Reader) error {
				var err error
				restored, err = io.ReadAll(r)
				return err
			},
		})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		if restored == nil && applied != 3 {
			t.Fatalf("snapshot skipped but %d records replayed, want 3", applied)
		}
		if restored != nil && applied != 0 {
			t.Fatalf("snapshot at 3 restored but %d records replayed, want 0", applied)
		}
	})
}
