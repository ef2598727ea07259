package test

import (
	"bufio"
	"fmt"
	"maps"
	"math/rand"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hashModel is what one writer's hash must hold: the fields of every
// acknowledged write, and the one write whose reply the crash cut off
// (applied or not: both are correct).
type hashModel struct {
	key     string
	fields  map[string]string
	pending func(map[string]string) // nil, or the unacknowledged write
	acked   int
}

func (m *hashModel) apply(f func(map[string]string)) { f(m.fields) }

// op returns the writer's next command and its effect on the model. Small
// writers rewrite a few dozen fields (the hash stays packed), large ones
// add fields without end (it converts to the large form); both delete and
// increment too.
func (m *hashModel) op(rng *rand.Rand, large bool, seq int) ([]string, func(map[string]string)) {
	field, del := fmt.Sprintf("f%d", rng.Intn(40)), fmt.Sprintf("f%d", rng.Intn(40))
	if large {
		field, del = fmt.Sprintf("f%d", seq), fmt.Sprintf("f%d", seq-rng.Intn(50))
	}
	value := fmt.Sprintf("v%d-%d", seq, rng.Intn(1000))
	switch rng.Intn(6) {
	case 0:
		return []string{"HDEL", m.key, del}, func(f map[string]string) { delete(f, del) }
	case 1:
		return []string{"HINCRBY", m.key, "ctr", "1"}, func(f map[string]string) {
			n := 0
			fmt.Sscan(f["ctr"], &n)
			f["ctr"] = fmt.Sprint(n + 1)
		}
	}
	other := fmt.Sprintf("g%d", seq%7)
	return []string{"HSET", m.key, field, value, other, value}, func(f map[string]string) {
		f[field], f[other] = value, value
	}
}

func (m *hashModel) check(got map[string]string) error {
	if maps.Equal(got, m.fields) {
		m.pending = nil
		return nil
	}
	if m.pending != nil {
		with := maps.Clone(m.fields)
		m.pending(with)
		if maps.Equal(got, with) {
			m.fields, m.pending = with, nil
			return nil
		}
	}
	return fmt.Errorf("%s holds %s, want %s (or that with the unacknowledged write)", m.key, showHash(got), showHash(m.fields))
}

func showHash(h map[string]string) string {
	var parts []string
	for f, v := range h {
		parts = append(parts, f+"="+v)
	}
	sort.Strings(parts)
	if len(parts) > 20 {
		return fmt.Sprintf("%d fields [%s ...]", len(parts), strings.Join(parts[:20], " "))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func hgetall(c *rawConn, key string) (map[string]string, error) {
	v, err := c.do("HGETALL", key)
	if err != nil {
		return nil, err
	}
	if v.Kind != '*' || len(v.Elems)%2 != 0 {
		return nil, fmt.Errorf("HGETALL %s: %s", key, v)
	}
	h := map[string]string{}
	for i := 0; i < len(v.Elems); i += 2 {
		h[v.Elems[i].Str] = v.Elems[i+1].Str
	}
	return h, nil
}

// TestCrashHash: writers on hashes of both forms against a durable node
// with fsync always, killed with SIGKILL while they write, then
// restarted: every acknowledged HSET, HDEL and HINCRBY is there, with the
// right content, through recovery of the log and (with small segments) of
// snapshots holding hashes.
func TestCrashHash(t *testing.T) {
	seed := testSeed(t)
	for i, v := range walVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(seed + int64(i)))
			n := newKVS(t, "kvs-hash", KVSOptions{Durable: true, Fsync: "always", Extra: v.extra})
			n.Start()
			const writers = 8
			models := make([]*hashModel, writers)
			for w := range models {
				models[w] = &hashModel{key: fmt.Sprintf("hash:%d", w), fields: map[string]string{}}
			}
			seq := 0
			for round := range 3 {
				seq = hashLoadThenKill(t, n, models, rng.Int63(), seq)
				n.Start()
				c := dialRaw(t, n.Addr)
				for _, m := range models {
					got, err := hgetall(c, m.key)
					if err != nil {
						t.Fatal(err)
					}
					if err := m.check(got); err != nil {
						t.Fatalf("round %d: %v\n%s", round, err, n.LogTail(20))
					}
				}
				acked := 0
				for _, m := range models {
					acked += m.acked
				}
				t.Logf("round %d: %d hash writes acknowledged so far", round, acked)
			}
			if enc := dialRaw(t, n.Addr).Do("HLEN", "hash:0"); enc.Str == "0" {
				t.Fatal("the large writer's hash is empty")
			}
		})
	}
}

// hashLoadThenKill runs one writer per model until together they have
// had enough writes acknowledged, kills the node while they go on, and
// returns the next sequence number.
func hashLoadThenKill(t *testing.T, n *Node, models []*hashModel, seed int64, seq int) int {
	t.Helper()
	var acked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(models))
	for w, m := range models {
		nc, err := net.DialTimeout("tcp", n.Addr, ioTimeout)
		if err != nil {
			t.Fatal(err)
		}
		c := &rawConn{t: t, c: nc, r: bufio.NewReader(nc)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer nc.Close()
			rng := rand.New(rand.NewSource(seed + int64(w)))
			for i := seq; ; i++ {
				cmd, effect := m.op(rng, w < 2, i)
				m.pending = effect
				v, err := c.do(cmd...)
				if err != nil {
					return // the kill: the write may or may not have happened
				}
				if v.IsError() {
					errs <- fmt.Errorf("%s: %s", showCommand(cmd), v)
					return
				}
				m.apply(effect)
				m.pending = nil
				m.acked++
				acked.Add(1)
			}
		}()
	}
	// Kill once the writers are well under way (a condition, not a time).
	target := acked.Load() + 3000 + int64(rand.New(rand.NewSource(seed)).Intn(3000))
	deadline := time.Now().Add(time.Minute)
	for acked.Load() < target && time.Now().Before(deadline) && len(errs) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	n.Kill()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return seq + 1_000_000
}

// TestClusterHashReplicas: hashes written on the leader reach every
// follower with the same content in the same order (HGETALL byte for
// byte: field order is decided by the fields, not by each node).
func TestClusterHashReplicas(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	c := dialRaw(t, leader.Addr)
	c.DoRetry("HSET", "small", "a", "1", "b", "2", "c", "3")
	c.DoRetry("HINCRBYFLOAT", "small", "a", "0.1")
	c.DoRetry("HDEL", "small", "b")
	for i := range 300 {
		c.DoRetry("HSET", "large", fmt.Sprintf("f%d", i), fmt.Sprint(i))
	}
	c.DoRetry("HDEL", "large", "f7", "f8")
	c.DoRetry("HINCRBY", "large", "f9", "100")
	c.DoRetry("HSET", "long", "x", strings.Repeat("v", 100))
	keys := []string{"small", "large", "long"}
	want := map[string]string{}
	for _, k := range keys {
		want[k] = string(c.DoRetry("HGETALL", k).Raw)
	}
	if !strings.Contains(want["small"], "1.1") || strings.Count(want["large"], "\r\n") != 1+4*298 {
		t.Fatalf("leader holds small %q, large %d lines", want["small"], strings.Count(want["large"], "\r\n"))
	}
	for _, f := range followers(nodes, leader) {
		fc := dialRaw(t, f.Addr)
		waitFor(t, "hashes on follower "+f.Name, func() error {
			for _, k := range keys {
				v, err := fc.do("HGETALL", k)
				if err != nil {
					return err
				}
				if string(v.Raw) != want[k] {
					return fmt.Errorf("%s: %.200q, leader %.200q", k, v.Raw, want[k])
				}
			}
			return nil
		})
	}
}
