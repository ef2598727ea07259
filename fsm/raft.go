package fsm

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// RaftFSM adapts a Store to hashicorp/raft: it implements raft.FSM and
// raft.BatchingFSM. Each raft command log holds one entry in the encoding of
// EncodeEntry; the response of a command log is its []Reply. Other log types
// (configuration changes, which raft also hands to a BatchingFSM) get a nil
// response and leave the store alone, AppliedIndex included.
//
// raft calls Apply, ApplyBatch, Snapshot and Restore from one goroutine and
// Persist from another, concurrently with Apply; the Store's lock and its
// copy-on-write snapshots make that safe.
type RaftFSM struct {
	Store *Store
}

// NewRaftFSM returns a RaftFSM over s.
func NewRaftFSM(s *Store) *RaftFSM { return &RaftFSM{Store: s} }

var (
	_ raft.BatchingFSM = (*RaftFSM)(nil)
	_ raft.FSMSnapshot = (*raftSnapshot)(nil)
)

// Apply applies one committed log.
func (f *RaftFSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies the command logs of a batch in order, all under one
// store lock, and returns one response per log: a []Reply for a command log,
// nil for any other. The store's AppliedIndex becomes the raft index of the
// last command log.
//
// A command log that does not decode was committed by a quorum and cannot be
// skipped without the replicas diverging: ApplyBatch panics, naming its index.
func (f *RaftFSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	entries := make([]Entry, 0, len(logs))
	for _, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		now, cmds, err := DecodeEntry(l.Data)
		if err != nil {
			panic(fmt.Sprintf("fsm: committed raft log %d does not decode: %v", l.Index, err))
		}
		entries = append(entries, Entry{Index: l.Index, Now: now, Cmds: cmds})
	}
	if len(entries) == 0 {
		return out
	}
	replies := f.Store.ApplyBatch(entries)
	j := 0
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = replies[j]
			j++
		}
	}
	return out
}

// Snapshot takes a point-in-time view of the store in O(1); raft writes it
// out with Persist while Apply goes on.
func (f *RaftFSM) Snapshot() (raft.FSMSnapshot, error) {
	return &raftSnapshot{sn: f.Store.Snapshot()}, nil
}

// Restore replaces the store's state with the snapshot read from rc and
// closes rc. On error the store is unchanged.
func (f *RaftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	_, err := f.Store.Restore(rc)
	return err
}

// AppliedIndex is the raft index of the last command log the store holds
// the effects of, applied or restored from a snapshot.
func (f *RaftFSM) AppliedIndex() uint64 { return f.Store.AppliedIndex() }

// SetReplayedThrough is the store's: the raft log held entries up to index
// when the node opened, which it applied before it restarted, so applying
// them again announces nothing to subscribers.
func (f *RaftFSM) SetReplayedThrough(index uint64) { f.Store.SetReplayedThrough(index) }

type raftSnapshot struct{ sn *Snapshot }

// Persist writes the snapshot to sink and closes it, or cancels it on error
// so that raft discards the partial file.
func (r *raftSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := r.sn.WriteTo(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (r *raftSnapshot) Release() { r.sn.Release() }
