package test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// docs/cluster.md's walk-through "Growing a cluster": three nodes and
// three groups grown to six nodes and six groups while a client writes.

// growRetryable are the error replies a write or read of the walk-through
// may meet and be sent again after: CLUSTERDOWN, TRYAGAIN and LOADING say
// the command was not applied, MOVED that another node serves the slot
// (go-redis follows it, up to MaxRedirects), UNCERTAIN that a write may
// have been applied. Sending an UNCERTAIN write again is safe here: each
// key has one writer, which sends the same SET until it is acknowledged,
// and the first attempt cannot apply after the repeat (see
// retryLeaderChange).
var growRetryable = []string{"CLUSTERDOWN ", "TRYAGAIN ", "LOADING ", "MOVED ", "UNCERTAIN "}

// growRetryableErr reports whether err is one of growRetryable, or a
// client-side timeout (the reply was late, its outcome unknown, as
// UNCERTAIN's).
func growRetryableErr(err error) bool {
	for _, p := range growRetryable {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return strings.Contains(err.Error(), "i/o timeout")
}

// errGrowStopped is what a retry loop returns once the load is told to
// stop.
var errGrowStopped = errors.New("the load stopped")

// growLoad is writers on a go-redis ClusterClient, each owning its keys:
// it SETs one, sending it again after a retryable error until it is
// acknowledged, then reads it back. It keeps each key's last acknowledged
// value, and the values written since whose outcome is unknown.
type growLoad struct {
	mu      sync.Mutex
	acked   map[string]string
	maybe   map[string][]string
	writes  int            // acknowledged
	reads   int            // read back
	retried map[string]int // retryable errors met and sent again, by first word
	failed  []string       // errors that are not retryable
	// stale counts read-backs that missed the write just acknowledged
	// and saw it when read again: a read the client's routing sends to a
	// node that follows the key's group is served by that node
	// (docs/cluster.md, Reads).
	stale int
	bad   []string
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newGrowLoad() *growLoad {
	return &growLoad{acked: map[string]string{}, maybe: map[string][]string{}, retried: map[string]int{}, stop: make(chan struct{})}
}

// acknowledged is how many writes have been acknowledged so far.
func (l *growLoad) acknowledged() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

// progressed waits until n more writes than now are acknowledged: the
// load is not stalled by whatever the cluster is doing.
func (l *growLoad) progressed(t *testing.T, what string, n int) {
	t.Helper()
	from := l.acknowledged()
	waitFor(t, "the load to write "+what, func() error {
		if got := l.acknowledged() - from; got < n {
			return fmt.Errorf("%d writes acknowledged %s, waiting for %d", got, what, n)
		}
		return nil
	})
}

// allWritten waits until each of the n keys of the load has been
// written once.
func (l *growLoad) allWritten(t *testing.T, n int) {
	t.Helper()
	waitFor(t, "the load to write each of its keys", func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.acked) < n {
			return fmt.Errorf("%d of %d keys written", len(l.acked), n)
		}
		return nil
	})
}

// retry runs do until it succeeds, fails with an error that is not
// retryable, or the load stops.
func (l *growLoad) retry(ctx context.Context, do func() error) error {
	for {
		err := do()
		if err == nil || !growRetryableErr(err) {
			return err
		}
		word, _, _ := strings.Cut(err.Error(), " ")
		l.mu.Lock()
		l.retried[word]++
		l.mu.Unlock()
		select {
		case <-l.stop:
			return errGrowStopped
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // pause between attempts
		}
	}
}

// run starts a writer named name (every name of the same length, so that
// every value is) over keys.
func (l *growLoad) run(ctx context.Context, name string, c redis.Cmdable, keys []string) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		pad := strings.Repeat("p", 64)
		for seq := 0; ; seq++ {
			select {
			case <-l.stop:
				return
			default:
			}
			// The keys in turn, each value of one length: what each group
			// holds, in bytes, does not change once every key is written.
			k := keys[seq%len(keys)]
			val := fmt.Sprintf("%s-%010d-%s", name, seq, pad)
			err := l.retry(ctx, func() error { return c.Set(ctx, k, val, 0).Err() })
			l.mu.Lock()
			if err != nil {
				l.maybe[k] = append(l.maybe[k], val)
				if !errors.Is(err, errGrowStopped) && ctx.Err() == nil {
					l.failed = append(l.failed, fmt.Sprintf("SET %s: %v", k, err))
				}
				l.mu.Unlock()
				continue
			}
			l.acked[k], l.maybe[k] = val, nil
			l.writes++
			l.mu.Unlock()

			// Read it back until it is there (a hang detector bounds it).
			deadline := time.Now().Add(clusterWait)
			for first := true; ; first = false {
				var got string
				err := l.retry(ctx, func() error {
					var err error
					got, err = c.Get(ctx, k).Result()
					if errors.Is(err, redis.Nil) {
						got, err = "", nil // a read that missed the key's first write
					}
					return err
				})
				if errors.Is(err, errGrowStopped) || ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				switch {
				case err != nil:
					l.bad = append(l.bad, fmt.Sprintf("%s: GET %s after writing it: %v", name, k, err))
				case got == val:
					l.reads++
					if !first {
						l.stale++
					}
				case time.Now().After(deadline):
					l.bad = append(l.bad, fmt.Sprintf("%s: GET %s = %q for %v after %q was acknowledged", name, k, got, clusterWait, val))
				}
				l.mu.Unlock()
				if err != nil || got == val || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond) // poll interval of a read that lags
			}
		}
	}()
}

// halt stops the writers and waits for them.
func (l *growLoad) halt() {
	close(l.stop)
	l.wg.Wait()
}

// check reads every key the load wrote through c: each must hold its last
// acknowledged value, or one written after it whose outcome is unknown.
func (l *growLoad) check(t *testing.T, ctx context.Context, c redis.Cmdable) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.bad {
		t.Error(b)
	}
	for _, f := range l.failed {
		t.Errorf("a write failed with an error that is not retryable: %s", f)
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
	t.Logf("the load: %d writes acknowledged over %d keys, %d read back (%d of them read again after missing the write); retryable errors sent again: %v",
		l.writes, len(l.acked), l.reads, l.stale, l.retried)
}

// groupBytes is what each data group holds by the stored slot map owners:
// the bytes KVS.SLOTS SIZES counts (what kvs rebalance weighs slots by),
// asked of each group's leader for each run of the slots the map gives
// it.
func groupBytes(ctx context.Context, addr string, owners []int) (map[int]int64, error) {
	st, err := kvsStatus(addr)
	if err != nil {
		return nil, err
	}
	clients := map[string]string{}
	for _, m := range st.members {
		clients[m[0]] = m[2]
	}
	out := map[int]int64{}
	for first := 0; first < len(owners); {
		g := owners[first]
		last := first
		for last+1 < len(owners) && owners[last+1] == g {
			last++
		}
		row, _ := groupRow(st, g)
		if row == nil || len(row) < 3 || clients[row[2]] == "" {
			return nil, fmt.Errorf("no leader known of group %d: %v", g, row)
		}
		c := redis.NewClient(&redis.Options{Addr: clients[row[2]], MaxRetries: -1, Protocol: 2})
		v, err := c.Do(ctx, "KVS.SLOTS", "SIZES", first, last).Slice()
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("KVS.SLOTS SIZES %d %d on group %d's leader %s: %v", first, last, g, row[2], err)
		}
		for i := 0; i+2 < len(v); i += 3 {
			b, _ := v[i+2].(int64)
			out[g] += b
		}
		first = last + 1
	}
	return out, nil
}

// waitPreferredLeaders waits until every one of nodes names, as the
// leader of each data group 1 to groups, the node the placement puts
// first: leaderships have spread, one group to each node here.
func waitPreferredLeaders(t *testing.T, nodes []*Node, groups int) {
	t.Helper()
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	pollFor(t, "each group led by its preferred node", placeWait, 100*time.Millisecond, func() error {
		for _, n := range nodes {
			st, err := kvsStatus(n.Addr)
			if err != nil {
				return fmt.Errorf("%s: %v", n.Name, err)
			}
			for k := 1; k <= groups; k++ {
				row, _ := groupRow(st, k)
				if want := placement(k, names, 3)[0]; len(row) < 3 || row[2] != want {
					return fmt.Errorf("%s sees group %d as %v, want it led by %s", n.Name, k, row, want)
				}
			}
		}
		return nil
	})
}

// growRebalance runs kvs rebalance with args, again while it finds a
// group without a leader (an election under way) before it records any
// move: it says so and to try again.
func growRebalance(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out string
	var code int
	waitFor(t, "kvs rebalance to find every group's leader", func() error {
		out, code = runKVS(t, 5*time.Minute, append([]string{"rebalance"}, args...)...)
		if code != 0 && strings.Contains(out, "no leader known yet") && !strings.Contains(out, "\nmove ") {
			return fmt.Errorf("kvs rebalance: %s", strings.TrimSpace(out))
		}
		return nil
	})
	return out, code
}

// TestGrowCluster runs docs/cluster.md's walk-through "Growing a cluster"
// with the real binary: three nodes with --groups 3 hold a few MB, spread
// evenly over the three groups; while a go-redis ClusterClient writes and
// reads, three more nodes join with kvs join (the groups' replicas move
// by placement), kvs groups add ADDR 3 makes groups 4, 5 and 6, and kvs
// rebalance --wait moves slots until each group holds about a sixth of the
// bytes. At the end every node lists the six groups, each led and on the
// three nodes the placement names; each group holds a sixth of the bytes
// within kvs rebalance's threshold, and a second rebalance finds nothing
// to move; every acknowledged write reads back with its last acknowledged
// value, every key is counted once over the masters, and no write or read
// met an error other than the retryable ones the load sent again.
func TestGrowCluster(t *testing.T) {
	t.Parallel()
	// 64mb a second: the few MB here copy in a moment (the default 4mb
	// paces a production cluster's copies).
	flags := []string{"--groups", "3", "--slot-move-rate", "64mb"}
	nodes := startCluster(t, 3, flags...)
	waitGroupsPlaced(t, nodes, []int{1, 2, 3}, 3)
	slotsOf(t, nodes, 1) // the stored slot map, on every node
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16})
	defer cc.Close()

	// About 3 MB: 1,000 keys of a kilobyte in each group's slots (the
	// redis-cli split the cluster was made with), so each group holds a
	// third of the bytes, and a sixth is about 500 KB.
	const perGroup, valueLen = 1000, 1000
	var seeded []string
	for _, r := range [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}} {
		seeded = append(seeded, moveKeys("grow", perGroup, r[0], r[1])...)
	}
	seedValue := func(k string) string { return k + "=" + strings.Repeat("v", valueLen-len(k)-1) }
	for chunk := range slices.Chunk(seeded, 200) {
		err := retryLeaderChange(t, func() error {
			_, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range chunk {
					p.Set(ctx, k, seedValue(k), 0)
				}
				return nil
			})
			return err
		})
		if err != nil {
			t.Fatalf("seeding: %v", err)
		}
	}

	// Four writers, each over its own keys, as many in each group's slots.
	load := newGrowLoad()
	var loadKeys []string
	for _, r := range [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}} {
		loadKeys = append(loadKeys, moveKeys("growload", 48, r[0], r[1])...)
	}
	for w := range 4 {
		var mine []string
		for i := w; i < len(loadKeys); i += 4 {
			mine = append(mine, loadKeys[i])
		}
		load.run(ctx, fmt.Sprintf("w%d", w), cc, mine)
	}
	defer func() {
		select {
		case <-load.stop:
		default:
			load.halt()
		}
	}()
	// Every load key written once before anything else: from then on
	// the bytes each group holds stay as they are.
	load.allWritten(t, len(loadKeys))

	// Three nodes join, started with the cluster's --groups; the groups'
	// replicas move to where the placement over six nodes puts them.
	for i := 4; i <= 6; i++ {
		n := newClusterNode(t, fmt.Sprintf("n%d", i), flags...)
		n.Start()
		out, code := runKVS(t, clusterWait, "join", nodes[0].Addr, n.Addr)
		if code != 0 {
			t.Fatalf("kvs join %s %s: exit %d\n%s", nodes[0].Addr, n.Addr, code, out)
		}
		t.Logf("kvs join: %s", strings.TrimSpace(out))
		nodes = append(nodes, n)
	}
	waitMembers(t, nodes, 6)
	waitGroupsPlaced(t, nodes, []int{1, 2, 3}, 3)
	load.progressed(t, "after the joins", 100)

	// Three groups more, placed over the six nodes, without slots yet.
	out, code := runKVS(t, clusterWait, "groups", "add", nodes[0].Addr, "3")
	if code != 0 || out != "added group 4\nadded group 5\nadded group 6\n" {
		t.Fatalf("kvs groups add %s 3: exit %d\n%s", nodes[0].Addr, code, out)
	}
	waitGroupsPlaced(t, nodes, []int{1, 2, 3, 4, 5, 6}, 3)
	if counts := slotsOf(t, nodes, 1); counts[4]+counts[5]+counts[6] != 0 {
		t.Fatalf("new groups own slots before any move: %v", counts)
	}
	load.progressed(t, "after kvs groups add", 100)

	// The rebalance gives each new group its share. It reads what each
	// group holds from its leader, so it waits until every group has the
	// leader the placement prefers; should an election leave a group
	// without one when it asks, it says to try again, and is run again.
	waitPreferredLeaders(t, nodes, 6)
	out, code = growRebalance(t, "--wait", nodes[0].Addr)
	t.Logf("kvs rebalance --wait:\n%s", out)
	if code != 0 {
		t.Fatalf("kvs rebalance --wait: exit %d", code)
	}
	for _, g := range []string{"4", "5", "6"} {
		if !strings.Contains(out, "to group "+g+"\n") {
			t.Errorf("kvs rebalance moved nothing to group %s", g)
		}
	}
	load.progressed(t, "after the rebalance", 100)
	waitGroupsPlaced(t, nodes, []int{1, 2, 3, 4, 5, 6}, 3)
	waitPreferredLeaders(t, nodes, 6)
	load.halt()

	// Every node routes by the rebalanced map; each group holds a sixth
	// of the bytes within the rebalance's default threshold (5% of the
	// share). It holds with room: the keys were spread evenly, the load
	// rewrites values of one length, and the plan ends each run of slots
	// within half a slot (a kilobyte or two here) of the share.
	counts := slotsOf(t, nodes, 2)
	for g := 1; g <= 6; g++ {
		if counts[g] == 0 {
			t.Errorf("group %d owns no slots after the rebalance: %v", g, counts)
		}
	}
	owners, version := sameMapEverywhere(t, nodes)
	var bytes map[int]int64
	waitFor(t, "what each group holds", func() error {
		var err error
		bytes, err = groupBytes(ctx, nodes[0].Addr, owners)
		return err
	})
	var total int64
	for _, b := range bytes {
		total += b
	}
	share := float64(total) / 6
	const threshold = 0.05 // kvs rebalance's default --threshold
	for g := 1; g <= 6; g++ {
		if off := float64(bytes[g]) - share; off > threshold*share || off < -threshold*share {
			t.Errorf("group %d holds %d bytes of %d, its share %.0f (by group: %v)", g, bytes[g], total, share, bytes)
		}
	}
	t.Logf("slot map version %s; slots by group %v; bytes by group %v (share %.0f)", version, counts, bytes, share)
	out, code = growRebalance(t, "--dry-run", nodes[5].Addr)
	if code != 0 || !strings.Contains(out, "balanced: nothing to move") {
		t.Errorf("a second kvs rebalance: exit %d\n%s", code, out)
	}

	// Every write acknowledged is there, every key once over the masters.
	cc.ReloadState(ctx)
	load.check(t, ctx, cc)
	for chunk := range slices.Chunk(seeded, 200) {
		var cmds []*redis.StringCmd
		err := retryLeaderChange(t, func() error {
			var err error
			cmds = cmds[:0]
			_, err = cc.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range chunk {
					cmds = append(cmds, p.Get(ctx, k))
				}
				return nil
			})
			return err
		})
		if err != nil {
			t.Fatalf("reading the seeded keys: %v", err)
		}
		for i, c := range cmds {
			if c.Val() != seedValue(chunk[i]) {
				t.Fatalf("%s after growing: %.40q..., want its seeded value", chunk[i], c.Val())
			}
		}
	}
	want := int64(len(seeded) + len(loadKeys))
	waitFor(t, "the keys over the masters to be those there are", func() error {
		cc.ReloadState(ctx)
		n, err := keysTotal(ctx, cc)
		if err == nil && n != want {
			err = fmt.Errorf("%d keys over the masters, want %d", n, want)
		}
		return err
	})
}
