package group

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"kvs/fsm"
	"kvs/wal"
)

// DurableOptions configure a durable group's append log.
type DurableOptions struct {
	Dir          string     // the data dir: segments and snapshots
	Fsync        wal.Policy // when the log is fsynced
	SegmentSize  int64      // 0: the wal's default
	CompactBytes int64      // 0: the wal's default
	// Repair cuts the log at the first corrupt record (keeping a .broken
	// copy) instead of refusing to start; RepairAllowEmpty lets it go
	// ahead when nothing would be left.
	Repair, RepairAllowEmpty bool
	Logger                   *slog.Logger
	// OnFsync, when not nil, hears of every fsync (for the metrics).
	OnFsync func(time.Duration, int)
}

// OpenDurable opens (and recovers) the append log in o.Dir, restoring
// store from the newest snapshot and replaying the records after it, and
// returns the group whose writes go through it.
func OpenDurable(store *fsm.Store, o DurableOptions) (*Group, error) {
	log, err := openLog(o, store)
	if err != nil {
		return nil, err
	}
	return &Group{store: store, log: log, proposer: &durableProposer{log: log}}, nil
}

// durableProposer is the proposer of durable mode: a batch becomes one log
// record; the wal applies it to the store once it is durable (fsync always)
// and hands back the store's replies.
//
// It serves the server's event loops too (Enqueue, Kick, Flush): a round's
// writes then share one write (and with fsync always, one fsync), as
// redis-server writes its append-only file once per event-loop iteration.
type durableProposer struct {
	log *wal.Log
}

var entryPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// encode returns cmds as a log record stamped with the clock, in a pooled
// buffer that goes back to entryPool once the log is done with the record.
func encode(cmds []fsm.Command) (*[]byte, []byte) {
	bp := entryPool.Get().(*[]byte)
	*bp = fsm.EncodeEntry((*bp)[:0], time.Now().UnixMilli(), cmds)
	return bp, *bp
}

func (p *durableProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	bp, rec := encode(cmds)
	res, err := p.log.Append(rec)
	// The wal has copied the record into its own buffer and the store has
	// copied what it keeps, so nothing refers to rec once Append returns.
	entryPool.Put(bp)
	if err != nil {
		return nil, logErr(err)
	}
	return res.([]fsm.Reply), nil
}

// Enqueue adds the batch to the log without writing it or waiting; done
// gets the replies once the batch is as durable as the policy promises and
// applied. Kick starts the write.
func (p *durableProposer) Enqueue(cmds []fsm.Command, done func([]fsm.Reply, error)) {
	bp, rec := encode(cmds)
	err := p.log.AppendFunc(rec, func(res any, err error) {
		entryPool.Put(bp) // the log is done with rec
		if err != nil {
			done(nil, logErr(err))
			return
		}
		done(res.([]fsm.Reply), nil)
	})
	if err != nil {
		entryPool.Put(bp)
		done(nil, logErr(err))
	}
}

// Kick starts the write (and fsync) of what Enqueue added.
func (p *durableProposer) Kick() { p.log.Kick() }

// Flush is Kick, then, with fsync always, a wait until what Enqueue added
// is durable and answered, or until stop is closed. Under everysec and no
// it does not wait: the answers follow the write, which takes no fsync.
func (p *durableProposer) Flush(stop <-chan struct{}) {
	if p.log.Policy() == wal.FsyncAlways {
		p.log.SyncUntil(stop)
		return
	}
	p.log.Kick()
}

// SyncUntil returns once every write acknowledged so far is on disk, or
// once stop is closed: at once under fsync always, whose writes are
// acknowledged only after their fsync; after the log's write and fsync
// of what it holds under the others (WAITAOF's local count). It returns
// the log's failure, if any.
func (p *durableProposer) SyncUntil(stop <-chan struct{}) error {
	if p.log.Policy() == wal.FsyncAlways {
		return p.log.Err()
	}
	return p.log.SyncUntil(stop)
}

// recordKeys names the keys a log record's commands touch, for the wal to
// say what a damaged or cut record affected.
func recordKeys(rec []byte) ([]string, error) {
	_, cmds, err := fsm.DecodeEntry(rec)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range cmds {
		keys, all := c.Keys()
		if all {
			out = append(out, "(every key: "+c.Op.String()+")")
		}
		for _, k := range keys {
			out = append(out, string(k))
		}
	}
	return out, nil
}

func openLog(o DurableOptions, store *fsm.Store) (*wal.Log, error) {
	l, err := wal.Open(wal.Options{
		Dir:              o.Dir,
		Fsync:            o.Fsync,
		SegmentSize:      o.SegmentSize,
		CompactBytes:     o.CompactBytes,
		Repair:           o.Repair,
		RepairAllowEmpty: o.RepairAllowEmpty,
		RecordKeys:       recordKeys,
		Logger:           o.Logger,
		OnFsync:          o.OnFsync,
		Apply: func(index uint64, rec []byte) any {
			now, cmds, err := fsm.DecodeEntry(rec)
			if err != nil {
				// The record passed its CRC, so it is what was written:
				// failing to decode it is a bug, not bad input.
				panic(fmt.Sprintf("kvs: log record %d cannot be decoded: %v", index, err))
			}
			return store.Apply(index, now, cmds)
		},
		Restore: func(r io.Reader) error {
			_, err := store.Restore(r)
			return err
		},
		Snapshot: func() (uint64, func(io.Writer) error, error) {
			snap := store.Snapshot()
			return snap.Index(), func(w io.Writer) error {
				defer snap.Release()
				_, err := snap.WriteTo(w)
				return err
			}, nil
		},
	})
	switch {
	case errors.Is(err, wal.ErrRepairEmpty):
		err = fmt.Errorf("%w (pass --repair-allow-empty as well to start empty; the cut files are kept as .broken)", err)
	case errors.Is(err, wal.ErrCorrupt) && !o.Repair:
		err = fmt.Errorf("%w (--repair cuts what the log above says and keeps a .broken copy of it)", err)
	}
	return l, err
}
