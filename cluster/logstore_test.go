package cluster

import (
	"errors"
	"io"
	"log/slog"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

// fullStore fails every write of entries while full is set.
type fullStore struct {
	*raft.InmemStore
	full bool
}

func (s *fullStore) StoreLogs(ls []*raft.Log) error {
	if s.full {
		return syscall.ENOSPC
	}
	return s.InmemStore.StoreLogs(ls)
}

func (s *fullStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// TestWatchedLogs: a failed write is reported from then on, with its
// cause, until a write succeeds again; each episode is counted once.
func TestWatchedLogs(t *testing.T) {
	store := &fullStore{InmemStore: raft.NewInmemStore()}
	w := &watchedLogs{LogStore: store, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	n := &Node{watched: w}
	entry := func(i uint64) []*raft.Log { return []*raft.Log{{Index: i, Term: 1}} }
	if err := w.StoreLogs(entry(1)); err != nil || n.LogStoreErr() != nil {
		t.Fatalf("StoreLogs = %v, LogStoreErr = %v", err, n.LogStoreErr())
	}
	store.full = true
	for i := range 3 {
		if err := w.StoreLogs(entry(2)); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("StoreLogs %d while full = %v", i, err)
		}
		if err := n.LogStoreErr(); !errors.Is(err, ErrLogStore) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("LogStoreErr while full = %v", err)
		}
	}
	if err := w.StoreLog(&raft.Log{Index: 2, Term: 1}); err == nil {
		t.Fatal("StoreLog while full succeeded")
	}
	store.full = false
	if err := w.StoreLogs(entry(2)); err != nil || n.LogStoreErr() != nil {
		t.Fatalf("StoreLogs after = %v, LogStoreErr = %v", err, n.LogStoreErr())
	}
	if got := n.LogStoreFailures(); got != 1 {
		t.Fatalf("LogStoreFailures = %d, want 1", got)
	}
}
