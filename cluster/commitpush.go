package cluster

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Telling followers of a commit at once.
//
// A follower learns that an entry is committed only from the commit index
// the leader puts in its next AppendEntries. hashicorp/raft sends one when
// there are new entries or, with nothing new, after CommitTimeout (raft's
// default is 50 ms, randomised up to twice that); its heartbeats carry no
// commit index. Under steady load the next batch carries the news within a
// round, but at light load a follower learned of each commit 50 to 100 ms
// late: that long its reads missed a write the leader had already
// acknowledged. With the push doing that, kvs sets CommitTimeout to 500 ms
// (config.go), leaving raft's path as the fallback.
//
// pushTransport closes that gap from outside raft. It wraps the node's
// transport, watches the AppendEntries requests raft sends (their header,
// term, the last entry sent to each follower and the commit index each
// carried), and, each time the leader's FSM applies entries (so the commit
// index moved), sends every follower that has not yet been told an empty
// AppendEntries carrying the new commit index, as raft's own CommitTimeout
// path does. Safety rests on raft's log matching check:
//
//   - The request's PrevLogEntry is the commit index C itself, with the
//     term of the leader's entry there. A follower accepts the request only
//     if its entry at C has that term, and then its log matches the
//     leader's up to C (raft's log matching property), so it sets its
//     commit index to min(C, its last index) = C and applies only entries
//     the leader committed. A follower that lacks the entry, or holds
//     another, refuses and changes nothing; raft's own replication then
//     carries the commit index later, as before.
//   - The term and RPC header are copied from a request raft itself sent as
//     leader, so the push speaks for a term this node led. Pushes stop when
//     the node is no longer leader; one that races with a change of leader
//     carries the old term, and a follower that has moved on refuses it.
//   - The response goes to the pusher, never to raft: raft's view of each
//     follower (next index, match index) is its own.
//
// A follower is pushed to only once raft has sent it the entry at C, and
// not when a request raft sent already carried a commit index of at least
// C. Under steady load raft's own requests mostly do.
//
// The same wrapper holds raft's RPCs to a follower that cannot be reached
// (reach.go).
type pushTransport struct {
	*raft.NetworkTransport

	raft   atomic.Pointer[raft.Raft] // set by start, once NewRaft returned
	logs   raft.LogStore             // for the term of the entry at the commit index
	snaps  raft.SnapshotStore        // for the newest snapshot (reach.go)
	log    *slog.Logger
	header atomic.Pointer[pushHeader]

	mu    sync.Mutex // guards peers and stopped
	peers map[raft.ServerID]*pushPeer
	// stopped is set by stop; no pusher starts after it.
	stopped bool
	stopCh  chan struct{}
	wg      sync.WaitGroup // the pushers

	beats      sync.RWMutex // held shared by each heartbeat raft handles (heartbeats.go)
	beatsEnded bool
}

// pushHeader is what a push copies from raft's own requests as leader.
type pushHeader struct {
	rpc    raft.RPCHeader
	term   uint64
	leader []byte
}

// pushPeer is what the transport knows of one follower, and the wake-up of
// its pusher.
type pushPeer struct {
	id   raft.ServerID
	addr atomic.Pointer[raft.ServerAddress]
	// sent is the highest entry index raft has sent the follower in term,
	// told the highest commit index a request to it carried, raft's or a
	// push.
	term atomic.Uint64
	sent atomic.Uint64
	told atomic.Uint64
	wake chan struct{} // one slot: a commit to tell
	// held counts the RPCs to the follower held while it cannot be
	// reached (reach.go).
	held atomic.Int32
	// contact is when the follower last answered an AppendEntries
	// (replication, heartbeat or push), in Unix nanoseconds; 0: never
	// (contact.go).
	contact atomic.Int64
	// last is the follower's last log index as its latest answer gave
	// it; nil: none since it was added (contact.go).
	last atomic.Pointer[followerLog]
}

// pushRetries bounds the tries to tell one follower of one commit index
// when it refuses (raft's entries to it still on their way, or a busy
// follower); the waits between them start at pushRetryWait and double
// (about a quarter of a second in all).
const (
	pushRetries   = 9
	pushRetryWait = time.Millisecond
)

func newPushTransport(trans *raft.NetworkTransport, logs raft.LogStore, snaps raft.SnapshotStore, log *slog.Logger) *pushTransport {
	return &pushTransport{
		NetworkTransport: trans,
		logs:             logs,
		snaps:            snaps,
		log:              log,
		peers:            make(map[raft.ServerID]*pushPeer),
		stopCh:           make(chan struct{}),
	}
}

// start gives the transport the raft instance it serves. NewRaft starts
// as a follower, and only a leader's applies are pushed, so nothing is
// missed before it.
func (t *pushTransport) start(r *raft.Raft) { t.raft.Store(r) }

// AppendEntriesPipeline is raft's pipeline, with its requests watched.
func (t *pushTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &watchedPipeline{AppendPipeline: p, t: t, id: id, target: target}, nil
}

type watchedPipeline struct {
	raft.AppendPipeline
	t      *pushTransport
	id     raft.ServerID
	target raft.ServerAddress
}

func (w *watchedPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	w.t.observe(w.id, w.target, args)
	return w.AppendPipeline.AppendEntries(args, resp)
}

// observe records what a request raft sends as leader says: its header and
// term, and for the follower the last entry sent and the commit index.
func (t *pushTransport) observe(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest) {
	if h := t.header.Load(); h == nil || h.term != args.Term {
		t.header.Store(&pushHeader{rpc: args.RPCHeader, term: args.Term, leader: args.Leader})
	}
	p := t.peer(id)
	if p == nil {
		return
	}
	if a := p.addr.Load(); a == nil || *a != target {
		p.addr.Store(&target)
	}
	last := args.PrevLogEntry
	if n := len(args.Entries); n > 0 {
		last = args.Entries[n-1].Index
	}
	if p.term.Swap(args.Term) != args.Term {
		// A new term: what was sent in an old one says nothing now.
		p.sent.Store(last)
		p.told.Store(args.LeaderCommitIndex)
	} else {
		storeMax(&p.sent, last)
		storeMax(&p.told, args.LeaderCommitIndex)
	}
	// raft read the commit index when it built the request; if a commit
	// came since, the pusher may have skipped this follower (the entry not
	// sent yet), and nothing else would tell it.
	// (A heartbeat, which carries no log position, tells nothing.)
	heartbeat := args.PrevLogEntry == 0 && len(args.Entries) == 0
	if r := t.raft.Load(); r != nil && !heartbeat && args.LeaderCommitIndex < r.CommitIndex() {
		p.poke()
	}
}

// poke wakes the follower's pusher.
func (p *pushPeer) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// peer returns the follower's record, starting its pusher the first time;
// nil once stopped.
func (t *pushTransport) peer(id raft.ServerID) *pushPeer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.peers[id]; ok || t.stopped {
		return p
	}
	p := &pushPeer{id: id, wake: make(chan struct{}, 1)}
	t.peers[id] = p
	t.wg.Add(1)
	go t.push(p)
	return p
}

// committed is called after the FSM applied entries: on the leader, the
// commit index moved, and every follower's pusher is woken.
func (t *pushTransport) committed() {
	if t == nil {
		return
	}
	if r := t.raft.Load(); r == nil || r.State() != raft.Leader {
		return
	}
	t.mu.Lock()
	for _, p := range t.peers {
		p.poke()
	}
	t.mu.Unlock()
}

// push tells one follower of each new commit index, until stop.
func (t *pushTransport) push(p *pushPeer) {
	defer t.wg.Done()
	retry := time.NewTimer(0)
	<-retry.C
	for {
		select {
		case <-p.wake:
		case <-t.stopCh:
			return
		}
		for try := 1; ; try++ {
			if t.pushOnce(p) || try == pushRetries {
				break
			}
			retry.Reset(pushRetryWait << (try - 1))
			select {
			case <-retry.C:
			case <-p.wake:
				retry.Stop()
			case <-t.stopCh:
				return
			}
		}
	}
}

// pushOnce sends the follower the leader's commit index if it has to be
// told; it reports false when the follower refused and a retry may help.
func (t *pushTransport) pushOnce(p *pushPeer) bool {
	r := t.raft.Load()
	if r == nil || r.State() != raft.Leader {
		return true
	}
	h, addr := t.header.Load(), p.addr.Load()
	commit := r.CommitIndex()
	if h == nil || addr == nil || commit == 0 || p.term.Load() != h.term || p.told.Load() >= commit || p.sent.Load() < commit {
		return true // nothing to tell, or raft's own entries will tell it
	}
	var entry raft.Log
	if err := t.logs.GetLog(commit, &entry); err != nil || entry.Term > h.term {
		return true
	}
	req := raft.AppendEntriesRequest{
		RPCHeader:         h.rpc,
		Term:              h.term,
		Leader:            h.leader,
		PrevLogEntry:      commit,
		PrevLogTerm:       entry.Term,
		LeaderCommitIndex: commit,
	}
	var resp raft.AppendEntriesResponse
	if err := t.NetworkTransport.AppendEntries(p.id, *addr, &req, &resp); err != nil {
		return true // the link is down: raft's own replication deals with it
	}
	p.answered()
	p.reported(resp.LastLog)
	if resp.Success {
		storeMax(&p.told, commit)
		return true
	}
	return resp.Term > h.term // a newer term: stop; else the entry is on its way
}

// stop ends the pushers and waits for them (one in the middle of a push
// returns once that RPC does). Idempotent.
func (t *pushTransport) stop() {
	t.mu.Lock()
	if !t.stopped {
		t.stopped = true
		close(t.stopCh)
	}
	t.mu.Unlock()
	t.wg.Wait()
}

func storeMax(v *atomic.Uint64, x uint64) {
	for {
		cur := v.Load()
		if x <= cur || v.CompareAndSwap(cur, x) {
			return
		}
	}
}
