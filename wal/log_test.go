package wal

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Policy
		ok   bool
	}{
		{"always", FsyncAlways, true},
		{"everysec", FsyncEverySec, true},
		{"no", FsyncNo, true},
		{"", 0, false},
		{"Always", 0, false},
	} {
		got, err := ParsePolicy(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePolicy(%q) = %v, %v", tc.in, got, err)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

func TestValidate(t *testing.T) {
	apply := func(uint64, []byte) any { return nil }
	for _, tc := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"minimal", Options{Dir: "d", Apply: apply}, true},
		{"no dir", Options{Apply: apply}, false},
		{"no apply", Options{Dir: "d"}, false},
		{"snapshot without restore", Options{Dir: "d", Apply: apply,
			Snapshot: func() (uint64, func(w io.Writer) error, error) { return 0, nil, nil }}, false},
		{"bad policy", Options{Dir: "d", Apply: apply, Fsync: 7}, false},
		{"negative segment", Options{Dir: "d", Apply: apply, SegmentSize: -1}, false},
	} {
		err := tc.opts.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v", tc.name, err)
		}
		// Only invalid options go to Open: valid ones would open a real
		// log in the package directory.
		if !tc.ok {
			if _, oerr := Open(tc.opts); oerr == nil {
				t.Errorf("%s: Open accepted invalid options", tc.name)
			}
		}
	}
}

func TestPolicies(t *testing.T) {
	for _, p := range []Policy{FsyncAlways, FsyncEverySec, FsyncNo} {
		t.Run(p.String(), func(t *testing.T) {
			fs := NewMemFS()
			m := &model{}
			opts := memOptions(t, fs, m)
			opts.Fsync = p
			l := mustOpen(t, opts)
			appendN(t, l, 1, 50)
			// Applied before Append returned, whatever the policy.
			wantRecords(t, m, 50)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if s := l.Stats(); s.DurableIndex != 50 || s.LastIndex != 50 || s.Appends != 50 {
				t.Fatalf("stats after Sync: %+v", s)
			}
			appendN(t, l, 51, 5)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			fs.ResetToSyncedState() // Close made everything durable
			l, m, err := reopen(t, fs, false)
			if err != nil {
				t.Fatal(err)
			}
			wantRecords(t, m, 55)
			l.Close()
		})
	}
}

// TestNoPolicyLosesUnsynced checks the strict FS really forgets: with
// FsyncNo, a record written but never fsynced is gone after a power cut.
func TestNoPolicyLosesUnsynced(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	opts.Fsync = FsyncNo
	l := mustOpen(t, opts)
	appendN(t, l, 1, 3)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 4, 3)
	crashed := fs.CrashClone()
	l.Close()
	l2, m2, err := reopen(t, crashed, false)
	if err != nil {
		t.Fatal(err)
	}
	// Records 4..6 may or may not have been written, never fsynced.
	if got := m2.last(); got != 3 {
		t.Fatalf("after power cut: %d records, want 3", got)
	}
	l2.Close()
}

func TestCloseIdempotent(t *testing.T) {
	m := &model{}
	l := mustOpen(t, memOptions(t, NewMemFS(), m))
	appendN(t, l, 1, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close = %v", err)
	}
	if err := l.Compact(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Compact after Close = %v", err)
	}
}

func TestRecordTooLarge(t *testing.T) {
	m := &model{}
	l := mustOpen(t, memOptions(t, NewMemFS(), m))
	defer l.Close()
	// Append checks with checkRecordSize; a real 1 GiB record would make
	// this test slow.
	for _, n := range []int{0, 1, MaxRecordSize} {
		if err := checkRecordSize(n); err != nil {
			t.Errorf("checkRecordSize(%d) = %v", n, err)
		}
	}
	if err := checkRecordSize(MaxRecordSize + 1); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("checkRecordSize(MaxRecordSize+1) = %v", err)
	}
	appendN(t, l, 1, 1)
}

// errInjected is the failure the tests' file systems inject (fail_test.go,
// pipeline_test.go).
var errInjected = errors.New("injected fsync failure")

// TestPowerCutConcurrentAppenders cuts power at random moments while 16
// goroutines append, then recovers from what was durable at that instant:
// every Append acknowledged before the cut must be there, each goroutine's
// records in the order it appended them.
// It runs with one fsync at a time and with two overlapping.
func TestPowerCutConcurrentAppenders(t *testing.T) {
	for _, depth := range []int{1, 2} {
		t.Run(fmt.Sprintf("depth=%d", depth), func(t *testing.T) {
			testPowerCutConcurrentAppenders(t, depth, false)
		})
	}
}

// TestPowerCutPreallocChunks is TestPowerCutConcurrentAppenders with
// preallocation chunks of tens to hundreds of bytes, so that the cut falls
// among many extensions, trims and rotations.
func TestPowerCutPreallocChunks(t *testing.T) {
	for _, depth := range []int{1, 2} {
		t.Run(fmt.Sprintf("depth=%d", depth), func(t *testing.T) {
			testPowerCutConcurrentAppenders(t, depth, true)
		})
	}
}

func testPowerCutConcurrentAppenders(t *testing.T, depth int, smallChunks bool) {
	const writers = 16
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for round := range rounds {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(round), 1))
			fs := NewMemFS()
			m := &model{}
			opts := memOptions(t, fs, m)
			opts.SyncDepth = depth
			opts.SegmentSize = 512 + rng.Int64N(4096)
			opts.CompactBytes = 2048 + rng.Int64N(8192)
			if smallChunks {
				opts.prealloc = 32 + rng.Int64N(512)
			}
			l := mustOpen(t, opts)

			var (
				ackMu sync.Mutex
				acked = make([]int, writers) // highest seq acknowledged per writer
				total atomic.Int64
				stop  atomic.Bool
				wg    sync.WaitGroup
			)
			for w := range writers {
				wg.Go(func() {
					for seq := 1; !stop.Load(); seq++ {
						if _, err := l.Append(fmt.Appendf(nil, "%d/%d", w, seq)); err != nil {
							t.Errorf("writer %d: %v", w, err)
							return
						}
						ackMu.Lock()
						acked[w] = seq
						ackMu.Unlock()
						total.Add(1)
					}
				})
			}
			cutAt := 50 + rng.Int64N(1500)
			waitFor(t, "appends before the cut", func() bool { return total.Load() >= cutAt })
			// Acknowledgements recorded before the clone completed before it.
			ackMu.Lock()
			before := slices.Clone(acked)
			ackMu.Unlock()
			crashed := fs.CrashClone()
			stop.Store(true)
			wg.Wait()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			m.check(t)

			l2, m2, err := reopen(t, crashed, false)
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			m2.check(t)
			seen := make([]int, writers)
			for _, r := range m2.all() {
				w, seq, _ := strings.Cut(string(r), "/")
				wi, _ := strconv.Atoi(w)
				si, _ := strconv.Atoi(seq)
				if si != seen[wi]+1 {
					t.Fatalf("writer %d: record %d after %d", wi, si, seen[wi])
				}
				seen[wi] = si
			}
			for w := range writers {
				if seen[w] < before[w] {
					t.Fatalf("writer %d: %d acknowledged before the cut, %d recovered", w, before[w], seen[w])
				}
			}
			s := l.Stats()
			t.Logf("cut after %d appends; recovered %d records (snapshot at %d); before the cut: %d compactions, %.1f records per fsync",
				cutAt, m2.last(), l2.Stats().SnapshotIndex, s.Compactions, s.RecordsPerFsync())
		})
	}
}

// TestGroupCommit checks that concurrent appenders share fsyncs.
func TestGroupCommit(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	l := mustOpen(t, memOptions(t, fs, m))
	defer l.Close()
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for range 200 {
				if _, err := l.Append([]byte("x")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	s := l.Stats()
	t.Logf("%d records in %d fsyncs (%.1f per fsync)", s.RecordsFsynced, s.Fsyncs, s.RecordsPerFsync())
	if s.RecordsFsynced != s.Appends {
		t.Fatalf("%d records fsynced, %d appended", s.RecordsFsynced, s.Appends)
	}
}

// TestCloseDuringAppends: Appends racing Close either succeed, and are then
// durable, or fail with ErrClosed; Close leaves no goroutine behind.
func TestCloseDuringAppends(t *testing.T) {
	before := runtime.NumGoroutine()
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	opts.CompactBytes = 1024
	l := mustOpen(t, opts)
	var (
		wg sync.WaitGroup
		ok atomic.Int64
	)
	for range 8 {
		wg.Go(func() {
			for {
				_, err := l.Append([]byte("x"))
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				ok.Add(1)
			}
		})
	}
	waitFor(t, "some appends", func() bool { return ok.Load() > 200 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	fs.ResetToSyncedState()
	l2, m2, err := reopen(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.last(); got != uint64(ok.Load()) {
		t.Fatalf("recovered %d records, %d acknowledged", got, ok.Load())
	}
	l2.Close()
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}

// TestPendingBound: with FsyncNo, appenders faster than the disk are held
// back once maxPending bytes wait for the flush goroutine, and nothing is
// lost.
func TestPendingBound(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	opts.Fsync = FsyncNo
	l := mustOpen(t, opts)
	big := make([]byte, 1<<20)
	n := 3 * maxPending / (1 << 20)
	for range n {
		if _, err := l.Append(big); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, m2, err := reopen(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if m2.last() != uint64(n) {
		t.Fatalf("recovered %d records, want %d", m2.last(), n)
	}
}

// TestOnFsync: the hook hears of every fsync, and what it is told adds up
// to the log's own counters, with concurrent appenders sharing fsyncs.
func TestOnFsync(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	var mu sync.Mutex
	var calls, records int
	opts.OnFsync = func(d time.Duration, n int) {
		mu.Lock()
		defer mu.Unlock()
		if d < 0 || n <= 0 {
			t.Errorf("OnFsync(%v, %d)", d, n)
		}
		calls++
		records += n
	}
	l := mustOpen(t, opts)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := l.Append(rec(w*1000 + i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s := l.Stats()
	mu.Lock()
	defer mu.Unlock()
	if uint64(calls) != s.Fsyncs || uint64(records) != s.RecordsFsynced || records != 400 {
		t.Fatalf("OnFsync saw %d fsyncs of %d records; stats say %d of %d", calls, records, s.Fsyncs, s.RecordsFsynced)
	}
}
