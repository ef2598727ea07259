package group

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"kvs/cluster"
)

// Placement while every node holds a replica of every group: group 0's
// configuration is the cluster's membership (KVS.JOIN and KVS.REMOVE
// change it, as before groups), and every other group follows it. Each
// node runs Reconcile now and then; the leader of a group adds the voters
// group 0 has and it lacks, and removes those group 0 no longer has. The
// state drives it, not a plan in memory: a new leader of a group picks up
// where the old one stopped, and a change half made is finished by the
// next round.
//
// A node opens all its groups before it asks to join group 0 (the group
// count is fixed when the cluster is made, and a joining node learns it
// first), so a group never waits on a voter that has not opened it.

// Reconcile brings each group this node leads, other than group 0, to
// group 0's voters. It returns the changes' errors, each naming its
// group; a group whose leadership moved meanwhile is left to its new
// leader.
func (n *Node) Reconcile() error {
	groups := n.Groups()
	if len(groups) < 2 || groups[0].id != 0 {
		return nil
	}
	members, err := groups[0].node.Members()
	if err != nil {
		return fmt.Errorf("group 0: %w", err)
	}
	want := map[string]string{} // id -> raft address
	for _, m := range members {
		if m.Voter {
			want[m.ID] = m.RaftAddr
		}
	}
	var errs []error
	for _, g := range groups[1:] {
		if !g.node.IsLeader() {
			continue
		}
		if err := reconcileGroup(g, n.o.NodeID, want); err != nil && !errors.Is(err, cluster.ErrNotLeader) {
			errs = append(errs, fmt.Errorf("group %d: %w", g.id, err))
		}
	}
	return errors.Join(errs...)
}

// reconcileGroup adds want's voters to g and removes the members want
// does not name, self (this node) last: a leader that removes itself
// steps down.
func reconcileGroup(g *Group, self string, want map[string]string) error {
	ms, err := g.node.Members()
	if err != nil {
		return err
	}
	have := map[string]cluster.Member{}
	for _, m := range ms {
		have[m.ID] = m
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		addr := want[id]
		if m, ok := have[id]; !ok || !m.Voter || m.RaftAddr != addr {
			if err := g.node.AddVoter(id, addr); err != nil {
				return err
			}
		}
	}
	leaving := false
	for _, m := range ms {
		if _, ok := want[m.ID]; ok {
			continue
		}
		if m.ID == self {
			leaving = true
			continue
		}
		if err := g.node.Remove(m.ID); err != nil {
			return err
		}
	}
	if leaving {
		return g.node.Remove(self)
	}
	return nil
}
