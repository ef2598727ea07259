package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// ErrLogStore is wrapped by LogStoreErr's error: this node's last write to
// its raft log (bolt) failed, on a full disk or an I/O error.
var ErrLogStore = errors.New("cluster: raft log write failed")

// watchedLogs is the bolt log store as raft's log cache sees it. It
// records whether the last write of entries failed, so that the node can
// say so (INFO, /healthz, metrics) from the failure until a write succeeds
// again. raft itself handles the failure: a leader whose StoreLogs fails
// answers the batch's futures with the error and steps down to follower
// (dispatchLogs in raft.go, v1.7.3), so another node takes over; a follower
// rejects the AppendEntries and the leader sends the entries again, which
// is what clears the failure once the disk has room.
type watchedLogs struct {
	raft.LogStore
	log      *slog.Logger
	failure  atomic.Pointer[error] // nil while the last write succeeded
	failures atomic.Uint64         // writes that failed after one that did not
}

func (w *watchedLogs) StoreLog(l *raft.Log) error { return w.note(w.LogStore.StoreLog(l)) }

func (w *watchedLogs) StoreLogs(ls []*raft.Log) error { return w.note(w.LogStore.StoreLogs(ls)) }

func (w *watchedLogs) note(err error) error {
	if err != nil {
		failed := fmt.Errorf("%w: %w", ErrLogStore, err)
		if w.failure.Swap(&failed) == nil {
			w.failures.Add(1)
			w.log.Error("raft log write failed; this node cannot lead or take new entries until a write succeeds", "err", err)
		}
		return err
	}
	if old := w.failure.Swap(nil); old != nil {
		w.log.Warn("raft log writes succeed again", "was", *old)
	}
	return nil
}

// LogStoreErr returns the failure of this node's last raft log write,
// wrapping ErrLogStore, or nil if it succeeded (or none failed yet).
func (n *Node) LogStoreErr() error {
	if p := n.watched.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// LogStoreFailures counts the times a raft log write of this node failed
// after one that succeeded.
func (n *Node) LogStoreFailures() uint64 { return n.watched.failures.Load() }
