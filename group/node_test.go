package group

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"kvs/cluster"
	"kvs/fsm"
	"kvs/internal/testwait"
)

// The tests below run real nodes in this process: raft over TCP on
// loopback through each node's one Raft port (cluster.Mux), raft state
// under t.TempDir(). Set KVS_RAFT_LOG=1 to see raft's logs.

// waitTimeout bounds every wait for a state (a leader, a replicated write,
// a handover). It is generous for a loaded 2-core machine running the race
// detector: it detects hangs, and asserts no speed.
const waitTimeout = 30 * time.Second

// eventually polls cond until it returns nil or waitTimeout passes.
func eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	testwait.Until(t, what, waitTimeout, cond)
}

func testLogger() *slog.Logger {
	var w io.Writer = io.Discard
	if os.Getenv("KVS_RAFT_LOG") != "" {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testNode is one node of the test cluster: a Node and the store of each
// group open on it.
type testNode struct {
	id, dir, addr string
	n             *Node
	stores        map[uint32]*fsm.Store
	groups        map[uint32]*Group
}

// openNode opens a node on dir and addr with a replica of each of groups,
// each over a fresh store; it fails the test unless had says, for every
// group, whether its dir held raft state.
func openNode(t *testing.T, id, dir, addr string, bootstrap bool, groups []uint32, had bool) *testNode {
	t.Helper()
	n, err := OpenNode(NodeOptions{DataDir: dir, NodeID: id, RaftAddr: addr, Bootstrap: bootstrap,
		Logger: testLogger().With("test_node", id)})
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	t.Cleanup(func() { n.Close() })
	tn := &testNode{id: id, dir: dir, addr: n.Addr(), n: n, stores: map[uint32]*fsm.Store{}, groups: map[uint32]*Group{}}
	for _, g := range groups {
		store := fsm.NewStore()
		grp, h, err := n.OpenGroup(g, store)
		if err != nil {
			t.Fatalf("%s: open group %d: %v", id, g, err)
		}
		if h != had {
			t.Fatalf("%s: group %d had state %v, want %v", id, g, h, had)
		}
		if grp.ID() != g {
			t.Fatalf("%s: group %d says it is %d", id, g, grp.ID())
		}
		tn.stores[g], tn.groups[g] = store, grp
	}
	return tn
}

// leaders returns, by group, the id of the node that leads it, for groups
// one of nodes leads and every other node knows to lead.
func leaders(nodes []*testNode, groups []uint32) (map[uint32]string, error) {
	out := map[uint32]string{}
	for _, g := range groups {
		var lead string
		for _, tn := range nodes {
			if tn.groups[g].Node().IsLeader() {
				if lead != "" {
					return nil, fmt.Errorf("group %d: %s and %s both lead", g, lead, tn.id)
				}
				lead = tn.id
			}
		}
		if lead == "" {
			return nil, fmt.Errorf("group %d: no leader", g)
		}
		for _, tn := range nodes {
			if id, _ := tn.groups[g].Node().Leader(); id != lead {
				return nil, fmt.Errorf("group %d: %s thinks the leader is %q, not %s", g, tn.id, id, lead)
			}
		}
		out[g] = lead
	}
	return out, nil
}

// voters returns group g's voters as tn's replica knows them.
func voters(tn *testNode, g uint32) ([]string, error) {
	ms, err := tn.groups[g].Node().Members()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.Voter {
			out = append(out, m.ID)
		}
	}
	return out, nil
}

// changeEverywhere runs change (Node.AddVoter or Remove) on every node,
// each changing the groups it leads, until check holds for every group's
// voters as their leader, one of members, knows them. Leaders may move
// meanwhile (a late heartbeat on a busy machine), and the changes are
// idempotent: a group a round missed is changed by whoever leads it in the
// next.
func changeEverywhere(t *testing.T, what string, nodes, members []*testNode, groups []uint32,
	change func(*Node) ([]uint32, error), check func([]string) bool) {
	t.Helper()
	eventually(t, what, func() error {
		for _, tn := range nodes {
			if _, err := change(tn.n); err != nil {
				return fmt.Errorf("%s: %w", tn.id, err)
			}
		}
		lead, err := leaders(members, groups)
		if err != nil {
			return err
		}
		for _, g := range groups {
			var on *testNode
			for _, tn := range members {
				if tn.id == lead[g] {
					on = tn
				}
			}
			vs, err := voters(on, g)
			if err != nil {
				return err
			}
			if !check(vs) {
				return fmt.Errorf("group %d: voters %v", g, vs)
			}
		}
		return nil
	})
}

// put sets key to val in group g through the proposer of whichever node
// leads it, again after a leader change failed it (setting a key to a
// value is idempotent).
func put(t *testing.T, nodes []*testNode, g uint32, key, val string) {
	t.Helper()
	eventually(t, fmt.Sprintf("SET %s in group %d", key, g), func() error {
		lead, err := leaders(nodes, []uint32{g})
		if err != nil {
			return err
		}
		for _, tn := range nodes {
			if tn.id != lead[g] {
				continue
			}
			replies, err := tn.groups[g].Proposer().Propose(setCmd([]byte(key), []byte(val)))
			if err != nil {
				return err
			}
			if len(replies) != 1 || replies[0].String() != "OK" {
				t.Fatalf("SET %s in group %d: replies %v", key, g, replies)
			}
		}
		return nil
	})
}

func get(s *fsm.Store, key string) string {
	return string(s.Read(0, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte(key)}}).Bulk)
}

// replicated waits until every node's replica of g holds key = val.
func replicated(t *testing.T, nodes []*testNode, g uint32, key, val string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s in group %d on every node", key, g), func() error {
		for _, tn := range nodes {
			if got := get(tn.stores[g], key); got != val {
				return fmt.Errorf("%s has %s = %q", tn.id, key, got)
			}
		}
		return nil
	})
}

// spread runs a leadership spreading step on every node until each group
// is led by its preferred leader, which the test works out by hand: group
// k by the k-th of the three nodes.
func spread(t *testing.T, nodes []*testNode, groups []uint32) {
	t.Helper()
	eventually(t, "leaderships spreading", func() error {
		for _, tn := range nodes {
			for _, h := range tn.n.SpreadLeaders(0) {
				t.Logf("%s: group %d to %s: %v", tn.id, h.Group, h.To, h.Err)
			}
		}
		lead, err := leaders(nodes, groups)
		if err != nil {
			return err
		}
		for _, g := range groups {
			if want := nodes[g].id; lead[g] != want {
				return fmt.Errorf("group %d led by %s, want %s", g, lead[g], want)
			}
		}
		return nil
	})
}

// TestNodeGroups runs three nodes holding three groups each: bootstrapped
// on one node, joined by the others group by group, written through each
// group's leader, spread so that each node leads one group, and survived
// by a node closed and reopened on its data dir.
func TestNodeGroups(t *testing.T) {
	// Registered first, so it runs after every node's cleanup: closing a
	// node ends every goroutine it and its groups started (but for the
	// wal's fsync ring, which the process keeps once started).
	running := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, running, goleak.IgnoreAnyFunction("kvs/wal.(*syncRing).complete"))
	})
	groups := []uint32{0, 1, 2}
	n1 := openNode(t, "n1", t.TempDir(), "127.0.0.1:0", true, groups, false)
	eventually(t, "n1 electing itself in every group", func() error {
		_, err := leaders([]*testNode{n1}, groups)
		return err
	})
	if _, _, err := n1.n.OpenGroup(1, fsm.NewStore()); err == nil {
		t.Fatal("group 1 opened twice on n1")
	}
	nodes := []*testNode{n1}
	for _, id := range []string{"n2", "n3"} {
		tn := openNode(t, id, t.TempDir(), "127.0.0.1:0", false, groups, false)
		nodes = append(nodes, tn)
		changeEverywhere(t, "adding "+id, nodes, nodes, groups,
			func(n *Node) ([]uint32, error) { return n.AddVoter(tn.id, tn.addr) },
			func(vs []string) bool { return slices.Contains(vs, tn.id) })
	}

	// Each group is a state machine of its own: a write to one reaches
	// every replica of it and no other group.
	for _, g := range groups {
		put(t, nodes, g, fmt.Sprint("k", g), fmt.Sprint("v", g))
	}
	for _, g := range groups {
		replicated(t, nodes, g, fmt.Sprint("k", g), fmt.Sprint("v", g))
		for _, other := range groups {
			if other != g {
				for _, tn := range nodes {
					if v := get(tn.stores[other], fmt.Sprint("k", g)); v != "" {
						t.Fatalf("%s: group %d holds group %d's key (%q)", tn.id, other, g, v)
					}
				}
			}
		}
	}

	spread(t, nodes, groups)
	// A node asked to change groups it does not lead names them.
	notLed, err := nodes[0].n.Remove("nobody")
	if err != nil {
		t.Fatal(err)
	}
	lead, err := leaders(nodes, groups)
	if err != nil {
		t.Fatal(err)
	}
	var want []uint32
	for _, g := range groups {
		if lead[g] != nodes[0].id {
			want = append(want, g)
		}
	}
	if !slices.Equal(notLed, want) {
		t.Errorf("Remove on n1 reports groups %v not led, want %v", notLed, want)
	}

	// n2 closes (its groups go to the others) and opens again on its data
	// dir and address: every group comes back from its dir with its data,
	// takes the writes made meanwhile, and gets its leadership back.
	n2 := nodes[1]
	if err := n2.n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n2.n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, _, err := n2.n.OpenGroup(7, fsm.NewStore()); !errors.Is(err, ErrNodeClosed) {
		t.Errorf("OpenGroup after Close: %v, want ErrNodeClosed", err)
	}
	up := []*testNode{nodes[0], nodes[2]}
	for _, g := range groups {
		put(t, up, g, fmt.Sprint("while", g), "down")
	}
	stored, err := StoredGroups(n2.dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stored, groups) {
		t.Fatalf("StoredGroups = %v, want %v", stored, groups)
	}
	nodes[1] = openNode(t, n2.id, n2.dir, n2.addr, false, stored, true)
	for _, g := range groups {
		replicated(t, nodes, g, fmt.Sprint("k", g), fmt.Sprint("v", g))
		replicated(t, nodes, g, fmt.Sprint("while", g), "down")
	}
	spread(t, nodes, groups)
	for _, g := range groups {
		put(t, nodes, g, fmt.Sprint("after", g), "up")
		replicated(t, nodes, g, fmt.Sprint("after", g), "up")
	}

	// n3 leaves every group, each removed by its leader; its replicas
	// shut down as they learn of it.
	changeEverywhere(t, "removing n3", nodes, nodes[:2], groups,
		func(n *Node) ([]uint32, error) { return n.Remove("n3") },
		func(vs []string) bool { return !slices.Contains(vs, "n3") })

	for _, tn := range nodes {
		if err := tn.n.Close(); err != nil {
			t.Errorf("close %s: %v", tn.id, err)
		}
	}
}

// TestOpenRaft: a node opened as before groups keeps group 0's raft state
// in DataDir/raft, and closing its group closes the node and frees its
// Raft port for the next start.
func TestOpenRaft(t *testing.T) {
	dir := t.TempDir()
	o := RaftOptions{DataDir: dir, NodeID: "n1", RaftAddr: "127.0.0.1:0", Bootstrap: true, Logger: testLogger()}
	open := func(wantHad bool) (*Group, *fsm.Store) {
		t.Helper()
		store := fsm.NewStore()
		g, had, err := OpenRaft(store, o)
		if err != nil {
			t.Fatal(err)
		}
		if had != wantHad {
			t.Fatalf("had state %v, want %v", had, wantHad)
		}
		o.RaftAddr = g.owner.Addr()
		return g, store
	}
	g, _ := open(false)
	eventually(t, "electing", func() error {
		if !g.Node().IsLeader() {
			return errors.New("not leader yet")
		}
		return nil
	})
	if _, err := g.Proposer().Propose(setCmd([]byte("k"), []byte("v"))); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "raft", "raft.db")); err != nil {
		t.Fatalf("group 0's raft state is not in DataDir/raft: %v", err)
	}
	if ids, err := StoredGroups(dir); err != nil || !slices.Equal(ids, []uint32{0}) {
		t.Fatalf("StoredGroups = %v, %v; want [0]", ids, err)
	}

	g, store := open(true)
	defer g.Close()
	eventually(t, "replaying", func() error {
		if v := get(store, "k"); v != "v" {
			return fmt.Errorf("k = %q", v)
		}
		return nil
	})
}

func TestStoredGroups(t *testing.T) {
	dir := t.TempDir()
	if ids, err := StoredGroups(dir); err != nil || len(ids) != 0 {
		t.Fatalf("empty data dir: StoredGroups = %v, %v", ids, err)
	}
	for _, d := range []string{
		"raft", "groups/3/raft", "groups/12/raft",
		"groups/5",               // opened by nothing: no raft dir
		"groups/05/raft",         // not a name OpenGroup makes
		"groups/0/raft",          // group 0 lives in DataDir/raft
		"groups/x/raft",          // nor this
		"groups/9/raft.broken",   // moved aside by a repair
		"groups/4294967296/raft", // past uint32
	} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := StoredGroups(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{0, 3, 12}; !slices.Equal(ids, want) {
		t.Errorf("StoredGroups = %v, want %v", ids, want)
	}
	for _, id := range ids {
		if _, err := os.Stat(GroupDir(dir, id)); err != nil {
			t.Errorf("GroupDir(%d): %v", id, err)
		}
	}
}

// TestOpenGroupRepair: damage in one group's raft state stops that group
// from opening, and the repair moves that group's state aside alone,
// within its own dir.
func TestOpenGroupRepair(t *testing.T) {
	dir := t.TempDir()
	o := NodeOptions{DataDir: dir, NodeID: "n1", RaftAddr: "127.0.0.1:0", Bootstrap: true, Logger: testLogger()}
	n, err := OpenNode(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint32{0, 1} {
		g, _, err := n.OpenGroup(id, fsm.NewStore())
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("electing in group %d", id), func() error {
			if !g.Node().IsLeader() {
				return errors.New("not leader yet")
			}
			return nil
		})
		for i := range 5 {
			if _, err := g.Proposer().Propose(setCmd([]byte(fmt.Sprint("k", i)), []byte("v"))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// A byte of group 1's first log record flipped: not a torn tail.
	segs, err := filepath.Glob(filepath.Join(GroupDir(dir, 1), "log", "*.rlog"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("group 1's log segments: %v, %v", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[12] ^= 0xFF
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	o.Bootstrap = false
	// reopen opens the node with both groups and closes it again; it
	// returns how group 1 opened.
	reopen := func(repair, allowEmpty bool) (bool, error) {
		t.Helper()
		o.Repair, o.RepairAllowEmpty = repair, allowEmpty
		n, err := OpenNode(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		if _, had, err := n.OpenGroup(0, fsm.NewStore()); err != nil || !had {
			t.Fatalf("group 0: had %v, %v", had, err)
		}
		_, had, err := n.OpenGroup(1, fsm.NewStore())
		n.Close()
		return had, err
	}
	if _, err := reopen(false, false); !errors.Is(err, cluster.ErrDamaged) {
		t.Fatalf("group 1 opened with damaged state: %v", err)
	}
	if _, err := reopen(true, false); !errors.Is(err, cluster.ErrDamaged) || !strings.Contains(err.Error(), "--repair-allow-empty") {
		t.Fatalf("--repair alone: %v", err)
	}
	if had, err := reopen(true, true); err != nil || had {
		t.Fatalf("repaired group 1: had %v, %v", had, err)
	}
	if _, err := os.Stat(GroupDir(dir, 1) + ".broken"); err != nil {
		t.Fatalf("group 1's damaged state was not kept aside: %v", err)
	}
	if ids, err := StoredGroups(dir); err != nil || !slices.Equal(ids, []uint32{0, 1}) {
		t.Fatalf("StoredGroups after the repair = %v, %v", ids, err)
	}
}

// TestWakesOnLeadership: a node's Wakes is signalled when one of its
// replicas becomes its group's leader: when it elects itself, and when the
// leadership is handed to it (as placement hands it to a replica just
// made a voter), so that its owner tends at once and serves the replica.
func TestWakesOnLeadership(t *testing.T) {
	groups := []uint32{0, 1}
	n1 := openNode(t, "n1", t.TempDir(), "127.0.0.1:0", true, groups, false)
	eventually(t, "n1 electing itself", func() error {
		_, err := leaders([]*testNode{n1}, groups)
		return err
	})
	wake := func(tn *testNode, why string) {
		t.Helper()
		select {
		case <-tn.n.Wakes():
		case <-time.After(waitTimeout):
			t.Fatalf("%s's Wakes not signalled %s", tn.id, why)
		}
	}
	wake(n1, "after it elected itself")
	n2 := openNode(t, "n2", t.TempDir(), "127.0.0.1:0", false, groups, false)
	nodes := []*testNode{n1, n2}
	changeEverywhere(t, "adding n2", nodes, nodes, groups,
		func(n *Node) ([]uint32, error) { return n.AddVoter(n2.id, n2.addr) },
		func(vs []string) bool { return slices.Contains(vs, n2.id) })
	// What an election during the adding signalled is not what this test
	// waits for.
	select {
	case <-n2.n.Wakes():
	default:
	}
	eventually(t, "handing group 1 to n2", func() error {
		if n2.groups[1].Node().IsLeader() {
			return nil
		}
		if err := n1.groups[1].Node().TransferLeadershipTo(n2.id, n2.addr); err != nil {
			return err
		}
		return errors.New("not yet")
	})
	wake(n2, "once it led group 1")
}
