package main

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"kvs/cluster"
	"kvs/fsm"
	"kvs/group"
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

// clusterView is the server's window on the node: server.Cluster over a
// cluster.Node, with client addresses from the replicated metadata.
type clusterView struct {
	node     *cluster.Node
	store    *fsm.Store
	id       string
	raftAddr string
	respAddr string
	propose  func([]fsm.Command) ([]fsm.Reply, error) // the leader's proposer
	// keeper is the node's side of the cluster's level: set on the
	// meta group's view, nil on a data group's.
	keeper *levelKeeper
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
		return nil, group.RaftErr(err)
	}
	leaderID, _ := v.node.Leader()
	out := make([]server.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, v.member(m.ID, m.RaftAddr, m.Voter, leaderID))
	}
	return out, nil
}

func (v *clusterView) ReadBarrier(ctx context.Context) error {
	return group.RaftErr(v.node.ReadIndex(ctx))
}

// Join and Remove write their metadata through the log, always: the
// leader's store may lag behind its log (a new leader applies what it
// inherited only once its first entry commits), so a value read there may
// be about to be overwritten. A node removed and joined again with the same
// client address would otherwise find its old address still in place, skip
// the write, and lose the address to the removal's pending clear.

// Join records the node's client address and the level it applies, then
// adds it as a voter, if that level is the cluster's or above
// (levelKeeper.admit). Both steps are idempotent, so an operator (or
// --join's retry loop) can repeat a join that timed out halfway.
func (v *clusterView) Join(ctx context.Context, id, raftAddr, respAddr string, level int) error {
	if !v.node.IsLeader() {
		return server.ErrNotLeader
	}
	return v.keeper.admit(ctx, id, respAddr, level, func(level int) error {
		// Always through the log (see above), and the level with the
		// address: until the node publishes its own, the lowest level of
		// the members counts the one it has.
		cmds := []fsm.Command{metaSet(metaRESPAddr(id), respAddr)}
		if level >= 0 {
			cmds = append(cmds, metaSet(group.NodeLevelMeta(id), strconv.Itoa(level)))
		}
		if _, err := v.propose(cmds); err != nil {
			return err
		}
		return group.RaftErr(v.node.AddVoter(id, raftAddr))
	})
}

func (v *clusterView) Remove(ctx context.Context, id string) error {
	if !v.node.IsLeader() {
		return server.ErrNotLeader
	}
	if err := group.RaftErr(v.node.Remove(id)); err != nil {
		return err
	}
	_, err := v.propose([]fsm.Command{metaSet(metaRESPAddr(id), ""), metaSet(group.NodeLevelMeta(id), "")})
	return err
}

func (v *clusterView) CaughtUp() bool { return v.node.CaughtUp() }

func (v *clusterView) AppliedIndex() uint64 { return v.node.AppliedIndex() }

func (v *clusterView) GoodReplicas(maxLag time.Duration) int { return v.node.ReplicasInContact(maxLag) }

func (v *clusterView) WaitApplied(ctx context.Context, index uint64) error {
	return group.RaftErr(v.node.WaitApplied(ctx, index))
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
		ApplyLevel:   fsm.ApplyLevel,
		ClusterLevel: group.Levels{Meta: v.store.Meta}.Cluster(),
	}
	d := v.node.ApplyDelay()
	out.ApplyDelayP50, out.ApplyDelayP99 = d.P50, d.P99
	if st.LeaderID != "" {
		out.LeaderAddr, _ = v.store.Meta(metaRESPAddr(st.LeaderID))
	}
	return out
}

// advertise keeps this node's client address and its level
// (levelKeeper.publishes) in the replicated metadata: the leader writes
// them at once, a follower forwards the write once a leader is known. It
// retries until both are there or stop closes. The writes are OpMetaSet,
// which a kvs of every level applies, and a kvs from before levels keeps
// the level without reading it.
func advertise(stop <-chan struct{}, v *clusterView, srv *server.Server, logger *slog.Logger) {
	name := metaRESPAddr(v.id)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var cmds []fsm.Command
		if cur, _ := v.store.Meta(name); cur != v.respAddr {
			cmds = append(cmds, metaSet(name, v.respAddr))
		}
		cmds = append(cmds, v.keeper.publishes()...)
		if len(cmds) == 0 {
			return
		}
		if _, ok := v.Leader(); ok || v.node.IsLeader() {
			// Server.Propose proposes on the leader and forwards elsewhere.
			if _, err := srv.Propose(cmds); err != nil {
				logger.Debug("advertising the client address and level", "err", err)
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
func joinLoop(stop <-chan struct{}, addr string, v *clusterView, sh shape, logger *slog.Logger) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := joinCluster(addr, v.id, v.raftAddr, v.respAddr, sh, fsm.ApplyLevel)
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
