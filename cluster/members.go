package cluster

import (
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
