package group

import (
	"errors"
	"slices"
	"time"
)

// Leadership spreading. A group's leader does its writes, its expiry and
// its linearizable reads, so a node that leads every group does nearly all
// of the cluster's work while the others only follow; and raft elects
// whichever node times out first, so after a bootstrap (one node leads
// every group it created) or a restart (a node's groups went to the
// others) leaderships bunch up. Each group therefore has a preferred
// leader, decided from group 0's voters alone so that every node decides
// the same without talking: the first node of its Placement (for group 0,
// PreferredLeader of its voters). Each node's SpreadLeaders
// hands the groups it leads but should not to their preferred leaders;
// called periodically on every node, it converges on the preferred
// layout, and moves back to it after a failure has moved leaders away.

// contactWindow is how recently a preferred leader must have answered
// this node's heartbeats (every tenth of a heartbeat timeout) for a
// handover to it to be tried: one to a node that is down or cut off would
// stall the group's writes for an election timeout and fail.
const contactWindow = 2 * time.Second

// ErrOutOfContact is a Handover's error when the preferred leader has not
// answered this node lately: the handover was not tried.
var ErrOutOfContact = errors.New("group: preferred leader out of contact")

// PreferredLeader returns which of voters should lead group: in the
// voters' sorted order, the one at the group's id modulo their count.
// While every node holds a replica of every group, G groups on M nodes
// give each node G/M leaderships, give or take one; group 0 prefers the
// lowest id. The choice depends only on the set of voters, so every node
// decides the same, and it changes only when the set does. It returns ""
// for no voters.
func PreferredLeader(group uint32, voters []string) string {
	if len(voters) == 0 {
		return ""
	}
	sorted := slices.Clone(voters)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	return sorted[group%uint32(len(sorted))]
}

// A Handover is what SpreadLeaders did about a group this node led though
// another voter is its preferred leader.
type Handover struct {
	Group uint32
	To    string // the preferred leader
	// Err is nil when raft handed leadership to To; ErrOutOfContact when
	// it was not tried; else why raft could not.
	Err error
}

// SpreadLeaders is one step of leadership spreading, with r replicas a
// data group (Placement's r): for each group open here that this node
// leads, it works out the preferred leader and, when that is another voter
// of the group in contact, hands leadership to it (one group at a time; each handover takes a round
// trip or two and pauses the group's writes meanwhile, briefly). It
// returns what it did or could not do, by group; nothing when every group
// this node leads is where it belongs. Meant to be called periodically by
// the node's owner (every few seconds): it starts nothing of its own.
func (n *Node) SpreadLeaders(r int) []Handover {
	var out []Handover
	var voters0 []string // group 0's, which place the data groups
	if g0 := n.Group(0); g0 != nil {
		if ms, err := g0.node.Members(); err == nil {
			voters0 = membersOf(ms, true)
		}
	}
	for _, g := range n.Groups() {
		if !g.node.IsLeader() {
			continue
		}
		members, err := g.node.Members()
		if err != nil {
			out = append(out, Handover{Group: g.id, Err: err})
			continue
		}
		var voters []string
		addr := map[string]string{}
		for _, m := range members {
			if m.Voter {
				voters = append(voters, m.ID)
				addr[m.ID] = m.RaftAddr
			}
		}
		to := PreferredLeader(g.id, voters)
		if g.id != 0 && len(voters0) > 0 {
			// A preferred leader not yet a voter of the group is being
			// added to it: the handover waits for it.
			to = Placement(g.id, voters0, r)[0]
		}
		if to == "" || to == n.o.NodeID || addr[to] == "" {
			continue
		}
		h := Handover{Group: g.id, To: to}
		if g.node.InContact(to, contactWindow) {
			h.Err = g.node.TransferLeadershipTo(to, addr[to])
		} else {
			h.Err = ErrOutOfContact
		}
		out = append(out, h)
	}
	return out
}
