package group

import (
	"errors"
	"fmt"
	"slices"

	"kvs/cluster"
	"kvs/fsm"
)

// Tending: what each node of a cluster of several data groups does every
// second or so (Node.Tend) to follow the placement (placement.go):
//
//  1. It opens a replica of each live data group (TendOptions.Groups) the
//     placement gives it that it does not hold (empty, for the group's
//     leader to add, or bootstrapped with its initial voters when the
//     group was just created and this node is one: GroupSet.Bootstraps),
//     and each group whose state its data dir holds.
//  2. It serves a replica (TendOptions.Serve) while the replica is a voter
//     and the placement gives it the group or it leads it; a replica that
//     is still catching up (a non-voter), or on its way out, is not
//     served: its commands go to the group's leader.
//  3. As a group's leader, it moves the group toward the placement
//     (Reconcile), and publishes the group's leader and membership in
//     group 0's metadata (TendOptions.Meta) when they differ from what is
//     there, so that nodes without a replica find the leader.
//  4. A replica the placement no longer gives it, once the published
//     membership has left it out at an index its log does not go past, is
//     closed and its state deleted (Membership.Dropped).
//  5. Leaderships are spread (SpreadLeaders).
//  6. A replica of a removed group (GroupSet.Removed) is closed and its
//     state deleted, whatever the membership says: the group is gone.

// Meta is group 0's metadata as tending reads and writes it: what each
// data group's leader published.
type Meta interface {
	// Leader returns the node id published as data group id's leader, ""
	// for none.
	Leader(id uint32) string
	// Membership returns data group id's published membership; ok false
	// while there is none.
	Membership(id uint32) (m Membership, ok bool)
	// Publish writes that this node leads data group id, with membership
	// m, through group 0's log.
	Publish(id uint32, m Membership) error
}

// TendOptions are what Node.Tend works with.
type TendOptions struct {
	// Groups are the cluster's data groups, as the meta group lists
	// them; Replicas the replicas a group (Placement's r).
	Groups   GroupSet
	Replicas int
	// NewStore returns the store a replica opened now starts from: empty,
	// ready for what its log or a snapshot brings.
	NewStore func(id uint32) (*fsm.Store, error)
	// Serve hands a replica to the node's server (g nil: takes it away).
	// Called from Tend only, for changes.
	Serve func(id uint32, g *Group)
	Meta  Meta
}

// TendReport is what one round of tending did, for the node's log.
type TendReport struct {
	Opened, Dropped []uint32
	Published       []uint32
	Handovers       []Handover
	Err             error
}

// Tend is one round of tending (see above). It starts nothing of its own;
// its owner calls it periodically, from one goroutine.
func (n *Node) Tend(o TendOptions) TendReport {
	var rep TendReport
	var errs []error
	voters0 := n.voters0()
	// Replicas of removed groups go first: their ids are never given
	// again, and nothing of them is needed.
	for _, g := range n.Groups() {
		if g.id == 0 || !o.Groups.Removed(g.id) {
			continue
		}
		n.serve(o, g.id, nil)
		if _, err := n.DropGroup(g.id, func(uint64) bool { return true }); err != nil {
			errs = append(errs, err)
		} else {
			rep.Dropped = append(rep.Dropped, g.id)
		}
	}
	if stored, err := StoredGroups(n.o.DataDir); err != nil {
		errs = append(errs, err)
	} else {
		for _, id := range stored {
			if id == 0 || !o.Groups.Removed(id) || n.Group(id) != nil {
				continue
			}
			if deleted, err := n.DeleteGroupState(id); err != nil {
				errs = append(errs, err)
			} else if deleted {
				rep.Dropped = append(rep.Dropped, id)
			}
		}
	}
	for _, id := range o.Groups.Live {
		want := Placement(id, voters0, o.Replicas)
		mine := slices.Contains(want, n.o.NodeID)
		g := n.Group(id)
		if g == nil {
			dir := GroupDir(n.o.DataDir, id)
			stored, err := isDir(dir)
			var had bool
			if err == nil && stored {
				had, err = cluster.HasState(dir)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			_, published := o.Meta.Membership(id)
			create := o.Groups.Bootstraps(id, n.o.NodeID, had, published)
			if !mine && !stored && !create {
				continue
			}
			st, err := o.NewStore(id)
			switch {
			case err != nil:
			case create:
				g, err = n.OpenCreated(id, st, o.Groups.InitialVoters(id))
			default:
				g, err = n.OpenReplica(id, st)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("opening group %d: %w", id, err))
				continue
			}
			rep.Opened = append(rep.Opened, id)
		}
		leads := g.node.IsLeader()
		if !mine && !leads {
			if m, ok := o.Meta.Membership(id); ok && m.Dropped(n.o.NodeID, g.node.Status().LastIndex) {
				n.serve(o, id, nil)
				dropped, err := n.DropGroup(id, func(last uint64) bool { return m.Dropped(n.o.NodeID, last) })
				if err != nil {
					errs = append(errs, err)
				} else if dropped {
					rep.Dropped = append(rep.Dropped, id)
				}
				continue
			}
		}
		if g.IsVoter() && (mine || leads) {
			n.serve(o, id, g)
		} else {
			n.serve(o, id, nil)
		}
	}
	if err := n.Reconcile(o.Replicas); err != nil {
		errs = append(errs, err)
	}
	for _, g := range n.Groups() {
		if g.id == 0 || !g.node.IsLeader() {
			continue
		}
		published, err := n.publish(g, o.Meta)
		if err != nil && !errors.Is(err, cluster.ErrNotLeader) {
			errs = append(errs, fmt.Errorf("publishing group %d: %w", g.id, err))
		}
		if published {
			rep.Published = append(rep.Published, g.id)
		}
	}
	rep.Handovers = n.SpreadLeaders(o.Replicas)
	rep.Err = errors.Join(errs...)
	return rep
}

// voters0 returns group 0's voters, nil when it is not open or cannot say.
func (n *Node) voters0() []string {
	g0 := n.Group(0)
	if g0 == nil {
		return nil
	}
	ms, err := g0.node.Members()
	if err != nil {
		return nil
	}
	return membersOf(ms, true)
}

// serve tells o.Serve of a change in whether g (nil: none) is served.
func (n *Node) serve(o TendOptions, id uint32, g *Group) {
	n.mu.Lock()
	changed := n.served[id] != g
	if g == nil {
		delete(n.served, id)
	} else {
		n.served[id] = g
	}
	n.mu.Unlock()
	if changed {
		o.Serve(id, g)
	}
}

// Serves returns this node's replica of data group id when, by the rule
// Tend serves replicas by, it should be served now, and nil otherwise
// (none open here, or not to be served); it records what it returns as
// served. Its owner hands the server what it returns before Tend's first
// round.
func (n *Node) Serves(id uint32, replicas int) *Group {
	g := n.Group(id)
	if g == nil || !g.IsVoter() {
		return nil
	}
	if !slices.Contains(Placement(id, n.voters0(), replicas), n.o.NodeID) && !g.node.IsLeader() {
		return nil
	}
	n.mu.Lock()
	n.served[id] = g
	n.mu.Unlock()
	return g
}

// publish writes g's leader (this node) and membership into group 0's
// metadata when what is there differs, committing the configuration again
// for an index to pair the members with. It reports whether it wrote.
func (n *Node) publish(g *Group, meta Meta) (bool, error) {
	ms, err := g.node.Members()
	if err != nil {
		return false, err
	}
	if m, ok := meta.Membership(g.id); ok && meta.Leader(g.id) == n.o.NodeID && m.Same(ms) {
		return false, nil
	}
	m, err := g.CommitMembership()
	if err != nil {
		return false, err
	}
	return true, meta.Publish(g.id, m)
}
