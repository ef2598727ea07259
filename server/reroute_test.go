package server

import (
	"slices"
	"testing"
	"time"

	"kvs/fsm"
)

// moveSlot takes slot s from group 0 to group 1 of p, as a move's steps do
// (fsm/move.go), up to and with the source's release when release is set,
// else up to its fence.
func (p *shardedPair) moveSlot(t *testing.T, s int, id uint64, release bool) {
	t.Helper()
	rs := []fsm.SlotRange{{Lo: s, Hi: s}}
	step := func(srv *Server, g int, cmd fsm.Command) fsm.Reply {
		t.Helper()
		r, err := srv.ProposeGroup(g, []fsm.Command{cmd})
		if err != nil || r[0].Kind == fsm.ReplyError {
			t.Fatalf("step %v on group %d: %v %v", cmd.Op, g, r, err)
		}
		return r[0]
	}
	step(p.n1, 0, fsm.MoveBegin(id, rs))
	view, err := p.stores[0][0].ExportSlots(rs)
	if err != nil {
		t.Fatal(err)
	}
	chunk, _ := view.Next(1 << 20)
	view.Release()
	step(p.n2, 1, fsm.MoveStage(id+1, rs, chunk))
	step(p.n1, 0, fsm.MoveFence(id))
	if !release {
		return
	}
	chunk, _, err = fsm.DrainReply(step(p.n1, 0, fsm.MoveDrain(id, 1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	step(p.n2, 1, fsm.MoveStage(id+1, rs, chunk))
	step(p.n2, 1, fsm.MoveActivate(id+1))
	step(p.n1, 0, fsm.MoveRelease(id))
}

// flipWhenWaited installs, on both nodes, the map in which slots have
// moved to group 1, once a command waits for a new map on srv.
func (p *shardedPair) flipWhenWaited(t *testing.T, srv *Server, version uint64, slots ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		srv.router.mapMu.Lock()
		waiting := srv.router.mapChanged != nil
		srv.router.mapMu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Error("no command waited for the slot map")
			return
		}
		time.Sleep(time.Millisecond)
	}
	table := slices.Clone(p.n1.router.slotMap().slots)
	for _, s := range slots {
		table[s] = 1
	}
	for _, n := range []*Server{p.n1, p.n2} {
		if err := n.SetSlotMap(version, table); err != nil {
			t.Error(err)
		}
	}
}

// TestRerouteRefused: a write the source group refused for a slot it gave
// up, or has fenced, is sent to the slot's new group once the node's slot
// map names it, from a plain connection; a cluster-aware one gets MOVED;
// and a script's refusal is answered as it is.
func TestRerouteRefused(t *testing.T) {
	p := startToldPair(t, time.Minute)
	released, fenced, ro, script := keyIn(0, 2, 0), keyIn(0, 2, 1), keyIn(0, 2, 2), keyIn(0, 2, 3)
	rc := dialRaw(t, p.n1)
	for _, k := range []string{released, fenced, ro, script} {
		if got := rc.do("SET", k, "old"); got != "+OK\r\n" {
			t.Fatalf("SET %s: %q", k, got)
		}
	}

	// Given up: sent to group 1 (led by n2) once n1's map says so.
	p.moveSlot(t, fsm.KeySlot(released), 10, true)
	done := make(chan string, 1)
	go func() { done <- rc.do("SET", released, "new") }()
	p.flipWhenWaited(t, p.n1, 1, fsm.KeySlot(released))
	if got := <-done; got != "+OK\r\n" {
		t.Fatalf("SET %s after its slot was given up: %q", released, got)
	}
	if got := dialRaw(t, p.n2).do("GET", released); got != "$3\r\nnew\r\n" {
		t.Errorf("GET %s on the new group's leader: %q", released, got)
	}

	// Fenced: the write waits for the hand-over, then goes to group 1.
	p.moveSlot(t, fsm.KeySlot(fenced), 20, false)
	go func() { done <- rc.do("SET", fenced, "new") }()
	p.n1.router.mapMu.Lock()
	p.n1.router.mapChanged = nil
	p.n1.router.mapMu.Unlock()
	p.flipWhenWaited(t, p.n1, 2) // not yet this slot: it waits on
	p.moveSlotRest(t, fsm.KeySlot(fenced), 20)
	p.flipWhenWaited(t, p.n1, 3, fsm.KeySlot(released), fsm.KeySlot(fenced))
	if got := <-done; got != "+OK\r\n" {
		t.Fatalf("SET %s after its slot was fenced: %q", fenced, got)
	}
	if got := dialRaw(t, p.n2).do("GET", fenced); got != "$3\r\nnew\r\n" {
		t.Errorf("GET %s on the new group's leader: %q", fenced, got)
	}

	// A cluster-aware client whose node's map is behind gets MOVED to
	// the new group's leader; a script's refusal is answered as it is.
	p.moveSlot(t, fsm.KeySlot(ro), 30, true)
	p.moveSlot(t, fsm.KeySlot(script), 40, true)
	cc := dialRaw(t, p.n1)
	cc.do("READONLY")
	go func() { done <- cc.do("SET", ro, "new") }()
	p.n1.router.mapMu.Lock()
	p.n1.router.mapChanged = nil
	p.n1.router.mapMu.Unlock()
	p.flipWhenWaited(t, p.n1, 4, fsm.KeySlot(released), fsm.KeySlot(fenced), fsm.KeySlot(ro))
	if got, want := <-done, "-MOVED "+itoa(fsm.KeySlot(ro))+" "+p.n2.Addr().String()+"\r\n"; got != want {
		t.Errorf("a cluster-aware SET %s: %q, want %q", ro, got, want)
	}
	if got := rc.do("EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", script); got != "-NOTOWNED slot "+itoa(fsm.KeySlot(script))+" is not served by this group\r\n" {
		t.Errorf("EVAL on a slot given up: %q", got)
	}
}

// startToldPair is startShardedPair with each group's stores told their
// slots, and commands a move refused waiting up to wait for the map.
func startToldPair(t *testing.T, wait time.Duration) *shardedPair {
	t.Helper()
	p := startShardedPair(t, func(c *Config) { c.RerouteWait = wait })
	for g, srv := range []*Server{p.n1, p.n2} {
		lo, hi := g*8192, g*8192+8191
		if _, err := srv.ProposeGroup(g, []fsm.Command{fsm.SlotsAssign([]fsm.SlotRange{{Lo: lo, Hi: hi}})}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestRerouteGivesUp: a write refused for a slot its group gave up, or
// fenced, while the node's map does not move the slot, gets TRYAGAIN once
// the wait is over, and is not applied anywhere.
func TestRerouteGivesUp(t *testing.T) {
	p := startToldPair(t, 10*time.Millisecond)
	released, fenced := keyIn(0, 2, 0), keyIn(0, 2, 1)
	p.moveSlot(t, fsm.KeySlot(released), 10, true)
	p.moveSlot(t, fsm.KeySlot(fenced), 20, false)
	rc := dialRaw(t, p.n1)
	if got := rc.do("SET", released, "x"); got != "-"+errSlotUnknown(fsm.KeySlot(released))+"\r\n" {
		t.Errorf("SET %s with no new map: %q", released, got)
	}
	if got, want := rc.do("SET", fenced, "x"), "-TRYAGAIN slot "+itoa(fsm.KeySlot(fenced))+" is moving, the write was not applied\r\n"; got != want {
		t.Errorf("SET %s fenced: %q, want %q", fenced, got, want)
	}
	for _, k := range []string{released, fenced} {
		for n := range 2 {
			for g := range 2 {
				r := p.stores[n][g].Read(time.Now().UnixMilli(), fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte(k)}})
				if r.Kind == fsm.ReplyBulk {
					t.Errorf("%s holds %q on node %d's group %d", k, r.Bulk, n+1, g)
				}
			}
		}
	}
}

// moveSlotRest finishes what moveSlot left at the fence.
func (p *shardedPair) moveSlotRest(t *testing.T, s int, id uint64) {
	t.Helper()
	rs := []fsm.SlotRange{{Lo: s, Hi: s}}
	r, err := p.n1.ProposeGroup(0, []fsm.Command{fsm.MoveDrain(id, 1<<20)})
	if err != nil {
		t.Fatal(err)
	}
	chunk, _, err := fsm.DrainReply(r[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		srv *Server
		g   int
		cmd fsm.Command
	}{
		{p.n2, 1, fsm.MoveStage(id+1, rs, chunk)},
		{p.n2, 1, fsm.MoveActivate(id + 1)},
		{p.n1, 0, fsm.MoveRelease(id)},
	} {
		if r, err := st.srv.ProposeGroup(st.g, []fsm.Command{st.cmd}); err != nil || r[0].Kind == fsm.ReplyError {
			t.Fatalf("step on group %d: %v %v", st.g, r, err)
		}
	}
}
