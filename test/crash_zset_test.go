package test

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// zsetWriter writes to its own sorted set, one command at a time, and
// keeps the model of what its acknowledged commands left there. When the
// server dies under it, the command in flight (pending) may or may not
// have been applied.
type zsetWriter struct {
	key     string
	seq     int
	model   map[string]float64
	pending []string
}

// next is the writer's seq-th command: adds (the set grows past the packed
// limit), increments, removals and pops.
func (w *zsetWriter) next() []string {
	s := w.seq
	switch s % 10 {
	case 3:
		return []string{"ZINCRBY", w.key, "1.5", "ctr"}
	case 5:
		return []string{"ZREM", w.key, zsetMember(s - 4), zsetMember(s - 8)}
	case 7:
		return []string{"ZPOPMIN", w.key}
	case 9:
		return []string{"ZADD", w.key, "GT", "CH", strconv.Itoa(s), zsetMember(s - 9), "-1", zsetMember(s - 1)}
	}
	return []string{"ZADD", w.key, strconv.Itoa(s % 97), zsetMember(s)}
}

// zsetMember is the writers' i-th member, long enough (but within the
// packed limit) that the log grows and compacts during the load.
func zsetMember(i int) string { return fmt.Sprintf("m%d-%040d", i, i) }

// apply changes model as cmd does (the model of Redis's semantics for the
// commands next makes).
func applyZSetModel(model map[string]float64, cmd []string) {
	switch cmd[0] {
	case "ZINCRBY":
		model[cmd[3]] += 1.5
	case "ZREM":
		for _, m := range cmd[2:] {
			delete(model, m)
		}
	case "ZPOPMIN":
		if len(model) == 0 {
			return
		}
		first := ""
		for m, s := range model {
			if first == "" || s < model[first] || (s == model[first] && m < first) {
				first = m
			}
		}
		delete(model, first)
	case "ZADD":
		gt := cmd[2] == "GT"
		pairs := cmd[2:]
		if gt {
			pairs = cmd[4:]
		}
		for i := 0; i < len(pairs); i += 2 {
			s, _ := strconv.ParseFloat(pairs[i], 64)
			cur, ok := model[pairs[i+1]]
			if !gt || !ok || s > cur {
				model[pairs[i+1]] = s
			}
		}
	}
}

func (w *zsetWriter) run(c *rawConn, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		cmd := w.next()
		v, err := c.do(cmd...)
		if err != nil || v.IsError() {
			w.pending = cmd
			return
		}
		applyZSetModel(w.model, cmd)
		w.seq++
	}
}

// zsetContent is ZRANGE key 0 -1 WITHSCORES as a map.
func zsetContent(c *rawConn, key string) (map[string]float64, error) {
	v, err := c.do("ZRANGE", key, "0", "-1", "WITHSCORES")
	if err != nil {
		return nil, err
	}
	if v.Kind != '*' || len(v.Elems)%2 != 0 {
		return nil, fmt.Errorf("ZRANGE %s: %s", key, v)
	}
	m := map[string]float64{}
	for i := 0; i < len(v.Elems); i += 2 {
		s, err := strconv.ParseFloat(v.Elems[i+1].Str, 64)
		if err != nil {
			return nil, err
		}
		m[v.Elems[i].Str] = s
	}
	return m, nil
}

func showZSet(m map[string]float64) string {
	var ps []string
	for k, v := range m {
		ps = append(ps, k+"="+strconv.FormatFloat(v, 'g', -1, 64))
	}
	slices.Sort(ps)
	return strings.Join(ps, " ")
}

// check compares the server's content with the model, settling the
// command in flight at the kill by what the server holds.
func (w *zsetWriter) check(t *testing.T, c *rawConn) {
	t.Helper()
	got, err := zsetContent(c, w.key)
	if err != nil {
		t.Fatal(err)
	}
	if showZSet(got) == showZSet(w.model) {
		if w.pending != nil {
			w.seq++ // not applied: the next round moves on
		}
		w.pending = nil
		return
	}
	if w.pending != nil {
		with := map[string]float64{}
		for k, v := range w.model {
			with[k] = v
		}
		applyZSetModel(with, w.pending)
		if showZSet(got) == showZSet(with) {
			w.model, w.pending = with, nil
			w.seq++
			return
		}
	}
	t.Errorf("%s after the crash (%d members, want %d): %s (or with %q applied)", w.key, len(got), len(w.model), zsetDiff(got, w.model), w.pending)
}

// zsetDiff names the members whose scores differ between got and want.
func zsetDiff(got, want map[string]float64) string {
	var out []string
	for m, s := range want {
		if g, ok := got[m]; !ok || g != s {
			out = append(out, fmt.Sprintf("%s: got %v (present %v), want %v", m, g, ok, s))
		}
	}
	for m, g := range got {
		if _, ok := want[m]; !ok {
			out = append(out, fmt.Sprintf("%s: got %v, want absent", m, g))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// TestCrashZSet: writers on sorted sets against a durable node with fsync
// always, killed with SIGKILL under load and restarted: every acknowledged
// write is there with the right scores. Small log segments make the node
// write snapshots holding the sets (packed and large) during the load.
func TestCrashZSet(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	n := newKVS(t, "kvs-zset", KVSOptions{Durable: true, Fsync: "always",
		Extra: []string{"--wal-segment-bytes", "32768", "--wal-compact-bytes", "65536"}})
	n.Start()
	writers := make([]*zsetWriter, 8)
	for i := range writers {
		writers[i] = &zsetWriter{key: "zcrash:" + strconv.Itoa(i), model: map[string]float64{}}
	}
	acked := 0
	for round := 0; round < 5; round++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, w := range writers {
			c := dialRaw(t, n.Addr)
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.run(c, stop)
			}()
		}
		time.Sleep(time.Duration(200+rng.Intn(600)) * time.Millisecond) // load for a random while; not synchronisation
		n.Kill()
		close(stop)
		wg.Wait()
		n.Start()
		c := dialRaw(t, n.Addr)
		for _, w := range writers {
			w.check(t, c)
		}
		if t.Failed() {
			t.Fatalf("round %d lost acknowledged sorted set writes\n%s", round, n.LogTail(30))
		}
	}
	for _, w := range writers {
		acked += w.seq
	}
	if acked < 100 {
		t.Fatalf("only %d commands acknowledged: the test proves little", acked)
	}
	t.Logf("%d sorted set commands acknowledged", acked)
}

// TestClusterZSet: sorted set writes on the leader reach every follower
// with the same content, a large set and small ones alike.
func TestClusterZSet(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	c := dialRaw(t, leader.Addr)
	model := map[string]map[string]float64{"zc:big": {}, "zc:small": {}}
	for i := 0; i < 400; i++ {
		key := "zc:big"
		if i%4 == 0 {
			key = "zc:small"
		}
		w := &zsetWriter{key: key, seq: i}
		cmd := w.next()
		if key == "zc:small" {
			cmd = []string{"ZADD", key, strconv.Itoa(i % 5), "m" + strconv.Itoa(i%20)}
		}
		if v := c.DoRetry(cmd...); v.IsError() {
			t.Fatalf("%s: %s", showCommand(cmd), v)
		}
		applyZSetModel(model[key], cmd)
	}
	if v := c.DoRetry("ZUNIONSTORE", "zc:union", "2", "zc:big", "zc:small", "WEIGHTS", "2", "0.5"); v.IsError() {
		t.Fatalf("ZUNIONSTORE: %s", v)
	}
	want := map[string]string{}
	for _, key := range []string{"zc:big", "zc:small", "zc:union"} {
		got, err := zsetContent(c, key)
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := model[key]; ok && showZSet(got) != showZSet(m) {
			t.Fatalf("%s on the leader:\n got %s\nwant %s", key, showZSet(got), showZSet(m))
		}
		want[key] = showZSet(got)
	}
	for _, f := range followers(nodes, leader) {
		fc := dialRaw(t, f.Addr)
		waitFor(t, "the follower's sorted sets", func() error {
			for key, w := range want {
				got, err := zsetContent(fc, key)
				if err != nil {
					return err
				}
				if showZSet(got) != w {
					return fmt.Errorf("%s on %s: %s, want %s", key, f.Name, showZSet(got), w)
				}
			}
			return nil
		})
	}
}

// TestBlockingZSet: BZPOPMIN, BZPOPMAX and BZMPOP clients are served, in
// the order they blocked, by ZADD, ZINCRBY and ZUNIONSTORE into their
// keys, in every single-node mode and on a cluster follower.
func TestBlockingZSet(t *testing.T) {
	for _, m := range blockingModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			n := m.start(t)
			a, b, cz := dialRaw(t, n.Addr), dialRaw(t, n.Addr), dialRaw(t, n.Addr)
			a.send("BZPOPMIN", "nothing", "z", "0")
			waitBlocked(t, n.Addr, 1)
			b.send("BZPOPMAX", "z", "0")
			waitBlocked(t, n.Addr, 2)
			cz.send("BZMPOP", "0", "1", "u", "MAX", "COUNT", "2")
			waitBlocked(t, n.Addr, 3)
			w := dialRaw(t, n.Addr)
			if v := w.Do("ZADD", "z", "1", "one", "2", "two", "3", "three"); v.Str != "3" {
				t.Fatalf("ZADD: %s", v)
			}
			if v := a.Read(); string(v.Raw) != "*3\r\n$1\r\nz\r\n$3\r\none\r\n$1\r\n1\r\n" {
				t.Fatalf("BZPOPMIN got %s", v)
			}
			if v := b.Read(); string(v.Raw) != "*3\r\n$1\r\nz\r\n$5\r\nthree\r\n$1\r\n3\r\n" {
				t.Fatalf("BZPOPMAX got %s", v)
			}
			if v := w.Do("ZUNIONSTORE", "u", "1", "z", "WEIGHTS", "10"); v.Str != "1" {
				t.Fatalf("ZUNIONSTORE: %s", v)
			}
			if v := cz.Read(); string(v.Raw) != "*2\r\n$1\r\nu\r\n*1\r\n*2\r\n$3\r\ntwo\r\n$2\r\n20\r\n" {
				t.Fatalf("BZMPOP got %s", v)
			}
			a.send("BZPOPMIN", "inc", "0")
			waitBlocked(t, n.Addr, 1)
			w.Do("ZINCRBY", "inc", "2.5", "m")
			if v := a.Read(); string(v.Raw) != "*3\r\n$3\r\ninc\r\n$1\r\nm\r\n$3\r\n2.5\r\n" {
				t.Fatalf("BZPOPMIN after ZINCRBY got %s", v)
			}
			if v := a.Do("BZPOPMIN", "nothing", "0.01"); string(v.Raw) != "*-1\r\n" {
				t.Fatalf("BZPOPMIN timeout: %s", v)
			}
		})
	}
	t.Run("follower", func(t *testing.T) {
		nodes := startCluster(t, 3)
		leader := waitLeader(t, nodes)
		f := followers(nodes, leader)[0]
		c := dialRaw(t, f.Addr)
		c.send("BZPOPMIN", "z", "0")
		waitBlocked(t, f.Addr, 1)
		if v := dialRaw(t, leader.Addr).DoRetry("ZADD", "z", "1", "x", "2", "y"); v.Str != "2" {
			t.Fatalf("ZADD on the leader: %s", v)
		}
		if v := c.Read(); string(v.Raw) != "*3\r\n$1\r\nz\r\n$1\r\nx\r\n$1\r\n1\r\n" {
			t.Fatalf("blocked follower client: %s", v)
		}
		waitFor(t, "the pop on every node", func() error {
			for _, n := range nodes {
				if v := dialRaw(t, n.Addr).Do("ZRANGE", "z", "0", "-1"); string(v.Raw) != "*1\r\n$1\r\ny\r\n" {
					return fmt.Errorf("%s: %s", n.Name, v)
				}
			}
			return nil
		})
	})
}
