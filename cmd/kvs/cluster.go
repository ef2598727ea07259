package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"kvs/cluster"
	"kvs/fsm"
	"kvs/server"
)

// metaRESPAddr is the replicated metadata name under which a node's client
// address is kept, so any node can find the leader's.
func metaRESPAddr(id string) string { return "node/" + id + "/resp" }

// metaSet is the write that sets (or, with an empty value, deletes) a
// replicated metadata name.
func metaSet(name, value string) fsm.Command {
	return fsm.Command{Op: fsm.OpMetaSet, Args: [][]byte{[]byte(name), []byte(value)}}
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

var errProposerStopped = fmt.Errorf("%w: the node is shutting down", server.ErrNotLeader)

func (p *raftProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	pr := &proposal{cmds: cmds, done: make(chan struct{})}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil, errProposerStopped
	}
	p.queue = append(p.queue, pr)
	p.arrivals++
	p.cond.Broadcast()
	p.mu.Unlock()
	<-pr.done
	return pr.replies, pr.err
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
		// A fresh buffer for every entry: raft keeps the slice it is given
		// (in its log cache and replication queues), never a copy.
		entry := fsm.EncodeEntry(make([]byte, 0, entrySizeHint(cmds)), time.Now().UnixMilli(), cmds)
		start := time.Now()
		replies, err := p.apply(entry, len(cmds))
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
		return nil, clusterErr(err)
	}
	replies, ok := res.([]fsm.Reply)
	if !ok || len(replies) != n {
		return nil, fmt.Errorf("%w: the state machine answered %T for %d commands", server.ErrUnknownOutcome, res, n)
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

// clusterErr turns the cluster package's errors into the server's three
// kinds, keeping the detail.
func clusterErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cluster.ErrNotLeader):
		return fmt.Errorf("%w: %v", server.ErrNotLeader, err)
	case errors.Is(err, cluster.ErrUnknownOutcome):
		return fmt.Errorf("%w: %v", server.ErrUnknownOutcome, err)
	case errors.Is(err, cluster.ErrShutdown):
		return fmt.Errorf("%w: %v", server.ErrUnknownOutcome, err)
	}
	return err
}

// clusterView is the server's window on the node: server.Cluster over a
// cluster.Node, with client addresses from the replicated metadata.
type clusterView struct {
	node     *cluster.Node
	store    *fsm.Store
	id       string
	raftAddr string
	respAddr string
	propose  func([]fsm.Command) ([]fsm.Reply, error) // the leader's proposer
}

func (v *clusterView) member(id, raftAddr string, voter bool, leaderID string) server.Member {
	m := server.Member{ID: id, RaftAddr: raftAddr, Voter: voter, Leader: id != "" && id == leaderID}
	m.RESPAddr, _ = v.store.Meta(metaRESPAddr(id))
	if id == v.id && m.RESPAddr == "" {
		m.RESPAddr = v.respAddr
	}
	return m
}

func (v *clusterView) Self() server.Member {
	leaderID, _ := v.node.Leader()
	m := v.member(v.id, v.raftAddr, true, leaderID)
	m.RESPAddr = v.respAddr
	m.Leader = v.node.IsLeader()
	return m
}

func (v *clusterView) Leader() (server.Member, bool) {
	id, addr := v.node.Leader()
	if id == "" {
		return server.Member{}, false
	}
	m := v.member(id, addr, true, id)
	if m.RESPAddr == "" {
		// Elected but its address is not replicated yet: nobody can
		// reach it, which for a client is the same as no leader.
		return m, false
	}
	return m, true
}

func (v *clusterView) Members() ([]server.Member, error) {
	ms, err := v.node.Members()
	if err != nil {
		return nil, clusterErr(err)
	}
	leaderID, _ := v.node.Leader()
	out := make([]server.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, v.member(m.ID, m.RaftAddr, m.Voter, leaderID))
	}
	return out, nil
}

func (v *clusterView) ReadBarrier(ctx context.Context) error {
	return clusterErr(v.node.ReadIndex(ctx))
}

// Join adds the node as a voter, then records its client address. Both are
// idempotent, so an operator (or --join's retry loop) can repeat a join that
// timed out halfway.
func (v *clusterView) Join(ctx context.Context, id, raftAddr, respAddr string) error {
	if !v.node.IsLeader() {
		return server.ErrNotLeader
	}
	if err := v.setMeta(metaRESPAddr(id), respAddr); err != nil {
		return err
	}
	return clusterErr(v.node.AddVoter(id, raftAddr))
}

func (v *clusterView) Remove(ctx context.Context, id string) error {
	if !v.node.IsLeader() {
		return server.ErrNotLeader
	}
	if err := clusterErr(v.node.Remove(id)); err != nil {
		return err
	}
	return v.setMeta(metaRESPAddr(id), "")
}

// setMeta writes a metadata entry through the log, always: the leader's
// store may lag behind its log (a new leader applies what it inherited only
// once its first entry commits), so a value read there may be about to be
// overwritten. A node removed and joined again with the same client address
// would otherwise find its old address still in place, skip the write, and
// lose the address to the removal's pending clear.
func (v *clusterView) setMeta(name, value string) error {
	_, err := v.propose([]fsm.Command{metaSet(name, value)})
	return err
}

func (v *clusterView) CaughtUp() bool { return v.node.CaughtUp() }

func (v *clusterView) AppliedIndex() uint64 { return v.node.AppliedIndex() }

func (v *clusterView) GoodReplicas(maxLag time.Duration) int { return v.node.ReplicasInContact(maxLag) }

func (v *clusterView) WaitApplied(ctx context.Context, index uint64) error {
	return clusterErr(v.node.WaitApplied(ctx, index))
}

func (v *clusterView) Status() server.ClusterStatus {
	st := v.node.Status()
	out := server.ClusterStatus{
		ID:           st.ID,
		State:        st.State,
		Term:         st.Term,
		LastIndex:    st.LastIndex,
		CommitIndex:  st.CommitIndex,
		AppliedIndex: st.AppliedIndex,
		LeaderID:     st.LeaderID,
	}
	d := v.node.ApplyDelay()
	out.ApplyDelayP50, out.ApplyDelayP99 = d.P50, d.P99
	if st.LeaderID != "" {
		out.LeaderAddr, _ = v.store.Meta(metaRESPAddr(st.LeaderID))
	}
	return out
}

// openCluster opens the node's raft state under f.dataDir/raft (bootstrapping
// or waiting to be joined when there is none) over store, and says whether
// there was state before.
func openCluster(f serveFlags, store *fsm.Store, tlsState *server.TLS, logger *slog.Logger) (*cluster.Node, bool, error) {
	dir := filepath.Join(f.dataDir, "raft")
	if err := checkClusterState(f, dir, logger); err != nil {
		return nil, false, err
	}
	had, err := cluster.HasState(dir)
	if err != nil {
		return nil, false, err
	}
	cfg := cluster.Config{
		NodeID:            f.nodeID,
		RaftAddr:          f.raftAddr,
		Dir:               dir,
		Bootstrap:         f.bootstrap,
		FSM:               fsm.NewRaftFSM(store),
		Logger:            logger,
		SnapshotThreshold: f.snapshotEntries,
		TrailingLogs:      f.trailingLogs,
		SnapshotInterval:  f.snapshotEvery,
	}
	if f.tls.clusterOn() {
		cfg.TLS = &cluster.TLS{Listener: tlsState.NodeListenerConfig(), Dial: tlsState.DialConfig}
	}
	node, err := cluster.Open(cfg)
	return node, had, err
}

// advertise keeps this node's client address in the replicated metadata:
// the leader writes its own at once, a follower forwards the write once a
// leader is known. It retries until the address is there or stop closes.
func advertise(stop <-chan struct{}, v *clusterView, srv *server.Server, logger *slog.Logger) {
	name := metaRESPAddr(v.id)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if cur, _ := v.store.Meta(name); cur == v.respAddr {
			return
		}
		if _, ok := v.Leader(); ok || v.node.IsLeader() {
			// Server.Propose proposes on the leader and forwards elsewhere.
			if _, err := srv.Propose([]fsm.Command{metaSet(name, v.respAddr)}); err != nil {
				logger.Debug("advertising the client address", "err", err)
			}
		}
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
	}
}

// joinLoop asks the cluster at addr to add this node, retrying until it
// succeeds or stop closes (--join).
func joinLoop(stop <-chan struct{}, addr string, v *clusterView, logger *slog.Logger) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := joinCluster(addr, v.id, v.raftAddr, v.respAddr)
		if err == nil {
			logger.Info("joined the cluster", "via", addr)
			return
		}
		logger.Warn("joining the cluster failed; retrying", "via", addr, "err", err, "in", wait)
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
	}
}

// checkClusterState checks the node's raft state before it is opened. A
// damaged member is repaired the one safe way: with --repair and
// --repair-allow-empty its raft state is moved aside whole (to raft.broken)
// and the node starts empty, to be caught up by the leader (or to join with
// --join). --repair alone says what it would move and stops.
func checkClusterState(f serveFlags, dir string, logger *slog.Logger) error {
	err := cluster.CheckState(dir, logger)
	if err == nil || !errors.Is(err, cluster.ErrDamaged) || !f.repair {
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
	if !f.repairEmpty {
		return fmt.Errorf("%w; --repair would move %s to %s and start this node empty: pass --repair-allow-empty as well to do so", err, dir, aside)
	}
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("cluster repair: %w", err)
	}
	if err := syncParent(dir); err != nil {
		return fmt.Errorf("cluster repair: %w", err)
	}
	logger.Warn("cluster repair: raft state moved aside; the node starts empty", "kept", aside)
	return nil
}

// syncParent makes a rename in dir's parent durable.
func syncParent(dir string) error {
	d, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// seedLoop proposes the ACL seed (--requirepass, --aclfile) until the
// cluster takes it: it applies once per cluster, only while no ACL change
// was ever made (fsm.ACLSeed), so every node proposing it is harmless.
func seedLoop(stop <-chan struct{}, srv *server.Server, seed fsm.Command, logger *slog.Logger) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		_, err := srv.Propose([]fsm.Command{seed})
		if err == nil {
			return
		}
		logger.Debug("seeding the ACL users failed; retrying", "err", err, "in", wait)
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
	}
}
