package test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// routedMap returns the slot map the node at addr routes by (slot ->
// group) and its version, from KVS.STATUS.
func routedMap(addr string) ([]int, string, error) {
	st, err := kvsStatus(addr)
	if err != nil {
		return nil, "", err
	}
	owners := make([]int, 16384)
	for i := range owners {
		owners[i] = -1
	}
	for _, run := range strings.Split(st.fields["slot_map"], ",") {
		span, g, ok := strings.Cut(run, ":")
		a, b, _ := strings.Cut(span, "-")
		first, err1 := strconv.Atoi(a)
		last, err2 := strconv.Atoi(b)
		id, err3 := strconv.Atoi(g)
		if !ok || err1 != nil || err2 != nil || err3 != nil || first > last || last > 16383 {
			return nil, "", fmt.Errorf("slot map %q: bad run %q", st.fields["slot_map"], run)
		}
		for s := first; s <= last; s++ {
			owners[s] = id
		}
	}
	for s, o := range owners {
		if o < 0 {
			return nil, "", fmt.Errorf("slot map %q leaves slot %d out", st.fields["slot_map"], s)
		}
	}
	return owners, st.fields["slot_map_version"], nil
}

// keysByGroup counts keys by the group that owns their slot.
func keysByGroup(owners []int, keys []string) map[int]int {
	n := map[int]int{}
	for _, k := range keys {
		n[owners[keySlot(k)]]++
	}
	return n
}

// sameMapEverywhere waits until every node routes by the same slot map
// version, and returns that map.
func sameMapEverywhere(t testing.TB, nodes []*Node) ([]int, string) {
	t.Helper()
	var owners []int
	var version string
	waitFor(t, "every node to route by the same slot map", func() error {
		var err error
		owners, version, err = routedMap(nodes[0].Addr)
		if err != nil {
			return err
		}
		for _, n := range nodes[1:] {
			_, v, err := routedMap(n.Addr)
			if err != nil {
				return err
			}
			if v != version {
				return fmt.Errorf("%s routes by version %s, %s by %s", nodes[0].Name, version, n.Name, v)
			}
		}
		return nil
	})
	return owners, version
}

// TestRebalance: three nodes, three groups, where group 1's slots hold
// nine keys in ten. kvs rebalance --dry-run prints a plan and moves
// nothing; kvs rebalance --wait, under writes through a ClusterClient,
// moves slots until each group holds about a third of the keys (the keys
// are all alike, so bytes go with keys), every key as it was and every
// acknowledged write there; a second rebalance finds nothing to move;
// --weights 1=0 empties group 1 of slots (at a pace lifted mid-copy by
// CONFIG SET slot-move-rate), and a bad weight is refused; group 1 is then
// removed, a group added, and a rebalance gives it a third of the keys.
func TestRebalance(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, "--groups", "3", "--slot-move-rate", "4mb")
	waitSpread(t, nodes)
	for _, n := range nodes {
		waitFor(t, n.Name+" to route by the stored slot map", func() error { return checkSlotMap(n) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16})
	defer cc.Close()
	heavy := moveKeys("rb", 2700, 0, 5460) // group 1's slots
	light := append(moveKeys("rb2", 150, 5461, 10922), moveKeys("rb3", 150, 10923, 16383)...)
	all := append(heavy, light...)
	val := strings.Repeat("v", 200)
	pipe := cc.Pipeline()
	for _, k := range all {
		pipe.Set(ctx, k, val, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	total := int64(len(all))

	// A refused weight, and a dry run.
	if out, code := runKVS(t, clusterWait, "rebalance", "--weights", "7=1", nodes[0].Addr); code != 2 || !strings.Contains(out, "no data group 7") {
		t.Errorf("kvs rebalance --weights 7=1: exit %d\n%s", code, out)
	}
	out, code := runKVS(t, clusterWait, "rebalance", "--dry-run", nodes[1].Addr)
	if code != 0 || !strings.Contains(out, "plan: slots") || strings.Contains(out, "move ") {
		t.Fatalf("kvs rebalance --dry-run: exit %d\n%s", code, out)
	}
	t.Logf("kvs rebalance --dry-run:\n%s", out)
	if _, v, err := routedMap(nodes[0].Addr); err != nil || v != "1" {
		t.Fatalf("after a dry run the map is at version %s (%v), want 1", v, err)
	}

	// The rebalance, under writes to keys of every group.
	load := newMoveLoad()
	load.run(ctx, "cluster", cc, append(moveKeys("rbl", 30, 0, 5460), moveKeys("rbl2", 10, 5461, 16383)...), 1)
	waitFor(t, "the load to write", func() error {
		if n := load.count(); n < 50 {
			return fmt.Errorf("%d writes", n)
		}
		return nil
	})
	out, code = runKVS(t, 4*time.Minute, "rebalance", "--wait", nodes[2].Addr)
	t.Logf("kvs rebalance --wait:\n%s", out)
	if code != 0 || !strings.Contains(out, ": done,") {
		t.Fatalf("kvs rebalance --wait: exit %d", code)
	}
	close(load.stop)
	load.wg.Wait()
	owners, version := sameMapEverywhere(t, nodes)
	if version == "1" {
		t.Fatal("the rebalance left the slot map at version 1")
	}
	by := keysByGroup(owners, all)
	for g := 1; g <= 3; g++ {
		if share := float64(by[g]) / float64(total); math.Abs(share-1.0/3) > 0.05 {
			t.Errorf("group %d holds %d of %d keys after the rebalance (%v)", g, by[g], total, by)
		}
	}
	load.check(t, ctx, cc)
	for _, k := range all {
		if v, err := cc.Get(ctx, k).Result(); err != nil || v != val {
			t.Fatalf("%s after the rebalance: %q, %v", k, v, err)
		}
	}
	// Each key counted once over the masters: none left behind in the
	// group it left, none lost.
	present := int64(0)
	for k := range load.acked {
		if n, err := cc.Exists(ctx, k).Result(); err != nil {
			t.Fatal(err)
		} else {
			present += n
		}
	}
	waitFor(t, "the keys over the masters to be those there are", func() error {
		n, err := keysTotal(ctx, cc)
		if err == nil && n != total+present {
			err = fmt.Errorf("%d keys over the masters, want %d", n, total+present)
		}
		return err
	})
	out, code = runKVS(t, clusterWait, "rebalance", nodes[0].Addr)
	if code != 0 || !strings.Contains(out, "balanced: nothing to move") {
		t.Errorf("a second kvs rebalance: exit %d\n%s", code, out)
	}

	// Group 1 emptied, at a pace that would take minutes until CONFIG SET
	// slot-move-rate lifts it mid-copy on every node.
	before := maps.Clone(by)
	setRate := func(v string) {
		t.Helper()
		for _, n := range nodes {
			c := redis.NewClient(&redis.Options{Addr: n.Addr})
			err := c.ConfigSet(ctx, "slot-move-rate", v).Err()
			c.Close()
			if err != nil {
				t.Fatalf("CONFIG SET slot-move-rate %s on %s: %v", v, n.Name, err)
			}
		}
	}
	setRate("1kb")
	out, code = runKVS(t, clusterWait, "rebalance", "--weights", "1=0", nodes[0].Addr)
	t.Logf("kvs rebalance --weights 1=0:\n%s", out)
	if code != 0 {
		t.Fatalf("kvs rebalance --weights 1=0: exit %d", code)
	}
	var ids []int64
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "move ") {
			ids = append(ids, moveID(t, line))
		}
	}
	if len(ids) == 0 {
		t.Fatal("kvs rebalance --weights 1=0 recorded no move")
	}
	waitMovePhase(t, ctx, nodes[1].Addr, ids[0], "copying", true)
	setRate("0")
	for _, id := range ids {
		waitMovePhase(t, ctx, nodes[1].Addr, id, "done", false)
	}
	owners, _ = sameMapEverywhere(t, nodes)
	for s, o := range owners {
		if o == 1 {
			t.Fatalf("slot %d is still group 1's after --weights 1=0", s)
		}
	}
	by = keysByGroup(owners, all)
	if by[2] <= before[2] || by[3] <= before[3] {
		t.Errorf("group 1's keys did not go to both others: %v, then %v", before, by)
	}
	for _, k := range all {
		if v, err := cc.Get(ctx, k).Result(); err != nil || v != val {
			t.Fatalf("%s after emptying group 1: %q, %v", k, v, err)
		}
	}

	// Group 1, empty, removed; a group added; the rebalance gives it its
	// share, taken from the two that hold everything.
	if out, code := runKVS(t, 3*time.Minute, "groups", "remove", nodes[2].Addr, "1"); code != 0 {
		t.Fatalf("kvs groups remove 1: exit %d\n%s", code, out)
	}
	out, code = runKVS(t, clusterWait, "groups", "add", nodes[1].Addr)
	if code != 0 || strings.TrimSpace(out) != "added group 4" {
		t.Fatalf("kvs groups add: exit %d\n%s", code, out)
	}
	waitGroupsPlaced(t, nodes, []int{2, 3, 4}, 3)
	out, code = runKVS(t, 4*time.Minute, "rebalance", "--wait", nodes[0].Addr)
	t.Logf("kvs rebalance --wait after kvs groups add:\n%s", out)
	if code != 0 || !strings.Contains(out, "to group 4") {
		t.Fatalf("kvs rebalance after kvs groups add: exit %d", code)
	}
	owners, _ = sameMapEverywhere(t, nodes)
	by = keysByGroup(owners, all)
	for _, g := range []int{2, 3, 4} {
		if share := float64(by[g]) / float64(total); math.Abs(share-1.0/3) > 0.05 {
			t.Errorf("group %d holds %d of %d keys after the rebalance (%v)", g, by[g], total, by)
		}
	}
	for _, k := range all {
		if v, err := cc.Get(ctx, k).Result(); err != nil || v != val {
			t.Fatalf("%s after the rebalance onto group 4: %q, %v", k, v, err)
		}
	}
}
