package group

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"kvs/fsm"
)

// testMeta is group 0's metadata as Tend reads and writes it, shared by
// the test's nodes (cmd/kvs keeps it in group 0's store).
type testMeta struct {
	mu      sync.Mutex
	leaders map[uint32]string
	members map[uint32]Membership
}

func newTestMeta() *testMeta {
	return &testMeta{leaders: map[uint32]string{}, members: map[uint32]Membership{}}
}

func (m *testMeta) Leader(id uint32) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leaders[id]
}

func (m *testMeta) Membership(id uint32) (Membership, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.members[id]
	return ms, ok
}

// publisher is the Meta one node publishes through, as itself.
type publisher struct {
	*testMeta
	self string
}

func (p publisher) Publish(id uint32, ms Membership) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leaders[id], p.members[id] = p.self, ms
	return nil
}

// tender runs Tend on a test node and records what it serves.
type tender struct {
	tn     *testNode
	meta   *testMeta
	groups int
	// set, when set, is the list of groups tended instead of 1..groups.
	set *GroupSet
	r   int

	mu     sync.Mutex
	served map[uint32]*Group
}

func (td *tender) round(t *testing.T) {
	t.Helper()
	set := DefaultGroupSet(td.groups)
	if td.set != nil {
		set = *td.set
	}
	rep := td.tn.n.Tend(TendOptions{
		Groups:   set,
		Replicas: td.r,
		NewStore: func(uint32) (*fsm.Store, error) { return fsm.NewStore(), nil },
		Serve: func(id uint32, g *Group) {
			td.mu.Lock()
			defer td.mu.Unlock()
			if g == nil {
				delete(td.served, id)
			} else {
				td.served[id] = g
			}
		},
		Meta: publisher{td.meta, td.tn.id},
	})
	if rep.Err != nil {
		t.Logf("%s: %v", td.tn.id, rep.Err)
	}
	if len(rep.Opened)+len(rep.Dropped)+len(rep.Published) > 0 {
		t.Logf("%s: opened %v, dropped %v, published %v", td.tn.id, rep.Opened, rep.Dropped, rep.Published)
	}
}

// placed waits, tending every node meanwhile, until every data group's
// voters are its placement over members with r replicas, no group has a
// non-voter, its leader is its preferred leader, and each node holds and
// serves exactly the groups the placement gives it.
func placed(t *testing.T, tenders []*tender, members []string) {
	t.Helper()
	eventually(t, fmt.Sprintf("placing the groups on %v", members), func() error {
		for _, td := range tenders {
			td.round(t)
		}
		for _, td := range tenders {
			if !slices.Contains(members, td.tn.id) {
				continue
			}
			var open, served []uint32
			for _, g := range td.tn.n.Groups() {
				if g.id != 0 {
					open = append(open, g.id)
				}
			}
			td.mu.Lock()
			for id := range td.served {
				served = append(served, id)
			}
			td.mu.Unlock()
			slices.Sort(served)
			var want []uint32
			for id := uint32(1); id <= uint32(td.groups); id++ {
				p := Placement(id, members, td.r)
				if slices.Contains(p, td.tn.id) {
					want = append(want, id)
				}
				g := td.tn.n.Group(id)
				if g == nil || p[0] != td.tn.id {
					continue
				}
				if !g.Node().IsLeader() {
					return fmt.Errorf("group %d: its preferred leader %s does not lead it", id, td.tn.id)
				}
				ms, err := g.Node().Members()
				if err != nil {
					return err
				}
				vs := slices.Sorted(slices.Values(p))
				if got := membersOf(ms, true); !slices.Equal(got, vs) || len(ms) != len(vs) {
					return fmt.Errorf("group %d: members %v, want voters %v", id, ms, vs)
				}
			}
			if !slices.Equal(open, want) || !slices.Equal(served, want) {
				return fmt.Errorf("%s holds %v and serves %v, want %v", td.tn.id, open, served, want)
			}
			// What it no longer holds is deleted.
			stored, err := StoredGroups(td.tn.dir)
			if err != nil {
				return err
			}
			if !slices.Equal(stored, append([]uint32{0}, want...)) {
				return fmt.Errorf("%s's data dir holds groups %v, want 0 and %v", td.tn.id, stored, want)
			}
		}
		return nil
	})
}

// TestTend: four nodes, three data groups of two replicas. The groups
// bootstrapped on one node move to their placement as the others join
// group 0 (each replica added, caught up, promoted, and the one it
// replaces removed and deleted), keeping their data; a node removed from
// group 0 has its replicas replaced on the others; a node added to group 0
// gets its share, and the nodes whose replicas it takes delete theirs.
func TestTend(t *testing.T) {
	const groups, r = 3, 2
	meta := newTestMeta()
	all := []uint32{0, 1, 2, 3}
	n1 := openNode(t, "n1", t.TempDir(), "127.0.0.1:0", true, all, false)
	eventually(t, "n1 electing itself in every group", func() error {
		_, err := leaders([]*testNode{n1}, all)
		return err
	})
	for id := uint32(1); id <= groups; id++ {
		put(t, []*testNode{n1}, id, fmt.Sprint("k", id), fmt.Sprint("v", id))
	}
	nodes := []*testNode{n1}
	tenders := []*tender{{tn: n1, meta: meta, groups: groups, r: r, served: map[uint32]*Group{}}}
	join := func(id string) {
		t.Helper()
		tn := openNode(t, id, t.TempDir(), "127.0.0.1:0", false, []uint32{0}, false)
		eventually(t, "adding "+id+" to group 0", func() error {
			lead, err := leaders(nodes, []uint32{0})
			if err != nil {
				return err
			}
			for _, l := range nodes {
				if l.id == lead[0] {
					return l.groups[0].Node().AddVoter(tn.id, tn.addr)
				}
			}
			return errors.New("no leader of group 0")
		})
		nodes = append(nodes, tn)
		tenders = append(tenders, &tender{tn: tn, meta: meta, groups: groups, r: r, served: map[uint32]*Group{}})
	}
	ids := func(nodes []*testNode) []string {
		var out []string
		for _, tn := range nodes {
			out = append(out, tn.id)
		}
		return out
	}
	for _, id := range []string{"n2", "n3", "n4"} {
		join(id)
	}
	placed(t, tenders, ids(nodes))
	// Each group's data is on its replicas, and nowhere else.
	check := func(members []string) {
		t.Helper()
		eventually(t, "the groups' data on their replicas", func() error {
			for _, td := range tenders {
				for id := uint32(1); id <= groups; id++ {
					g := td.tn.n.Group(id)
					if !slices.Contains(Placement(id, members, r), td.tn.id) {
						continue
					}
					if g == nil {
						return fmt.Errorf("%s holds no replica of group %d", td.tn.id, id)
					}
					if v := get(g.Store(), fmt.Sprint("k", id)); v != fmt.Sprint("v", id) {
						return fmt.Errorf("%s: group %d's k%d = %q", td.tn.id, id, id, v)
					}
				}
			}
			return nil
		})
	}
	check(ids(nodes))
	if _, ok := meta.Membership(1); !ok || meta.Leader(1) == "" {
		t.Fatalf("group 1's leader and membership are not published: %q", meta.Leader(1))
	}

	// n2 leaves group 0: the groups it held get a replica on another node
	// first, then lose n2's. (n2 itself is not told: its leaders stop
	// sending to it, so it keeps its replicas until it is stopped.)
	eventually(t, "removing n2 from group 0", func() error {
		lead, err := leaders(nodes, []uint32{0})
		if err != nil {
			return err
		}
		for _, l := range nodes {
			if l.id == lead[0] {
				return l.groups[0].Node().Remove("n2")
			}
		}
		return errors.New("no leader of group 0")
	})
	// n2 is no longer a voter of group 0: once its leader stops sending,
	// it forgets who leads (raft clears the leader on a heartbeat timeout),
	// so it is no longer asked who leads group 0.
	nodes = slices.DeleteFunc(nodes, func(tn *testNode) bool { return tn.id == "n2" })
	rest := []string{"n1", "n3", "n4"}
	placed(t, tenders, rest)
	check(rest)
	// n5 joins: it gets its share.
	join("n5")
	members := append(rest, "n5")
	placed(t, tenders, members)
	check(members)
	for id := uint32(1); id <= groups; id++ {
		var on []string
		for _, td := range tenders {
			if g := td.tn.n.Group(id); g != nil && g.IsVoter() && slices.Contains(members, td.tn.id) {
				on = append(on, td.tn.id)
			}
		}
		if want := Placement(id, members, r); !slices.Equal(slices.Sorted(slices.Values(want)), on) {
			t.Errorf("group %d's voters: %v, want %v", id, on, want)
		}
	}
}

// TestOpenNodeRemovesDropped: a replica's state that DropGroup moved aside
// and did not get to delete (a crash between the rename and the delete)
// is deleted when the node opens, and was never a group to open.
func TestOpenNodeRemovesDropped(t *testing.T) {
	dir := t.TempDir()
	aside := filepath.Join(dir, "groups", "4"+droppedSuffix, "raft")
	if err := os.MkdirAll(aside, 0o755); err != nil {
		t.Fatal(err)
	}
	if ids, err := StoredGroups(dir); err != nil || len(ids) != 0 {
		t.Fatalf("StoredGroups with a dropped replica's state: %v, %v", ids, err)
	}
	n, err := OpenNode(NodeOptions{DataDir: dir, NodeID: "n1", RaftAddr: "127.0.0.1:0", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := os.Stat(filepath.Dir(aside)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dropped replica's state is still there: %v", err)
	}
	if _, err := n.DropGroup(0, func(uint64) bool { return true }); err == nil {
		t.Error("DropGroup of group 0 succeeded")
	}
	if _, err := n.DropGroup(3, func(uint64) bool { return true }); err == nil {
		t.Error("DropGroup of a group not open succeeded")
	}
}

// TestTendAddRemove: three nodes, one data group. A group added to the
// set is bootstrapped by its initial voters as they tend, elects a leader
// that publishes it, and takes writes; a node the placement gives it
// that is not among its initial voters gets an empty replica its leader
// adds. Removed from the set, every node closes its replica and deletes
// its state.
func TestTendAddRemove(t *testing.T) {
	const r = 3
	meta := newTestMeta()
	n1 := openNode(t, "n1", t.TempDir(), "127.0.0.1:0", true, []uint32{0, 1}, false)
	eventually(t, "n1 electing itself", func() error {
		_, err := leaders([]*testNode{n1}, []uint32{0, 1})
		return err
	})
	nodes := []*testNode{n1}
	tenders := []*tender{{tn: n1, meta: meta, groups: 1, r: r, served: map[uint32]*Group{}}}
	for _, id := range []string{"n2", "n3"} {
		tn := openNode(t, id, t.TempDir(), "127.0.0.1:0", false, []uint32{0}, false)
		eventually(t, "adding "+id+" to group 0", func() error {
			return n1.groups[0].Node().AddVoter(tn.id, tn.addr)
		})
		nodes = append(nodes, tn)
		tenders = append(tenders, &tender{tn: tn, meta: meta, groups: 1, r: r, served: map[uint32]*Group{}})
	}
	placed(t, tenders, []string{"n1", "n2", "n3"})

	// Group 2, created with n2 and n3 as its first voters; the placement
	// (three replicas) puts it on n1 too.
	set, ids, err := DefaultGroupSet(1).Add([][]Peer{{{ID: "n2", Addr: nodes[1].addr}, {ID: "n3", Addr: nodes[2].addr}}})
	if err != nil || len(ids) != 1 || ids[0] != 2 {
		t.Fatalf("Add: %v %v", ids, err)
	}
	for _, td := range tenders {
		td.set = &set
	}
	eventually(t, "group 2 led, published, on every node", func() error {
		for _, td := range tenders {
			td.round(t)
		}
		if _, ok := meta.Membership(2); !ok {
			return errors.New("group 2's membership is not published")
		}
		leader := meta.Leader(2)
		for _, tn := range nodes {
			g := tn.n.Group(2)
			if g == nil || !g.IsVoter() {
				return fmt.Errorf("%s holds no voting replica of group 2", tn.id)
			}
			if id, _ := g.Node().Leader(); id != leader {
				return fmt.Errorf("%s: group 2's leader %q, published %q", tn.id, id, leader)
			}
		}
		return nil
	})
	var lead *Group
	for _, tn := range nodes {
		if g := tn.n.Group(2); g.Node().IsLeader() {
			lead = g
		}
	}
	if lead == nil {
		t.Fatal("no node leads group 2")
	}
	if rs, err := lead.Proposer().Propose(setCmd([]byte("k"), []byte("v"))); err != nil || rs[0].String() != "OK" {
		t.Fatalf("SET in group 2: %v %v", rs, err)
	}
	eventually(t, "group 2's write on every replica", func() error {
		for _, tn := range nodes {
			if v := get(tn.n.Group(2).Store(), "k"); v != "v" {
				return fmt.Errorf("%s: k = %q", tn.id, v)
			}
		}
		return nil
	})
	// n1 was added to group 2 by its leader: three members.
	ms, err := nodes[0].n.Group(2).Node().Members()
	if err != nil || len(ms) != 3 {
		t.Fatalf("group 2's members on n1: %v %v", ms, err)
	}

	// Group 2 removed: closed and deleted everywhere.
	removed, err := set.Remove(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range tenders {
		td.set = &removed
	}
	eventually(t, "group 2 deleted from every node", func() error {
		for _, td := range tenders {
			td.round(t)
		}
		for _, td := range tenders {
			if td.tn.n.Group(2) != nil {
				return fmt.Errorf("%s still has group 2 open", td.tn.id)
			}
			td.mu.Lock()
			_, served := td.served[2]
			td.mu.Unlock()
			if served {
				return fmt.Errorf("%s still serves group 2", td.tn.id)
			}
			stored, err := StoredGroups(td.tn.dir)
			if err != nil {
				return err
			}
			if slices.Contains(stored, 2) {
				return fmt.Errorf("%s's data dir holds group 2: %v", td.tn.id, stored)
			}
		}
		return nil
	})
}
