package test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Moving slots between the groups of a sharded cluster (kvs slots move).

// moveKeys returns n keys named prefix:i whose slots are within first..last.
func moveKeys(prefix string, n, first, last int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := prefix + ":" + strconv.Itoa(i)
		if s := keySlot(k); s >= first && s <= last {
			out = append(out, k)
		}
	}
	return out
}

// seedTypes writes keys of every type (a string with or without a TTL, a
// hash, a list, a set, a sorted set), about 300 bytes each.
func seedTypes(t *testing.T, ctx context.Context, c redis.Cmdable, keys []string) {
	t.Helper()
	pad := strings.Repeat("x", 50)
	for i, k := range keys {
		seed := func() error {
			switch i % 6 {
			case 0:
				return c.Set(ctx, k, strings.Repeat("v", 300), 0).Err()
			case 1:
				return c.Set(ctx, k, strings.Repeat("t", 300), time.Hour).Err()
			case 2:
				return c.HSet(ctx, k, "a", pad+"1", "b", pad+"2", "c", pad+"3", "d", pad+"4", "e", pad+"5").Err()
			case 3:
				// In a transaction with a DEL, so that a push whose outcome
				// was unknown can be sent again.
				_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Del(ctx, k)
					p.RPush(ctx, k, pad+"1", pad+"2", pad+"3", pad+"4", pad+"5")
					return nil
				})
				return err
			case 4:
				return c.SAdd(ctx, k, pad+"1", pad+"2", pad+"3", pad+"4", pad+"5").Err()
			default:
				err := c.ZAdd(ctx, k, redis.Z{Score: 1, Member: pad + "1"}, redis.Z{Score: 2.5, Member: pad + "2"},
					redis.Z{Score: -3, Member: pad + "3"}).Err()
				if err == nil {
					err = c.Expire(ctx, k, time.Hour).Err()
				}
				return err
			}
		}
		// Each write is idempotent, so one whose outcome is unknown (a
		// leadership lost on a loaded machine) or refused while a group
		// elects is sent again.
		waitFor(t, "seeding "+k, func() error {
			err := seed()
			if err != nil && !retryableSeed(err) {
				t.Fatalf("seeding %s: %v", k, err)
			}
			return err
		})
	}
}

// retryableSeed reports whether a seeding write may be sent again.
func retryableSeed(err error) bool {
	msg := err.Error()
	for _, p := range []string{"UNCERTAIN", "TRYAGAIN", "CLUSTERDOWN", "MOVED", "LOADING"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "EOF") || strings.Contains(msg, "i/o timeout")
}

// describe is key's type, value and whether it has a TTL, as one string.
func describe(ctx context.Context, c redis.Cmdable, key string) (string, error) {
	typ, err := c.Type(ctx, key).Result()
	if err != nil {
		return "", err
	}
	var val any
	switch typ {
	case "none":
		return "none", nil
	case "string":
		val, err = c.Get(ctx, key).Result()
	case "hash":
		var m map[string]string
		m, err = c.HGetAll(ctx, key).Result()
		val = fmt.Sprint(m) // fmt sorts a map's keys
	case "list":
		val, err = c.LRange(ctx, key, 0, -1).Result()
	case "set":
		var ms []string
		ms, err = c.SMembers(ctx, key).Result()
		slices.Sort(ms)
		val = ms
	case "zset":
		val, err = c.ZRangeWithScores(ctx, key, 0, -1).Result()
	}
	if err != nil {
		return "", err
	}
	ttl, err := c.PTTL(ctx, key).Result()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %v ttl=%v", typ, val, ttl > 0), nil
}

// describeAll describes every key, retrying a key while the cluster
// answers with an error (a client following a move).
func describeAll(t *testing.T, ctx context.Context, c redis.Cmdable, keys []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		waitFor(t, "reading "+k, func() error {
			d, err := describe(ctx, c, k)
			if err == nil {
				out[k] = d
			}
			return err
		})
	}
	return out
}

// moveStatus is move id as KVS.SLOTS STATUS on addr lists it.
func moveStatus(ctx context.Context, addr string, id int64) (map[string]any, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	ms, err := allMoves(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m["id"] == id {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no move %d in %v", id, ms)
}

// allMoves is every move KVS.SLOTS STATUS lists through c (a RESP2
// client), each a map of its fields.
func allMoves(ctx context.Context, c *redis.Client) ([]map[string]any, error) {
	v, err := c.Do(ctx, "KVS.SLOTS", "STATUS").Slice()
	if err != nil {
		return nil, err
	}
	var ms []map[string]any
	for _, e := range v {
		fields, _ := e.([]any)
		m := map[string]any{}
		for i := 0; i+1 < len(fields); i += 2 {
			m[fmt.Sprint(fields[i])] = fields[i+1]
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// moveID is the id `kvs slots move` printed.
func moveID(t *testing.T, out string) int64 {
	t.Helper()
	var id int64
	if _, err := fmt.Sscanf(out, "move %d:", &id); err != nil {
		t.Fatalf("kvs slots move printed %q: %v", out, err)
	}
	return id
}

// moveLoad is writers keeping a model of the keys they own: each key's
// last acknowledged state ("" absent) and the values written since whose
// outcome is unknown.
type moveLoad struct {
	mu    sync.Mutex
	acked map[string]string
	maybe map[string][]string
	n     int
	errs  map[string]int // the errors writes got, by their first word
	bad   []string
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newMoveLoad() *moveLoad {
	return &moveLoad{acked: map[string]string{}, maybe: map[string][]string{}, errs: map[string]int{}, stop: make(chan struct{})}
}

func (l *moveLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// run writes (SET, or DEL now and then) and reads back keys through c
// until stop closes.
func (l *moveLoad) run(ctx context.Context, name string, c redis.Cmdable, keys []string, seed int64) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		rng := rand.New(rand.NewSource(seed))
		for seq := 0; ; seq++ {
			select {
			case <-l.stop:
				return
			default:
			}
			k := keys[rng.Intn(len(keys))]
			val := ""
			var err error
			if rng.Intn(8) == 0 {
				err = c.Del(ctx, k).Err()
			} else {
				val = fmt.Sprintf("%s-%d", name, seq)
				err = c.Set(ctx, k, val, 0).Err()
			}
			l.mu.Lock()
			if err != nil {
				word, _, _ := strings.Cut(err.Error(), " ")
				l.errs[word]++
				l.maybe[k] = append(l.maybe[k], val)
				l.mu.Unlock()
				continue
			}
			l.acked[k], l.maybe[k] = val, nil
			l.n++
			l.mu.Unlock()
			got, err := c.Get(ctx, k).Result()
			if errors.Is(err, redis.Nil) {
				got, err = "", nil
			}
			if err == nil && got != val {
				l.mu.Lock()
				if len(l.maybe[k]) == 0 && l.acked[k] == val {
					l.bad = append(l.bad, fmt.Sprintf("%s read %s = %q after writing %q", name, k, got, val))
				}
				l.mu.Unlock()
			}
		}
	}()
}

// check finds every key in the state the model allows, through c.
func (l *moveLoad) check(t *testing.T, ctx context.Context, c redis.Cmdable) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.bad {
		t.Error(b)
	}
	for k, want := range l.acked {
		var got string
		waitFor(t, "reading "+k, func() error {
			v, err := c.Get(ctx, k).Result()
			if errors.Is(err, redis.Nil) {
				v, err = "", nil
			}
			got = v
			return err
		})
		if got != want && !slices.Contains(l.maybe[k], got) {
			t.Errorf("%s = %q; acknowledged last %q, unknown since %q", k, got, want, l.maybe[k])
		}
	}
}

// slotOwners checks that every node routes by slot map version and that
// its CLUSTER SLOTS gives slots first..last to group g's leader.
func slotOwners(nodes []*Node, version string, first, last, g int) error {
	for _, n := range nodes {
		st, err := kvsStatus(n.Addr)
		if err != nil {
			return err
		}
		if v := st.fields["slot_map_version"]; v != version {
			return fmt.Errorf("%s routes by slot map version %s, want %s", n.Name, v, version)
		}
		addrs := map[string]string{}
		for _, m := range st.members {
			addrs[m[0]] = m[2]
		}
		leader := addrs[st.groups[g][2]]
		c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		slots, err := c.ClusterSlots(context.Background()).Result()
		c.Close()
		if err != nil {
			return err
		}
		found := false
		for _, r := range slots {
			if int(r.Start) <= first && last <= int(r.End) {
				found = true
				if len(r.Nodes) == 0 || r.Nodes[0].Addr != leader {
					return fmt.Errorf("%s: CLUSTER SLOTS gives %d-%d to %v, want group %d's leader %s", n.Name, r.Start, r.End, r.Nodes, g, leader)
				}
			}
		}
		if !found {
			return fmt.Errorf("%s: CLUSTER SLOTS has no range holding %d-%d: %v", n.Name, first, last, slots)
		}
	}
	return nil
}

// keysTotal is DBSIZE summed over the masters of the cluster: every key
// once, a key held by two groups twice.
func keysTotal(ctx context.Context, cc *redis.ClusterClient) (int64, error) {
	var total int64
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := c.DBSize(ctx).Result()
		mu.Lock()
		total += n
		mu.Unlock()
		return err
	})
	return total, err
}

// moveCluster is a three-node cluster of three groups whose slots
// first..last (of group 1) hold keys of every type, and others beyond.
type moveCluster struct {
	nodes  []*Node
	cc     *redis.ClusterClient
	ctx    context.Context
	all    []string          // the keys seeded
	before map[string]string // described
	total  int64
}

func startMoveCluster(t *testing.T, first, last int) *moveCluster {
	t.Helper()
	return startMoveClusterRate(t, first, last, "64kb")
}

// startMoveClusterRate is startMoveCluster with the nodes' --slot-move-rate
// rate: at 64kb the copy of the seeded slots takes about five seconds.
func startMoveClusterRate(t *testing.T, first, last int, rate string) *moveCluster {
	t.Helper()
	nodes := startCluster(t, 3, "--groups", "3", "--slot-move-rate", rate)
	waitSpread(t, nodes)
	for _, n := range nodes {
		waitFor(t, n.Name+" to route by the stored slot map", func() error { return checkSlotMap(n) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16})
	t.Cleanup(func() { cc.Close() })
	seeded := moveKeys("mv", 1200, first, last)
	others := moveKeys("other", 200, last+1, 16383)
	seedTypes(t, ctx, cc, seeded)
	seedTypes(t, ctx, cc, others)
	all := append(slices.Clone(seeded), others...)
	mc := &moveCluster{nodes: nodes, cc: cc, ctx: ctx, all: all, before: describeAll(t, ctx, cc, all), total: int64(len(all))}
	if n, err := keysTotal(ctx, cc); err != nil || n != mc.total {
		t.Fatalf("keys over the masters: %d, %v; want %d", n, err, mc.total)
	}
	return mc
}

// waitMovePhase waits until move id is in phase, as the node at addr
// lists it, and returns its status.
func waitMovePhase(t *testing.T, ctx context.Context, addr string, id int64, phase string, progress bool) map[string]any {
	t.Helper()
	var m map[string]any
	waitFor(t, fmt.Sprintf("move %d to be %s", id, phase), func() error {
		var err error
		if m, err = moveStatus(ctx, addr, id); err != nil {
			return err
		}
		if m["phase"] != phase || progress && m["keys"].(int64) == 0 {
			return fmt.Errorf("move %d: %v", id, m)
		}
		return nil
	})
	return m
}

// TestSlotMove: three nodes, three groups; slots 0-1999 of group 1 hold
// keys of every type, some with TTLs. A move of them to group 2 cancelled
// mid-copy leaves everything at group 1: the slot map's version, every
// key, and nothing more to count. Then, while a go-redis ClusterClient
// and a plain client on another node write, delete and read keys of the
// range, the move again, to its end (kvs slots move --wait): every
// acknowledged write is there exactly, every key seeded is as it was,
// CLUSTER SLOTS on every node names group 2's leader for the range, the
// slot map's version went up by one, and the keys counted over the
// masters are the keys there are (none left behind at group 1).
func TestSlotMove(t *testing.T) {
	t.Parallel()
	const first, last, from, to = 0, 1999, 1, 2
	mc := startMoveCluster(t, first, last)
	nodes, cc, ctx, all, before, total := mc.nodes, mc.cc, mc.ctx, mc.all, mc.before, mc.total

	// A move cancelled mid-copy.
	out, code := runKVS(t, clusterWait, "slots", "move", nodes[0].Addr, fmt.Sprintf("%d-%d", first, last), strconv.Itoa(to))
	if code != 0 {
		t.Fatalf("kvs slots move: exit %d\n%s", code, out)
	}
	id := moveID(t, out)
	waitMovePhase(t, ctx, nodes[1].Addr, id, "copying", true)
	// A backup is refused while slots move: each group's part is of its
	// own moment.
	backupFile := filepath.Join(t.TempDir(), "moving.kvsbackup")
	if out, code := runKVS(t, clusterWait, "backup", nodes[1].Addr, backupFile); code != 1 || !strings.Contains(out, "slots are moving between groups") {
		t.Errorf("kvs backup during a move: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(backupFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("kvs backup refused during a move left %s: %v", backupFile, err)
	}
	if out, code := runKVS(t, clusterWait, "slots", "cancel", nodes[2].Addr, strconv.FormatInt(id, 10)); code != 0 {
		t.Fatalf("kvs slots cancel: exit %d\n%s", code, out)
	}
	waitMovePhase(t, ctx, nodes[2].Addr, id, "cancelled", false)
	waitFor(t, "every node to route the range to group 1", func() error { return slotOwners(nodes, "1", first, last, from) })
	if after := describeAll(t, ctx, cc, all); !maps.Equal(before, after) {
		t.Fatalf("keys changed by a cancelled move:\n%s", diffDescribed(before, after))
	}
	if n, err := keysTotal(ctx, cc); err != nil || n != total {
		t.Fatalf("keys over the masters after the cancel: %d, %v; want %d", n, err, total)
	}

	// The move under load, to its end, with a client blocked on a key of
	// the slots (BLPOP with no timeout) from before it.
	load := newMoveLoad()
	plain := redis.NewClient(&redis.Options{Addr: nodes[2].Addr})
	defer plain.Close()
	blockedKey := moveKeys("blocked", 1, first, last)[0]
	popped := make(chan []string, 1)
	blocker := redis.NewClient(&redis.Options{Addr: nodes[0].Addr, MaxRetries: -1, ReadTimeout: -1})
	defer blocker.Close()
	go func() {
		v, err := blocker.BLPop(ctx, 0, blockedKey).Result()
		if err != nil {
			v = []string{"error", err.Error()}
		}
		popped <- v
	}()
	probe := redis.NewClient(&redis.Options{Addr: nodes[0].Addr})
	defer probe.Close()
	waitFor(t, "the client to block", func() error {
		info, err := probe.Info(ctx, "clients").Result()
		if err == nil && !strings.Contains(info, "blocked_clients:1") {
			err = errors.New("no client blocked")
		}
		return err
	})
	load.run(ctx, "cluster", cc, moveKeys("ldc", 40, first, last), 1)
	load.run(ctx, "plain", plain, moveKeys("ldp", 40, first, last), 2)
	waitFor(t, "the load to write", func() error {
		if n := load.count(); n < 100 {
			return fmt.Errorf("%d writes", n)
		}
		return nil
	})
	out, code = runKVS(t, 3*time.Minute, "slots", "move", "--wait", nodes[1].Addr, fmt.Sprintf("%d-%d", first, last), strconv.Itoa(to))
	if code != 0 || !strings.Contains(out, ": done,") {
		t.Fatalf("kvs slots move --wait: exit %d\n%s", code, out)
	}
	t.Logf("kvs slots move --wait:\n%s", out)
	atDone := load.count()
	waitFor(t, "the load to write after the move", func() error {
		if n := load.count(); n < atDone+100 {
			return fmt.Errorf("%d writes since the move", n-atDone)
		}
		return nil
	})
	close(load.stop)
	load.wg.Wait()
	rerouted := 0
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		info, err := c.Info(ctx, "stats").Result()
		c.Close()
		if err == nil {
			_, v, _ := strings.Cut(info, "kvs_commands_rerouted:")
			v, _, _ = strings.Cut(v, "\r\n")
			k, _ := strconv.Atoi(v)
			rerouted += k
		}
	}
	t.Logf("%d writes acknowledged, errors by kind: %v; commands rerouted: %d", load.count(), load.errs, rerouted)
	waitFor(t, "every node to route the range to group 2", func() error { return slotOwners(nodes, "2", first, last, to) })
	load.check(t, ctx, cc)
	load.check(t, ctx, plain)
	if after := describeAll(t, ctx, cc, all); !maps.Equal(before, after) {
		t.Fatalf("keys changed by the move:\n%s", diffDescribed(before, after))
	}
	present := 0
	for _, v := range load.acked {
		if v != "" {
			present++
		}
	}
	want := total + int64(present)
	waitFor(t, "the keys over the masters to be those there are", func() error {
		n, err := keysTotal(ctx, cc)
		if err == nil && n != want {
			err = fmt.Errorf("%d keys over the masters, want %d", n, want)
		}
		return err
	})
	// The client blocked from before the move is served by the group the
	// key moved to.
	if err := cc.RPush(ctx, blockedKey, "pushed").Err(); err != nil {
		t.Fatalf("RPUSH %s: %v", blockedKey, err)
	}
	select {
	case v := <-popped:
		if !slices.Equal(v, []string{blockedKey, "pushed"}) {
			t.Errorf("BLPOP blocked from before the move: %q", v)
		}
	case <-time.After(clusterWait):
		t.Errorf("BLPOP blocked from before the move was not served by the key's new group")
	}

	// A script on a moved key runs in the group it moved to, whose
	// store judges its calls by the slots it owns now.
	k := all[0]
	if err := cc.Eval(ctx, "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])", []string{k}, "scripted").Err(); err != nil {
		t.Errorf("EVAL on moved key %s: %v", k, err)
	}
	if v, err := plain.Get(ctx, k).Result(); err != nil || v != "scripted" {
		t.Errorf("GET %s after the script: %q, %v", k, v, err)
	}
	if out, code := runKVS(t, clusterWait, "backup", nodes[1].Addr, backupFile); code != 0 {
		t.Errorf("kvs backup after the moves: exit %d\n%s", code, out)
	}
	out, code = runKVS(t, clusterWait, "slots", "status", nodes[0].Addr)
	if code != 0 || !strings.Contains(out, "done") || !strings.Contains(out, "cancelled") {
		t.Errorf("kvs slots status: exit %d\n%s", code, out)
	}
}

func diffDescribed(a, b map[string]string) string {
	var lines []string
	for k, v := range a {
		if b[k] != v {
			lines = append(lines, fmt.Sprintf("%s: %q -> %q", k, v, b[k]))
		}
	}
	slices.Sort(lines)
	if len(lines) > 10 {
		lines = append(lines[:10], fmt.Sprintf("... %d in all", len(lines)))
	}
	return strings.Join(lines, "\n")
}

// TestSlotMoveFaults: in the middle of a move's copy, under a
// ClusterClient's writes, deletes and reads of the moving slots, the
// leader of the source group, of the target group or of the meta group is
// killed (kill -9), or paused (SIGSTOP) until the group has another
// leader (the source group's: until its next leader has started the copy
// over) and then woken, still believing it leads; or every node is
// stopped and started again. The move goes on to its end from its
// record: every acknowledged write is there, every key seeded as it was,
// once, and every node, the one killed started again, routes the slots
// to the target at map version 2.
func TestSlotMoveFaults(t *testing.T) {
	t.Parallel()
	const first, last, from, to = 0, 1999, 1, 2
	for _, tc := range []struct {
		name  string
		group int // whose leader
		pause bool
	}{
		{"source leader killed", from, false},
		{"target leader killed", to, false},
		{"meta leader killed", 0, false},
		{"source leader paused", from, true},
		{"target leader paused", to, true},
		{"meta leader paused", 0, true},
		{"every node restarted", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := startMoveCluster(t, first, last)
			nodes, cc, ctx := mc.nodes, mc.cc, mc.ctx
			st, err := kvsStatus(nodes[0].Addr)
			if err != nil {
				t.Fatal(err)
			}
			var victim *Node
			alive := nodes
			if tc.group >= 0 {
				alive = nil
				for _, n := range nodes {
					if n.Name == st.groups[tc.group][2] {
						victim = n
					} else {
						alive = append(alive, n)
					}
				}
				if victim == nil {
					t.Fatalf("no node leads group %d: %v", tc.group, st.groups)
				}
			}
			load := newMoveLoad()
			load.run(ctx, "cluster", cc, moveKeys("ldc", 40, first, last), 1)
			out, code := runKVS(t, clusterWait, "slots", "move", alive[0].Addr, fmt.Sprintf("%d-%d", first, last), strconv.Itoa(to))
			if code != 0 {
				t.Fatalf("kvs slots move: exit %d\n%s", code, out)
			}
			id := moveID(t, out)
			waitMovePhase(t, ctx, alive[0].Addr, id, "copying", true)
			switch {
			case victim == nil:
				for _, n := range nodes {
					n.Stop()
				}
				for _, n := range nodes {
					n.Start()
				}
			case tc.pause:
				if err := sendSignal(victim, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				waitFor(t, fmt.Sprintf("group %d to elect another leader", tc.group), func() error {
					st, err := kvsStatus(alive[0].Addr)
					if err != nil {
						return err
					}
					if l := st.groups[tc.group][2]; l == "" || l == victim.Name {
						return fmt.Errorf("group %d's leader: %q", tc.group, l)
					}
					return nil
				})
				if tc.group == from {
					waitFor(t, "the source group's next leader to start the copy over", func() error {
						m, err := moveStatus(ctx, alive[0].Addr, id)
						if err != nil {
							return err
						}
						if m["attempts"].(int64) < 2 && m["phase"] != "done" {
							return fmt.Errorf("move %d: %v", id, m)
						}
						return nil
					})
				}
				if err := sendSignal(victim, syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			default:
				victim.Kill()
			}
			m := waitMovePhase(t, ctx, alive[0].Addr, id, "done", false)
			t.Logf("move %d: %v", id, m)
			if victim != nil && !tc.pause {
				victim.Start()
			}
			waitMembers(t, nodes, 3)
			atDone := load.count()
			waitFor(t, "the load to write after the move", func() error {
				if n := load.count(); n < atDone+50 {
					return fmt.Errorf("%d writes since the move", n-atDone)
				}
				return nil
			})
			close(load.stop)
			load.wg.Wait()
			t.Logf("%d writes acknowledged, errors by kind: %v", load.count(), load.errs)
			waitFor(t, "every node to route the range to group 2", func() error { return slotOwners(nodes, "2", first, last, to) })
			load.check(t, ctx, cc)
			if after := describeAll(t, ctx, cc, mc.all); !maps.Equal(mc.before, after) {
				t.Fatalf("keys changed by the move:\n%s", diffDescribed(mc.before, after))
			}
			present := 0
			for _, v := range load.acked {
				if v != "" {
					present++
				}
			}
			want := mc.total + int64(present)
			waitFor(t, "the keys over the masters to be those there are", func() error {
				n, err := keysTotal(ctx, cc)
				if err == nil && n != want {
					err = fmt.Errorf("%d keys over the masters, want %d", n, want)
				}
				return err
			})
		})
	}
}

// TestSlotMovePartitions moves slots 0-1999 around the three groups of one
// cluster, five times in a row, each time under a ClusterClient's writes,
// deletes and reads of the slots, while a leader is isolated from the
// other nodes (a partition through proxies in front of the nodes' raft
// ports, as the chaos tests make them; clients still reach it) until its
// group has another leader, and then healed, still believing it leads:
// the source group's leader mid-copy (held until its next leader has
// started the copy over), the meta group's, the target group's; then the
// source's once the source is fenced, and the target's once its copy is
// activated. For those two the raft traffic is slowed (every RPC delayed)
// from the copy on, so that KVS.SLOTS STATUS, polled, finds the move in
// those short phases (the phase caught is logged; a move already past it
// is hit where it is). Last, the source's leader is cut off in the meta
// group alone (the proxies cut that group's traffic to and from it) until
// its replica of the meta group knows no leader: it leads its group and
// copies on, but can neither read nor write the move's record. Each move
// ends done, and then every acknowledged
// write is there, every key seeded as it was, every node routes the slots
// to the target at the map's next version, and DBSIZE summed over the
// masters counts every key once.
func TestSlotMovePartitions(t *testing.T) {
	t.Parallel()
	const first, last = 0, 1999
	// A copy of two or three seconds: long enough for a leader to be
	// isolated and replaced in the middle of it.
	mc := startMoveClusterRate(t, first, last, "128kb")
	nodes, cc, ctx := mc.nodes, mc.cc, mc.ctx
	ps := proxyRaft(t, nodes)
	var loaded []string // the keys every load wrote
	owner := 1
	for i, tc := range []struct {
		name, role string
		at         string // the phase to hit the move in, past copying
	}{
		{"source leader isolated mid-copy", "source", ""},
		// Second, from group 2: group 3 is the one the meta group's
		// leader (n1, which both prefer) leads, and the move goes to 1.
		{"meta leader isolated mid-copy", "meta", ""},
		{"target leader isolated mid-copy", "target", ""},
		{"source leader isolated fenced", "source", "fenced"},
		{"target leader isolated activated", "target", "activated"},
		// The source's leader keeps its group but loses the meta group:
		// it copies on, and can neither read nor write the record.
		{"source leader cut off in the meta group mid-copy", "source-meta", ""},
	} {
		to := owner%3 + 1
		ok := t.Run(tc.name, func(t *testing.T) {
			// Each node leads one data group again (a leader handed back
			// to its preferred node after the last heal), so the
			// partition isolates the leader of one data group.
			waitSpread(t, nodes)
			g := map[string]int{"source": owner, "target": to, "meta": 0, "source-meta": owner}[tc.role]
			st, err := kvsStatus(nodes[0].Addr)
			if err != nil {
				t.Fatal(err)
			}
			if tc.role == "meta" && st.groups[to][2] == st.groups[0][2] {
				// The meta group's leader leads a data group too: the
				// move goes to the other one, so that the partition
				// hits the meta group's leader and not the target's
				// (unless it leads the source).
				to = 6 - owner - to
			}
			vi := slices.IndexFunc(nodes, func(n *Node) bool { return n.Name == st.groups[g][2] })
			if vi < 0 {
				t.Fatalf("no node leads group %d: %v", g, st.groups)
			}
			victim, rest := nodes[vi], slices.DeleteFunc([]int{0, 1, 2}, func(j int) bool { return j == vi })
			alive := nodes[rest[0]]
			load := newMoveLoad()
			keys := moveKeys(fmt.Sprintf("ld%d", i), 40, first, last)
			loaded = append(loaded, keys...)
			load.run(ctx, "cluster", cc, keys, int64(i))
			out, code := runKVS(t, clusterWait, "slots", "move", alive.Addr, fmt.Sprintf("%d-%d", first, last), strconv.Itoa(to))
			if code != 0 {
				t.Fatalf("kvs slots move: exit %d\n%s", code, out)
			}
			id := moveID(t, out)
			waitMovePhase(t, ctx, alive.Addr, id, "copying", true)
			if tc.at != "" {
				t.Logf("move %d caught %s (wanted %s)", id, catchMovePhase(t, ctx, alive.Addr, id, tc.at, ps), tc.at)
			}
			if tc.role == "source-meta" {
				ps.IsolateGroup(0, vi)
			} else if err := ps.Partition([]int{vi}, rest); err != nil {
				t.Fatal(err)
			}
			for _, p := range ps.P {
				p.Delay(0)
			}
			var led []string
			for j, row := range st.groups {
				if row[2] == victim.Name {
					led = append(led, strconv.Itoa(j))
				}
			}
			t.Logf("move %d from group %d to group %d: %s, leader of groups %s: %s", id, owner, to, victim.Name, strings.Join(led, ", "), tc.name)
			if tc.role == "source-meta" {
				waitFor(t, victim.Name+"'s meta replica to lose its leader", func() error {
					st, err := kvsStatus(victim.Addr)
					if err != nil {
						return err
					}
					if l := st.groups[0][2]; l != "" && l != victim.Name {
						return fmt.Errorf("%s's meta replica names leader %q", victim.Name, l)
					}
					st, err = kvsStatus(alive.Addr)
					if err != nil {
						return err
					}
					if l := st.groups[0][2]; l == "" || l == victim.Name {
						return fmt.Errorf("group 0's leader: %q", l)
					}
					return nil
				})
			} else {
				waitFor(t, fmt.Sprintf("group %d to elect another leader", g), func() error {
					st, err := kvsStatus(alive.Addr)
					if err != nil {
						return err
					}
					if l := st.groups[g][2]; l == "" || l == victim.Name {
						return fmt.Errorf("group %d's leader: %q", g, l)
					}
					return nil
				})
			}
			if tc.role == "source" && tc.at == "" {
				waitFor(t, "the source group's next leader to start the copy over", func() error {
					m, err := moveStatus(ctx, alive.Addr, id)
					if err != nil {
						return err
					}
					if m["attempts"].(int64) < 2 && m["phase"] != "done" {
						return fmt.Errorf("move %d: %v", id, m)
					}
					return nil
				})
			}
			ps.HealAll()
			m := waitMovePhase(t, ctx, alive.Addr, id, "done", false)
			t.Logf("move %d: %v", id, m)
			waitMembers(t, nodes, 3)
			atDone := load.count()
			waitFor(t, "the load to write after the move", func() error {
				if n := load.count(); n < atDone+50 {
					return fmt.Errorf("%d writes since the move", n-atDone)
				}
				return nil
			})
			close(load.stop)
			load.wg.Wait()
			t.Logf("%d writes acknowledged, errors by kind: %v", load.count(), load.errs)
			waitFor(t, fmt.Sprintf("every node to route the range to group %d", to), func() error {
				return slotOwners(nodes, strconv.Itoa(int(id)+1), first, last, to)
			})
			load.check(t, ctx, cc)
			if after := describeAll(t, ctx, cc, mc.all); !maps.Equal(mc.before, after) {
				t.Fatalf("keys changed by the move:\n%s", diffDescribed(mc.before, after))
			}
			// The loads' keys there, read: a write of unknown outcome
			// may or may not have made one.
			var present int64
			for _, k := range loaded {
				waitFor(t, "EXISTS "+k, func() error {
					n, err := cc.Exists(ctx, k).Result()
					present += n
					return err
				})
			}
			want := mc.total + present
			waitFor(t, "the keys over the masters to be those there are", func() error {
				n, err := keysTotal(ctx, cc)
				if err == nil && n != want {
					err = fmt.Errorf("%d keys over the masters, want %d", n, want)
				}
				return err
			})
		})
		if !ok {
			return // the next move starts from where this one ended
		}
		owner = to
	}
}

// catchMovePhase slows every raft RPC (ps's proxies delay each by a few
// tens of milliseconds each way, which heartbeats survive), so that the
// short phases of move id's hand-over span many polls, and polls
// KVS.SLOTS STATUS on addr until the move is in phase or past it. It
// returns the phase it found; the caller lifts the delays.
func catchMovePhase(t *testing.T, ctx context.Context, addr string, id int64, phase string, ps RaftProxies) string {
	t.Helper()
	order := []string{"copying", "fenced", "activated", "released", "flipped", "done"}
	for _, p := range ps.P {
		p.Delay(30 * time.Millisecond)
	}
	var at string
	pollFor(t, fmt.Sprintf("move %d to be %s", id, phase), 2*time.Minute, 2*time.Millisecond, func() error {
		m, err := moveStatus(ctx, addr, id)
		if err != nil {
			return err
		}
		at, _ = m["phase"].(string)
		if slices.Index(order, at) < slices.Index(order, phase) {
			return fmt.Errorf("move %d: %v", id, m)
		}
		return nil
	})
	return at
}

// TestSlotMoveStaleDriver: a node that leads a move's source group again
// while its replica of the meta group is behind must not drive the move
// from the stale record. The node leading group 1 sees move 1 (slots
// 0-1999 to group 2) recorded and begun, while group 2 has no leader
// (every connection of group 2 cut), so the move waits at begun; then its
// meta replica is cut off (the meta group's traffic to and from it alone),
// and so is its replica of group 1, whose leadership goes to another node.
// Group 2 heals, and the new leader of group 1 drives the move to its
// end. Then the node's replica of group 1 heals, and the group's
// leadership comes back to it (its preferred leader), its meta replica
// still cut, still saying the move is begun, the slot map still at
// version 1: its driver resumes the move from there, and the groups must
// refuse the assignment of slots it begins with, by that map (they did
// not: group 1 took the slots back, empty, and group 2 gave them up with
// every key in them). Once everything heals, the move must still be done
// with every key where the move put it: group 2 owning the slots with
// every key, group 1 none.
func TestSlotMoveStaleDriver(t *testing.T) {
	t.Parallel()
	const first, last, from, to = 0, 1999, 1, 2
	mc := startMoveClusterRate(t, first, last, "256kb")
	nodes, cc, ctx := mc.nodes, mc.cc, mc.ctx
	ps := proxyRaft(t, nodes)
	// x is group 1's preferred leader (data group k prefers the node at k
	// modulo the count, in id order: n2), to which the group's leadership
	// returns.
	xi := from % len(nodes)
	x, other := nodes[xi], nodes[(xi+1)%3]
	waitFor(t, fmt.Sprintf("%s to lead group %d", x.Name, from), func() error {
		st, err := kvsStatus(x.Addr)
		if err != nil {
			return err
		}
		if st.groups[from][1] != "leader" {
			return fmt.Errorf("%s is %s in group %d", x.Name, st.groups[from][1], from)
		}
		return nil
	})
	ps.CutGroupEverywhere(to)
	waitFor(t, fmt.Sprintf("group %d to lose its leader", to), func() error {
		for _, n := range nodes {
			st, err := kvsStatus(n.Addr)
			if err != nil {
				return err
			}
			if st.groups[to][1] == "leader" {
				return fmt.Errorf("%s still leads group %d", n.Name, to)
			}
		}
		return nil
	})
	out, code := runKVS(t, clusterWait, "slots", "move", other.Addr, fmt.Sprintf("%d-%d", first, last), strconv.Itoa(to))
	if code != 0 {
		t.Fatalf("kvs slots move: exit %d\n%s", code, out)
	}
	id := moveID(t, out)
	waitMovePhase(t, ctx, x.Addr, id, "begun", false)
	t.Logf("move %d begun as %s (leader of group %d) sees it; cutting its meta replica off, then its replica of group %d", id, x.Name, from, from)
	ps.IsolateGroup(0, xi)
	ps.IsolateGroup(from, xi)
	waitFor(t, fmt.Sprintf("group %d to elect a leader other than %s", from, x.Name), func() error {
		st, err := kvsStatus(other.Addr)
		if err != nil {
			return err
		}
		if l := st.groups[from][2]; l == "" || l == x.Name {
			return fmt.Errorf("group %d's leader: %q", from, l)
		}
		return nil
	})
	ps.HealGroup(to)
	m := waitMovePhase(t, ctx, other.Addr, id, "done", false)
	t.Logf("move %d, driven by group %d's new leader: %v", id, from, m)
	if m, err := moveStatus(ctx, x.Addr, id); err != nil || m["phase"] != "begun" {
		t.Fatalf("%s's meta replica should still say move %d is begun: %v %v", x.Name, id, m, err)
	}
	// Group 1's traffic to x heals; its leader hands the group back to x,
	// its preferred leader, whose meta replica is still cut.
	ps.HealGroup(from)
	waitFor(t, fmt.Sprintf("%s to lead group %d again", x.Name, from), func() error {
		st, err := kvsStatus(x.Addr)
		if err != nil {
			return err
		}
		if st.groups[from][1] != "leader" {
			return fmt.Errorf("%s is %s in group %d", x.Name, st.groups[from][1], from)
		}
		return nil
	})
	// x's driver resumes the move from its stale record: the groups
	// refuse the assignment of slots by the map from before the move,
	// and x logs the refusal.
	waitFor(t, x.Name+"'s driver to be refused the stale assignment", func() error {
		b, err := os.ReadFile(x.LogPath())
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "come after slot move") {
			return fmt.Errorf("no refusal in %s", x.LogPath())
		}
		return nil
	})
	if m, err := moveStatus(ctx, x.Addr, id); err != nil || m["phase"] != "begun" {
		t.Fatalf("%s's meta replica should still say move %d is begun: %v %v", x.Name, id, m, err)
	}
	ps.HealAll()
	waitMembers(t, nodes, 3)
	waitMovePhase(t, ctx, x.Addr, id, "done", false)
	waitFor(t, "every node to route the range to group 2", func() error { return slotOwners(nodes, "2", first, last, to) })
	if after := describeAll(t, ctx, cc, mc.all); !maps.Equal(mc.before, after) {
		t.Fatalf("keys changed by the move:\n%s", diffDescribed(mc.before, after))
	}
	waitFor(t, "the keys over the masters to be those there are", func() error {
		n, err := keysTotal(ctx, cc)
		if err == nil && n != mc.total {
			err = fmt.Errorf("%d keys over the masters, want %d", n, mc.total)
		}
		return err
	})
}
