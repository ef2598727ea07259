package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// progress is the highest log index whose effects the FSM holds, with a
// way to wait for it to pass a mark. raft's own AppliedIndex counts entries
// handed to the FSM goroutine, not entries applied, so it cannot serve.
type progress struct {
	index atomic.Uint64
	// mu guards wake, which is created by the first waiter and closed (and
	// cleared) by the next advance.
	mu   sync.Mutex
	wake chan struct{}
}

func (p *progress) advance(index uint64) {
	for {
		cur := p.index.Load()
		if index <= cur {
			return
		}
		if p.index.CompareAndSwap(cur, index) {
			break
		}
	}
	p.mu.Lock()
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
	p.mu.Unlock()
}

// changed returns a channel closed at the next advance.
func (p *progress) changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wake == nil {
		p.wake = make(chan struct{})
	}
	return p.wake
}

// trackingFSM records in applied the index of the last log the FSM has
// applied. raft hands the FSM command and configuration logs only; noop and
// barrier logs never reach it, so termReady records the barriers it commits.
type trackingFSM struct {
	raft.BatchingFSM
	applied    *progress
	fsmApplied *progress
	applying   *atomic.Bool   // set while the FSM applies (nil: not kept)
	push       *pushTransport // told of every apply: on a leader, a commit
	delays     *applyDelays   // nil: not recorded
	startIndex uint64         // entries up to it were in the log at open
	boltPath   string         // named when a corrupt entry stops the node
	bytes      *logBytes      // nil: not counted
}

func (t *trackingFSM) ApplyBatch(logs []*raft.Log) []any {
	if t.applying != nil {
		t.applying.Store(true)
		defer t.applying.Store(false)
	}
	resp := t.BatchingFSM.ApplyBatch(t.unseal(logs))
	if t.bytes != nil {
		t.bytes.add(logs)
	}
	if len(logs) > 0 {
		t.advance(logs[len(logs)-1])
	}
	return resp
}

func (t *trackingFSM) Apply(l *raft.Log) any {
	if t.applying != nil {
		t.applying.Store(true)
		defer t.applying.Store(false)
	}
	resp := t.BatchingFSM.Apply(t.unseal([]*raft.Log{l})[0])
	if t.bytes != nil {
		t.bytes.add([]*raft.Log{l})
	}
	t.advance(l)
	return resp
}

// advance records that the FSM applied everything up to last.
func (t *trackingFSM) advance(last *raft.Log) {
	t.applied.advance(last.Index)
	t.fsmApplied.advance(last.Index)
	t.push.committed()
	if t.delays != nil && last.Index > t.startIndex && !last.AppendedAt.IsZero() {
		t.delays.record(time.Since(last.AppendedAt))
	}
}

// unseal checks each command entry's checksum and hands the FSM copies of
// the logs with the checksum stripped (the originals stay as they are: raft
// keeps them in its log cache and sends them to followers). An entry whose
// checksum does not match was damaged on this node's disk after raft wrote
// it; applying it could serve a value nobody wrote, and a committed entry
// cannot be skipped, so the node stops here, saying what to do.
func (t *trackingFSM) unseal(logs []*raft.Log) []*raft.Log {
	out := make([]*raft.Log, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			out[i] = l
			continue
		}
		data, ok := unsealEntry(l.Data)
		if !ok {
			panic(fmt.Sprintf("cluster: raft log entry %d is corrupt (CRC-32C mismatch): %s is damaged; "+
				"move this node's data dir aside and add the node to the cluster again (kvs join) to recover its state from the others",
				l.Index, t.boltPath))
		}
		c := *l
		c.Data = data
		out[i] = &c
	}
	return out
}

// Restore passes through. raft does not tell the FSM the snapshot's
// index; an FSM that knows the last command it now holds (fsm.RaftFSM
// does) moves applied there, and otherwise the next applied log or
// barrier moves applied past it.
func (t *trackingFSM) Restore(rc io.ReadCloser) error {
	if err := t.BatchingFSM.Restore(rc); err != nil {
		return err
	}
	if t.bytes != nil {
		t.bytes.snapshotted()
	}
	if a, ok := t.BatchingFSM.(interface{ AppliedIndex() uint64 }); ok {
		t.applied.advance(a.AppliedIndex())
		t.fsmApplied.advance(a.AppliedIndex())
	}
	return nil
}

// Snapshot passes through, noting where the applied bytes stand (raft
// calls it between applies).
func (t *trackingFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := t.BatchingFSM.Snapshot()
	if err == nil && t.bytes != nil {
		t.bytes.snapshotted()
	}
	return s, err
}

// stallBarrier is how long ReadIndex waits for the FSM to reach the read
// index before it commits a barrier to get past entries the FSM never sees
// (a noop, a barrier another caller committed, a restored snapshot).
const stallBarrier = 100 * time.Millisecond

// ReadIndex returns nil once a read of the local store would be
// linearizable: this node is the leader, confirmed by a quorum after the
// call began, and its store holds every entry committed before the call.
// That is the Raft thesis's read index (§6.4):
//
//  1. the leader has committed an entry of its current term (else its commit
//     index may be behind its predecessor's), by a barrier once per term;
//  2. it records its commit index as the read index;
//  3. it confirms with a quorum that it is still the leader (VerifyLeader);
//  4. it waits until the FSM has applied the read index.
//
// On a node that is not the leader it returns an error wrapping
// ErrNotLeader, also when leadership is lost during the call. ctx bounds the
// wait.
func (n *Node) ReadIndex(ctx context.Context) error {
	if err := n.checkOpen(); err != nil {
		return err
	}
	if !n.IsLeader() {
		return fmt.Errorf("%w: read index", ErrNotLeader)
	}
	if err := n.termReady(ctx); err != nil {
		return err
	}
	readIndex := n.raft.CommitIndex()
	if err := n.wait(ctx, n.raft.VerifyLeader()); err != nil {
		return readError("verifying leadership", err)
	}
	return n.waitApplied(ctx, readIndex)
}

// termReady makes sure an entry of the current term has been committed and
// applied by this node as leader. The first call in a term commits a
// barrier; concurrent callers wait for it and later ones return at once.
func (n *Node) termReady(ctx context.Context) error {
	term := n.raft.CurrentTerm()
	if n.readyTerm.Load() == term {
		return nil
	}
	select {
	case n.barrierSem <- struct{}{}:
		defer func() { <-n.barrierSem }()
	case <-ctx.Done():
		return fmt.Errorf("cluster: waiting for the read barrier: %w", ctx.Err())
	}
	if n.readyTerm.Load() == term {
		return nil
	}
	if err := n.barrier(ctx); err != nil {
		return err
	}
	// The barrier was committed in a term at least term (terms only grow);
	// if the term is still the same, it was this one.
	if n.raft.CurrentTerm() != term {
		return fmt.Errorf("%w: term changed during the read barrier", ErrNotLeader)
	}
	n.readyTerm.Store(term)
	return nil
}

// barrier commits a barrier entry, which raft answers once the FSM has
// applied every entry before it, and records its index as applied.
func (n *Node) barrier(ctx context.Context) error {
	f := n.raft.Barrier(n.cfg.ApplyTimeout)
	if err := n.wait(ctx, f); err != nil {
		return readError("read barrier", err)
	}
	// raft's Barrier returns its log future, which knows its index.
	if f, ok := f.(raft.IndexFuture); ok {
		n.applied.advance(f.Index())
	}
	return nil
}

// readError classifies an error of a read's leadership check. Nothing a read
// submits changes the state, so a lost leadership is just ErrNotLeader.
func readError(what string, err error) error {
	switch {
	case errors.Is(err, ErrShutdown), errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %s", ErrShutdown, what)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("cluster: %s: %w", what, err)
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %s: %v", ErrNotLeader, what, err)
	}
	return fmt.Errorf("cluster: %s: %w", what, err)
}

// waitApplied waits until the FSM has applied index. If it stalls short of
// it while raft has handed the FSM everything up to index, the missing
// entries are ones the FSM never sees, and a barrier moves past them.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	stall := time.NewTimer(stallBarrier)
	defer stall.Stop()
	for {
		changed := n.applied.changed()
		if n.applied.index.Load() >= index {
			return nil
		}
		select {
		case <-changed:
		case <-stall.C:
			if n.raft.AppliedIndex() >= index {
				if err := n.barrier(ctx); err != nil {
					return err
				}
			}
			stall.Reset(stallBarrier)
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting to apply index %d: %w", index, ctx.Err())
		case <-n.closing:
			return ErrShutdown
		}
	}
}

// AppliedIndex is the last entry this node's FSM has applied itself (a
// command or configuration, or the last command of a restored snapshot).
// Every replica's FSM reaches it, so it is what a leader reports to a
// follower that must wait for a write (WaitApplied).
func (n *Node) AppliedIndex() uint64 { return n.fsmApplied.index.Load() }

// WaitApplied returns nil once this node's FSM has applied index (an
// AppliedIndex of any member), or an error when ctx is done or the node
// closes first. It works on every member: a follower waits for raft to
// learn the entry is committed (see commitpush.go) and hand it over.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	for {
		changed := n.fsmApplied.changed()
		if n.fsmApplied.index.Load() >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting to apply index %d: %w", index, ctx.Err())
		case <-n.closing:
			return ErrShutdown
		}
	}
}
