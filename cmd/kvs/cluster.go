package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"kvs/cluster"
	"kvs/fsm"
	"kvs/server"
)

// metaRESPAddr is the replicated metadata name under which a node's client
// address is kept, so any node can find the leader's.
func metaRESPAddr(id string) string { return "node/" + id + "/resp" }

// raftProposer is the proposer of a cluster leader: a batch becomes one raft
// log entry; the FSM applies it on every node after commit, and the leader
// hands back its replies. Followers never call it: the server forwards their
// writes to the leader.
type raftProposer struct {
	node *cluster.Node
}

func (p raftProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	entry := fsm.EncodeEntry(make([]byte, 0, 64), time.Now().UnixMilli(), cmds)
	res, err := p.node.Apply(entry)
	if err != nil {
		return nil, clusterErr(err)
	}
	replies, ok := res.([]fsm.Reply)
	if !ok {
		return nil, fmt.Errorf("%w: the state machine answered %T", server.ErrUnknownOutcome, res)
	}
	return replies, nil
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

func (v *clusterView) setMeta(name, value string) error {
	if cur, _ := v.store.Meta(name); cur == value {
		return nil
	}
	_, err := v.propose([]fsm.Command{{Op: fsm.OpMetaSet, Args: [][]byte{[]byte(name), []byte(value)}}})
	return err
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
	if st.LeaderID != "" {
		out.LeaderAddr, _ = v.store.Meta(metaRESPAddr(st.LeaderID))
	}
	return out
}

// openCluster opens the node's raft state under f.dataDir/raft (bootstrapping
// or waiting to be joined when there is none) over store, and says whether
// there was state before.
func openCluster(f serveFlags, store *fsm.Store, logger *slog.Logger) (*cluster.Node, bool, error) {
	dir := filepath.Join(f.dataDir, "raft")
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
			cmd := fsm.Command{Op: fsm.OpMetaSet, Args: [][]byte{[]byte(name), []byte(v.respAddr)}}
			var err error
			if v.node.IsLeader() {
				_, err = v.propose([]fsm.Command{cmd})
			} else {
				_, err = srv.Propose([]fsm.Command{cmd})
			}
			if err != nil {
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
