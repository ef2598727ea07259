package wal

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// AppendFunc adds records without writing them; Sync writes and fsyncs
// them and returns only after every record's callback has run, with the
// index Apply returned, in log order. A power cut right after Sync keeps
// them all.
func TestAppendFuncThenSync(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	l := mustOpen(t, memOptions(t, fs, m))
	defer l.Close()
	for round := range 20 {
		var mu sync.Mutex
		var got []uint64
		const n = 25
		for i := range n {
			err := l.AppendFunc(rec(round*n+i+1), func(res any, err error) {
				if err != nil {
					t.Errorf("record %d: %v", round*n+i+1, err)
				}
				mu.Lock()
				got = append(got, res.(uint64))
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(got) != n {
			t.Fatalf("round %d: Sync returned after %d of %d callbacks", round, len(got), n)
		}
		for i, idx := range got {
			if want := uint64(round*n + i + 1); idx != want {
				t.Fatalf("round %d: callback %d had index %d, want %d", round, i, idx, want)
			}
		}
		mu.Unlock()

		cm := &model{}
		c := mustOpen(t, memOptions(t, fs.CrashClone(), cm))
		if got := cm.last(); got != uint64((round+1)*n) {
			t.Fatalf("round %d: after a power cut right after Sync, %d records, want %d", round, got, (round+1)*n)
		}
		c.Close()
	}
	m.check(t)
}

// Records added with AppendFunc are not answered before they are durable,
// even when another appender's Append makes the log write them.
func TestAppendFuncNotAnsweredBeforeFsync(t *testing.T) {
	release := make(chan struct{})
	fs := &hookFS{MemFS: NewMemFS()}
	var once sync.Once
	started := make(chan struct{})
	fs.sync = func(n int64, sync func() error) error {
		once.Do(func() { close(started) })
		<-release
		return sync()
	}
	l := mustOpen(t, memOptions(t, fs, &model{}))
	defer l.Close()
	answered := make(chan error, 1)
	if err := l.AppendFunc(rec(1), func(_ any, err error) { answered <- err }); err != nil {
		t.Fatal(err)
	}
	go l.Sync()
	<-started
	select {
	case err := <-answered:
		t.Fatalf("answered (%v) while its fsync has not returned", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}

// AppendFunc refuses what Append refuses, without calling back.
func TestAppendFuncErrors(t *testing.T) {
	l := mustOpen(t, memOptions(t, NewMemFS(), &model{}))
	called := false
	cb := func(any, error) { called = true }
	if err := l.AppendFunc(make([]byte, MaxRecordSize+1), cb); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("record too large: %v", err)
	}
	l.Close()
	if err := l.AppendFunc(rec(1), cb); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if called {
		t.Fatal("a refused record was answered")
	}
}

// Under everysec and no, the records AppendFunc added are answered once
// written (a killed process keeps them) after a Kick; a round larger than
// the room for unwritten records does not wait forever for a flush
// goroutine nobody woke.
func TestAppendFuncFlushLazy(t *testing.T) {
	for _, policy := range []Policy{FsyncEverySec, FsyncNo} {
		t.Run(policy.String(), func(t *testing.T) {
			defer func(was int) { maxPending = was }(maxPending)
			maxPending = 1 << 20
			fs := NewMemFS()
			opts := memOptions(t, fs, &model{})
			opts.Fsync = policy
			l := mustOpen(t, opts)
			defer l.Close()
			big := make([]byte, 64<<10)
			n := 2 * maxPending / len(big) // twice the room, in one round
			var answered atomic.Int64
			for i := range n {
				big[0] = byte(i)
				if err := l.AppendFunc(bytes.Clone(big), func(_ any, err error) {
					if err != nil {
						t.Error(err)
					}
					answered.Add(1)
				}); err != nil {
					t.Fatal(err)
				}
			}
			l.Kick()
			waitFor(t, "every record answered", func() bool { return answered.Load() == int64(n) })
			m := &model{}
			copts := memOptions(t, liveClone(t, fs), m)
			copts.Fsync = policy
			c := mustOpen(t, copts)
			defer c.Close()
			if got := m.last(); got != uint64(n) {
				t.Fatalf("a process killed once they were answered would keep %d of %d records", got, n)
			}
		})
	}
}

// SyncUntil stops waiting once stop is closed; the sync goes on, and the
// record's callback comes when its fsync returns.
func TestSyncUntilStops(t *testing.T) {
	release := make(chan struct{})
	fs := &hookFS{MemFS: NewMemFS()}
	var once sync.Once
	started := make(chan struct{})
	fs.sync = func(n int64, sync func() error) error {
		once.Do(func() { close(started) })
		<-release
		return sync()
	}
	l := mustOpen(t, memOptions(t, fs, &model{}))
	defer l.Close()
	answered := make(chan error, 1)
	if err := l.AppendFunc(rec(1), func(_ any, err error) { answered <- err }); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	returned := make(chan error, 1)
	go func() { returned <- l.SyncUntil(stop) }()
	<-started
	close(stop)
	if err := <-returned; err != nil {
		t.Fatalf("SyncUntil after stop: %v", err)
	}
	select {
	case err := <-answered:
		t.Fatalf("answered (%v) before its fsync returned", err)
	default:
	}
	close(release)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}
