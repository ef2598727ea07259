package server

import (
	"time"

	"kvs/fsm"
	"kvs/group"
)

// A Proposer makes a batch of write commands happen, in order, and returns
// one reply per command. It returns only once the writes are visible to
// readers and as durable as the mode promises: applied in memory (memory
// mode), fsynced in the append log (durable mode), committed by a majority
// (cluster mode). An error means no reply could be produced for the batch;
// the server sends it to every command of the batch.
//
// The proposer stamps the batch with its clock reading; the store uses that
// reading as "now" when it applies the batch, on every replica and replay.
type Proposer interface {
	Propose(cmds []fsm.Command) ([]fsm.Reply, error)
}

// ErrLogWrite is wrapped, around the cause, by a Proposer's error when the
// node cannot write its log (a full disk, an I/O error) and so refuses the
// write: it was not applied. The server answers it as redis-server answers
// writes while its append-only file cannot be written: "MISCONF Errors
// writing to the AOF file: " and the OS's error text. Reads go on being
// served meanwhile.
var ErrLogWrite = group.ErrLogWrite

// An appendProposer is a Proposer that can append the replies to a buffer
// the caller reuses, saving an allocation per batch. The replies are the
// caller's until its next call.
type appendProposer interface {
	ProposeAppend(dst []fsm.Reply, cmds []fsm.Command) ([]fsm.Reply, error)
}

// A roundProposer can also serve an event loop without holding it up:
// Enqueue takes a batch without waiting, and Kick, called at the end of a
// round of the loop, starts writing (and fsyncing) everything enqueued, so
// that a round's batches share one write and one fsync. Each batch's done
// is called later, from another goroutine, with what Propose would have
// returned, once the batch is as durable as Propose promises. Flush is
// Kick that may also wait until the batches are answered, or until stop
// is closed: a loop calls it when every pipeline of its round waits for
// the log, so that it waits with them (durable mode waits for the fsync
// under fsync always; under everysec and no the answers follow the write
// at once, and done may come after Flush whenever the log failed
// meanwhile), and stops waiting once a script turns busy, since the log's
// apply then runs it and the loop's clients are to be answered BUSY.
// cmds may be reused once Enqueue returns; done must not block. A
// Proposer that is not one (cluster mode's) has a goroutine per
// connection serving the clients.
// queuedProposer is a Proposer that takes a batch at once, behind the
// ones before it, and answers it later (a Raft group's proposer): a loop
// queues a cluster write on the loop, in the order the commands arrived,
// and waits for it off the loop.
type queuedProposer interface {
	Queue(cmds []fsm.Command) func() ([]fsm.Reply, error)
}

// queueLocal queues cmds, all writes, with g's proposer when this node
// leads g and the proposer queues; nil otherwise (route them as usual).
func queueLocal(g *groupRef, cmds []fsm.Command) func() ([]fsm.Reply, error) {
	qp, ok := g.proposer.(queuedProposer)
	if !ok || !g.leads() {
		return nil
	}
	for i := range cmds {
		if !cmds[i].Op.IsWrite() {
			return nil
		}
	}
	return qp.Queue(cmds)
}

type roundProposer interface {
	Enqueue(cmds []fsm.Command, done func([]fsm.Reply, error))
	Kick()
	Flush(stop <-chan struct{})
}

// MemoryProposer applies batches straight to the store: memory mode.
type MemoryProposer struct {
	Store *fsm.Store
}

// Propose applies cmds to the store under one lock acquisition.
func (p MemoryProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	return p.Store.Apply(0, time.Now().UnixMilli(), cmds), nil
}

// ProposeAppend is Propose appending the replies to dst.
func (p MemoryProposer) ProposeAppend(dst []fsm.Reply, cmds []fsm.Command) ([]fsm.Reply, error) {
	return p.Store.ApplyTo(dst, 0, time.Now().UnixMilli(), cmds), nil
}
