package wal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// model is a state machine for tests: it keeps every record applied, checks
// that indexes arrive consecutively, and snapshots itself.
type model struct {
	mu   sync.Mutex
	recs [][]byte // recs[i] has index base+i+1
	base uint64
	bad  error
}

func (m *model) apply(index uint64, rec []byte) any {
	m.mu.Lock()
	defer m.mu.Unlock()
	if want := m.base + uint64(len(m.recs)) + 1; index != want && m.bad == nil {
		m.bad = fmt.Errorf("applied index %d, want %d", index, want)
	}
	m.recs = append(m.recs, bytes.Clone(rec))
	return index
}

func (m *model) last() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.base + uint64(len(m.recs))
}

func (m *model) all() [][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.recs)
}

// snapshot captures the records by slice header, cheap as the fsm's
// copy-on-write view would be; records are never modified once applied.
func (m *model) snapshot() (uint64, func(io.Writer) error, error) {
	m.mu.Lock()
	recs, base := slices.Clip(m.recs), m.base
	m.mu.Unlock()
	index := base + uint64(len(recs))
	return index, func(w io.Writer) error {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], base)
		w.Write(b[:])
		binary.LittleEndian.PutUint64(b[:], uint64(len(recs)))
		w.Write(b[:])
		for _, r := range recs {
			binary.LittleEndian.PutUint64(b[:], uint64(len(r)))
			w.Write(b[:])
			if _, err := w.Write(r); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

func (m *model) restore(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.base = binary.LittleEndian.Uint64(data)
	n := binary.LittleEndian.Uint64(data[8:])
	data = data[16:]
	m.recs = nil
	for range n {
		l := binary.LittleEndian.Uint64(data)
		m.recs = append(m.recs, bytes.Clone(data[8:8+l]))
		data = data[8+l:]
	}
	return nil
}

func (m *model) check(t testing.TB) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bad != nil {
		t.Fatal(m.bad)
	}
}

const testDir = "/db"

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// tWriter sends log lines to t.Log so they show only for failing tests.
type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func memOptions(t testing.TB, fs FS, m *model) Options {
	return Options{
		Dir:      testDir,
		FS:       fs,
		Apply:    m.apply,
		Restore:  m.restore,
		Snapshot: m.snapshot,
		Logger:   testLogger(t),
	}
}

func mustOpen(t testing.TB, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func rec(i int) []byte { return fmt.Appendf(nil, "record-%d", i) }

func appendN(t testing.TB, l *Log, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		res, err := l.Append(rec(i))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if res != uint64(i) {
			t.Fatalf("Append %d returned %v", i, res)
		}
	}
}

// wantRecords checks that m holds records 1..n in order.
func wantRecords(t testing.TB, m *model, n int) {
	t.Helper()
	m.check(t)
	got := m.all()
	if int(m.base)+len(got) != n {
		t.Fatalf("have %d records (base %d), want %d", int(m.base)+len(got), m.base, n)
	}
	for i, r := range got {
		if want := rec(int(m.base) + i + 1); !bytes.Equal(r, want) {
			t.Fatalf("record %d = %q, want %q", int(m.base)+i+1, r, want)
		}
	}
}

func segPath(first uint64) string { return filepath.Join(testDir, segmentName(first)) }

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling, not synchronising
	}
}
