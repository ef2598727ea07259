package test

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestChaos runs a seeded schedule of faults against a three-node cluster
// with linearizable reads while workers record a client history over all
// three nodes, and checks that history with porcupine.
//
// Every node's raft listener sits behind a Proxy (faultproxy_test.go), so
// the schedule can deafen, slow or flap a node as well as kill, pause and
// restart processes. One fault runs at a time and is undone before the
// next; between faults the test waits for every node to run and agree on
// a leader, which is also the liveness check.
//
// Long runs are split into epochs of at most chaosEpoch. Each epoch starts
// new workers on keys of its own and ends with the cluster healed, the
// workers stopped and a final read of each key, so its history is checked
// alone: porcupine's search stays small however long the run, and a write
// of unknown outcome from an earlier epoch, which may still land, cannot
// touch a later epoch's keys. A failed check leaves porcupine's
// visualization and the raw history in the test's node directory, under
// epochN/. Each epoch also waits for chaosMinOK acknowledged operations
// before its first fault and after its last, so a cluster that stopped
// serving fails the test rather than passing on an empty history.
//
// -chaos.time bounds when the last fault starts; that fault, the healing
// and the checks add some seconds. The seed (-args -seed=N or
// KVS_TEST_SEED) fixes the sequence of fault kinds, the nodes drawn for
// them, their durations and the workers' operations; which node leads,
// and process and network timing, still vary from run to run.
//
//	go test ./test/ -run TestChaos -v -args -chaos.time=2m -seed=42
//	make chaos CHAOS_TIME=30m CHAOS_SEED=42
var flagChaosTime = flag.Duration("chaos.time", 20*time.Second, "how long TestChaos injects faults")

const (
	chaosEpoch   = 30 * time.Second
	chaosWorkers = 6
	chaosKeys    = 4
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
	name   string
	inject func(c *chaos)
}

var chaosFaults = []chaosFault{
	{"kill-leader", (*chaos).killLeader},
	{"kill-node", (*chaos).killNode},
	{"pause-leader", (*chaos).pauseLeader},
	{"deafen", (*chaos).deafen},
	{"delay", (*chaos).delay},
	{"flap", (*chaos).flap},
	{"restart-all", (*chaos).restartAll},
}

// chaos is the state of one TestChaos run. Only the test goroutine uses it.
type chaos struct {
	t       *testing.T
	nodes   []*Node
	proxies RaftProxies // proxies[i] carries every raft RPC to nodes[i]
	rng     *rand.Rand
	start   time.Time
	faults  map[string]int // injected, by kind
	paused  *Node          // SIGSTOPped and not yet continued
}

func TestChaos(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	nodes := startCluster(t, 3, "--reads", "linearizable")
	c := &chaos{
		t: t, nodes: nodes, rng: rand.New(rand.NewSource(seed)),
		start: time.Now(), faults: map[string]int{},
	}
	// Cleanups run last-registered first: a node left paused by a failed
	// test is continued before the nodes' own cleanups stop it.
	t.Cleanup(c.resume)
	c.proxies = proxyRaft(t, nodes)
	watch := watchLeader(nodes)
	t.Cleanup(watch.stop)

	var ops []HistOp
	for e := 0; e == 0 || time.Since(c.start) < *flagChaosTime; e++ {
		d := min(chaosEpoch, *flagChaosTime-time.Since(c.start))
		ops = append(ops, c.epoch(e, d, seed)...)
	}
	watch.stop()
	checkRaftAddrs(t, nodes, c.proxies)

	byOutcome := map[Outcome]int{}
	byKind := map[HistKind]int{}
	for _, o := range ops {
		byOutcome[o.Outcome]++
		if o.Outcome == OutcomeOK {
			byKind[o.Kind]++
		}
	}
	var faults []string
	for _, f := range chaosFaults {
		faults = append(faults, fmt.Sprintf("%s=%d", f.name, c.faults[f.name]))
	}
	t.Logf("chaos report: seed %d, %v of faults", seed, time.Since(c.start).Round(time.Second))
	t.Logf("  faults: %s", strings.Join(faults, " "))
	t.Logf("  operations: %d recorded, %d acknowledged, %d failed, %d unknown; acknowledged by kind %v",
		len(ops), byOutcome[OutcomeOK], byOutcome[OutcomeFailed], byOutcome[OutcomeUnknown], byKind)
	t.Logf("  longest time without a leader: %v", watch.longest().Round(time.Millisecond))
	var carried int64
	for i, p := range c.proxies.P {
		s := p.Stats()
		carried += s.ToTarget
		t.Logf("  %s's proxy: %d connections, %d bytes in, %d out, %d discarded",
			nodes[i].Name, s.Accepted, s.ToTarget, s.FromTarget, s.Discarded)
	}
	if carried == 0 {
		t.Errorf("no raft traffic went through the proxies: the faults on them had no effect")
	}
	for _, k := range []HistKind{KindGet, KindSet, KindIncr, KindCAS, KindDel} {
		if byKind[k] == 0 {
			t.Errorf("no %s acknowledged: the workload did not exercise it", k)
		}
	}
}

// epoch records a history on fresh keys while faults run for d, then
// heals the cluster, reads every key and checks the epoch's history.
func (c *chaos) epoch(e int, d time.Duration, seed int64) []HistOp {
	t := c.t
	var keys []string
	for k := range chaosKeys {
		keys = append(keys, fmt.Sprintf("chaos:%d:%c", e, 'a'+k))
	}
	h := NewHistory()
	stop := sync.OnceFunc(runHistWorkers(h, chaosWorkers, c.nodes, keys, seed+int64(e)*chaosWorkers))
	t.Cleanup(stop)
	waitOK(t, h, chaosMinOK)

	for end := time.Now().Add(d); time.Now().Before(end); {
		f := chaosFaults[c.rng.Intn(len(chaosFaults))]
		c.faults[f.name]++
		f.inject(c)
		c.settle()
		// A quiet spell, so that some faults hit a settled cluster and
		// others one still catching up.
		time.Sleep(c.between(0, 2*chaosElection))
	}
	waitOK(t, h, countOK(h.Ops())+chaosMinOK)
	stop()

	// Reads after the workers stopped are linearized after every
	// acknowledged write, so a lost one shows up as a violation.
	for _, k := range keys {
		waitFor(t, "a final read of "+k, func() error {
			leader, err := leaderNow(c.nodes)
			if err != nil {
				return err
			}
			return finalGet(newHistWorker(h, 1000, 1, c.nodes, keys, 0), leader, k)
		})
	}
	ops := h.Ops()
	for _, o := range unexpectedErrors(ops) {
		t.Errorf("epoch %d: unexpected error reply: %v", e, o)
	}
	dir := filepath.Join(testDir(t), fmt.Sprintf("epoch%d", e))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("epoch %d: %d operations, %d acknowledged", e, len(ops), countOK(ops))
	checkLinearizable(t, ops, dir)
	return ops
}

// settle undoes whatever a fault left behind and waits until every node
// runs and all agree on a leader.
func (c *chaos) settle() {
	c.proxies.HealAll()
	c.resume()
	for _, n := range c.nodes {
		if n.isExited() {
			n.Start()
		}
	}
	waitLeader(c.t, c.nodes)
}

func (c *chaos) logf(format string, args ...any) {
	c.t.Helper()
	c.t.Logf("%8v  %s", time.Since(c.start).Round(time.Millisecond), fmt.Sprintf(format, args...))
}

// between returns a duration drawn uniformly from [lo, hi).
func (c *chaos) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rng.Int63n(int64(hi-lo)))
}

func (c *chaos) pick() (int, *Node) {
	i := c.rng.Intn(len(c.nodes))
	return i, c.nodes[i]
}

// The faults. Each holds its fault for a drawn time with time.Sleep: that
// is the schedule itself, not a wait for a condition.

func (c *chaos) killLeader() {
	c.kill(waitLeader(c.t, c.nodes), "leader")
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
	l := waitLeader(c.t, c.nodes)
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

// restartAll stops every node gracefully, in a random order, and starts
// them all again: the last ones stop without a majority.
func (c *chaos) restartAll() {
	order := c.rng.Perm(len(c.nodes))
	var names []string
	for _, i := range order {
		names = append(names, c.nodes[i].Name)
	}
	c.logf("restart all: stop %s, then start all", strings.Join(names, ", "))
	for _, i := range order {
		c.nodes[i].Stop()
	}
	for _, n := range c.nodes {
		n.Start()
	}
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
	for i, n := range nodes {
		waitFor(t, "KVS.JOIN "+n.Name+" through its proxy", func() error {
			leader, err := leaderNow(nodes)
			if err != nil {
				return err
			}
			c, err := net.DialTimeout("tcp", leader.Addr, time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(ioTimeout))
			if _, err := c.Write(encodeCommand("KVS.JOIN", n.Name, ps.P[i].Addr(), n.Addr)); err != nil {
				return err
			}
			v, err := readValue(bufio.NewReader(c))
			if err != nil {
				return err
			}
			if string(v.Raw) != "+OK\r\n" {
				return fmt.Errorf("KVS.JOIN on %s: %s", leader.Name, v)
			}
			return nil
		})
	}
	checkRaftAddrs(t, nodes, ps)
	return ps
}

// checkRaftAddrs waits until every node lists each member at its proxy's
// address: otherwise faults on the proxies would miss that member.
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
		}
		return nil
	})
}

// leaderWatch polls every node's KVS.STATUS and tracks the longest time in
// which no node that answered was leader. A follower that still names a
// leader that was killed does not count: clients get no answers from it.
// A node that is down or paused does not answer and so does not count
// either way.
type leaderWatch struct {
	done chan struct{}
	wg   sync.WaitGroup // one poller per node
	once sync.Once

	mu       sync.Mutex // guards the fields below
	lastSeen time.Time  // when a node last answered as leader
	gap      time.Duration
}

const leaderPollEvery = 50 * time.Millisecond

func watchLeader(nodes []*Node) *leaderWatch {
	w := &leaderWatch{done: make(chan struct{}), lastSeen: time.Now()}
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
		known, err := isLeader(addr)
		if err != nil {
			continue
		}
		now := time.Now()
		w.mu.Lock()
		w.gap = max(w.gap, now.Sub(w.lastSeen))
		if known {
			w.lastSeen = now
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

// isLeader asks the node at addr whether it is the leader. Its deadline
// is short, unlike kvsStatus's, so that a paused node holds up its poller
// only briefly.
func isLeader(addr string) (bool, error) {
	c, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
	if err != nil {
		return false, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(encodeCommand("KVS.STATUS")); err != nil {
		return false, err
	}
	v, err := readValue(bufio.NewReader(c))
	if err != nil {
		return false, err
	}
	if v.Kind != '*' && v.Kind != '%' {
		return false, fmt.Errorf("KVS.STATUS: %s", v)
	}
	for i := 0; i+1 < len(v.Elems); i += 2 {
		if v.Elems[i].Str == "state" {
			return v.Elems[i+1].Str == "leader", nil
		}
	}
	return false, fmt.Errorf("KVS.STATUS without state: %s", v)
}
