package server

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// Reads on a READONLY connection of a follower: a cluster-aware client
// (go-redis's ClusterClient with ReadOnly, redis-cli -c) sends its writes
// to the leader on one connection and its reads to a follower on another,
// so the follower cannot know which writes the client has seen
// acknowledged. Before the first read of each pipeline such a connection
// sends, the follower asks the leader for its applied index (KVS.SYNC, one
// round trip carrying no data) and waits until its own store has applied
// that much. Every write the leader acknowledged before the read arrived is
// then visible to it, whichever node it went through.
//
// Concurrent reads share round trips: at most one KVS.SYNC is in flight
// and one more is queued, which every read that arrives meanwhile joins
// (the queued one is sent after they arrived, as each needs).
//
// When there is no leader to ask, or it does not answer, or the store does
// not catch up, within catchUpTimeout each, the read is served from the store as
// it is, as a Redis replica serves reads while its master is away, and
// counted (kvs_replica_reads_unsynced in INFO stats).

// replicaSync is the round trips in flight and queued.
type replicaSync struct {
	mu       sync.Mutex // guards the fields below
	inflight *syncRound
	next     *syncRound
}

type syncRound struct {
	done  chan struct{} // closed once index and err are set
	index uint64
	err   error
}

// syncReplica waits until group g's store has applied every write its
// leader had applied when it was called; it reports whether it got there.
func (s *Server) syncReplica(g *groupRef) bool {
	index, err := s.leaderIndex(g)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
		err = g.raft.WaitApplied(ctx, index)
		cancel()
	}
	if err != nil {
		s.stats.unsyncedReplicaReads.Add(1)
		s.cfg.Logger.Debug("server: replica read served without the leader's index", "err", err)
		return false
	}
	return true
}

// leaderIndex returns the leader's applied index, asked after the call
// began, sharing the question with concurrent callers.
func (s *Server) leaderIndex(g *groupRef) (uint64, error) {
	rs := &g.rsync
	rs.mu.Lock()
	if r := rs.next; r != nil {
		// A round not sent yet: it will be sent after this call began.
		rs.mu.Unlock()
		<-r.done
		return r.index, r.err
	}
	r := &syncRound{done: make(chan struct{})}
	prev := rs.inflight
	rs.next = r
	rs.mu.Unlock()
	if prev != nil {
		<-prev.done
	}
	rs.mu.Lock()
	rs.next, rs.inflight = nil, r
	rs.mu.Unlock()

	r.index, r.err = s.askLeaderIndex(g)

	rs.mu.Lock()
	if rs.inflight == r {
		rs.inflight = nil
	}
	rs.mu.Unlock()
	close(r.done)
	return r.index, r.err
}

var syncRequest = encodeArgs("KVS.SYNC")

// askLeaderIndex sends KVS.SYNC to g's leader: KVS.SYNC <group> for a
// group other than the home one.
func (s *Server) askLeaderIndex(g *groupRef) (uint64, error) {
	addr, err := s.leaderAddr(g)
	if err != nil {
		return 0, err
	}
	req := syncRequest
	if g.index != 0 {
		req = encodeArgs("KVS.SYNC", strconv.Itoa(g.index))
	}
	r, err := s.peers.roundTrip(addr, catchUpTimeout, func(*peerConn) net.Buffers {
		return net.Buffers{req}
	})
	if err != nil {
		return 0, err
	}
	if r.kind == '-' {
		return 0, &remoteError{r.text}
	}
	index, err := strconv.ParseUint(r.text, 10, 64)
	if r.kind != '+' || err != nil {
		return 0, fmt.Errorf("%w: the leader at %s answered KVS.SYNC with %c%s", ErrLeaderUnreachable, addr, r.kind, r.text)
	}
	return index, nil
}

// runSync answers KVS.SYNC [group] on the group's leader with its applied
// index, as a status reply; elsewhere with the error a read gets there.
func runSync(c *client, args [][]byte) {
	g, e := c.s.router.groupArg(args[1:])
	if e != "" {
		c.out = appendError(c.out, e)
		return
	}
	if g == nil {
		c.out = appendError(c.out, errProposal(ErrNotLeader, false))
		return
	}
	cl := g.raft
	switch {
	case g.remote():
		c.out = appendError(c.out, errProposal(ErrNotLeader, false))
	case cl == nil:
		c.out = appendError(c.out, errClusterDisabled)
	case !cl.Self().Leader:
		c.out = appendError(c.out, errProposal(ErrNotLeader, false))
	default:
		c.out = append(c.out, '+')
		c.out = strconv.AppendUint(c.out, cl.AppliedIndex(), 10)
		c.out = append(c.out, '\r', '\n')
	}
}
