package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"kvs/cluster/raftlog"
)

const (
	boltFile = "raft.db"
	// logDir holds the raft log (package raftlog).
	logDir = "log"
	// retainSnapshots: the newest is the one in use, the one before is a
	// fallback if the newest turns out unreadable.
	retainSnapshots = 2
	// logCacheSize entries stay in memory in front of bolt, so followers a
	// few batches behind and the FSM read recent entries without bolt.
	logCacheSize = 512
	// transport settings: connections kept per peer, and the I/O deadline
	// of one RPC (an InstallSnapshot of a large store takes longer, but
	// raft streams it without this deadline).
	transportPool    = 5
	transportTimeout = 10 * time.Second
	// boltOpenTimeout bounds the wait for bolt's file lock, so that a
	// second process on the same Dir fails instead of hanging.
	boltOpenTimeout = time.Second
)

// Node is one member of a Raft cluster: raft, its bolt log and stable store,
// its snapshot store and its TCP transport. All methods are safe for
// concurrent use.
type Node struct {
	cfg   Config
	log   *slog.Logger
	raft  *raft.Raft
	trans *raft.NetworkTransport
	bolt  *raftboltdb.BoltStore // the stable store, and the log of a node from before raftlog
	rlog  *raftlog.Log          // the log, in Dir/log (nil: bolt holds it)
	logs  raft.LogStore         // the log behind raft's log cache
	snaps raft.SnapshotStore    // the snapshots
	// watched is bolt as the log cache sees it, noting failed writes.
	watched *watchedLogs

	// applied is the FSM's progress, for ReadIndex; a leader's barriers
	// move it too. fsmApplied moves only with entries the FSM itself
	// applies (commands, configurations, a restored snapshot's last
	// command): an index every replica's FSM reaches, so a follower can
	// wait for the one a leader reports (WaitApplied).
	applied    progress
	fsmApplied progress
	// applying is set while the FSM applies a batch (waitEntry).
	applying atomic.Bool
	// push tells followers of each commit at once (commitpush.go).
	push *pushTransport
	// delays is how long applied writes took to get here (applydelay.go).
	delays applyDelays

	// startIndex is the last index in the log when the node opened,
	// startApplied the last entry of it the FSM will see, and
	// snapshotIndex the snapshot restored then; caughtUp latches once
	// CaughtUp has seen the store reach what it held before.
	startIndex    uint64
	startApplied  uint64 // the last entry in it the FSM will see
	snapshotIndex uint64
	caughtUp      atomic.Bool
	// readyTerm is the term in which this node, as leader, has seen one of
	// its own entries committed and applied (0: none yet); ReadIndex needs
	// that before it may trust the commit index. barrierSem (a one-slot
	// semaphore a waiter can give up on) makes concurrent ReadIndex calls
	// share one barrier per term.
	readyTerm  atomic.Uint64
	barrierSem chan struct{}

	leaderCh chan bool // LeaderChanges; sent to only by watch

	// snapshotChecks counts the checks of whether a snapshot is due
	// (snapshots.go); snapsDone is closed when they stop.
	snapshotChecks atomic.Int64
	snapsDone      chan struct{}

	closeOnce sync.Once
	closeErr  error
	closing   chan struct{} // closed when Close starts stopping raft
	stopped   chan struct{} // closed once raft has shut down
	watchDone chan struct{} // closed when watch returns
}

// HasState reports whether dir already holds Raft state: a log, a stored
// term or a snapshot. It opens nothing for writing and creates nothing; it
// fails if a running node holds dir's bolt file.
func HasState(dir string) (bool, error) {
	snaps, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("cluster: %w", err)
	}
	for _, e := range snaps {
		if e.IsDir() && !isTempSnapshot(e.Name()) {
			return true, nil
		}
	}
	if has, err := raftlog.HasEntries(filepath.Join(dir, logDir)); err != nil || has {
		return has, err
	}
	path := filepath.Join(dir, boltFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: boltOpenTimeout},
	})
	if err != nil {
		return false, fmt.Errorf("cluster: opening %s: %w", path, err)
	}
	defer store.Close()
	return hasLogOrTerm(store)
}

// isTempSnapshot reports whether name is a snapshot the file store was
// still writing (it names those with a .tmp suffix and ignores them).
func isTempSnapshot(name string) bool { return filepath.Ext(name) == ".tmp" }

// hasLogOrTerm is raft.HasExistingState without the snapshot store. A
// read-only bolt file may lack the buckets a node creates on first open;
// raft-boltdb then reports "not found", which means no state.
func hasLogOrTerm(store *raftboltdb.BoltStore) (bool, error) {
	if term, err := store.GetUint64([]byte("CurrentTerm")); err == nil && term > 0 {
		return true, nil
	}
	last, err := store.LastIndex()
	if err != nil {
		return false, nil
	}
	return last > 0, nil
}

// Open starts a node with the state in cfg.Dir, bootstrapping a new cluster
// first if cfg.Bootstrap is set and Dir holds no state. It returns once raft
// runs; leadership comes later (see IsLeader, LeaderChanges).
func Open(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	rc := cfg.raftConfig()
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := mkdirDurable(cfg.Dir); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n := &Node{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "cluster", "node", cfg.NodeID),
		leaderCh:   make(chan bool, 1),
		barrierSem: make(chan struct{}, 1),
		closing:    make(chan struct{}),
		stopped:    make(chan struct{}),
		watchDone:  make(chan struct{}),
		snapsDone:  make(chan struct{}),
	}
	ok := false
	defer func() {
		if !ok {
			n.closeStores()
		}
	}()

	if err := CheckState(cfg.Dir, n.log); err != nil {
		return nil, err
	}
	var err error
	path := filepath.Join(cfg.Dir, boltFile)
	n.bolt, err = raftboltdb.New(raftboltdb.Options{
		Path: path,
		// As etcd runs bolt: the freelist is rebuilt at open instead of
		// written by every commit (the log is truncated behind snapshots,
		// so the file stays small and the scan short).
		BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: opening %s: %w", path, err)
	}
	base, err := n.openLog(cfg.Dir)
	if err != nil {
		return nil, err
	}
	n.watched = &watchedLogs{LogStore: base, log: n.log}
	cache, err := raft.NewLogCache(logCacheSize, n.watched)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	fileSnaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, retainSnapshots, newHCLogger(cfg.Logger, "raft-snapshots"))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	logs := retainingLogs{LogStore: cache, snaps: fileSnaps}
	snaps := syncedSnapshots{FileSnapshotStore: fileSnaps, dir: filepath.Join(cfg.Dir, "snapshots")}
	// raft.db and snapshots/ may have just been created: make their names
	// durable before anything is written to them.
	if err := syncDir(cfg.Dir); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// advertise nil: raft advertises the bound address, and refuses one
	// such as 0.0.0.0 that peers could not dial.
	switch {
	case cfg.Mux != nil:
		var layer raft.StreamLayer
		if layer, err = cfg.Mux.Layer(cfg.Group); err == nil {
			n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
				Stream: layer, MaxPool: transportPool, Timeout: transportTimeout, Logger: newHCLogger(cfg.Logger, "raft-net"),
			})
		}
	case cfg.TLS != nil:
		n.trans, err = newTLSTransport(cfg.RaftAddr, cfg.TLS, &raft.NetworkTransportConfig{
			MaxPool: transportPool, Timeout: transportTimeout, Logger: newHCLogger(cfg.Logger, "raft-net"),
		})
	default:
		n.trans, err = newTCPTransport(cfg.RaftAddr, &raft.NetworkTransportConfig{
			MaxPool: transportPool, Timeout: transportTimeout, Logger: newHCLogger(cfg.Logger, "raft-net"),
		})
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: raft transport on %s: %w", cfg.RaftAddr, err)
	}

	exists, err := raft.HasExistingState(logs, n.bolt, snaps)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	switch {
	case cfg.Bootstrap && exists:
		n.log.Info("raft state exists; not bootstrapping", "dir", cfg.Dir)
	case cfg.Bootstrap:
		conf := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: n.trans.LocalAddr(),
		}}}
		if len(cfg.BootstrapVoters) > 0 {
			if !slices.ContainsFunc(cfg.BootstrapVoters, func(v Voter) bool { return v.ID == cfg.NodeID }) {
				return nil, fmt.Errorf("cluster: bootstrap: node %s is not one of the voters it bootstraps with", cfg.NodeID)
			}
			conf.Servers = nil
			for _, v := range cfg.BootstrapVoters {
				conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(v.ID), Address: raft.ServerAddress(v.Addr)})
			}
		}
		if err := raft.BootstrapCluster(rc, logs, n.bolt, snaps, n.trans, conf); err != nil {
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
		n.log.Info("bootstrapped a new cluster", "raft_addr", n.trans.LocalAddr())
	}

	// What the store must reach before it may serve reads again
	// (CaughtUp). Nothing is applied before NewRaft.
	n.logs = logs
	if err := n.findStart(logs); err != nil {
		return nil, err
	}
	if r, ok := cfg.FSM.(interface{ SetReplayedThrough(uint64) }); ok {
		// What the log held at open may have been applied, and its
		// writes and messages announced, before the restart: the FSM
		// applies it again without announcing anything. An entry that
		// was only logged then goes unannounced on this node (at most
		// once, never twice).
		r.SetReplayedThrough(n.startIndex)
	}
	n.push = newPushTransport(n.trans, logs, snaps, n.log)
	// findStart ran: startIndex is known before the FSM sees anything.
	fsm := &trackingFSM{BatchingFSM: cfg.FSM, applied: &n.applied, fsmApplied: &n.fsmApplied, applying: &n.applying,
		push: n.push, delays: &n.delays, startIndex: n.startIndex, boltPath: path, bytes: &logBytes{}}
	n.raft, err = raft.NewRaft(rc, fsm, logs, n.bolt, snaps, n.push)
	if err != nil {
		n.push.stop()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.push.start(n.raft)
	// NewRaft restored the newest snapshot, if any, into the FSM.
	if v, err := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64); err == nil {
		n.snapshotIndex = v
	}
	ok = true
	go n.watch()
	n.snaps = snaps
	go n.snapshots(snaps, fsm.bytes)
	return n, nil
}

// closeStores closes what Open opened before raft took them over.
func (n *Node) closeStores() {
	if n.trans != nil {
		n.trans.Close()
	}
	if n.rlog != nil {
		n.rlog.Close()
	}
	if n.bolt != nil {
		n.bolt.Close()
	}
}

// openLog returns the node's raft log: kvs's own (raftlog, in Dir/log)
// for a new node, or bolt's for one whose raft.db holds log entries,
// written before raftlog; such a node keeps it.
func (n *Node) openLog(dir string) (raft.LogStore, error) {
	legacy, err := boltHoldsLog(dir, n.bolt)
	if err != nil || legacy {
		return n.bolt, err
	}
	n.rlog, err = raftlog.Open(raftlog.Options{Dir: filepath.Join(dir, logDir)})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return n.rlog, nil
}

// boltHoldsLog reports whether the node keeps its log in bolt: raft.db
// holds log entries and there is no Dir/log.
func boltHoldsLog(dir string, bolt *raftboltdb.BoltStore) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, logDir)); err == nil {
		return false, nil
	}
	last, err := bolt.LastIndex()
	if err != nil {
		return false, fmt.Errorf("cluster: %w", err)
	}
	return last > 0, nil
}

// watch follows raft's leadership signal for the node's lifetime: it passes
// each change to LeaderChanges and, on becoming leader, commits a barrier so
// that the first ReadIndex of the term need not wait for one.
func (n *Node) watch() {
	defer close(n.watchDone)
	for {
		select {
		case <-n.closing:
			return
		case isLeader := <-n.raft.LeaderCh():
			n.log.Info("leadership changed", "leader", isLeader, "term", n.raft.CurrentTerm())
			n.notify(isLeader)
			if isLeader {
				ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
				if err := n.termReady(ctx); err != nil {
					n.log.Debug("read barrier after election", "err", err)
				}
				cancel()
			}
		}
	}
}

// notify sends isLeader on leaderCh, replacing a value nobody took yet: the
// reader sees the latest state. Only watch sends, so this does not race.
func (n *Node) notify(isLeader bool) {
	select {
	case n.leaderCh <- isLeader:
		return
	default:
	}
	select {
	case <-n.leaderCh:
	default:
	}
	n.leaderCh <- isLeader
}

// LeaderChanges delivers true when this node becomes leader and false when it
// stops being leader. The channel holds one value; a change not yet received
// is replaced by the next, so a slow reader sees the latest state, possibly
// skipping a step (true after true means leadership was lost and regained).
// It has one reader. It is closed by Close.
func (n *Node) LeaderChanges() <-chan bool { return n.leaderCh }

// Addr returns the address the node's Raft transport listens on and
// advertises (RaftAddr with the port chosen when it was 0).
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// Raft returns the underlying raft instance, for metrics and stats. Calls
// that append to the log (Apply, Barrier) should go through Node.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Apply submits entry to the log and waits, at most ApplyTimeout in all, for
// it to be committed and applied here; it returns the FSM's response for it.
// An FSM response that is an error is returned as the error. Other errors
// wrap ErrNotLeader, ErrUnknownOutcome or ErrShutdown (see classify).
func (n *Node) Apply(entry []byte) (any, error) {
	if err := n.checkOpen(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(n.cfg.ApplyTimeout)
	f := n.raft.Apply(seal(entry), n.cfg.ApplyTimeout)
	if err := n.waitEntry(f, time.Until(deadline)); err != nil {
		return nil, err
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// checkOpen returns ErrShutdown once Close has begun or raft has shut down
// (as it does on a node removed from the cluster). Submitting then would be
// worse than useless: raft.Apply may still queue the entry, which nothing
// will ever answer.
func (n *Node) checkOpen() error {
	select {
	case <-n.closing:
		return ErrShutdown
	default:
	}
	if n.raft.State() == raft.Shutdown {
		return ErrShutdown
	}
	return nil
}

// waitEntry waits for an entry's future. raft's futures cannot be
// selected on and raft never answers an entry still queued when it shuts
// down (BatchApplyCh), so a goroutine waits for the answer while this one
// also watches the clock and the node's shutdown; after either, that
// goroutine ends when raft answers, or stays with the stranded entry.
//
// The timeout is for the round, not for the FSM: while the FSM is
// applying when it runs out (an entry that runs a long script, which the
// entries after it wait for), the wait goes on, since raft answers the
// entry once applied, or with an error if this node loses leadership.
func (n *Node) waitEntry(f raft.IndexFuture, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case err := <-done:
			// f.Index is safe to read once Error has returned.
			return classify(err, err != nil && f.Index() != 0)
		case <-timer.C:
			if n.applying.Load() {
				timer.Reset(timeout)
				continue
			}
			return fmt.Errorf("%w: no answer within %v of submission", ErrUnknownOutcome, n.cfg.ApplyTimeout)
		case <-n.stopped:
			select {
			case err := <-done:
				return classify(err, err != nil && f.Index() != 0)
			default:
				return fmt.Errorf("%w: node shut down with the entry queued", ErrUnknownOutcome)
			}
		}
	}
}

// wait waits for a future that is not a log entry (VerifyLeader, a
// leadership transfer), or for ctx, or for Close.
func (n *Node) wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.closing:
		return ErrShutdown
	}
}

// IsLeader reports whether this node is the leader as far as it knows. Only
// ReadIndex confirms it with a quorum.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the leader's ID and Raft address as this node knows them,
// both empty while no leader is known.
func (n *Node) Leader() (id, raftAddr string) {
	addr, sid := n.raft.LeaderWithID()
	return string(sid), string(addr)
}

// TransferLeadership asks raft to hand leadership to the most up-to-date
// follower and waits for the outcome. On a node that is not the leader it
// does nothing and returns nil.
func (n *Node) TransferLeadership() error {
	if !n.IsLeader() || !n.hasOtherVoter() {
		return nil // nothing to hand over, or nobody to hand it to
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.transferWait())
	defer cancel()
	if err := n.wait(ctx, n.raft.LeadershipTransfer()); err != nil {
		return fmt.Errorf("cluster: leadership transfer: %w", err)
	}
	return nil
}

// TransferLeadershipTo hands leadership to the voter id at raftAddr
// (raft catches it up first) and waits for the outcome: a node that leads
// several groups gives each to the node meant to lead it, where
// TransferLeadership would pick whichever follower is most up to date.
// It must run on the leader (ErrNotLeader elsewhere). While raft hands
// over, this node refuses new entries (ErrNotLeader), for at most an
// election timeout.
func (n *Node) TransferLeadershipTo(id, raftAddr string) error {
	if err := n.checkOpen(); err != nil {
		return err
	}
	if !n.IsLeader() {
		return fmt.Errorf("%w: transfer leadership to %s", ErrNotLeader, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.transferWait())
	defer cancel()
	if err := n.wait(ctx, n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(raftAddr))); err != nil {
		return fmt.Errorf("cluster: leadership transfer to %s: %w", id, err)
	}
	return nil
}

// CaughtUp reports whether the store has applied everything this node's
// log held when it opened (what it may have served before a restart), or,
// if the end of that log was never committed and a new leader replaced
// it, whether raft has handed the FSM all of the old log's length. Until
// then its reads would go back in time, so the server refuses them. A
// restarted node can replay its log only once it learns the commit index
// from a leader, so it stays behind while it hears from none. A fresh node
// is caught up at once. It latches: once true, it stays true.
func (n *Node) CaughtUp() bool {
	if n.caughtUp.Load() {
		return true
	}
	if n.startApplied > n.snapshotIndex {
		commit := n.raft.CommitIndex()
		if commit == 0 {
			return false // no leader heard from yet
		}
		// The FSM sees commands and configurations, not raft's no-ops, so
		// the target is the last entry it would see. If that entry was
		// never committed, a new leader may have replaced it: then the
		// target is the last command in the log as it is now, up to the
		// old log's length (a restored snapshot counts commands only),
		// once raft has handed it all over.
		// raft counts an entry applied when it hands it to the FSM, not
		// when the FSM is done, so the FSM's own progress decides.
		if n.applied.index.Load() < n.startApplied {
			if commit < n.startIndex || n.raft.AppliedIndex() < n.startIndex {
				return false
			}
			if i, ok := lastEntry(n.logs, n.startIndex, raft.LogCommand); ok && n.applied.index.Load() < i {
				return false
			}
		}
	}
	n.caughtUp.Store(true)
	return true
}

// findStart records the log's last index and the last entry in it that
// the FSM will see (a command or configuration), looking back a bounded
// number of entries past raft's own no-ops and barriers.
func (n *Node) findStart(logs raft.LogStore) error {
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	n.startIndex, n.startApplied = last, last
	if i, ok := lastEntry(logs, last, raft.LogCommand, raft.LogConfiguration); ok {
		n.startApplied = i
	}
	return nil
}

// lastEntry returns the last entry at or below index of one of types,
// looking back a bounded number of entries (past raft's own no-ops and
// barriers, say); ok is false if there is none within reach.
func lastEntry(logs raft.LogStore, index uint64, types ...raft.LogType) (uint64, bool) {
	for i := index; i > 0 && index-i < 1024; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return 0, false
		}
		if slices.Contains(types, l.Type) {
			return i, true
		}
	}
	return 0, false
}

// hasOtherVoter reports whether the configuration holds a voter besides
// this node.
func (n *Node) hasOtherVoter() bool {
	ms, err := n.Members()
	if err != nil {
		return true // let raft say what is wrong
	}
	for _, m := range ms {
		if m.Voter && m.ID != n.cfg.NodeID {
			return true
		}
	}
	return false
}

// transferWait bounds a leadership transfer: raft gives the target one
// election timeout to win after catching it up.
func (n *Node) transferWait() time.Duration {
	return 2*n.cfg.ElectionTimeout + time.Second
}

// Close stops the node, in this order: hand leadership to another voter if
// this node leads (bounded by a few election timeouts; a failure is logged),
// stop raft (which closes the transport and waits for raft's goroutines),
// stop the leadership watcher, close LeaderChanges, close the bolt file.
// Apply calls still waiting return ErrUnknownOutcome. Close is idempotent;
// later calls return the first call's result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if err := n.TransferLeadership(); err != nil {
			n.log.Warn("closing without handing over leadership", "err", err)
		}
		close(n.closing)
		err := n.raft.Shutdown().Error()
		// raft closed the transport's listener and the connections it
		// accepted (stream.go), but not those it dialled: their
		// goroutines on the other nodes would read on. And a leader that
		// removed itself shut raft down without closing the transport at
		// all, so the Shutdown above did not either: its listener (a Mux
		// layer, which would keep the group's id taken) and its accept
		// loop would outlive the node. Closing it again is harmless.
		n.trans.Close()
		n.trans.CloseStreams()
		n.push.endHeartbeats()
		n.push.stop()
		close(n.stopped)
		<-n.watchDone
		<-n.snapsDone
		close(n.leaderCh)
		if n.rlog != nil {
			if cerr := n.rlog.Close(); err == nil {
				err = cerr
			}
		}
		if cerr := n.bolt.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			n.closeErr = fmt.Errorf("cluster: close: %w", err)
		}
		n.log.Info("raft stopped")
	})
	return n.closeErr
}
