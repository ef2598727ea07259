package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/raft"
)

// Member is one server in the Raft configuration.
type Member struct {
	ID       string
	RaftAddr string
	Voter    bool // false for a non-voter
	Leader   bool // the leader as this node knows it
}

// Members lists the latest Raft configuration (possibly not yet committed),
// sorted by ID.
func (n *Node) Members() ([]Member, error) {
	servers, err := n.servers()
	if err != nil {
		return nil, err
	}
	_, leaderID := n.raft.LeaderWithID()
	out := make([]Member, 0, len(servers))
	for _, s := range servers {
		out = append(out, Member{
			ID:       string(s.ID),
			RaftAddr: string(s.Address),
			Voter:    s.Suffrage == raft.Voter,
			Leader:   s.ID == leaderID,
		})
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (n *Node) servers() ([]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		if err == raft.ErrRaftShutdown {
			return nil, fmt.Errorf("%w: %v", ErrShutdown, err)
		}
		return nil, fmt.Errorf("cluster: configuration: %w", err)
	}
	return f.Configuration().Servers, nil
}

// AddVoter adds the node id, reachable for Raft at raftAddr, as a voter and
// waits for the change to commit. It must run on the leader (ErrNotLeader
// elsewhere). If id is already a voter at raftAddr it does nothing; a known
// id at another address is moved there. Errors are classified as Apply's.
func (n *Node) AddVoter(id, raftAddr string) error {
	if err := n.checkOpen(); err != nil {
		return err
	}
	if !n.IsLeader() {
		return fmt.Errorf("%w: add voter %s", ErrNotLeader, id)
	}
	servers, err := n.servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if string(s.ID) == id && string(s.Address) == raftAddr && s.Suffrage == raft.Voter {
			return nil
		}
	}
	f := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout)
	if err := n.waitEntry(f, n.cfg.ApplyTimeout); err != nil {
		return fmt.Errorf("add voter %s at %s: %w", id, raftAddr, err)
	}
	n.log.Info("added voter", "id", id, "raft_addr", raftAddr)
	return nil
}

// AddNonvoter adds the node id, reachable for Raft at raftAddr, as a
// non-voter, and waits for the change to commit: the leader replicates to
// it (a snapshot first, when its log is far behind) but does not count it
// in any majority, so a new replica catches up without slowing the
// group's writes or putting its quorum at risk. It must run on the leader
// (ErrNotLeader elsewhere). A server already in the configuration under
// id at raftAddr, voter or not, is left as it is. What the follower
// reported before is forgotten (FollowerIndex): it counts from its
// answers to this change on. Errors are classified as Apply's.
func (n *Node) AddNonvoter(id, raftAddr string) error {
	if err := n.checkOpen(); err != nil {
		return err
	}
	if !n.IsLeader() {
		return fmt.Errorf("%w: add non-voter %s", ErrNotLeader, id)
	}
	servers, err := n.servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if string(s.ID) == id && string(s.Address) == raftAddr {
			return nil
		}
	}
	n.push.forget(raft.ServerID(id))
	f := n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout)
	if err := n.waitEntry(f, n.cfg.ApplyTimeout); err != nil {
		return fmt.Errorf("add non-voter %s at %s: %w", id, raftAddr, err)
	}
	n.log.Info("added non-voter", "id", id, "raft_addr", raftAddr)
	return nil
}

// CommitConfiguration commits the current configuration again, as a new
// entry that changes nothing, and returns that entry's index and the
// members it holds: a pair that is true of the group's log, which a node
// that missed its own removal can compare with its log (raft tells a
// configuration's index to no one). It must run on the leader
// (ErrNotLeader elsewhere), and the configuration must not change
// meanwhile: raft takes one change at a time, and a change made between
// reading the members and committing the entry is reported as an error
// rather than paired with the wrong index.
func (n *Node) CommitConfiguration() (uint64, []Member, error) {
	if err := n.checkOpen(); err != nil {
		return 0, nil, err
	}
	if !n.IsLeader() {
		return 0, nil, fmt.Errorf("%w: commit configuration", ErrNotLeader)
	}
	before, err := n.Members()
	if err != nil {
		return 0, nil, err
	}
	// Adding the leader as the voter it is, at the address the
	// configuration has for it: the same configuration, in an entry of
	// its own.
	i := slices.IndexFunc(before, func(m Member) bool { return m.ID == n.cfg.NodeID })
	if i < 0 || !before[i].Voter {
		return 0, nil, fmt.Errorf("%w: commit configuration: this node is no voter of it", ErrNotLeader)
	}
	f := n.raft.AddVoter(raft.ServerID(n.cfg.NodeID), raft.ServerAddress(before[i].RaftAddr), 0, n.cfg.ApplyTimeout)
	if err := n.waitEntry(f, n.cfg.ApplyTimeout); err != nil {
		return 0, nil, fmt.Errorf("commit configuration: %w", err)
	}
	after, err := n.Members()
	if err != nil {
		return 0, nil, err
	}
	if !sameMembers(before, after) {
		return 0, nil, errors.New("cluster: commit configuration: the configuration changed meanwhile")
	}
	return f.Index(), after, nil
}

// sameMembers reports whether a and b (sorted by ID) name the same servers
// at the same addresses with the same votes.
func sameMembers(a, b []Member) bool {
	return slices.EqualFunc(a, b, func(x, y Member) bool {
		return x.ID == y.ID && x.RaftAddr == y.RaftAddr && x.Voter == y.Voter
	})
}

// Remove takes the node id out of the configuration and waits for the
// change to commit. It must run on the leader (ErrNotLeader elsewhere); an
// id not in the configuration is no error. A leader may remove itself: it
// steps down once the change commits. A removed node's raft shuts down.
func (n *Node) Remove(id string) error {
	if err := n.checkOpen(); err != nil {
		return err
	}
	if !n.IsLeader() {
		return fmt.Errorf("%w: remove %s", ErrNotLeader, id)
	}
	servers, err := n.servers()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == id }) {
		return nil
	}
	f := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout)
	if err := n.waitEntry(f, n.cfg.ApplyTimeout); err != nil {
		return fmt.Errorf("remove %s: %w", id, err)
	}
	n.log.Info("removed server", "id", id)
	return nil
}

// Status is one node's view of the cluster.
type Status struct {
	ID    string
	State string // "leader", "follower", "candidate" or "shutdown"
	Term  uint64
	// LastIndex is the last index in the node's log (or snapshot),
	// CommitIndex the highest it knows committed, AppliedIndex the highest
	// raft has handed to the FSM.
	LastIndex, CommitIndex, AppliedIndex uint64
	// LeaderID and LeaderRaftAddr are empty while no leader is known.
	LeaderID, LeaderRaftAddr string
}

// Status returns the node's current view; it does not block on raft.
func (n *Node) Status() Status {
	addr, id := n.raft.LeaderWithID()
	return Status{
		ID:             n.cfg.NodeID,
		State:          strings.ToLower(n.raft.State().String()),
		Term:           n.raft.CurrentTerm(),
		LastIndex:      n.raft.LastIndex(),
		CommitIndex:    n.raft.CommitIndex(),
		AppliedIndex:   n.raft.AppliedIndex(),
		LeaderID:       string(id),
		LeaderRaftAddr: string(addr),
	}
}
