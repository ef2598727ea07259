package test

import (
	"bufio"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Moves of slots as chaos faults (TestChaosGroups). Next to the kills,
// pauses and partitions, the schedule of a cluster of several groups
// draws faults that move a range of slots to another data group through
// KVS.SLOTS MOVE sent to any member, cancel a move in flight, or start a
// move and hit the cluster with another fault once the move reaches a
// phase drawn at random. A move goes on in the background: the faults
// drawn after it hit it mid-copy, fenced, activating or flipping the map.
// One more fault cuts a node off in one raft group alone (the meta group
// or a data group, drawn), its other groups untouched: its replicas then
// disagree on where a move stands, as when a node leads a move's source
// group again before its replica of the meta group has caught up.
//
// Each range is contiguous, within one run of the stored slot map, from
// a few slots to a few hundred, and holds the slot of a key the workers
// use (an epoch's keys, or the lists below), so the keys under test move
// again and again. Filler keys spread over every slot (a string of about
// a kilobyte each, --slot-move-rate 16kb) make a range's copy last from a
// moment to seconds, so that faults land in the middle of it.
//
// Besides the histories porcupine checks, list workers RPUSH unique
// elements to a few lists of the moving slots for the whole run; at the
// end every acknowledged element must be in its list exactly once, no
// element of a push that certainly failed may be there, and one
// worker's acknowledged elements must be in the order it pushed them.
// Every epoch waits for the moves in flight to finish (done or
// cancelled) once its faults stop; at the end of the run every member
// must route each slot to the group the stored slot map names, and the
// keys counted over the groups' leaders must be the keys there are
// (checkConserved), filler and lists included.

var chaosMoveFaults = []chaosFault{
	{name: "move-slots", members: 1, weight: 5, inject: (*chaos).moveSlots},
	{name: "move-then-fault", members: 1, weight: 3, nests: true, inject: (*chaos).moveThenFault},
	{name: "cancel-move", members: 1, inject: (*chaos).cancelMove},
	{name: "isolate-replica", members: 2, weight: 2, inject: (*chaos).isolateReplica},
}

const (
	// chaosFillers keys of about chaosFillerSize bytes are spread over
	// the slots of a sharded chaos run, so that a range's copy takes a
	// while at chaosMoveRate.
	chaosFillers    = 3000
	chaosFillerSize = 1000
	chaosMoveRate   = "16kb"
	// chaosListKeys lists per group take the list workers' pushes.
	chaosListKeys    = 2
	chaosListWorkers = 3
	// chaosMovesQueued: with this many moves not finished, a move fault
	// cancels one instead of queueing another.
	chaosMovesQueued = 2
	// chaosMoveWait bounds the wait for the moves in flight to finish
	// once faults stop: a hang detector, not a speed assertion.
	chaosMoveWait = 3 * time.Minute
)

// chaosMoves is what the move faults did, for the report and the final
// checks.
type chaosMoves struct {
	asked      []uint64 // ids of the moves recorded
	askFailed  int      // KVS.SLOTS MOVE answered with an error
	cancels    int      // KVS.SLOTS CANCEL answered +OK
	refused    int      // cancels refused (past the hand-over, or finished)
	keysMoved  int      // worker keys inside the ranges asked to move, summed over the moves
	fillers    map[string]string
	lists      *chaosListLoad
	ended      map[uint64]string // id -> final phase and note
	fenceFault int               // move-then-fault faults that caught a move fenced or later
}

// slotRun is a run of slots of one group in a slot map.
type slotRun struct{ first, last, group int }

// parseSlotRuns parses KVS.STATUS's slot_map ("first-last:group,...").
func parseSlotRuns(s string) ([]slotRun, error) {
	var out []slotRun
	for part := range strings.SplitSeq(s, ",") {
		rng, g, ok1 := strings.Cut(part, ":")
		a, b, ok2 := strings.Cut(rng, "-")
		first, err1 := strconv.Atoi(a)
		last, err2 := strconv.Atoi(b)
		grp, err3 := strconv.Atoi(g)
		if !ok1 || !ok2 || err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("bad slot map run %q in %q", part, s)
		}
		out = append(out, slotRun{first, last, grp})
	}
	return out, nil
}

// slotMapNow returns the newest slot map a member routes by, and its
// version.
func (c *chaos) slotMapNow() (int, []slotRun, error) {
	best, bestMap := -1, ""
	var lastErr error
	for _, n := range c.members() {
		if n.isExited() {
			continue
		}
		st, err := kvsStatus(n.Addr)
		if err != nil {
			lastErr = err
			continue
		}
		v, err := strconv.Atoi(st.fields["slot_map_version"])
		if err != nil {
			lastErr = fmt.Errorf("%s: slot_map_version %q", n.Name, st.fields["slot_map_version"])
			continue
		}
		if v > best {
			best, bestMap = v, st.fields["slot_map"]
		}
	}
	if best < 0 {
		return 0, nil, fmt.Errorf("no member told its slot map: %v", lastErr)
	}
	runs, err := parseSlotRuns(bestMap)
	return best, runs, err
}

// groupRuns returns, for each data group the newest slot map gives slots
// to, by id, its longest run of slots there, as [first, last]. A group
// without slots (one that lost every slot to moves, one just added, or
// one emptied to be removed) has no run: it keeps no key of the epoch
// until it owns slots.
func (c *chaos) groupRuns() [][2]int {
	var out [][2]int
	waitFor(c.t, "the slot map", func() error {
		_, runs, err := c.slotMapNow()
		if err != nil {
			return err
		}
		longest := map[int][2]int{}
		for _, r := range runs {
			if r.group < 1 {
				return fmt.Errorf("slot map gives slots %d-%d to group %d", r.first, r.last, r.group)
			}
			if cur, ok := longest[r.group]; !ok || r.last-r.first > cur[1]-cur[0] {
				longest[r.group] = [2]int{r.first, r.last}
			}
		}
		out = nil
		for _, g := range slices.Sorted(maps.Keys(longest)) {
			out = append(out, longest[g])
		}
		return nil
	})
	return out
}

// oneCommand sends args to addr on a connection of its own and returns
// the reply.
func oneCommand(addr string, timeout time.Duration, args ...string) (Value, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return Value{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(encodeCommand(args...)); err != nil {
		return Value{}, err
	}
	return readValue(bufio.NewReader(conn))
}

// shownMoveT is one move as KVS.SLOTS STATUS lists it.
type shownMoveT struct {
	id       uint64
	slots    string
	phase    string
	note     string
	attempts int64
}

func (m shownMoveT) finished() bool { return m.phase == "done" || m.phase == "cancelled" }

// movesNow is KVS.SLOTS STATUS of a running member, the first that
// answers. It draws nothing from c.rng: it is polled a number of times
// that depends on timing, and the schedule must not.
func (c *chaos) movesNow() ([]shownMoveT, error) {
	var lastErr error
	for i, n := range c.nodes {
		if c.out[i] || n.isExited() {
			continue
		}
		v, err := oneCommand(n.Addr, 5*time.Second, "KVS.SLOTS", "STATUS")
		if err == nil && v.Kind != '*' {
			err = fmt.Errorf("KVS.SLOTS STATUS on %s: %s", n.Name, v)
		}
		if err != nil {
			lastErr = err
			continue
		}
		var out []shownMoveT
		for _, e := range v.Elems {
			var m shownMoveT
			for i := 0; i+1 < len(e.Elems); i += 2 {
				val := e.Elems[i+1].Str
				switch e.Elems[i].Str {
				case "id":
					id, _ := strconv.ParseUint(val, 10, 64)
					m.id = id
				case "slots":
					m.slots = val
				case "phase":
					m.phase = val
				case "note":
					m.note = val
				case "attempts":
					m.attempts, _ = strconv.ParseInt(val, 10, 64)
				}
			}
			out = append(out, m)
		}
		return out, nil
	}
	return nil, fmt.Errorf("no member answered KVS.SLOTS STATUS: %v", lastErr)
}

// workerKeys are the keys the workers use now: the epoch's and the
// lists.
func (c *chaos) workerKeys() []string {
	return slices.Concat(c.epochKeys, c.moves.lists.keys)
}

// pickRange draws a range to move: around the slot of a worker key, within
// the run of the slot map holding it, from 1 to 400 slots, and a target
// group other than the run's.
func (c *chaos) pickRange() (first, last, target int, ok bool) {
	_, runs, err := c.slotMapNow()
	if err != nil {
		c.logf("move: no slot map: %v", err)
		return 0, 0, 0, false
	}
	keys := c.workerKeys()
	s := keySlot(keys[c.rng.Intn(len(keys))])
	var run slotRun
	for _, r := range runs {
		if r.first <= s && s <= r.last {
			run = r
		}
	}
	// Sizes spread over a few to a few hundred slots, small ones as
	// likely as large.
	size := int(math.Exp(c.rng.Float64() * math.Log(400)))
	size = min(max(size, 1), run.last-run.first+1)
	lo := max(run.first, s-c.rng.Intn(size))
	lo = min(lo, run.last-size+1)
	first, last = lo, lo+size-1
	// Any live data group but the run's, and but one being emptied to
	// be removed (which would refuse to go while a move into it is in
	// flight).
	var to []int
	for _, g := range c.regroup.live {
		if g != run.group && g != c.regroup.removing {
			to = append(to, g)
		}
	}
	if len(to) == 0 {
		c.logf("move: no group to move slots %d-%d of group %d to", first, last, run.group)
		return 0, 0, 0, false
	}
	target = to[c.rng.Intn(len(to))]
	return first, last, target, true
}

// askMove records a move of a drawn range through a random member and
// returns its id.
func (c *chaos) askMove() (uint64, bool) {
	first, last, target, ok := c.pickRange()
	if !ok {
		return 0, false
	}
	in := 0
	for _, k := range c.workerKeys() {
		if s := keySlot(k); first <= s && s <= last {
			in++
		}
	}
	_, n := c.pick()
	v, err := oneCommand(n.Addr, ioTimeout, "KVS.SLOTS", "MOVE", strconv.Itoa(first), strconv.Itoa(last), strconv.Itoa(target))
	if err != nil || v.Kind != ':' {
		// Refused (no meta leader yet, a range a move in flight took,
		// ...) or of unknown outcome: a move recorded is found by the
		// wait for the moves to finish all the same.
		c.moves.askFailed++
		c.logf("move slots %d-%d to group %d via %s: %s %v", first, last, target, n.Name, v, err)
		return 0, false
	}
	id, _ := strconv.ParseUint(v.Str, 10, 64)
	c.moves.asked = append(c.moves.asked, id)
	c.moves.keysMoved += in
	c.logf("move %d: slots %d-%d (%d slots, %d worker keys) to group %d, via %s", id, first, last, last-first+1, in, target, n.Name)
	return id, true
}

// moveSlots starts a move and returns at once: the move goes on while
// the next faults hit. With chaosMovesQueued moves not finished it
// cancels one instead.
func (c *chaos) moveSlots() {
	ms, err := c.movesNow()
	if err != nil {
		c.logf("move: %v", err)
		return
	}
	var open []shownMoveT
	for _, m := range ms {
		if !m.finished() {
			open = append(open, m)
		}
	}
	if len(open) >= chaosMovesQueued {
		c.cancel(open[c.rng.Intn(len(open))])
		return
	}
	c.askMove()
}

// cancelMove cancels a move not finished, or starts one and cancels it
// after a drawn time.
func (c *chaos) cancelMove() {
	ms, err := c.movesNow()
	if err != nil {
		c.logf("cancel: %v", err)
		return
	}
	var open []shownMoveT
	for _, m := range ms {
		if !m.finished() {
			open = append(open, m)
		}
	}
	if len(open) == 0 {
		id, ok := c.askMove()
		if !ok {
			return
		}
		time.Sleep(c.between(0, 3*time.Second)) // the schedule: cancel at a random point of the move
		open = []shownMoveT{{id: id}}
	}
	c.cancel(open[c.rng.Intn(len(open))])
}

func (c *chaos) cancel(m shownMoveT) {
	_, n := c.pick()
	v, err := oneCommand(n.Addr, ioTimeout, "KVS.SLOTS", "CANCEL", strconv.FormatUint(m.id, 10))
	switch {
	case err == nil && string(v.Raw) == "+OK\r\n":
		c.moves.cancels++
	case err == nil && strings.Contains(v.Str, "cannot be cancelled"):
		c.moves.refused++
	}
	c.logf("cancel move %d via %s: %s %v", m.id, n.Name, v, err)
}

// moveThenFault starts a move, waits (polling KVS.SLOTS STATUS) until it
// reaches a phase drawn among copying, fenced and activated, or one past
// it, and then injects another fault, drawn from chaosFaults, with the
// move at that point.
func (c *chaos) moveThenFault() {
	phases := []string{"begun", "copying", "fenced", "activated", "released", "flipped", "done"}
	want := phases[1+c.rng.Intn(3)]
	f := c.draw(slices.DeleteFunc(slices.Clone(chaosFaults), func(f chaosFault) bool { return f.nests }))
	id, ok := c.askMove()
	if !ok {
		return
	}
	at := ""
	deadline := time.Now().Add(clusterWait)
	for time.Now().Before(deadline) {
		ms, err := c.movesNow()
		if err == nil {
			for _, m := range ms {
				if m.id == id {
					at = m.phase
				}
			}
		}
		if i := slices.Index(phases, at); at == "cancelled" || i >= slices.Index(phases, want) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if i := slices.Index(phases, at); i >= 2 && i <= 4 {
		c.moves.fenceFault++
	}
	c.logf("move %d is %s (waited for %s): %s", id, at, want, f.name)
	c.faults[f.name]++
	f.inject(c)
}

// waitMoves waits until no move is in flight, and notes how each of the
// moves asked ended.
func (c *chaos) waitMoves() {
	var last []shownMoveT
	pollFor(c.t, "the slot moves in flight to finish", chaosMoveWait, 100*time.Millisecond, func() error {
		ms, err := c.movesNow()
		if err != nil {
			return err
		}
		last = ms
		for _, m := range ms {
			if !m.finished() {
				return fmt.Errorf("move %d (%s) is %s, attempt %d", m.id, m.slots, m.phase, m.attempts)
			}
		}
		return nil
	})
	for _, m := range last {
		if _, seen := c.moves.ended[m.id]; !seen && slices.Contains(c.moves.asked, m.id) {
			c.moves.ended[m.id] = strings.TrimSpace(m.phase + " " + m.note)
			c.logf("move %d (%s) ended %s %s", m.id, m.slots, m.phase, m.note)
		}
	}
}

// checkRouting checks, once no move is in flight, that every member
// routes by the same slot map, and that its CLUSTER SLOTS gives every
// slot to the leader of the group that map names.
func (c *chaos) checkRouting() {
	waitFor(c.t, "every member to route each slot to the group the stored slot map names", func() error {
		ls, err := groupLeadersNow(c.members(), c.raftGroups())
		if err != nil {
			return err
		}
		version, runs := "", ""
		for _, n := range c.members() {
			st, err := kvsStatus(n.Addr)
			if err != nil {
				return err
			}
			if version == "" {
				version, runs = st.fields["slot_map_version"], st.fields["slot_map"]
			} else if st.fields["slot_map_version"] != version || st.fields["slot_map"] != runs {
				return fmt.Errorf("%s routes by slot map %s %s, another member by %s %s",
					n.Name, st.fields["slot_map_version"], st.fields["slot_map"], version, runs)
			}
			sm, err := parseSlotRuns(runs)
			if err != nil {
				return err
			}
			var owner [16384]string
			for _, r := range sm {
				if r.group >= len(ls) || ls[r.group] == nil {
					return fmt.Errorf("%s's slot map gives slots %d-%d to group %d, which no member lists", n.Name, r.first, r.last, r.group)
				}
				for s := r.first; s <= r.last; s++ {
					owner[s] = ls[r.group].Addr
				}
			}
			v, err := oneCommand(n.Addr, 5*time.Second, "CLUSTER", "SLOTS")
			if err != nil || v.Kind != '*' {
				return fmt.Errorf("CLUSTER SLOTS on %s: %s %v", n.Name, v, err)
			}
			var got [16384]string
			for _, e := range v.Elems {
				if len(e.Elems) < 3 || len(e.Elems[2].Elems) < 2 {
					return fmt.Errorf("CLUSTER SLOTS on %s: %s", n.Name, e)
				}
				lo, _ := strconv.Atoi(e.Elems[0].Str)
				hi, _ := strconv.Atoi(e.Elems[1].Str)
				addr := net.JoinHostPort(e.Elems[2].Elems[0].Str, e.Elems[2].Elems[1].Str)
				for s := lo; s <= hi && s < len(got); s++ {
					got[s] = addr
				}
			}
			for s := range owner {
				if got[s] != owner[s] {
					return fmt.Errorf("%s: CLUSTER SLOTS gives slot %d to %q, the slot map (version %s) to %q", n.Name, s, got[s], version, owner[s])
				}
			}
		}
		return nil
	})
}

// seedFillers writes the filler keys through the members, pipelined.
func (c *chaos) seedFillers() {
	c.moves.fillers = map[string]string{}
	var keys []string
	for i := range chaosFillers {
		k := fmt.Sprintf("chaos:fill:%d", i)
		v := fmt.Sprintf("%d:", i)
		v += strings.Repeat("f", chaosFillerSize-len(v))
		c.moves.fillers[k] = v
		keys = append(keys, k)
	}
	for lo := 0; lo < len(keys); lo += 500 {
		batch := keys[lo:min(lo+500, len(keys))]
		waitFor(c.t, "the filler keys", func() error {
			n := c.nodes[lo/500%len(c.nodes)]
			conn, err := net.DialTimeout("tcp", n.Addr, time.Second)
			if err != nil {
				return err
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(ioTimeout))
			var req []byte
			for _, k := range batch {
				req = append(req, encodeCommand("SET", k, c.moves.fillers[k])...)
			}
			if _, err := conn.Write(req); err != nil {
				return err
			}
			r := bufio.NewReader(conn)
			for _, k := range batch {
				if v, err := readValue(r); err != nil || string(v.Raw) != "+OK\r\n" {
					return fmt.Errorf("SET %s on %s: %s %v", k, n.Name, v, err)
				}
			}
			return nil
		})
	}
}

// chaosListLoad is the list workers' ledger: every RPUSH of a unique
// element, with its outcome.
type chaosListLoad struct {
	keys []string
	h    *opHistory[listPush]
	stop func()
}

// listPush is one RPUSH key elem.
type listPush struct {
	Worker         int
	Key, Elem      string
	Invoke, Return int64
	Outcome        Outcome
	Result         string
	ErrReply       bool // Result is an error reply's text
	NotInt         bool // the reply was no error and no integer
}

func (p listPush) outcome() Outcome { return p.Outcome }

// startLists starts the list workers on lists placed in each group's
// slots.
func (c *chaos) startLists(seed int64) {
	l := &chaosListLoad{h: &opHistory[listPush]{origin: time.Now()}}
	for g, r := range c.shards {
		for i := range chaosListKeys {
			l.keys = append(l.keys, keyInSlots(fmt.Sprintf("chaos:list:%d%c", g, 'a'+i), r))
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range chaosListWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.worker(c, w, seed, done)
		}()
	}
	l.stop = sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
	c.t.Cleanup(l.stop)
	c.moves.lists = l
	waitOK(c.t, l.h, chaosMinOK)
}

// worker pushes elements never pushed before, w:seq, to the lists in turn
// through the nodes in turn (a node forwards the push to its group's
// leader), one at a time.
func (l *chaosListLoad) worker(c *chaos, w int, seed int64, done <-chan struct{}) {
	attempt := 0
	for seq := 0; ; {
		select {
		case <-done:
			return
		default:
		}
		n := c.nodes[(w+attempt)%len(c.nodes)]
		attempt++
		conn, err := net.DialTimeout("tcp", n.Addr, time.Second)
		if err != nil {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond): // the node is down; try another
			}
			continue
		}
		r := bufio.NewReader(conn)
		for {
			select {
			case <-done:
				conn.Close()
				return
			default:
			}
			seq++
			p := listPush{Worker: w, Key: l.keys[(int(seed)+w+seq)%len(l.keys)], Elem: fmt.Sprintf("%d:%d", w, seq)}
			op := HistOp{Kind: "rpush"}
			p.Invoke = l.h.Now()
			conn.SetDeadline(time.Now().Add(histOpTimeout))
			var v Value
			_, err := conn.Write(encodeCommand("RPUSH", p.Key, p.Elem))
			if err == nil {
				v, err = readValue(r)
			}
			op.Return = l.h.Now()
			classify(&op, v, err)
			p.Return, p.Outcome, p.Result, p.ErrReply = op.Return, op.Outcome, op.Result, op.ErrReply
			if op.Outcome == OutcomeOK && v.Kind != ':' {
				p.Outcome, p.NotInt = OutcomeUnknown, true
			}
			l.h.Add(p)
			if err != nil {
				break
			}
			if p.Outcome == OutcomeFailed {
				time.Sleep(10 * time.Millisecond) // back off as a client would
			}
		}
		conn.Close()
	}
}

// check reads every list (a linearizable read through any member) and
// checks it against the ledger; it returns the problems found and counts.
func (l *chaosListLoad) check(c *chaos) (problems []string, acked, failed, unknown int) {
	l.stop()
	pushes := l.h.Ops()
	byElem := map[string]listPush{}
	for _, p := range pushes {
		byElem[p.Elem] = p
		switch p.Outcome {
		case OutcomeOK:
			acked++
		case OutcomeFailed:
			failed++
		default:
			unknown++
		}
		code, _, _ := strings.Cut(p.Result, " ")
		switch {
		case p.ErrReply && code != "CLUSTERDOWN" && code != "TRYAGAIN" && code != "UNCERTAIN" && code != "LOADING":
			problems = append(problems, fmt.Sprintf("RPUSH %s %s: unexpected error reply %q", p.Key, p.Elem, p.Result))
		case p.NotInt:
			problems = append(problems, fmt.Sprintf("RPUSH %s %s: unexpected reply %q", p.Key, p.Elem, p.Result))
		}
	}
	lists := map[string][]string{}
	for _, k := range l.keys {
		waitFor(c.t, "reading list "+k, func() error {
			_, n := c.pick()
			v, err := oneCommand(n.Addr, ioTimeout, "LRANGE", k, "0", "-1")
			if err != nil || v.Kind != '*' {
				return fmt.Errorf("LRANGE %s on %s: %s %v", k, n.Name, v, err)
			}
			lists[k] = nil
			for _, e := range v.Elems {
				lists[k] = append(lists[k], e.Str)
			}
			return nil
		})
	}
	pos := map[string]int{} // element -> its index in its list
	for _, k := range l.keys {
		for i, e := range lists[k] {
			p, sent := byElem[e]
			switch {
			case !sent || p.Key != k:
				problems = append(problems, fmt.Sprintf("%s holds %q, which no worker pushed there", k, e))
			case p.Outcome == OutcomeFailed:
				problems = append(problems, fmt.Sprintf("%s holds %q, whose push failed: %s", k, e, p.Result))
			}
			if _, twice := pos[e]; twice {
				problems = append(problems, fmt.Sprintf("%s holds %q twice", k, e))
			}
			pos[e] = i
		}
	}
	// One worker's acknowledged pushes to a list must be there in the
	// order it made them: each returned before the next was sent.
	lastPos := map[[2]any]int{} // (worker, key) -> index of its last acknowledged element
	for _, p := range pushes {
		if p.Outcome != OutcomeOK {
			continue
		}
		i, there := pos[p.Elem]
		if !there {
			problems = append(problems, fmt.Sprintf("acknowledged push of %q to %s is lost", p.Elem, p.Key))
			continue
		}
		wk := [2]any{p.Worker, p.Key}
		if j, ok := lastPos[wk]; ok && j > i {
			problems = append(problems, fmt.Sprintf("%s holds %q before the element worker %d pushed and had acknowledged earlier", p.Key, p.Elem, p.Worker))
		}
		lastPos[wk] = i
	}
	return problems, acked, failed, unknown
}

// present returns the lists that hold elements: the keys they count for.
func (l *chaosListLoad) present(c *chaos) []string {
	var out []string
	for _, k := range l.keys {
		waitFor(c.t, "LLEN "+k, func() error {
			_, n := c.pick()
			v, err := oneCommand(n.Addr, ioTimeout, "LLEN", k)
			if err != nil || v.Kind != ':' {
				return fmt.Errorf("LLEN %s on %s: %s %v", k, n.Name, v, err)
			}
			if v.Str != "0" {
				out = append(out, k)
			}
			return nil
		})
	}
	return out
}

// coverBarriers adds a barrier key in each group's slots where the
// barriers have none since moves, so that the final reads write in
// every group. The earlier ones stay: each is a key to find at the end.
func (c *chaos) coverBarriers() {
	waitFor(c.t, "a barrier key in each group", func() error {
		_, runs, err := c.slotMapNow()
		if err != nil {
			return err
		}
		covered := map[int]bool{}
		for _, b := range c.barriers {
			s := keySlot(b)
			for _, r := range runs {
				if r.first <= s && s <= r.last {
					covered[r.group] = true
				}
			}
		}
		for _, r := range runs {
			if !covered[r.group] {
				covered[r.group] = true
				c.barriers = append(c.barriers, keyInSlots(fmt.Sprintf("chaos:barrier:%d.%d", r.group, len(c.barriers)), [2]int{r.first, r.last}))
			}
		}
		return nil
	})
}

// checkMoves runs at the end of a sharded run, the faults over and the
// moves finished: the lists against their ledger, the routing of every
// slot on every member against the stored slot map, and the report of
// what the moves did.
func (c *chaos) checkMoves(tot *chaosTotals) {
	t := c.t
	c.waitMoves()
	problems, acked, failed, unknown := c.moves.lists.check(c)
	for _, p := range problems {
		t.Errorf("lists: %s", p)
		if strings.Contains(p, "is lost") {
			tot.lost++
		} else {
			tot.violations++
		}
	}
	c.extra = c.moves.lists.present(c)
	c.checkRouting()
	version, _, err := c.slotMapNow()
	if err != nil {
		t.Fatal(err)
	}
	ended := map[string]int{}
	for _, id := range c.moves.asked {
		e, ok := c.moves.ended[id]
		if !ok {
			e = "finished (no longer listed)"
		}
		phase, _, _ := strings.Cut(e, " ")
		if phase == "cancelled" && e != phase {
			phase = "cancelled by kvs"
		}
		ended[phase]++
	}
	t.Logf("slot moves: %d asked (%d refused or of unknown outcome), ended %v; slot map version %d at the end; %d cancels taken, %d refused; %d faults injected with a move fenced to released; worker keys in the ranges asked: %d",
		len(c.moves.asked), c.moves.askFailed, ended, version, c.moves.cancels, c.moves.refused, c.moves.fenceFault, c.moves.keysMoved)
	t.Logf("lists: %d RPUSHes acknowledged, %d failed, %d unknown, over %d lists; %d filler keys", acked, failed, unknown, len(c.moves.lists.keys), len(c.moves.fillers))
	if len(c.moves.asked) == 0 {
		t.Errorf("no move of slots was recorded: the move faults did not exercise moves")
	}
	if acked == 0 {
		t.Errorf("no RPUSH acknowledged: the lists did not exercise the moves")
	}
}

// isolateReplica cuts one member off from the others in one raft group
// drawn among all (the meta group included, and the data groups there are
// now), both ways, for a drawn time; its other groups go on. The settle
// that follows heals it.
func (c *chaos) isolateReplica() {
	i, n := c.pick()
	ids := append([]int{0}, c.regroup.live...)
	g := ids[c.rng.Intn(len(ids))]
	c.proxies.IsolateGroup(uint32(g), i)
	c.holdPartition(fmt.Sprintf("isolate %s in group %d alone", n.Name, g))
}
