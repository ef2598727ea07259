package test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestChaos runs a seeded schedule of faults against a three-node cluster
// with linearizable reads while workers record a client history over all
// three nodes, and checks that history with porcupine. TestChaosStale runs
// the same schedule on a cluster with the default stale reads and checks
// its history with the stale-read checker.
//
// Every node's raft listener sits behind a Proxy (faultproxy_test.go)
// that knows which node sent each RPC, so the schedule can cut single
// links (isolate the leader, split a follower off, a bridge, one
// direction, a flapping pair) and deafen, slow or flap a node, as well as
// kill, pause and restart processes and remove a node and join it again.
// One fault runs at a time and is undone before the next (the membership
// change holds one more fault inside it); between faults the test waits
// for every member to run and agree on a leader, which is also the
// liveness check.
//
// Long runs are split into epochs of at most chaosEpoch. Each epoch starts
// new workers on keys of its own and ends with the cluster healed, the
// workers stopped and a final read of each key, so its history is checked
// alone: porcupine's search stays small however long the run, and a write
// of unknown outcome from an earlier epoch, which may still land, cannot
// touch a later epoch's keys. A failed check leaves the raw history (and,
// for porcupine, its visualization) in the test's node directory, under
// epochN/. Each epoch also waits for chaosMinOK acknowledged operations
// before its first fault and after its last, so a cluster that stopped
// serving fails the test rather than passing on an empty history.
//
// Every epoch has register keys (SET, CAS, DEL, GET) and counter keys
// (INCR, GET), which the stale-read checker judges in both tests: no
// acknowledged write lost, every read names a write, one client's reads
// on one node never go back. TestChaos adds mixed keys, where INCR and SET
// meet, which only porcupine can judge. After the last epoch every key of
// every epoch must still be where its epoch left it (checkConserved).
//
// -chaos.time (-chaos.stale-time for TestChaosStale) bounds when the last
// fault starts; that fault, the healing and the checks add some seconds.
// The seed (-args -seed=N or KVS_TEST_SEED) fixes the sequence of fault
// kinds, the nodes drawn for them, their durations and the workers'
// operations; which node leads, and process and network timing, still vary
// from run to run.
//
//	go test ./test/ -run 'TestChaos$' -v -args -chaos.time=2m -seed=42
//	go test ./test/ -run TestChaosStale -v -args -chaos.stale-time=2m -seed=42
//	make chaos CHAOS_TIME=30m CHAOS_SEED=42
var (
	flagChaosTime      = flag.Duration("chaos.time", 20*time.Second, "how long TestChaos injects faults")
	flagChaosStaleTime = flag.Duration("chaos.stale-time", 15*time.Second, "how long TestChaosStale injects faults")
	flagChaosTLSTime   = flag.Duration("chaos.tls-time", 10*time.Second, "how long TestChaosTLS injects faults")
)

const (
	chaosEpoch   = 30 * time.Second
	chaosWorkers = 6
	// chaosElection is kvs's default raft election timeout
	// (cluster.DefaultElectionTimeout); a paused leader sleeps for 1 to 3
	// of them.
	chaosElection = 500 * time.Millisecond
	// chaosMinOK acknowledged operations are awaited before an epoch's
	// first fault and again after its last one.
	chaosMinOK = 50
)

// A chaosFault injects one fault and undoes it before returning.
type chaosFault struct {
	name string
	// members is how many cluster members the fault needs; a fault run
	// while a node is out of the cluster is drawn among those that fit.
	members int
	// nests marks the membership change, which runs another fault inside
	// itself and so is never drawn there.
	nests bool
	// weight is how often the fault is drawn against the others (0 is
	// 1).
	weight int
	inject func(c *chaos)
}

var chaosFaults = []chaosFault{
	{name: "kill-leader", members: 1, inject: (*chaos).killLeader},
	{name: "kill-node", members: 1, inject: (*chaos).killNode},
	{name: "pause-leader", members: 1, inject: (*chaos).pauseLeader},
	{name: "deafen", members: 1, inject: (*chaos).deafen},
	{name: "delay", members: 1, inject: (*chaos).delay},
	{name: "flap", members: 1, inject: (*chaos).flap},
	{name: "restart-all", members: 1, inject: (*chaos).restartAll},
	{name: "isolate-leader", members: 2, inject: (*chaos).isolateLeader},
	{name: "split-leader-majority", members: 3, inject: (*chaos).splitLeaderMajority},
	{name: "bridge", members: 3, inject: (*chaos).bridge},
	{name: "one-way-to-leader", members: 2, inject: (*chaos).oneWayToLeader},
	{name: "flap-link", members: 2, inject: (*chaos).flapLink},
	{name: "remove-rejoin", members: 3, nests: true, inject: (*chaos).removeRejoin},
}

// chaos is the state of one chaos run. Only the test goroutine uses it,
// except gens, which the workers read.
type chaos struct {
	t     *testing.T
	stale bool // --reads stale: no porcupine, mixed keys left out
	// groups is the cluster's --groups; 0 and 1 are one group. With
	// several, the faults on "the leader" hit the leader of a group
	// drawn at random, and the cluster has settled once every group
	// has a leader that every member names.
	groups  int
	nodes   []*Node
	proxies RaftProxies // proxies.P[i] carries every raft RPC to nodes[i]
	rng     *rand.Rand
	start   time.Time
	faults  map[string]int // injected, by kind
	paused  *Node          // SIGSTOPped and not yet continued
	out     map[int]bool   // nodes removed from the cluster and not yet back
	// schedule is chaosFaults, which removeRejoin draws from again (a
	// field, since chaosFaults cannot refer to itself).
	schedule []chaosFault
	// shards are the slot ranges of the groups (one range for a cluster
	// of one group), in the groups' order; barriers are the keys
	// finalReads writes, one in each.
	shards   [][2]int
	barriers []string
	// epochKeys are the keys of the epoch running; moves is what the
	// faults that move slots did (a cluster of several groups only).
	epochKeys []string
	moves     *chaosMoves
	// extra are keys present at the end that are not strings (the
	// lists the move faults' workers push to): checkConserved counts
	// them, and finds them in each member's replica, but does not GET
	// them.
	extra []string
	// regroup is what the faults that add and remove data groups did,
	// and the set of data groups as the members last agreed on it (a
	// cluster of several groups only).
	regroup *chaosRegroup

	gensMu sync.Mutex
	gens   map[string]int // node name -> times its data was wiped
}

// chaosTotals adds up what the epochs found.
type chaosTotals struct {
	ops        []HistOp
	lost       int // acknowledged writes missing from a final value
	violations int // everything else either checker found
	linChecked int // operations porcupine checked
	// final is every epoch's final read of each of its keys: what every
	// member must hold at the end of the run.
	final map[string]finalRead
}

// chaosOpts says which cluster a chaos run faces.
type chaosOpts struct {
	stale  bool // --reads stale, checked by the stale-read checker; otherwise linearizable and porcupine
	tls    bool // --tls-cluster yes
	groups int  // --groups; 0 is one group
}

func TestChaos(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosOpts{}, *flagChaosTime)
}

func TestChaosStale(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosOpts{stale: true}, *flagChaosStaleTime)
}

// TestChaosTLS runs the same schedule against a cluster with mutual TLS
// between its nodes (--tls-cluster yes): raft, forwarding and joins over
// TLS, the proxies' faults cutting and delaying TLS streams.
func TestChaosTLS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the raft proxies tell TLS senders apart through /proc")
	}
	t.Parallel()
	runChaos(t, chaosOpts{tls: true}, *flagChaosTLSTime)
}

func runChaos(t *testing.T, o chaosOpts, length time.Duration) {
	seed := testSeed(t)
	stale, withTLS := o.stale, o.tls
	reads := "linearizable"
	if stale {
		reads = "stale"
	}
	flags := []string{"--reads", reads}
	if o.groups > 1 {
		// A slow copy, so that the faults hit moves in the middle.
		flags = append(flags, "--groups", strconv.Itoa(o.groups), "--slot-move-rate", chaosMoveRate)
	}
	var nodes []*Node
	if withTLS {
		nodes = startTLSCluster(t, newTLSEnv(t), 3, flags...)
	} else {
		nodes = startCluster(t, 3, flags...)
	}
	c := &chaos{
		t: t, stale: stale, groups: o.groups, nodes: nodes, rng: rand.New(rand.NewSource(seed)),
		start: time.Now(), faults: map[string]int{}, out: map[int]bool{}, gens: map[string]int{},
		schedule: chaosFaults,
	}
	// Cleanups run last-registered first: a node left paused by a failed
	// test is continued before the nodes' own cleanups stop it.
	t.Cleanup(c.resume)
	c.proxies = proxyRaft(t, nodes)
	if c.sharded() {
		c.waitSpread()
	}
	c.findShards()
	tot := chaosTotals{final: map[string]finalRead{}}
	if c.sharded() {
		// The filler keys and the lists' first pushes take their time
		// out of no fault's: the run's length starts after them.
		setup := time.Now()
		c.schedule = slices.Concat(chaosFaults, chaosMoveFaults, chaosGroupFaults)
		c.moves = &chaosMoves{ended: map[uint64]string{}}
		c.regroup = newChaosRegroup(c.groups)
		c.seedFillers()
		for k, v := range c.moves.fillers {
			tot.final[k] = finalRead{Value: v}
		}
		c.startLists(seed)
		length += time.Since(setup)
	}
	watch := watchLeader(nodes, c.raftGroups())
	t.Cleanup(watch.stop)

	for e := 0; e == 0 || time.Since(c.start) < length; e++ {
		d := min(chaosEpoch, length-time.Since(c.start))
		c.epoch(e, d, seed, &tot)
	}
	watch.stop()
	checkRaftAddrs(t, nodes, c.proxies)
	if c.sharded() {
		c.checkMoves(&tot)
		c.checkGroups()
	}
	c.checkConserved(tot.final)

	ops := tot.ops
	byOutcome, byKind := countOps(ops)
	var faults []string
	total := 0
	for _, f := range c.schedule {
		faults = append(faults, fmt.Sprintf("%s=%d", f.name, c.faults[f.name]))
		total += c.faults[f.name]
	}
	t.Logf("chaos report: --reads %s, tls-cluster %v, groups %d, seed %d, %v of faults", reads, withTLS, max(1, c.groups), seed, time.Since(c.start).Round(time.Second))
	t.Logf("  faults injected: %d: %s", total, strings.Join(faults, " "))
	t.Logf("  operations checked: %d recorded, %d acknowledged, %d failed, %d unknown; acknowledged by kind %v",
		len(ops), byOutcome[OutcomeOK], byOutcome[OutcomeFailed], byOutcome[OutcomeUnknown], byKind)
	if stale {
		t.Logf("  checked by the stale-read checker (porcupine does not apply to stale reads)")
	} else {
		t.Logf("  checked by porcupine: %d operations; by the stale-read checker: the register and counter keys", tot.linChecked)
	}
	t.Logf("  acknowledged writes lost: %d", tot.lost)
	t.Logf("  violations: %d", tot.violations)
	t.Logf("  longest time without a leader: %v", watch.longest().Round(time.Millisecond))
	t.Logf("  keys conserved: %d written, %d present at the end (%d barriers among them)", len(tot.final)+len(c.barriers), c.wantKeys(tot.final), len(c.barriers))
	var carried int64
	byGroup := map[uint32]int64{}
	for i, p := range c.proxies.P {
		s := p.Stats()
		carried += s.ToTarget
		groups := ""
		for g, by := range s.Groups {
			for _, n := range by {
				byGroup[g] += n
			}
		}
		if c.sharded() {
			groups = fmt.Sprintf(" (by group and sender %v)", s.Groups)
		}
		t.Logf("  %s's proxy: %d connections (by sender %v)%s, %d bytes in, %d out, %d discarded",
			nodes[i].Name, s.Accepted, s.Senders, groups, s.ToTarget, s.FromTarget, s.Discarded)
		if s.Senders[""] > 0 {
			t.Errorf("%s's proxy could not tell the sender of %d connections: link faults missed them", nodes[i].Name, s.Senders[""])
		}
	}
	if carried == 0 {
		t.Errorf("no raft traffic went through the proxies: the faults on them had no effect")
	}
	if c.sharded() && !withTLS {
		for g := range c.raftGroups() {
			if byGroup[uint32(g)] == 0 {
				t.Errorf("no raft connection of group %d went through the proxies: the faults on them missed it", g)
			}
		}
	}
	for _, k := range []HistKind{KindGet, KindSet, KindIncr, KindCAS, KindDel} {
		if byKind[k] == 0 {
			t.Errorf("no %s acknowledged: the workload did not exercise it", k)
		}
	}
}

// epoch records a history on fresh keys while faults run for d, then
// heals the cluster, reads every key and checks the epoch's history.
func (c *chaos) epoch(e int, d time.Duration, seed int64, tot *chaosTotals) {
	t := c.t
	// Two keys of each sort, or on a cluster of several groups one in
	// each group that owns slots.
	shards := c.shards
	if c.sharded() && e > 0 {
		// Moves, and groups added and removed, have changed the groups'
		// slots: a key of each sort in the longest run of each group
		// the stored slot map gives slots to now.
		shards = c.groupRuns()
	}
	perSort := max(2, len(shards))
	key := func(sort string, k int) string {
		base := fmt.Sprintf("chaos:%d:%s%c", e, sort, 'a'+k)
		if !c.sharded() {
			return base
		}
		return keyInSlots(base, shards[k%len(shards)])
	}
	var mixed, registers, counters []string
	for k := range perSort {
		registers = append(registers, key("r", k))
		counters = append(counters, key("n", k))
	}
	if !c.stale {
		for k := range perSort {
			mixed = append(mixed, key("m", k))
		}
	}
	all := slices.Concat(mixed, registers, counters)
	c.epochKeys = all
	h := NewHistory()
	stop := sync.OnceFunc(runHistWorkersWith(h, histConfig{
		Workers: chaosWorkers, Nodes: c.nodes, Keys: mixed, Registers: registers, Counters: counters,
		Seed: seed + int64(e)*chaosWorkers, Label: c.label,
	}))
	t.Cleanup(stop)
	waitOK(t, h, chaosMinOK)

	for end, i := time.Now().Add(d), 0; time.Now().Before(end); i++ {
		f := c.draw(c.schedule)
		switch {
		case c.sharded() && i == 0:
			// Every epoch moves slots at least once.
			f = chaosMoveFaults[0]
		case c.sharded() && e == 0 && i <= len(chaosGroupFaults):
			// And the first adds a group and removes one, so that a
			// short run changes the set of groups too.
			f = chaosGroupFaults[i-1]
		}
		c.faults[f.name]++
		f.inject(c)
		c.settle()
		if c.sharded() {
			c.tendGroups()
		}
		// A quiet spell, so that some faults hit a settled cluster and
		// others one still catching up.
		time.Sleep(c.between(0, 2*chaosElection))
	}
	if c.sharded() {
		// The final reads and checks need the slots where they stay,
		// and the groups too: a removal under way ends.
		c.drainGroups()
	}
	waitOK(t, h, countOK(h.Ops())+chaosMinOK)
	stop()

	final := c.finalReads(h, all)
	maps.Copy(tot.final, final)
	ops := h.Ops()
	for _, o := range unexpectedErrors(ops) {
		t.Errorf("epoch %d: unexpected error reply: %v", e, o)
		tot.violations++
	}
	dir := filepath.Join(testDir(t), fmt.Sprintf("epoch%d", e))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("epoch %d: %d operations, %d acknowledged", e, len(ops), countOK(ops))
	if !c.stale {
		// Reads after the workers stopped are linearized after every
		// acknowledged write, so a lost one shows up as a violation.
		if !checkLinearizable(t, ops, dir) {
			tot.violations++
		}
		tot.linChecked += len(ops)
	}
	var split []HistOp
	for _, o := range ops {
		if !slices.Contains(mixed, o.Key) {
			split = append(split, o)
		}
	}
	splitFinal := map[string]finalRead{}
	for _, k := range slices.Concat(registers, counters) {
		splitFinal[k] = final[k]
	}
	if vs := staleViolations(split, splitFinal); len(vs) > 0 {
		raw := filepath.Join(dir, "history.json")
		if err := writeHistoryJSON(raw, ops); err != nil {
			t.Errorf("writing %s: %v", raw, err)
		}
		for _, v := range vs {
			t.Errorf("epoch %d: %s", e, v)
			if v.Lost {
				tot.lost++
			} else {
				tot.violations++
			}
		}
		t.Errorf("epoch %d: stale-read checker found %d violations; history %s", e, len(vs), raw)
	}
	tot.ops = append(tot.ops, ops...)
}

// finalReads reads every key once the workers have stopped and the
// cluster has healed, from a leader that has applied a write made after
// every operation of the history, and returns what it read. With
// linearizable reads the reads go into the history for porcupine. Then it
// waits until every member holds the same values: the followers must
// converge on the acknowledged state too.
func (c *chaos) finalReads(h *History, keys []string) map[string]finalRead {
	t := c.t
	final := map[string]finalRead{}
	if c.sharded() {
		c.coverBarriers()
	}
	waitFor(t, "final reads", func() error {
		leader, err := leaderNow(c.members())
		if err != nil {
			return err
		}
		conn, err := net.DialTimeout("tcp", leader.Addr, time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(ioTimeout))
		r := bufio.NewReader(conn)
		// A write through the leader is applied there after everything
		// committed before it, acknowledged writes included; on a
		// cluster of several groups, a write in each group, which a node
		// answers once its own replica of the group has applied it.
		for _, b := range c.barriers {
			if _, err := conn.Write(encodeCommand("SET", b, fmt.Sprint(time.Now().UnixNano()))); err != nil {
				return err
			}
			if v, err := readValue(r); err != nil || string(v.Raw) != "+OK\r\n" {
				return fmt.Errorf("barrier write %s on %s: %v %v", b, leader.Name, v, err)
			}
		}
		w := newHistWorker(h, 1000, 1, c.nodes, keys, 0)
		got := map[string]HistOp{}
		for _, k := range keys {
			op := HistOp{ClientID: w.client, Node: c.label(leader), Kind: KindGet, Key: k}
			if !w.do(conn, r, &op, []string{"GET", k}) || op.Outcome != OutcomeOK {
				return fmt.Errorf("final GET %s on %s: %s", k, leader.Name, op.Result)
			}
			got[k] = op
		}
		if c.stale {
			// Not part of the history: a stale-read checker's final value
			// is no client read.
			h.mu.Lock()
			h.ops = slices.DeleteFunc(h.ops, func(o HistOp) bool { return o.ClientID == w.client })
			h.mu.Unlock()
		}
		for k, op := range got {
			final[k] = finalRead{Nil: op.Nil, Value: op.Result}
		}
		return nil
	})
	waitFor(t, "every member to hold the final values", func() error {
		for _, n := range c.members() {
			rc, err := net.DialTimeout("tcp", n.Addr, time.Second)
			if err != nil {
				return err
			}
			rc.SetDeadline(time.Now().Add(ioTimeout))
			r := bufio.NewReader(rc)
			for _, k := range keys {
				if _, err := rc.Write(encodeCommand("GET", k)); err != nil {
					rc.Close()
					return err
				}
				v, err := readValue(r)
				if err != nil || v.IsError() || v.Null != final[k].Nil || (!v.Null && v.Str != final[k].Value) {
					rc.Close()
					return fmt.Errorf("%s: GET %s = %v %v, the leader read %+v", n.Name, k, v, err, final[k])
				}
			}
			rc.Close()
		}
		return nil
	})
	return final
}

// label names n in histories: its name, and how many times its data was
// wiped, since a wiped node may read older values than it read before.
func (c *chaos) label(n *Node) string {
	c.gensMu.Lock()
	defer c.gensMu.Unlock()
	if g := c.gens[n.Name]; g > 0 {
		return fmt.Sprintf("%s.%d", n.Name, g)
	}
	return n.Name
}

// members returns the nodes in the cluster, in order.
func (c *chaos) members() []*Node {
	var out []*Node
	for i, n := range c.nodes {
		if !c.out[i] {
			out = append(out, n)
		}
	}
	return out
}

// memberIdx returns the indexes of the nodes in the cluster.
func (c *chaos) memberIdx() []int {
	var out []int
	for i := range c.nodes {
		if !c.out[i] {
			out = append(out, i)
		}
	}
	return out
}

// draw picks a fault that the current members can take.
func (c *chaos) draw(from []chaosFault) chaosFault {
	var fit []chaosFault
	total := 0
	for _, f := range from {
		if f.members <= len(c.memberIdx()) && !(f.nests && len(c.out) > 0) {
			fit = append(fit, f)
			total += max(1, f.weight)
		}
	}
	x := c.rng.Intn(total)
	for _, f := range fit {
		if x -= max(1, f.weight); x < 0 {
			return f
		}
	}
	panic("unreachable")
}

// settle undoes whatever a fault left behind and waits until every member
// runs and all agree on a leader.
func (c *chaos) settle() {
	c.proxies.HealAll()
	c.resume()
	for _, n := range c.members() {
		if n.isExited() {
			n.Start()
		}
	}
	c.waitLeader()
}

// waitLeader waits, as waitLeader does, until every running member names
// the same leader, of every group, and returns group 0's. When none
// emerges it logs every member's KVS.STATUS and has each running member
// dump its goroutines into its log (SIGQUIT) before failing: a cluster
// that never recovers is a finding, and the evidence is gone once the
// nodes stop.
func (c *chaos) waitLeader() *Node {
	c.t.Helper()
	return c.waitLeaders()[0]
}

// waitLeaders is waitLeader, returning each group's leader.
func (c *chaos) waitLeaders() []*Node {
	c.t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		ls, err := groupLeadersNow(c.members(), c.raftGroups())
		if err == nil {
			return ls
		}
		if time.Now().After(deadline) {
			for _, n := range c.members() {
				st, serr := kvsStatus(n.Addr)
				c.t.Logf("%s: KVS.STATUS %v members %v groups %v %v (err %v)", n.Name, st.fields, st.members, st.groups, st.groupMembers, serr)
				if !n.isExited() {
					sendSignal(n, syscall.SIGQUIT)
				}
			}
			c.t.Fatalf("waiting for a leader: %v (goroutine dumps in the nodes' logs)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *chaos) logf(format string, args ...any) {
	c.t.Helper()
	c.t.Logf("%8v  %s", time.Since(c.start).Round(time.Millisecond), fmt.Sprintf(format, args...))
}

// between returns a duration drawn uniformly from [lo, hi).
func (c *chaos) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rng.Int63n(int64(hi-lo)))
}

// pick draws a member.
func (c *chaos) pick() (int, *Node) {
	idx := c.memberIdx()
	i := idx[c.rng.Intn(len(idx))]
	return i, c.nodes[i]
}

// leader waits for the members' leader and returns its index; on a
// cluster of several groups, the leader of a group drawn at random.
func (c *chaos) leader() (int, *Node) {
	ls := c.waitLeaders()
	g := 0
	if len(ls) > 1 {
		var ids []int // the groups there are now: ids may have gaps
		for id, l := range ls {
			if l != nil {
				ids = append(ids, id)
			}
		}
		g = ids[c.rng.Intn(len(ids))]
		c.logf("group %d's leader is %s", g, ls[g].Name)
	}
	return slices.Index(c.nodes, ls[g]), ls[g]
}

// The faults. Each holds its fault for a drawn time with time.Sleep: that
// is the schedule itself, not a wait for a condition.

func (c *chaos) killLeader() {
	_, l := c.leader()
	c.kill(l, "leader")
}

func (c *chaos) killNode() {
	_, n := c.pick()
	c.kill(n, "node")
}

func (c *chaos) kill(n *Node, what string) {
	down := c.between(200*time.Millisecond, 3*time.Second)
	c.logf("kill -9 %s %s, restart after %v", what, n.Name, down)
	n.Kill()
	time.Sleep(down)
	n.Start()
}

// pauseLeader freezes the leader with SIGSTOP for 1 to 3 election
// timeouts. The others may elect a new leader meanwhile; the old one
// wakes up still believing it leads, and must not answer a read or
// acknowledge a write on that belief.
func (c *chaos) pauseLeader() {
	_, l := c.leader()
	d := c.between(chaosElection, 3*chaosElection)
	c.logf("SIGSTOP leader %s for %v", l.Name, d)
	if err := sendSignal(l, syscall.SIGSTOP); err != nil {
		c.t.Fatalf("SIGSTOP %s: %v", l.Name, err)
	}
	c.paused = l
	time.Sleep(d)
	c.resume()
}

// resume continues a paused node.
func (c *chaos) resume() {
	if c.paused == nil {
		return
	}
	if err := sendSignal(c.paused, syscall.SIGCONT); err != nil {
		c.t.Errorf("SIGCONT %s: %v", c.paused.Name, err)
	}
	c.paused = nil
}

// deafen cuts every raft RPC to one node. A deaf follower falls behind
// and campaigns; a deaf leader keeps leading (see Proxy).
func (c *chaos) deafen() {
	i, n := c.pick()
	d := c.between(500*time.Millisecond, 3*time.Second)
	c.logf("deafen %s for %v", n.Name, d)
	c.proxies.P[i].Cut()
	time.Sleep(d)
	c.proxies.P[i].Heal()
}

// delay slows every raft RPC to one node; at the upper end the round trip
// exceeds the heartbeat timeout.
func (c *chaos) delay() {
	i, n := c.pick()
	lat := c.between(20*time.Millisecond, 300*time.Millisecond)
	d := c.between(time.Second, 4*time.Second)
	c.logf("delay raft RPCs to %s by %v each way for %v", n.Name, lat, d)
	c.proxies.P[i].Delay(lat)
	time.Sleep(d)
	c.proxies.P[i].Heal()
}

// flap cuts and heals one node's proxy a few times, forcing redials.
func (c *chaos) flap() {
	i, n := c.pick()
	times := 3 + c.rng.Intn(4)
	c.logf("flap %s %d times", n.Name, times)
	for range times {
		c.proxies.P[i].Cut()
		time.Sleep(c.between(100*time.Millisecond, 700*time.Millisecond))
		c.proxies.P[i].Heal()
		time.Sleep(c.between(100*time.Millisecond, 700*time.Millisecond))
	}
}

// restartAll stops every member gracefully, in a random order, and starts
// them all again: the last ones stop without a majority.
func (c *chaos) restartAll() {
	members := c.members()
	order := c.rng.Perm(len(members))
	var names []string
	for _, i := range order {
		names = append(names, members[i].Name)
	}
	c.logf("restart all: stop %s, then start all", strings.Join(names, ", "))
	for _, i := range order {
		members[i].Stop()
	}
	for _, n := range members {
		n.Start()
	}
}

// holdPartition holds a partition (already applied) for a drawn time; the
// settle that follows heals it.
func (c *chaos) holdPartition(what string) {
	d := c.between(chaosElection, 8*chaosElection)
	c.logf("%s for %v", what, d)
	time.Sleep(d)
	c.logLeaders()
}

// logLeaders logs whom each member names as leader at the end of a
// partition, before the heal: the evidence that the partition bit.
func (c *chaos) logLeaders() {
	var views []string
	for _, n := range c.members() {
		v := "no answer"
		if st, err := kvsStatus(n.Addr); err == nil {
			v = fmt.Sprintf("%s, leader %q, term %s", st.fields["state"], st.fields["leader_id"], st.fields["term"])
			for _, g := range st.groups[min(1, len(st.groups)):] {
				v += fmt.Sprintf("; group %s %s, leader %q", g[0], g[1], g[2])
			}
		}
		views = append(views, n.Name+": "+v)
	}
	c.logf("  before the heal: %s", strings.Join(views, "; "))
}

func (c *chaos) names(idx []int) string {
	var s []string
	for _, i := range idx {
		s = append(s, c.nodes[i].Name)
	}
	return strings.Join(s, " ")
}

func (c *chaos) others(idx ...int) []int {
	return slices.DeleteFunc(c.memberIdx(), func(i int) bool { return slices.Contains(idx, i) })
}

func (c *chaos) mustBlock(err error) {
	if err != nil {
		c.t.Fatal(err)
	}
}

// isolateLeader cuts the leader off from every other member, both ways:
// with three members, a 1|2 split with the leader in the minority. The
// majority elects a new leader; the old one must stop acknowledging
// writes and answering linearizable reads, and steps down when its lease
// runs out.
func (c *chaos) isolateLeader() {
	l, _ := c.leader()
	rest := c.others(l)
	c.mustBlock(c.proxies.Partition([]int{l}, rest))
	c.holdPartition(fmt.Sprintf("isolate leader %s: %s | %s", c.nodes[l].Name, c.nodes[l].Name, c.names(rest)))
}

// splitLeaderMajority cuts one follower off from the others, both ways:
// a 1|2 split with the leader in the majority. The cluster keeps serving;
// the follower campaigns in vain and must catch up after the heal.
func (c *chaos) splitLeaderMajority() {
	l, _ := c.leader()
	fs := c.others(l)
	f := fs[c.rng.Intn(len(fs))]
	rest := c.others(f)
	c.mustBlock(c.proxies.Partition([]int{f}, rest))
	c.holdPartition(fmt.Sprintf("split %s | %s (leader %s in the majority)", c.nodes[f].Name, c.names(rest), c.nodes[l].Name))
}

// bridge cuts two members off from each other while a third reaches
// both. Either the leader is the bridge, and nothing need change, or it is
// at one end, and the far end hears no leader and campaigns through the
// bridge.
func (c *chaos) bridge() {
	l, _ := c.leader()
	idx := c.memberIdx()
	b := idx[c.rng.Intn(len(idx))]
	ends := c.others(b)
	blocked := noLinks(len(c.nodes))
	blocked[ends[0]][ends[1]], blocked[ends[1]][ends[0]] = true, true
	c.mustBlock(c.proxies.Block(blocked))
	role := "the leader"
	if b != l {
		role = "a follower; leader " + c.nodes[l].Name
	}
	c.holdPartition(fmt.Sprintf("bridge %s - %s - %s (the bridge is %s)", c.nodes[ends[0]].Name, c.nodes[b].Name, c.nodes[ends[1]].Name, role))
}

// oneWayToLeader stops everything the other members send to the leader,
// their replies included, while the leader's own messages still arrive:
// the followers keep hearing heartbeats, but the leader hears no
// acknowledgement and can commit nothing.
func (c *chaos) oneWayToLeader() {
	l, _ := c.leader()
	blocked := noLinks(len(c.nodes))
	for _, f := range c.others(l) {
		blocked[f][l] = true
	}
	c.mustBlock(c.proxies.Block(blocked))
	c.holdPartition(fmt.Sprintf("nothing reaches leader %s from %s", c.nodes[l].Name, c.names(c.others(l))))
}

// flapLink cuts and heals the link between two members, both ways, a few
// times; one of the two is the leader half of the time.
func (c *chaos) flapLink() {
	idx := c.memberIdx()
	a := idx[c.rng.Intn(len(idx))]
	if c.rng.Intn(2) == 0 {
		a, _ = c.leader()
	}
	rest := c.others(a)
	b := rest[c.rng.Intn(len(rest))]
	times := 3 + c.rng.Intn(4)
	c.logf("flap the link %s - %s %d times", c.nodes[a].Name, c.nodes[b].Name, times)
	for range times {
		blocked := noLinks(len(c.nodes))
		blocked[a][b], blocked[b][a] = true, true
		c.mustBlock(c.proxies.Block(blocked))
		time.Sleep(c.between(100*time.Millisecond, 700*time.Millisecond))
		c.mustBlock(c.proxies.Block(noLinks(len(c.nodes))))
		time.Sleep(c.between(100*time.Millisecond, 700*time.Millisecond))
	}
}

// removeRejoin removes a member (the leader as likely as any) with
// KVS.REMOVE, stops it, wipes its data and runs another fault on the two
// that remain; then it starts the node empty and joins it again through
// its proxy with KVS.JOIN, as an operator replaces a broken node. Clients
// keep using the node's address throughout: it is down, then up but not a
// member, then a member catching up. Its reads after the wipe are labelled
// as a new node (see label), since it may read older values than before.
func (c *chaos) removeRejoin() {
	i, n := c.pick()
	_, l := c.leader()
	pause := c.between(0, 2*chaosElection)
	c.logf("remove %s (leader %s); stop it after %v, wipe its data and run a fault without it", n.Name, l.Name, pause)
	// Sent to whichever node says it leads, the node itself included; a
	// removed leader that lost its reply has shut its raft down, and the
	// retry goes to its successor.
	c.leaderAdmin("KVS.REMOVE "+n.Name, "KVS.REMOVE", n.Name)
	c.out[i] = true
	// Every group must have let n go before its data is wiped: a group
	// that still counted it as a voter would count votes and entries it
	// forgot. Group 0's change is the command's own; the others follow
	// it within seconds.
	waitFor(c.t, n.Name+" out of the configuration", func() error {
		for _, m := range c.members() {
			st, err := kvsStatus(m.Addr)
			if err != nil {
				return err
			}
			for _, row := range st.members {
				if row[0] == n.Name {
					return fmt.Errorf("%s still lists %s", m.Name, n.Name)
				}
			}
			for g, ms := range st.groupMembers {
				for _, row := range ms {
					if row[0] == n.Name {
						return fmt.Errorf("%s's replica of group %d still lists %s", m.Name, g, n.Name)
					}
				}
			}
		}
		return nil
	})
	// Clients still reach the removed node until it stops.
	time.Sleep(pause)
	n.Kill()
	if err := os.RemoveAll(n.DataDir()); err != nil {
		c.t.Fatal(err)
	}
	c.gensMu.Lock()
	c.gens[n.Name]++
	c.gensMu.Unlock()
	// An empty node must never bootstrap a cluster of its own.
	args := n.Args
	n.Args = func(n *Node) []string {
		return slices.DeleteFunc(args(n), func(a string) bool { return a == "--bootstrap" })
	}

	f := c.draw(c.schedule)
	c.faults[f.name]++
	f.inject(c)
	c.settle()

	c.logf("start %s empty and join it again", n.Name)
	n.Start()
	c.leaderAdmin("KVS.JOIN "+n.Name, "KVS.JOIN", n.Name, c.proxies.P[i].Addr(), n.Advertised())
	delete(c.out, i)
	checkRaftAddrs(c.t, c.nodes, c.proxies)
}

// leaderAdmin sends an admin command to a member that says it is the
// leader until one answers +OK. It asks each node itself rather than
// waiting for all to agree: a leader being removed is still the one to
// ask, while the others may already be electing its successor.
func (c *chaos) leaderAdmin(what string, args ...string) {
	c.t.Helper()
	waitFor(c.t, what, func() error {
		for _, n := range c.members() {
			if n.isExited() {
				continue
			}
			if leads, err := isLeader(n.Addr); err == nil && leads {
				return adminOK(n, args...)
			}
		}
		return errors.New("no member says it leads")
	})
}

// adminOK sends one command to n and requires +OK.
func adminOK(n *Node, args ...string) error {
	var conn net.Conn
	var err error
	if n.AdminTLS != nil {
		// Node commands of a --tls-cluster cluster need a connection
		// with the cluster CA's certificate.
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: n.AdminTLS}
		conn, err = d.Dial("tcp", n.TLSAddr)
	} else {
		conn, err = net.DialTimeout("tcp", n.Addr, time.Second)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := conn.Write(encodeCommand(args...)); err != nil {
		return err
	}
	v, err := readValue(bufio.NewReader(conn))
	if err != nil {
		return err
	}
	if string(v.Raw) != "+OK\r\n" {
		return fmt.Errorf("%s on %s: %s", args[0], n.Name, v)
	}
	return nil
}

// sendSignal sends sig to n's process without waiting for it to exit, as
// Node.signal does.
func sendSignal(n *Node, sig syscall.Signal) error {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil || n.isExited() {
		return fmt.Errorf("%s is not running", n.Name)
	}
	return cmd.Process.Signal(sig)
}

// proxyRaft puts a Proxy in front of each node's raft listener and points
// the replicated configuration at the proxies with KVS.JOIN, as the Proxy
// doc describes, so that every peer dials node i through proxies[i].
//
// A leader that learns a follower's new address sends its heartbeats
// there at once, but its pipeline of entries keeps the connection it had
// dialed to the old address until that breaks (hashicorp/raft dials the
// pipeline once per replication): entries and their acknowledgements
// would bypass the proxies, and a cut that stops heartbeats would not
// stop commits. So every node is then restarted, which ends every
// connection to it, and every new one is dialed from the proxies'
// addresses; a write in each group must then cross every follower's
// proxy (checkProxied).
func proxyRaft(t *testing.T, nodes []*Node) RaftProxies {
	t.Helper()
	st, err := kvsStatus(waitLeader(t, nodes).Addr)
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := map[string]string{}
	for _, m := range st.members {
		raftAddr[m[0]] = m[1]
	}
	var ids, addrs []string
	for _, n := range nodes {
		if raftAddr[n.Name] == "" {
			t.Fatalf("%s is not among the members %v", n.Name, st.members)
		}
		ids = append(ids, n.Name)
		addrs = append(addrs, raftAddr[n.Name])
	}
	ps := NewRaftProxies(t, ids, addrs)
	if nodes[0].AdminTLS != nil {
		// Raft over TLS: the proxies cannot read who is calling, so they
		// ask which node's process holds the dialing socket.
		identify := func(remote, local net.Addr) (string, bool) {
			ta, ok1 := remote.(*net.TCPAddr)
			la, ok2 := local.(*net.TCPAddr)
			if !ok1 || !ok2 {
				return "", false
			}
			// A node restarted since it dialed has a new pid, and one
			// killed may take a while to close its sockets on a loaded
			// machine; ask again for a while before giving up on a
			// socket that is open.
			for try := 0; ; try++ {
				var pids []int
				byPid := map[int]string{}
				for _, n := range nodes {
					if pid := n.livePid(); pid != 0 {
						pids = append(pids, pid)
						byPid[pid] = n.Name
					}
				}
				pid, exists := socketOwner(ta, la, pids)
				switch {
				case !exists:
					return "", true
				case pid > 0:
					return byPid[pid], false
				case try == 50:
					return "", false
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		for _, p := range ps.P {
			p.SetIdentify(identify)
		}
	}
	for i, n := range nodes {
		waitFor(t, "KVS.JOIN "+n.Name+" through its proxy", func() error {
			leader, err := leaderNow(nodes)
			if err != nil {
				return err
			}
			return adminOK(leader, "KVS.JOIN", n.Name, ps.P[i].Addr(), n.Advertised())
		})
	}
	checkRaftAddrs(t, nodes, ps)
	for _, n := range nodes {
		n.Stop()
	}
	for _, n := range nodes {
		n.Start()
	}
	checkProxied(t, nodes, ps)
	return ps
}

// proxyProbeSize is the value written in each group to check that its
// entries cross the followers' proxies: more than all the heartbeats of
// the check's time.
const proxyProbeSize = 128 << 10

// checkProxied waits until a write in each group crosses the proxy of
// every node that follows the group: the leader's entries go through the
// proxies, not over a connection dialed before the configuration named
// them. Each probe key is deleted again.
func checkProxied(t *testing.T, nodes []*Node, ps RaftProxies) {
	t.Helper()
	st, err := kvsStatus(waitLeader(t, nodes).Addr)
	if err != nil {
		t.Fatal(err)
	}
	// Raft groups, and the data groups' slot ranges: with several, group
	// 0 is the meta group, and the range at index g is group g+1's.
	groups := max(1, len(st.groups))
	shards, first := [][2]int{{0, 16383}}, 0
	if groups > 1 {
		shards, first = clusterShards(t, nodes[0], groups-1), 1
	}
	value := strings.Repeat("p", proxyProbeSize)
	for g, r := range shards {
		key := keyInSlots(fmt.Sprintf("chaos:proxy-probe:%d", g), r)
		waitFor(t, fmt.Sprintf("group %d's entries to cross the followers' proxies", g), func() error {
			ls, err := groupLeadersNow(nodes, groups)
			if err != nil {
				return err
			}
			before := make([]int64, len(ps.P))
			for i, p := range ps.P {
				before[i] = p.Stats().ToTarget
			}
			rc := dialRaw(t, ls[g+first].Addr)
			defer rc.c.Close()
			if v, err := rc.do("SET", key, value); err != nil || string(v.Raw) != "+OK\r\n" {
				return fmt.Errorf("SET %s on %s: %s %v", key, ls[g+first].Name, v, err)
			}
			var missed error
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				missed = nil
				for i, p := range ps.P {
					if nodes[i] != ls[g+first] && p.Stats().ToTarget-before[i] < proxyProbeSize {
						missed = fmt.Errorf("%s's proxy carried %d bytes of a %d-byte write in group %d (leader %s)",
							nodes[i].Name, p.Stats().ToTarget-before[i], proxyProbeSize, g, ls[g+first].Name)
					}
				}
				if missed == nil {
					break
				}
			}
			if v, err := rc.do("DEL", key); err != nil || v.IsError() {
				return fmt.Errorf("DEL %s: %s %v", key, v, err)
			}
			return missed
		})
	}
}

// checkRaftAddrs waits until every node lists each member at its proxy's
// address, in every group it holds: otherwise faults on the proxies would
// miss that member.
func checkRaftAddrs(t *testing.T, nodes []*Node, ps RaftProxies) {
	t.Helper()
	want := map[string]string{}
	for i, n := range nodes {
		want[n.Name] = ps.P[i].Addr()
	}
	waitFor(t, "raft addresses pointing at the proxies", func() error {
		for _, n := range nodes {
			st, err := kvsStatus(n.Addr)
			if err != nil {
				return err
			}
			if len(st.members) != len(nodes) {
				return fmt.Errorf("%s lists %v", n.Name, st.members)
			}
			for _, m := range st.members {
				if want[m[0]] != m[1] {
					return fmt.Errorf("%s lists %s at %s, its proxy is %s", n.Name, m[0], m[1], want[m[0]])
				}
			}
			// Every group dials the members at group 0's addresses once
			// it has followed group 0's configuration.
			for g, ms := range st.groupMembers {
				if len(ms) != len(nodes) {
					return fmt.Errorf("%s's replica of group %d lists %v", n.Name, g, ms)
				}
				for _, m := range ms {
					if want[m[0]] != m[1] {
						return fmt.Errorf("%s's replica of group %d lists %s at %s, its proxy is %s", n.Name, g, m[0], m[1], want[m[0]])
					}
				}
			}
		}
		return nil
	})
}

// leaderWatch polls every node's KVS.STATUS and tracks the longest time in
// which no node that answered was leader, of any one group. A follower
// that still names a leader that was killed does not count: clients get
// no answers from it. A node that is down or paused does not answer and
// so does not count either way. Groups are followed by id from when a
// node first lists them until one lists them no longer (data groups are
// added and removed as faults of TestChaosGroups).
type leaderWatch struct {
	done chan struct{}
	wg   sync.WaitGroup // one poller per node
	once sync.Once

	mu       sync.Mutex        // guards the fields below
	lastSeen map[int]time.Time // by group id, when a node last answered as its leader
	gap      time.Duration
}

const leaderPollEvery = 50 * time.Millisecond

// watchLeader watches nodes, which hold groups groups to begin with.
func watchLeader(nodes []*Node, groups int) *leaderWatch {
	w := &leaderWatch{done: make(chan struct{}), lastSeen: map[int]time.Time{}}
	for g := range groups {
		w.lastSeen[g] = time.Now()
	}
	for _, n := range nodes {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.poll(n.Addr)
		}()
	}
	return w
}

func (w *leaderWatch) poll(addr string) {
	tick := time.NewTicker(leaderPollEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-tick.C:
		}
		led, listed, err := ledGroups(addr)
		if err != nil {
			continue
		}
		now := time.Now()
		w.mu.Lock()
		for g := range w.lastSeen {
			if !slices.Contains(listed, g) {
				delete(w.lastSeen, g) // removed
			}
		}
		for _, g := range listed {
			if _, ok := w.lastSeen[g]; !ok {
				w.lastSeen[g] = now // added
			}
		}
		for g := range w.lastSeen {
			w.gap = max(w.gap, now.Sub(w.lastSeen[g]))
			if slices.Contains(led, g) {
				w.lastSeen[g] = now
			}
		}
		w.mu.Unlock()
	}
}

// stop ends the polling; it is idempotent.
func (w *leaderWatch) stop() {
	w.once.Do(func() {
		close(w.done)
		w.wg.Wait()
	})
}

func (w *leaderWatch) longest() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gap
}

// ledGroups asks the node at addr which groups it leads (group 0 or none
// on a node of one group) and which it lists, by id. Its deadline is
// short, unlike kvsStatus's, so that a paused node holds up its poller
// only briefly.
func ledGroups(addr string) (led, listed []int, err error) {
	v, err := shortStatus(addr)
	if err != nil {
		return nil, nil, err
	}
	listed = []int{0}
	for i := 0; i+1 < len(v.Elems); i += 2 {
		switch v.Elems[i].Str {
		case "state":
			if v.Elems[i+1].Str == "leader" {
				led = append(led, 0)
			}
		case "groups":
			led, listed = led[:0], listed[:0] // group 0 is among them
			for _, row := range v.Elems[i+1].Elems {
				if len(row.Elems) < 2 {
					continue
				}
				g, err := strconv.Atoi(row.Elems[0].Str)
				if err != nil {
					continue
				}
				listed = append(listed, g)
				if row.Elems[1].Str == "leader" {
					led = append(led, g)
				}
			}
		}
	}
	return led, listed, nil
}

// shortStatus is a node's KVS.STATUS within a short deadline.
func shortStatus(addr string) (Value, error) {
	c, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
	if err != nil {
		return Value{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(encodeCommand("KVS.STATUS")); err != nil {
		return Value{}, err
	}
	v, err := readValue(bufio.NewReader(c))
	if err != nil {
		return Value{}, err
	}
	if v.Kind != '*' && v.Kind != '%' {
		return Value{}, fmt.Errorf("KVS.STATUS: %s", v)
	}
	return v, nil
}

// isLeader asks the node at addr whether it leads (group 0 of a node of
// several), within shortStatus's deadline.
func isLeader(addr string) (bool, error) {
	v, err := shortStatus(addr)
	if err != nil {
		return false, err
	}
	for i := 0; i+1 < len(v.Elems); i += 2 {
		if v.Elems[i].Str == "state" {
			return v.Elems[i+1].Str == "leader", nil
		}
	}
	return false, fmt.Errorf("KVS.STATUS without state: %s", v)
}
