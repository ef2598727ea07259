package group

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"kvs/cluster"
	"kvs/fsm"
)

// OpenRaft opens a node with one group, group 0, over store
// (bootstrapping it, or waiting to be joined, when there is no state), and
// says whether there was state before: a node as it was before groups,
// whose raft state is in DataDir/raft. Closing the group closes the node.
func OpenRaft(store *fsm.Store, o RaftOptions) (*Group, bool, error) {
	n, err := OpenNode(o)
	if err != nil {
		return nil, false, err
	}
	g, had, err := n.OpenGroup(0, store)
	if err != nil {
		n.Close()
		return nil, false, err
	}
	g.closeOwner = true
	return g, had, nil
}

// raftProposer is the proposer of a cluster leader. Batches from concurrent
// connections are coalesced into one raft log entry, as the wal's group
// commit puts them in one fsync: one worker takes everything queued,
// proposes it as one entry, and splits the replies. The FSM applies an
// entry's commands in order, so each connection's batch keeps its order and
// stays contiguous. Followers never call it: the server forwards their
// writes to the leader.
//
// Why one entry at a time, and why the worker gathers (measured with
// redis-benchmark, 50 connections against the leader of three nodes on one
// machine, docs/performance-notes.md): raft's cost is mostly per entry (encoding, a
// bolt key, a future, channel hand-offs), while a round of fsyncs costs
// about the same for one entry or fifty. Proposing each connection's batch
// as its own entry reached about 8k SETs a second; coalescing with four
// entries in flight about 10k, with one about 12k. What remained was the
// cohort effect: the connections released by one round come back while the
// next round, carrying the others, is in flight, so the writers split into
// two halves taking turns. So after a round the worker waits, briefly, for
// as many new proposals as the round released (a lone writer's next write
// starts the next round at once): the halves merge, and 50 connections
// reached 15-20k. The wait is bounded by half the last round's duration
// (and 2 ms), so writers that went quiet cost one short wait, after which
// the target shrinks to the writers that are left.
type raftProposer struct {
	node *cluster.Node
	// gate, when set, is the node's level gate (Node.SetLevelGate).
	gate *levelGate

	mu       sync.Mutex // guards the fields below
	cond     *sync.Cond // broadcast when queue grows, a gather times out, or stopped is set
	queue    []*proposal
	arrivals uint64 // proposals ever queued
	stopped  bool
	done     chan struct{} // closed when the worker has returned
}

// maxGather caps the worker's wait for the writers of the last round.
const maxGather = 2 * time.Millisecond

type proposal struct {
	cmds    []fsm.Command
	replies []fsm.Reply
	err     error
	done    chan struct{}
}

func newRaftProposer(node *cluster.Node) *raftProposer {
	p := &raftProposer{node: node, done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	go p.work()
	return p
}

var errProposerStopped = fmt.Errorf("%w: the node is shutting down", ErrNotLeader)

func (p *raftProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	return p.Queue(cmds)()
}

// Queue takes cmds at once, behind the proposals queued before it, and
// returns the wait for their replies: proposals queued one after another
// are proposed in that order, whoever waits for them (the server queues
// on an event loop, in the order the commands arrived, and waits off it).
func (p *raftProposer) Queue(cmds []fsm.Command) func() ([]fsm.Reply, error) {
	if err := p.allowed(cmds); err != nil {
		return func() ([]fsm.Reply, error) { return nil, err }
	}
	pr := &proposal{cmds: cmds, done: make(chan struct{})}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return func() ([]fsm.Reply, error) { return nil, errProposerStopped }
	}
	p.queue = append(p.queue, pr)
	p.arrivals++
	p.cond.Broadcast()
	p.mu.Unlock()
	return func() ([]fsm.Reply, error) {
		<-pr.done
		return pr.replies, pr.err
	}
}

// allowed returns nil when the node's level gate lets cmds be proposed,
// else its error (wrapping ErrLevel): the batch alone is refused, not the
// entry it would have shared with other connections' batches.
func (p *raftProposer) allowed(cmds []fsm.Command) error {
	if p.gate == nil {
		return nil
	}
	return p.gate.allows(cmds)
}

// work is the proposer's one worker: gather, propose as one entry, hand
// out the replies; until stop.
func (p *raftProposer) work() {
	defer close(p.done)
	var (
		cmds      []fsm.Command
		released  uint64        // proposals the last round answered
		sinceThen uint64        // p.arrivals when it answered them
		lastRound time.Duration // how long the last round took
	)
	for {
		batch := p.gather(released, sinceThen, lastRound)
		if batch == nil {
			return
		}
		cmds = cmds[:0]
		for _, pr := range batch {
			cmds = append(cmds, pr.cmds...)
		}
		// An entry whose scripts may call the commands of the cluster's
		// level says so first (fsm/calllevel.go), once every node can
		// apply that.
		stamped := false
		if p.gate != nil && fsm.RunsScripts(cmds) {
			if l := p.gate.callLevel(); l > 0 {
				cmds = slices.Insert(cmds, 0, fsm.CallLevel(l))
				stamped = true
			}
		}
		// A fresh buffer for every entry: raft keeps the slice it is given
		// (in its log cache and replication queues), never a copy.
		entry := fsm.EncodeEntry(make([]byte, 0, entrySizeHint(cmds)), time.Now().UnixMilli(), cmds)
		start := time.Now()
		replies, err := p.apply(entry, len(cmds))
		if stamped && err == nil {
			replies = replies[1:]
		}
		lastRound = time.Since(start)
		p.mu.Lock()
		released, sinceThen = uint64(len(batch)), p.arrivals
		p.mu.Unlock()
		for _, pr := range batch {
			if err != nil {
				pr.err = err
			} else {
				pr.replies, replies = replies[:len(pr.cmds):len(pr.cmds)], replies[len(pr.cmds):]
			}
			close(pr.done)
		}
		clear(cmds) // drop references to the connections' buffers
	}
}

// gather waits for a proposal, then, if the last round answered more than
// one, for as many new proposals as it answered or until a bounded wait
// passes; it returns the queue, or nil once stopped with nothing queued.
func (p *raftProposer) gather(released, sinceThen uint64, lastRound time.Duration) []*proposal {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.queue) == 0 && !p.stopped {
		p.cond.Wait()
	}
	if len(p.queue) == 0 {
		return nil
	}
	if released > 1 && p.arrivals-sinceThen < released {
		timedOut := false
		t := time.AfterFunc(min(lastRound/2, maxGather), func() {
			p.mu.Lock()
			timedOut = true
			p.cond.Broadcast()
			p.mu.Unlock()
		})
		for p.arrivals-sinceThen < released && !timedOut && !p.stopped {
			p.cond.Wait()
		}
		t.Stop()
	}
	batch := p.queue
	p.queue = nil
	return batch
}

// entrySizeHint is a guess at the encoded size of cmds that is right or
// a little high for the common commands, so EncodeEntry rarely regrows.
func entrySizeHint(cmds []fsm.Command) int {
	n := 16
	for i := range cmds {
		n += 24
		for _, a := range cmds[i].Args {
			n += len(a) + 4
		}
	}
	return n
}

func (p *raftProposer) apply(entry []byte, n int) ([]fsm.Reply, error) {
	res, err := p.node.Apply(entry)
	if err != nil {
		return nil, RaftErr(err)
	}
	replies, ok := res.([]fsm.Reply)
	if !ok || len(replies) != n {
		return nil, fmt.Errorf("%w: the state machine answered %T for %d commands", ErrUnknownOutcome, res, n)
	}
	return replies, nil
}

// stop lets the worker finish what is queued and returns once it has.
func (p *raftProposer) stop() {
	p.mu.Lock()
	p.stopped = true
	p.cond.Broadcast()
	p.mu.Unlock()
	<-p.done
}

// checkClusterState checks a group's raft state on this node, in dir,
// before it is opened. A damaged replica is repaired the one safe way:
// with --repair and --repair-allow-empty its raft state is moved aside
// whole (dir to dir.broken, the group's other replicas and the node's
// other groups untouched) and it starts empty, to be caught up by the
// group's leader (or to join with --join). --repair alone says what it
// would move and stops.
func checkClusterState(o NodeOptions, logger *slog.Logger, dir string) error {
	err := cluster.CheckState(dir, logger)
	if err == nil || !errors.Is(err, cluster.ErrDamaged) || !o.Repair {
		return err
	}
	aside := dir + ".broken"
	for i := 1; ; i++ {
		if _, serr := os.Stat(aside); errors.Is(serr, os.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s.%d.broken", dir, i)
	}
	logger.Error("cluster repair: this node's whole raft state (log, vote, snapshots) is cut: it moves aside and the node starts empty, taking the cluster's state from the leader",
		"from", dir, "to", aside, "damage", err)
	if !o.RepairAllowEmpty {
		return fmt.Errorf("%w; --repair would move %s to %s and start this node empty: pass --repair-allow-empty as well to do so", err, dir, aside)
	}
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("cluster repair: %w", err)
	}
	if err := SyncParent(dir); err != nil {
		return fmt.Errorf("cluster repair: %w", err)
	}
	logger.Warn("cluster repair: raft state moved aside; the node starts empty", "kept", aside)
	return nil
}

// SyncParent makes a rename in dir's parent durable.
func SyncParent(dir string) error {
	d, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
