package test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The cluster's level: the level of replicated entries every node of a
// cluster can apply. A kvs from before levels applies level 0; today's
// stores the slot map with an entry of level 1, and applies entries up to
// kvsLevel.

// kvsLevel is the level of the kvs under test (fsm.ApplyLevel): a
// cluster of only today's kvs records it.
const kvsLevel = "4"

// slotMapHeldBack is what a node that leads the meta group logs when the
// cluster's level keeps it from storing the slot map.
const slotMapHeldBack = "the slot map is stored once every node runs a kvs that applies it"

// logHas reports an error unless n's log holds text.
func logHas(n *Node, text string) error {
	b, err := os.ReadFile(n.LogPath())
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), text) {
		return fmt.Errorf("%s has not logged %q yet", n.Name, text)
	}
	return nil
}

// waitClusterLevel waits until n reports the cluster's level want.
func waitClusterLevel(t testing.TB, n *Node, want string) {
	t.Helper()
	waitFor(t, n.Name+" to report the cluster's level "+want, func() error {
		st, err := kvsStatus(n.Addr, n.Password)
		if err != nil {
			return err
		}
		if l := st.fields["cluster_level"]; l != want {
			return fmt.Errorf("cluster level %q", l)
		}
		return nil
	})
}

// TestShardedRollingUpgrade: a cluster of three nodes and three groups made
// by the kvs before the stored slot map is upgraded one node at a time
// while a client of each node writes keys of every group and reads each
// back. No node stops on an entry it cannot apply: n1, the meta group's
// preferred leader, leads it again from its upgrade on, and stores no slot
// map while an old node runs; once the last node runs today's kvs the
// cluster records its level, version 1 of the map is stored and every node
// routes by it, and every acknowledged write is on every node.
func TestShardedRollingUpgrade(t *testing.T) {
	t.Parallel()
	old := buildOldKVS(t, shardedUpgradeFrom, t.TempDir())
	nodes := startOldShardedCluster(t, old)
	for _, n := range nodes {
		st, err := kvsStatus(n.Addr)
		if err != nil || st.fields["apply_level"] != "" || st.fields["slot_map_version"] != "" {
			t.Fatalf("%s reports apply level %q, slot map version %q (%v): not the kvs this test needs",
				n.Name, st.fields["apply_level"], st.fields["slot_map_version"], err)
		}
	}

	ctx := context.Background()
	var (
		acked    sync.Map // key -> value, every write a node acknowledged
		nAcked   atomic.Int64
		misreads atomic.Int64
		misread  sync.Once
		stop     = make(chan struct{})
		clients  sync.WaitGroup
	)
	for w, n := range nodes {
		// One plain client per node, made up front: a node down refuses
		// connections and its client waits for it to come back. Writes
		// go to each key's group's leader through the node.
		c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: clusterWait})
		t.Cleanup(func() { c.Close() })
		clients.Add(1)
		go func() {
			defer clients.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key, val := fmt.Sprintf("u%d:%d", w, i), fmt.Sprintf("v%d", i)
				// A failed write (the node down, a leader change, an
				// UNCERTAIN) is not acknowledged and not checked.
				if c.Set(ctx, key, val, 0).Err() != nil {
					time.Sleep(10 * time.Millisecond) // the node is down or electing
					continue
				}
				acked.Store(key, val)
				nAcked.Add(1)
				// The node that acknowledged a write reads it back, or
				// fails to answer (stopped meanwhile), never answers
				// another value.
				got, err := c.Get(ctx, key).Result()
				if err == nil && got != val {
					misreads.Add(1)
					misread.Do(func() { t.Errorf("GET %s on %s after its SET: %q, want %q", key, n.Name, got, val) })
				}
			}
		}()
	}
	stopClients := sync.OnceFunc(func() { close(stop); clients.Wait() })
	defer stopClients()
	progress := func(what string) {
		t.Helper()
		from := nAcked.Load()
		waitFor(t, what, func() error {
			if nAcked.Load() < from+50 {
				return fmt.Errorf("%d writes acknowledged since", nAcked.Load()-from)
			}
			return nil
		})
	}
	// stopped names a node that stopped on its own.
	stopped := func() *Node {
		for _, n := range nodes {
			if n.isExited() {
				return n
			}
		}
		return nil
	}
	running := func(when string) {
		t.Helper()
		if n := stopped(); n != nil {
			t.Fatalf("%s stopped %s: %v\n%s", n.Name, when, n.exitErr(), n.LogTail(40))
		}
	}

	progress("writes on the old cluster")
	for i, n := range nodes {
		running("before " + n.Name + "'s upgrade")
		n.Stop()
		progress("writes while " + n.Name + " is down")
		n.Bin = requireKVS(t)
		n.Start()
		waitMembers(t, nodes, 3)
		progress("writes after " + n.Name + " was upgraded")
		if i == 0 {
			// Group 0's preferred leader takes the meta group back from
			// the old node that led it meanwhile, and may not store the
			// map.
			waitFor(t, n.Name+" to lead the meta group and hold the slot map back", func() error {
				if s := stopped(); s != nil {
					t.Fatalf("%s stopped: %v\n%s", s.Name, s.exitErr(), s.LogTail(40))
				}
				st, err := kvsStatus(n.Addr)
				if err != nil {
					return err
				}
				if st.fields["state"] != "leader" {
					return fmt.Errorf("%s is the meta group's %s", n.Name, st.fields["state"])
				}
				return logHas(n, slotMapHeldBack)
			})
		}
		if i == len(nodes)-1 {
			break
		}
		progress("writes of a cluster of old and new nodes")
		for _, u := range nodes[:i+1] {
			st, err := kvsStatus(u.Addr)
			if err != nil {
				t.Fatal(err)
			}
			if v, l := st.fields["slot_map_version"], st.fields["cluster_level"]; v != "0" || l != "0" || st.fields["apply_level"] != kvsLevel {
				t.Fatalf("%s with %d of %d nodes upgraded: slot map version %q, cluster level %q, apply level %q; want 0, 0, %s",
					u.Name, i+1, len(nodes), v, l, st.fields["apply_level"], kvsLevel)
			}
		}
		running("with " + n.Name + " upgraded")
	}
	for _, n := range nodes {
		waitClusterLevel(t, n, kvsLevel)
	}
	for _, n := range nodes {
		waitFor(t, n.Name+" to route by the stored slot map", func() error { return checkSlotMap(n) })
	}
	progress("writes once the slot map is stored")
	running("at the end")
	stopClients()
	if n := misreads.Load(); n > 0 {
		t.Errorf("%d reads after a write answered another value", n)
	}

	var keys []string
	acked.Range(func(k, _ any) bool {
		keys = append(keys, k.(string))
		return true
	})
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("%d acknowledged writes on %s", len(keys), n.Name), func() error {
			c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
			defer c.Close()
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			pipe := c.Pipeline()
			cmds := make([]*redis.StringCmd, len(keys))
			for i, k := range keys {
				cmds[i] = pipe.Get(ctx, k)
			}
			pipe.Exec(ctx)
			for i, cmd := range cmds {
				want, _ := acked.Load(keys[i])
				if got, err := cmd.Result(); err != nil || got != want {
					return fmt.Errorf("GET %s = %q, %v; want %q", keys[i], got, err, want)
				}
			}
			return nil
		})
	}
	t.Logf("%d acknowledged writes on every node", len(keys))
}

// TestOldNodeJoinRefused: a kvs from before levels may not join a cluster
// of today's level, which holds an entry it cannot apply (the slot map): the
// join is refused, by the old kvs join and by today's, by a KVS.JOIN that
// does not say the level (the leader asks the node), and so is the old
// node's own --join, with an error that says why; the cluster keeps its one
// member and the old nodes keep running. Today's kvs joins by a KVS.JOIN
// without the level.
func TestOldNodeJoinRefused(t *testing.T) {
	t.Parallel()
	old := buildOldKVS(t, shardedUpgradeFrom, t.TempDir())
	n1 := newClusterNode(t, "n1", "--bootstrap", "--groups", "3")
	n1.Start()
	waitLeadsEvery(t, n1, 3)
	waitFor(t, "the slot map stored at the cluster's level "+kvsLevel, func() error {
		st, err := kvsStatus(n1.Addr)
		if err != nil {
			return err
		}
		if l := st.fields["cluster_level"]; l != kvsLevel {
			return fmt.Errorf("cluster level %q", l)
		}
		return checkSlotMap(n1)
	})

	if out, code := runKVS(t, clusterWait, "status", n1.Addr); code != 0 || !strings.Contains(out, "level:    applies entries up to level "+kvsLevel+"; the cluster's level is "+kvsLevel+"\n") {
		t.Errorf("kvs status: exit %d\n%s", code, out)
	}

	const refusal = "applies replicated entries up to level 0 and the cluster's level is " + kvsLevel
	n2 := newClusterNode(t, "n2", "--groups", "3")
	n2.Bin = old
	n2.Start()
	for _, bin := range []string{old, requireKVS(t)} {
		out, code := runBin(t, bin, clusterWait, "join", n1.Addr, n2.Addr)
		if code == 0 || !strings.Contains(out, "node n2 "+refusal) {
			t.Errorf("%s join of the old n2: exit %d\n%s", bin, code, out)
		}
	}
	// KVS.JOIN without the level, as an operator may type it: the leader
	// asks the node.
	if v := dialRaw(t, n1.Addr).Do("KVS.JOIN", "n2", "127.0.0.1:1", n2.Addr); !strings.Contains(v.Str, "node n2 "+refusal) {
		t.Errorf("KVS.JOIN of the old n2 without its level: %s", v)
	}
	n3 := newClusterNode(t, "n3", "--join", n1.Addr)
	n3.Bin = old
	n3.Start()
	waitFor(t, "the old n3's --join to be refused", func() error { return logHas(n3, "node n3 "+refusal) })

	st, err := kvsStatus(n1.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.members) != 1 {
		t.Errorf("members after the refused joins: %v", st.members)
	}
	for _, n := range []*Node{n1, n2, n3} {
		if n.isExited() {
			t.Errorf("%s stopped: %v\n%s", n.Name, n.exitErr(), n.LogTail(20))
		}
	}
	if v := dialRaw(t, n1.Addr).Do("SET", "k", "v"); v.Str != "OK" {
		t.Errorf("SET on n1 after the refused joins: %s", v)
	}

	// Today's kvs joins by KVS.JOIN without its level too: asked, it
	// answers 1.
	n4 := newClusterNode(t, "n4", "--groups", "3")
	n4.Start()
	st4, err := kvsStatus(n4.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if v := dialRaw(t, n1.Addr).Do("KVS.JOIN", "n4", st4.fields["raft_addr"], n4.Addr); v.Str != "OK" {
		t.Fatalf("KVS.JOIN of today's n4 without its level: %s", v)
	}
	waitMembers(t, []*Node{n1, n4}, 2)
}

// startOldShardedCluster starts three nodes of three groups on the kvs
// binary old, made and joined with its own commands, and waits until
// every group is placed and led.
func startOldShardedCluster(t *testing.T, old string) []*Node {
	t.Helper()
	var nodes []*Node
	for i := 1; i <= 3; i++ {
		extra := []string{"--groups", "3"}
		if i == 1 {
			extra = append(extra, "--bootstrap")
		}
		n := newClusterNode(t, fmt.Sprintf("n%d", i), extra...)
		n.Bin = old
		n.Start()
		if i > 1 {
			if out, code := runBin(t, old, clusterWait, "join", nodes[0].Addr, n.Addr); code != 0 {
				t.Fatalf("the old kvs join %s: exit %d\n%s", n.Name, code, out)
			}
		}
		nodes = append(nodes, n)
	}
	waitMembers(t, nodes, 3)
	waitSpread(t, nodes)
	return nodes
}
