package server

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"kvs/fsm"
)

// evenTable is the slot map of n groups startSharded and startShardedPair
// give their servers.
func evenTable(n int) []uint16 {
	t := make([]uint16, fsm.ClusterSlots)
	for s := range t {
		t[s] = uint16(s * n / fsm.ClusterSlots)
	}
	return t
}

// flipped is table with slots first..last given to group g.
func flipped(table []uint16, first, last int, g uint16) []uint16 {
	t := slices.Clone(table)
	for s := first; s <= last; s++ {
		t[s] = g
	}
	return t
}

// TestSetSlotMap: a newer slot map moves a slot's commands to the group it
// names, reads and writes alike; an older or equal version is ignored; a
// malformed one is refused; and a command that loaded the map before goes
// on with the group it found.
func TestSetSlotMap(t *testing.T) {
	const n = 3
	s, stores := startSharded(t, n)
	rc := dialRaw(t, s)
	k := keyIn(0, n, 0)
	slot := fsm.KeySlot(k)
	if got := rc.do("SET", k, "old"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	if v := s.SlotMapVersion(); v != 0 {
		t.Fatalf("version %d before any map was set, want 0 (the computed one)", v)
	}
	loaded := s.router.slotMap()

	table := flipped(evenTable(n), slot, slot, 2)
	if err := s.SetSlotMap(1, table); err != nil {
		t.Fatal(err)
	}
	table[slot] = 1 // the server keeps a copy of its own
	if v := s.SlotMapVersion(); v != 1 {
		t.Fatalf("version %d after setting 1", v)
	}
	// The slot's keys are group 2's now; nothing moved them.
	if got := rc.do("GET", k); got != "$-1\r\n" {
		t.Errorf("GET of a slot given to an empty group: %q", got)
	}
	if got := rc.do("SET", k, "new"); got != "+OK\r\n" {
		t.Fatalf("SET after the flip: %q", got)
	}
	if got := keysOf(stores[2]); !slices.Contains(got, k) {
		t.Errorf("group 2 holds %q, want %s in it", got, k)
	}
	if got := rc.do("GET", k); got != "$3\r\nnew\r\n" {
		t.Errorf("GET after the flip: %q", got)
	}
	if got := keysOf(stores[0]); !slices.Contains(got, k) {
		t.Errorf("group 0 lost %s: %q", k, got)
	}
	// What loaded the map before still routes by it.
	if g := s.router.groupIn(loaded, slot); g.index != 0 {
		t.Errorf("the map loaded before the flip names group %d for slot %d", g.index, slot)
	}
	if g := s.router.groupOf(slot); g.index != 2 {
		t.Errorf("the map in force names group %d for slot %d", g.index, slot)
	}

	// Not newer: ignored.
	for _, v := range []uint64{0, 1} {
		if err := s.SetSlotMap(v, evenTable(n)); err != nil {
			t.Fatal(err)
		}
		if got := s.SlotMapVersion(); got != 1 || s.router.groupOf(slot).index != 2 {
			t.Errorf("version %d replaced version 1 (now %d)", v, got)
		}
	}
	// Versions may skip.
	if err := s.SetSlotMap(5, evenTable(n)); err != nil {
		t.Fatal(err)
	}
	if got := rc.do("GET", k); got != "$3\r\nold\r\n" {
		t.Errorf("GET at version 5, the slot back in group 0: %q", got)
	}

	for name, tab := range map[string][]uint16{
		"short":         evenTable(n)[1:],
		"unknown group": flipped(evenTable(n), 0, 0, n),
	} {
		if err := s.SetSlotMap(9, tab); err == nil {
			t.Errorf("%s: SetSlotMap took it", name)
		}
	}
	if s.SlotMapVersion() != 5 {
		t.Errorf("a refused map changed the version to %d", s.SlotMapVersion())
	}

	one := startServer(t, Config{Store: fsm.NewStore()})
	if err := one.SetSlotMap(1, evenTable(1)); err == nil {
		t.Error("a node of one group took a slot map")
	}
	if one.SlotMapVersion() != 0 {
		t.Error("a node of one group has a slot map version")
	}
}

// TestSetSlotMapUnderLoad: commands on every group go on while the map
// flips back and forth (run with -race): each lands in one group, and
// none fails.
func TestSetSlotMapUnderLoad(t *testing.T) {
	const n = 3
	s, _ := startSharded(t, n)
	a, b := evenTable(n), flipped(evenTable(n), 0, fsm.ClusterSlots/2, 1)
	var wg sync.WaitGroup
	var done atomic.Int64 // commands answered
	stop := make(chan struct{})
	errs := make(chan string, 4)
	for w := range 4 {
		rc := dialRaw(t, s)
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := keyIn(i%n, n, w)
				if got := rc.do("SET", k, "v"); got != "+OK\r\n" {
					errs <- fmt.Sprintf("SET %s: %q", k, got)
					return
				}
				if got := rc.do("MULTI"); got != "+OK\r\n" {
					errs <- fmt.Sprintf("MULTI: %q", got)
					return
				}
				rc.do("INCR", "{"+k+"}n")
				if got := rc.do("EXEC"); !strings.HasPrefix(got, "*1\r\n:") {
					errs <- fmt.Sprintf("EXEC: %q", got)
					return
				}
				done.Add(4)
			}
		})
	}
	// Flips until the clients have had 2000 answers among them, or
	// one failed.
	for v := uint64(1); done.Load() < 2000 && len(errs) == 0; v++ {
		tab := a
		if v%2 == 0 {
			tab = b
		}
		if err := s.SetSlotMap(v, tab); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestShardedSlotMapTopology: a new slot map given to both nodes of a pair
// changes what CLUSTER SLOTS, SHARDS, NODES and KVS.STATUS say, and where a
// key of a moved slot goes: MOVED to its new group's leader on a READONLY
// connection, forwarded there for a plain client.
func TestShardedSlotMapTopology(t *testing.T) {
	p := startShardedPair(t)
	// Slots 0-99 go from group 0 (n1 leads) to group 1 (n2 leads).
	table := flipped(evenTable(2), 0, 99, 1)
	for _, s := range []*Server{p.n1, p.n2} {
		if err := s.SetSlotMap(1, table); err != nil {
			t.Fatal(err)
		}
	}
	rc := dialRaw(t, p.n1)
	id1, id2 := nodeID("n1"), nodeID("n2")
	h1, h2 := p.n1.Addr().String(), p.n2.Addr().String()
	node := func(addr, id string) string {
		host, port, _ := strings.Cut(addr, ":")
		return fmt.Sprintf("*4\r\n$%d\r\n%s\r\n:%s\r\n$40\r\n%s\r\n*0\r\n", len(host), host, port, id)
	}
	want := "*3\r\n" +
		"*4\r\n:0\r\n:99\r\n" + node(h2, id2) + node(h1, id1) +
		"*4\r\n:100\r\n:8191\r\n" + node(h1, id1) + node(h2, id2) +
		"*4\r\n:8192\r\n:16383\r\n" + node(h2, id2) + node(h1, id1)
	if got := rc.do("CLUSTER", "SLOTS"); got != want {
		t.Errorf("CLUSTER SLOTS:\n%q\nwant\n%q", got, want)
	}
	nodes := rc.do("CLUSTER", "NODES")
	for _, w := range []string{id1 + " " + h1 + "@17001 myself,master - 0 0 2 connected 100-8191\n",
		id2 + " " + h2 + "@17002 master - 0 0 2 connected 0-99 8192-16383\n"} {
		if !strings.Contains(nodes, w) {
			t.Errorf("CLUSTER NODES %q lacks %q", nodes, w)
		}
	}
	shards := rc.do("CLUSTER", "SHARDS")
	if !strings.HasPrefix(shards, "*2\r\n*4\r\n$5\r\nslots\r\n*2\r\n:100\r\n:8191\r\n") ||
		!strings.Contains(shards, "*4\r\n:0\r\n:99\r\n:8192\r\n:16383\r\n") {
		t.Errorf("CLUSTER SHARDS: %q", shards)
	}
	if info := rc.do("CLUSTER", "INFO"); !strings.Contains(info, "cluster_slots_ok:16384") {
		t.Errorf("CLUSTER INFO: %q", info)
	}
	status := rc.do("KVS.STATUS")
	if w := bulk("slot_map_version") + ":1\r\n" + bulk("slot_map") + bulk("0-99:1,100-8191:0,8192-16383:1"); !strings.Contains(status, w) {
		t.Errorf("KVS.STATUS %q lacks %q", status, w)
	}

	// A key of slots 0-99.
	var k string
	for i := 0; ; i++ {
		if k = fmt.Sprintf("m%d", i); fsm.KeySlot(k) <= 99 {
			break
		}
	}
	ro := dialRaw(t, p.n1)
	ro.do("READONLY")
	wantMoved := fmt.Sprintf("-MOVED %d %s\r\n", fsm.KeySlot(k), h2)
	if got := ro.do("SET", k, "v"); got != wantMoved {
		t.Errorf("SET of a moved slot on a READONLY connection to n1: %q, want %q", got, wantMoved)
	}
	if got := rc.do("SET", k, "v"); got != "+OK\r\n" {
		t.Fatalf("SET of a moved slot from a plain client of n1: %q", got)
	}
	for n := range 2 {
		if got := keysOf(p.stores[n][1]); !slices.Contains(got, k) {
			t.Errorf("node %d's replica of group 1 holds %q, want %s in it", n+1, got, k)
		}
		if got := keysOf(p.stores[n][0]); slices.Contains(got, k) {
			t.Errorf("node %d's replica of group 0 holds %s", n+1, k)
		}
	}
	// On n2, which leads the new owner, the key is served where it is.
	if got := dialRaw(t, p.n2).do("GET", k); got != "$1\r\nv\r\n" {
		t.Errorf("GET on n2: %q", got)
	}
}
