package wal

import (
	"path/filepath"
	"testing"
	"time"
)

// liveClone copies what the files under testDir hold right now, synced or
// not: what a crash of the process (kill -9), as opposed to the machine,
// leaves behind, since the OS keeps what was written.
func liveClone(t *testing.T, m *MemFS) *MemFS {
	t.Helper()
	c := NewMemFS()
	if err := c.MkdirAll(testDir); err != nil {
		t.Fatal(err)
	}
	names, err := m.ReadDir(testDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		data, err := m.ReadFile(filepath.Join(testDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WriteFile(filepath.Join(testDir, name), data); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Under everysec and no, an acknowledged record is already written when
// Append returns, so killing the process at that moment loses nothing, as
// with Redis's append-only file.
func TestAppendWrittenBeforeReturn(t *testing.T) {
	for _, policy := range []Policy{FsyncEverySec, FsyncNo} {
		t.Run(policy.String(), func(t *testing.T) {
			fs := NewMemFS()
			opts := memOptions(t, fs, &model{})
			opts.Fsync = policy
			l := mustOpen(t, opts)
			defer l.Close()
			for i := 1; i <= 100; i++ {
				appendN(t, l, i, 1)
				m := &model{}
				copts := memOptions(t, liveClone(t, fs), m)
				copts.Fsync = policy
				c := mustOpen(t, copts)
				if got := m.last(); got < uint64(i) {
					t.Fatalf("after Append %d returned, a killed process would keep %d records", i, got)
				}
				c.Close()
			}
		})
	}
}

// Under everysec an appender waits only for the write, never for the
// periodic fsync: while that fsync is stuck, appends still return.
func TestEverySecAppendDuringFsync(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	fs := &hookFS{MemFS: NewMemFS()}
	fs.sync = func(n int64, sync func() error) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		return sync()
	}
	m := &model{}
	opts := pipelineOptions(t, fs, m, 1)
	opts.Fsync = FsyncEverySec
	l := mustOpen(t, opts)
	defer l.Close()
	defer close(release)
	appendN(t, l, 1, 1)
	select {
	case <-started: // the once-a-second fsync is running and stuck
	case <-time.After(guard):
		t.Fatal("no periodic fsync started")
	}
	done := make(chan error, 1)
	go func() {
		for i := 2; i <= 10; i++ {
			if _, err := l.Append(rec(i)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		t.Fatal("appends waited for the periodic fsync")
	}
	wantRecords(t, m, 10)
}
