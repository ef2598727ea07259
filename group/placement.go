package group

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"kvs/cluster"
)

// Placement: which nodes hold a replica of which group. Group 0, the meta
// group, is on every node as a voter; its configuration is the cluster's
// membership (KVS.JOIN and KVS.REMOVE change it). Each data group has r
// replicas on r of those nodes, chosen by Placement from group 0's voters
// alone, so that every node works out the same placement without talking.
//
// Each node moves the groups it leads toward the placement now and then
// (Reconcile): a replica the placement names and the group lacks is added
// as a non-voter, catches up (a snapshot, then the log), and is promoted;
// only when every replica the placement names is a voter does the leader
// remove the ones it no longer names, others first, and hand its own
// leadership to the group's preferred leader when it is one of those. So a
// group never has fewer voters than the placement asks for, and a voter
// removed is replaced first. The state drives it, not a plan in memory: a
// new leader of a group picks up where the old one stopped, and a change
// half made is finished by the next round.
//
// A removed replica often never learns of its removal (the leader stops
// sending to it), so it cannot tell from its own log whether it may delete
// its state. The leader therefore commits its configuration again and
// publishes the pair (its index, its members) in group 0's metadata (a
// Membership); a replica that the pair leaves out, and whose log ends at
// or before its index, holds no entry the group still needs of it, and
// may delete its state (Membership.Dropped). A replica added again later
// gets an entry past that index, and is promoted only once its log holds
// that entry (catchUpTarget), so it never counts as a voter on state it
// has deleted.

// Placement returns the nodes that hold group id's replicas, of voters
// (group 0's voters; the order and repeats do not matter) when each group
// has r: group 0 on every voter, in id order; data group id on r voters
// consecutive in id order, from the one at id modulo their count,
// wrapping. r is capped at the number of voters, and r <= 0 means every
// voter. The first node is the group's preferred leader (PreferredLeader
// for group 0 and for a group on every voter), so data groups 1..n of n
// nodes are led one by each, and each node holds about r/n of the groups.
// It returns nil for no voters.
func Placement(id uint32, voters []string, r int) []string {
	sorted := slices.Clone(voters)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	n := len(sorted)
	if n == 0 {
		return nil
	}
	if id == 0 || r <= 0 || r > n {
		r = n
	}
	start := int(id % uint32(n))
	out := make([]string, r)
	for i := range out {
		out[i] = sorted[(start+i)%n]
	}
	return out
}

// A Membership is a data group's configuration as its leader publishes it
// in group 0's metadata: the members at a log index of the group's that a
// committed configuration entry holds (cluster.Node.CommitConfiguration).
type Membership struct {
	Index     uint64   `json:"index"`
	Voters    []string `json:"voters"`
	Nonvoters []string `json:"nonvoters,omitempty"`
}

// Encode is m as group 0's metadata holds it.
func (m Membership) Encode() string {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // strings and a number always encode
	}
	return string(b)
}

// ParseMembership reads a Membership that Encode wrote.
func ParseMembership(s string) (Membership, error) {
	var m Membership
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return Membership{}, fmt.Errorf("group: membership %q: %w", s, err)
	}
	return m, nil
}

// Holds reports whether id is a member, voter or not.
func (m Membership) Holds(id string) bool {
	return slices.Contains(m.Voters, id) || slices.Contains(m.Nonvoters, id)
}

// Dropped reports whether the replica of node id whose log ends at
// lastIndex may delete its state: the group left it out at an index its
// log does not go past, so it holds no entry that any configuration
// counting it came with.
func (m Membership) Dropped(id string, lastIndex uint64) bool {
	return m.Index > 0 && !m.Holds(id) && lastIndex <= m.Index
}

// Same reports whether m and members list the same voters and non-voters.
func (m Membership) Same(members []cluster.Member) bool {
	return slices.Equal(m.Voters, membersOf(members, true)) && slices.Equal(m.Nonvoters, membersOf(members, false))
}

// membersOf returns the ids of the voters (voter true) or non-voters of
// members, in members' order.
func membersOf(members []cluster.Member, voter bool) []string {
	var out []string
	for _, m := range members {
		if m.Voter == voter {
			out = append(out, m.ID)
		}
	}
	return out
}

// CommitMembership commits the group's configuration again and returns it
// with that entry's index, for its leader to publish. Errors are
// cluster.Node.CommitConfiguration's (ErrNotLeader off the leader).
func (g *Group) CommitMembership() (Membership, error) {
	index, members, err := g.node.CommitConfiguration()
	if err != nil {
		return Membership{}, err
	}
	return Membership{Index: index, Voters: membersOf(members, true), Nonvoters: membersOf(members, false)}, nil
}

// IsVoter reports whether this node is a voter of the group as its replica
// knows the configuration.
func (g *Group) IsVoter() bool {
	ms, err := g.node.Members()
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.ID == g.owner.o.NodeID {
			return m.Voter
		}
	}
	return false
}

// followerWindow is how recently a non-voter must have reported its log
// for it to count as caught up: an old report may be of a replica since
// closed.
const followerWindow = 2 * time.Second

// Reconcile is one step of placement for each data group this node leads:
// it brings the group's configuration toward Placement of group 0's
// voters with r replicas a group (see above). It returns the changes'
// errors, each naming its group; a group whose leadership moved meanwhile
// is left to its new leader.
func (n *Node) Reconcile(r int) error {
	g0 := n.Group(0)
	if g0 == nil {
		return nil
	}
	members, err := g0.node.Members()
	if err != nil {
		return fmt.Errorf("group 0: %w", err)
	}
	var voters []string
	addrs := map[string]string{} // id -> raft address
	for _, m := range members {
		if m.Voter {
			voters = append(voters, m.ID)
			addrs[m.ID] = m.RaftAddr
		}
	}
	var errs []error
	for _, g := range n.Groups() {
		if g.id == 0 || !g.node.IsLeader() {
			continue
		}
		err := n.reconcileGroup(g, Placement(g.id, voters, r), addrs)
		if err != nil && !errors.Is(err, cluster.ErrNotLeader) {
			errs = append(errs, fmt.Errorf("group %d: %w", g.id, err))
		}
	}
	return errors.Join(errs...)
}

// reconcileGroup moves g, which this node leads, one step toward want.
func (n *Node) reconcileGroup(g *Group, want []string, addrs map[string]string) error {
	if len(want) == 0 {
		return nil
	}
	ms, err := g.node.Members()
	if err != nil {
		return err
	}
	have := map[string]cluster.Member{}
	for _, m := range ms {
		have[m.ID] = m
	}
	// Add what is missing; promote what has caught up; follow a node
	// that moved to another address.
	ready := true
	for _, id := range want {
		m, ok := have[id]
		switch {
		case !ok:
			ready = false
			if err := n.addNonvoter(g, id, addrs[id]); err != nil {
				return err
			}
		case !m.Voter:
			if !n.caughtUp(g, id) {
				ready = false
				continue
			}
			if err := g.node.AddVoter(id, addrs[id]); err != nil {
				return err
			}
		case m.RaftAddr != addrs[id]:
			if err := g.node.AddVoter(id, addrs[id]); err != nil {
				return err
			}
		}
	}
	// A non-voter the placement no longer names counts in no majority:
	// it goes at once.
	for _, m := range ms {
		if !m.Voter && !slices.Contains(want, m.ID) {
			if err := g.node.Remove(m.ID); err != nil {
				return err
			}
		}
	}
	if !ready {
		return nil
	}
	// Every replica the placement names votes: the others go, this node
	// last, by handing its leadership to one that stays (whose next round
	// removes this node).
	leaving := false
	for _, m := range ms {
		switch {
		case !m.Voter || slices.Contains(want, m.ID):
		case m.ID == n.o.NodeID:
			leaving = true
		default:
			if err := g.node.Remove(m.ID); err != nil {
				return err
			}
		}
	}
	if !leaving {
		return nil
	}
	for _, id := range want {
		if g.node.InContact(id, contactWindow) {
			return g.node.TransferLeadershipTo(id, addrs[id])
		}
	}
	return fmt.Errorf("%w: leaving the group, and no replica that stays answered lately", ErrOutOfContact)
}

// A catchUpTarget is where a non-voter's log must reach before it is
// promoted: the leader's last index when, leading in term, it added the
// non-voter or first saw it as one. That is past the entry that added it,
// so a replica that deleted its state since (seeing itself removed before)
// and has not caught up again is not promoted: it reports a shorter log.
// Within a term only its leader changes the configuration, and it sets the
// target anew at each addition; a target of another term is not used.
type catchUpTarget struct {
	term, index uint64
}

// caughtUp reports whether the non-voter id of g, which this node leads,
// reported its log reaching its catch-up target lately.
func (n *Node) caughtUp(g *Group, id string) bool {
	st := g.node.Status()
	n.mu.Lock()
	t, ok := n.targets[g.id][id]
	if !ok || t.term != st.Term {
		t = catchUpTarget{term: st.Term, index: st.LastIndex}
		n.setTargetLocked(g.id, id, t)
	}
	n.mu.Unlock()
	last, ok := g.node.FollowerIndex(id, followerWindow)
	return ok && last >= t.index
}

// addNonvoter adds id to g as a non-voter, and sets its catch-up target.
func (n *Node) addNonvoter(g *Group, id, addr string) error {
	if err := g.node.AddNonvoter(id, addr); err != nil {
		return err
	}
	st := g.node.Status()
	n.mu.Lock()
	n.setTargetLocked(g.id, id, catchUpTarget{term: st.Term, index: st.LastIndex})
	n.mu.Unlock()
	return nil
}

func (n *Node) setTargetLocked(group uint32, id string, t catchUpTarget) {
	if n.targets[group] == nil {
		n.targets[group] = map[string]catchUpTarget{}
	}
	n.targets[group][id] = t
}
