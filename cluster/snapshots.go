package cluster

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A node takes its own snapshots, where raft would take one whenever
// SnapshotThreshold entries had been applied since the last, checked every
// SnapshotInterval. A snapshot writes the whole store, so a store of a
// gigabyte written to a little at a time (a few thousand small writes in
// the interval) was written whole every half minute to a minute, on every
// replica: measured on a move of 512 MiB of slots under load, that cost the
// other groups' clients a fifth of their throughput and gave writes pauses
// of a quarter second. So, as Redis rewrites its append-only file only once
// it grew by auto-aof-rewrite-percentage of its size at the last rewrite
// (and is at least auto-aof-rewrite-min-size), a store whose last snapshot
// holds SnapshotMinSize bytes or more is snapshotted again once the entries
// applied since add up to SnapshotGrowth percent of that snapshot's size
// too. The log on disk is then at most about that share of the store
// beyond the trailing entries, and a restart replays at most as much.
// Smaller stores are snapshotted by entries, as raft did.

// logBytes counts the bytes of the commands a node's FSM applied, and
// where they stood at the last snapshot taken or restored.
type logBytes struct {
	applied atomic.Int64
	atSnap  atomic.Int64
}

// add counts the commands of logs.
func (b *logBytes) add(logs []*raft.Log) {
	var n int64
	for _, l := range logs {
		if l.Type == raft.LogCommand {
			n += int64(len(l.Data))
		}
	}
	b.applied.Add(n)
}

// snapshotted marks that the store as applied so far is snapshotted (or
// restored from a snapshot): called on the FSM's goroutine, where raft
// takes the FSM's snapshot between applies.
func (b *logBytes) snapshotted() { b.atSnap.Store(b.applied.Load()) }

// since is the bytes applied since the last snapshot.
func (b *logBytes) since() int64 { return b.applied.Load() - b.atSnap.Load() }

// snapshotDue reports whether a node whose FSM has applied through index
// applied, with sinceBytes bytes of commands since its last snapshot, of
// index snapIndex and snapSize bytes, takes a snapshot now, by c (its
// defaults applied).
func snapshotDue(c Config, applied, snapIndex uint64, snapSize, sinceBytes int64) bool {
	if applied < snapIndex || applied-snapIndex < c.SnapshotThreshold {
		return false
	}
	if c.SnapshotGrowth < 0 || snapSize < c.SnapshotMinSize {
		return true
	}
	return sinceBytes >= snapSize/100*int64(c.SnapshotGrowth)
}

// snapshots checks, every SnapshotInterval plus as much again at random
// (as raft does), whether a snapshot is due, and takes it; until the node
// closes.
func (n *Node) snapshots(snaps raft.SnapshotStore, bytes *logBytes) {
	defer close(n.snapsDone)
	interval := n.cfg.SnapshotInterval
	for {
		t := time.NewTimer(interval + rand.N(interval))
		select {
		case <-n.closing:
			t.Stop()
			return
		case <-t.C:
		}
		var snapIndex uint64
		var snapSize int64
		if metas, err := snaps.List(); err != nil {
			n.log.Warn("listing snapshots", "err", err)
			continue
		} else if len(metas) > 0 {
			snapIndex, snapSize = metas[0].Index, metas[0].Size
		}
		due := snapshotDue(n.cfg, n.raft.AppliedIndex(), snapIndex, snapSize, bytes.since())
		n.snapshotChecks.Add(1)
		if !due {
			continue
		}
		err := n.raft.Snapshot().Error()
		switch {
		case err == nil, errors.Is(err, raft.ErrNothingNewToSnapshot):
		case errors.Is(err, raft.ErrRaftShutdown):
			return
		default:
			n.log.Warn("taking a snapshot", "err", err)
		}
	}
}
