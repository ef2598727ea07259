package cluster

import (
	"time"

	"github.com/hashicorp/raft"
)

// The leader's contact with its followers, for Redis's min-replicas-to-write:
// a replica is good while it has acknowledged its master within
// min-replicas-max-lag seconds. raft keeps the time each follower last
// answered its leader, but not where anyone else can read it, so the
// transport keeps its own: the time of each follower's last answer to an
// AppendEntries, raft's replication and heartbeats (sent every tenth of
// HeartbeatTimeout even while the pipeline carries the entries) or a
// commit push. An RPC held while the follower cannot be reached (reach.go)
// is no answer.

// answered records that the follower answered just now.
func (p *pushPeer) answered() { p.contact.Store(time.Now().UnixNano()) }

// reported records the follower's last log index, as an answer to an
// AppendEntries (raft's, or a push) gave it, with the time.
func (p *pushPeer) reported(last uint64) {
	p.last.Store(&followerLog{index: last, at: time.Now().UnixNano()})
}

// followerLog is a follower's last log index as it last reported it, and
// when (Unix nanoseconds).
type followerLog struct {
	index uint64
	at    int64
}

// ReplicasInContact returns how many of the other servers of the
// configuration, voters and non-voters, answered this node within the last
// d while it led: its good replicas. It is 0 on a node that is not the
// leader, which has no replicas of its own.
func (n *Node) ReplicasInContact(d time.Duration) int {
	if n.raft.State() != raft.Leader {
		return 0
	}
	servers, err := n.servers()
	if err != nil {
		return 0
	}
	since := time.Now().Add(-d).UnixNano()
	good := 0
	for _, s := range servers {
		if s.ID == raft.ServerID(n.cfg.NodeID) {
			continue
		}
		if n.push.lastContact(s.ID) >= since {
			good++
		}
	}
	return good
}

// InContact reports whether the follower id answered this node within the
// last d while it led: whether leadership handed to it would likely be
// taken up, rather than stall the group's writes for an election timeout
// and fail. It is false on a node that is not the leader.
func (n *Node) InContact(id string, d time.Duration) bool {
	if n.raft.State() != raft.Leader {
		return false
	}
	return n.push.lastContact(raft.ServerID(id)) >= time.Now().Add(-d).UnixNano()
}

// FollowerIndex returns the last index of the follower id's log as it
// reported it, answering this leader within the last d, and whether it
// did: how far a new replica has caught up (an AppendEntries answer,
// heartbeats included, carries the follower's last index; raft keeps its
// own match index to itself). It is false on a node that is not the
// leader, and for a follower that has not answered since it was last
// added (AddNonvoter).
func (n *Node) FollowerIndex(id string, d time.Duration) (uint64, bool) {
	if n.raft.State() != raft.Leader {
		return 0, false
	}
	n.push.mu.Lock()
	p := n.push.peers[raft.ServerID(id)]
	n.push.mu.Unlock()
	if p == nil {
		return 0, false
	}
	l := p.last.Load()
	if l == nil || l.at < time.Now().Add(-d).UnixNano() {
		return 0, false
	}
	return l.index, true
}

// forget drops what the follower id reported: a server added anew may be
// another replica than the one that answered before (emptied, reopened).
func (t *pushTransport) forget(id raft.ServerID) {
	t.mu.Lock()
	p := t.peers[id]
	t.mu.Unlock()
	if p != nil {
		p.last.Store(nil)
	}
}

// lastContact is when the follower id last answered, in Unix nanoseconds;
// 0 if it never did.
func (t *pushTransport) lastContact(id raft.ServerID) int64 {
	t.mu.Lock()
	p := t.peers[id]
	t.mu.Unlock()
	if p == nil {
		return 0
	}
	return p.contact.Load()
}
