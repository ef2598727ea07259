package group

import (
	"errors"
	"fmt"

	"kvs/cluster"
)

// Membership changes go through each group's leader, and a node leads
// only some of its groups: AddVoter and Remove change the groups this node
// leads and name the others, for the caller to ask their leaders (each
// group's Node().Leader() says who that is, as far as this node knows).

// AddVoter adds the node id, reachable for Raft at raftAddr, as a voter to
// every group open here that this node leads, waiting for each change to
// commit. It returns, by id, the groups it left alone because this node
// does not lead them (or stopped leading them before the change was
// submitted), and the other failures joined, each naming its group. Adding
// a voter already there does nothing, so a retry after a partial failure
// is safe.
//
// The new node must have opened its replica of each group first: the
// change commits only once the enlarged group's majority holds it, and
// that includes the new node when a group had one voter.
func (n *Node) AddVoter(id, raftAddr string) (notLed []uint32, err error) {
	return n.eachLed(func(g *Group) error { return g.node.AddVoter(id, raftAddr) })
}

// Remove takes the node id out of every group open here that this node
// leads, as AddVoter adds it; an id a group does not hold is no error. A
// node may remove itself: it steps down in each such group once the
// change commits.
func (n *Node) Remove(id string) (notLed []uint32, err error) {
	return n.eachLed(func(g *Group) error { return g.node.Remove(id) })
}

// eachLed runs change on every open group, in id order; see AddVoter.
func (n *Node) eachLed(change func(*Group) error) (notLed []uint32, err error) {
	var errs []error
	for _, g := range n.Groups() {
		if !g.node.IsLeader() {
			notLed = append(notLed, g.id)
			continue
		}
		switch cerr := change(g); {
		case errors.Is(cerr, cluster.ErrNotLeader):
			notLed = append(notLed, g.id)
		case cerr != nil:
			errs = append(errs, fmt.Errorf("group %d: %w", g.id, cerr))
		}
	}
	return notLed, errors.Join(errs...)
}
