package test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Data groups added to and removed from a running cluster (kvs groups).

// groupRow is group id's row of st's groups and its members (id, raft
// addr, role each); nil when st lists no such group.
func groupRow(st status, id int) ([]string, [][]string) {
	for i, g := range st.groups {
		if len(g) > 0 && g[0] == strconv.Itoa(id) {
			return g, st.groupMembers[i]
		}
	}
	return nil, nil
}

// groupIDs are the data groups st lists.
func groupIDs(st status) []int {
	var ids []int
	for _, g := range st.groups {
		if id, err := strconv.Atoi(g[0]); err == nil && id > 0 {
			ids = append(ids, id)
		}
	}
	return ids
}

// waitGroupsPlaced waits until every one of nodes lists exactly the data
// groups ids, each with the voters the placement over nodes with r
// replicas gives it, held (or not) as it says, and led by a node that
// all of them name.
func waitGroupsPlaced(t *testing.T, nodes []*Node, ids []int, r int) {
	t.Helper()
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	pollFor(t, fmt.Sprintf("groups %v placed on %v", ids, names), placeWait, 100*time.Millisecond, func() error {
		leaders := map[int]string{}
		for _, n := range nodes {
			st, err := kvsStatus(n.Addr)
			if err != nil {
				return fmt.Errorf("%s: %v", n.Name, err)
			}
			if got := groupIDs(st); !slices.Equal(got, ids) {
				return fmt.Errorf("%s lists groups %v, want %v", n.Name, got, ids)
			}
			for _, k := range ids {
				want := placement(k, names, r)
				row, ms := groupRow(st, k)
				var members []string
				for _, m := range ms {
					if len(m) < 3 || m[2] == "nonvoter" {
						return fmt.Errorf("%s sees group %d with members %v", n.Name, k, ms)
					}
					members = append(members, m[0])
				}
				if !slices.Equal(members, slices.Sorted(slices.Values(want))) {
					return fmt.Errorf("%s sees group %d on %v, want %v", n.Name, k, members, want)
				}
				switch {
				case slices.Contains(want, n.Name) && row[1] == "none":
					return fmt.Errorf("%s holds no replica of group %d, placed on %v", n.Name, k, want)
				case !slices.Contains(want, n.Name) && row[1] != "none":
					return fmt.Errorf("%s holds a replica of group %d (%s), placed on %v", n.Name, k, row[1], want)
				case row[2] == "":
					return fmt.Errorf("%s knows no leader of group %d", n.Name, k)
				case leaders[k] != "" && leaders[k] != row[2]:
					return fmt.Errorf("group %d: leaders %s and %s", k, leaders[k], row[2])
				}
				leaders[k] = row[2]
			}
		}
		return nil
	})
}

// slotsOf waits until every node routes by slot map version at least
// minVersion and returns the slots of each data group by the map of the
// first node, checking that they all route by the same.
func slotsOf(t *testing.T, nodes []*Node, minVersion int) map[int]int {
	t.Helper()
	var counts map[int]int
	waitFor(t, "every node to route by the same slot map", func() error {
		var m string
		for _, n := range nodes {
			st, err := kvsStatus(n.Addr)
			if err != nil {
				return err
			}
			if v := atoiOr(st.fields["slot_map_version"], 0); v < minVersion {
				return fmt.Errorf("%s routes by slot map version %d, want %d or later", n.Name, v, minVersion)
			}
			if m != "" && st.fields["slot_map"] != m {
				return fmt.Errorf("nodes route by %q and %q", m, st.fields["slot_map"])
			}
			m = st.fields["slot_map"]
		}
		counts = map[int]int{}
		for run := range strings.SplitSeq(m, ",") {
			span, g, _ := strings.Cut(run, ":")
			a, b, _ := strings.Cut(span, "-")
			counts[atoiOr(g, -1)] += atoiOr(b, 0) - atoiOr(a, 0) + 1
		}
		return nil
	})
	return counts
}

// existing counts the keys of keys that exist, through c.
func existing(t *testing.T, ctx context.Context, c redis.Cmdable, keys []string) int64 {
	t.Helper()
	var n int64
	for _, k := range keys {
		var e int64
		waitFor(t, "EXISTS "+k, func() error {
			var err error
			e, err = c.Exists(ctx, k).Result()
			return err
		})
		n += e
	}
	return n
}

// TestGroupsAddRemove: three nodes, two data groups. kvs groups add makes
// group 3, placed on the three nodes with a leader; a range of slots moves
// to it while a go-redis ClusterClient writes, and every acknowledged
// write is there. After every node restarts group 3 is still there and
// serves. kvs groups remove 1 spreads group 1's slots over groups 2 and 3,
// and deletes it: its state is gone from every node's data dir, no key is
// lost or counted twice, every key reads back. The next group added is 4,
// never 1 again, and a fourth node joining then gets the replicas the
// placement gives it. The meta group, a removed and an unknown group are
// refused.
func TestGroupsAddRemove(t *testing.T) {
	t.Parallel()
	// A slow copy, so that a move can be cancelled mid-way.
	nodes := startCluster(t, 3, "--groups", "2", "--slot-move-rate", "64kb")
	waitGroupsPlaced(t, nodes, []int{1, 2}, 3)
	slotsOf(t, nodes, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 16})
	defer cc.Close()
	seeded := moveKeys("gs", 600, 0, 16383)
	pad := strings.Repeat("x", 1000)
	for _, k := range seeded {
		if err := retryLeaderChange(t, func() error { return cc.Set(ctx, k, "v-"+k+pad, 0).Err() }); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}

	// A library every group holds, the one made later too.
	lib := "#!lua name=glib\nredis.register_function('gset', function(keys, args) return redis.call('SET', keys[1], args[1]) end)"
	if err := retryLeaderChange(t, func() error { return cc.FunctionLoadReplace(ctx, lib).Err() }); err != nil {
		t.Fatalf("FUNCTION LOAD: %v", err)
	}

	// Refusals first, while the cluster is as made.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"remove", nodes[0].Addr, "0"}, "meta group"},
		{[]string{"remove", nodes[0].Addr, "7"}, "no data group 7"},
		{[]string{"add", nodes[0].Addr, "0"}, "not a number of groups"},
	} {
		out, code := runKVS(t, clusterWait, append([]string{"groups"}, tc.args...)...)
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("kvs groups %v: exit %d, want an error saying %q\n%s", tc.args, code, tc.want, out)
		}
	}

	out, code := runKVS(t, clusterWait, "groups", "add", nodes[1].Addr)
	if code != 0 || strings.TrimSpace(out) != "added group 3" {
		t.Fatalf("kvs groups add: exit %d\n%s", code, out)
	}
	waitGroupsPlaced(t, nodes, []int{1, 2, 3}, 3)
	if out, code := runKVS(t, clusterWait, "groups", "list", nodes[2].Addr); code != 0 || !strings.Contains(out, "\n3 ") {
		t.Errorf("kvs groups list: exit %d\n%s", code, out)
	}
	// Group 3, without slots, is a master without slots to clients: in
	// CLUSTER SHARDS and NODES, not in CLUSTER SLOTS.
	waitFor(t, "group 3 shown as a master without slots", func() error {
		st, err := kvsStatus(nodes[0].Addr)
		if err != nil {
			return err
		}
		row, _ := groupRow(st, 3)
		var leaderAddr string
		for _, m := range st.members {
			if m[0] == row[2] {
				leaderAddr = m[2]
			}
		}
		for _, n := range nodes {
			c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
			shards, err1 := c.ClusterShards(ctx).Result()
			slots, err2 := c.ClusterSlots(ctx).Result()
			text, err3 := c.ClusterNodes(ctx).Result()
			c.Close()
			if err := errors.Join(err1, err2, err3); err != nil {
				return err
			}
			empty := 0
			for _, sh := range shards {
				if len(sh.Slots) == 0 {
					empty++
					if len(sh.Nodes) == 0 || sh.Nodes[0].Role != "master" || fmt.Sprintf("%s:%d", sh.Nodes[0].IP, sh.Nodes[0].Port) != leaderAddr {
						return fmt.Errorf("%s: CLUSTER SHARDS' shard without slots: %+v, want its master at %s", n.Name, sh.Nodes, leaderAddr)
					}
				}
			}
			if len(shards) != 3 || empty != 1 {
				return fmt.Errorf("%s: CLUSTER SHARDS lists %d shards, %d without slots; want 3 and 1", n.Name, len(shards), empty)
			}
			covered := 0
			for _, r := range slots {
				covered += int(r.End-r.Start) + 1
			}
			if covered != 16384 || len(slots) != 2 {
				return fmt.Errorf("%s: CLUSTER SLOTS has %d ranges covering %d slots, want groups 1 and 2's", n.Name, len(slots), covered)
			}
			for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
				f := strings.Fields(line)
				if len(f) > 2 && strings.HasPrefix(f[1], leaderAddr+"@") && !strings.Contains(f[2], "master") {
					return fmt.Errorf("%s: CLUSTER NODES calls group 3's leader %q", n.Name, line)
				}
			}
		}
		return nil
	})

	// Slots 0-999 to group 3 under writes.
	loadKeys := moveKeys("gl", 200, 0, 999)
	load := newMoveLoad()
	load.run(ctx, "cc", cc, loadKeys, testSeed(t))
	waitFor(t, "the load to write", func() error {
		if load.count() < 50 {
			return errors.New("fewer than 50 writes acknowledged")
		}
		return nil
	})
	out, code = runKVS(t, 3*time.Minute, "slots", "move", "--wait", nodes[0].Addr, "0-999", "3")
	if code != 0 || !strings.Contains(out, "done") {
		t.Fatalf("kvs slots move --wait 0-999 3: exit %d\n%s", code, out)
	}
	before := load.count()
	waitFor(t, "writes after the move", func() error {
		if load.count() < before+50 {
			return errors.New("the load stalled after the move")
		}
		return nil
	})
	close(load.stop)
	load.wg.Wait()
	load.check(t, ctx, cc)
	if counts := slotsOf(t, nodes, 2); counts[3] != 1000 {
		t.Fatalf("group 3 owns %d slots, want 1000: %v", counts[3], counts)
	}
	fk := moveKeys("gf", 1, 0, 999)[0]
	if err := cc.FCall(ctx, "gset", []string{fk}, "by-function").Err(); err != nil {
		t.Fatalf("FCALL gset on %s, a key of group 3: %v", fk, err)
	}
	all := append(slices.Clone(seeded), loadKeys...)
	all = append(all, fk)
	want := existing(t, ctx, cc, all)
	checkTotal := func(when string) {
		t.Helper()
		waitFor(t, "the keys over the masters "+when, func() error {
			n, err := keysTotal(ctx, cc)
			if err != nil {
				return err
			}
			if n != want {
				return fmt.Errorf("%d keys over the masters, want %d", n, want)
			}
			return nil
		})
	}
	checkTotal("after the move")

	// Every node restarts: group 3 is still there, and serves.
	for _, n := range nodes {
		n.Stop()
	}
	for _, n := range nodes {
		n.Start()
	}
	waitGroupsPlaced(t, nodes, []int{1, 2, 3}, 3)
	cc.ReloadState(ctx)
	load.check(t, ctx, cc)
	if err := retryLeaderChange(t, func() error { return cc.Set(ctx, loadKeys[0], "after-restart", 0).Err() }); err != nil {
		t.Fatalf("SET %s in group 3 after the restart: %v", loadKeys[0], err)
	}
	load.acked[loadKeys[0]] = "after-restart"
	want = existing(t, ctx, cc, all)
	checkTotal("after the restart")

	// Removing group 1 stops when its move is cancelled, and the group
	// stays with its slots.
	type result struct {
		out  string
		code int
	}
	done := make(chan result, 1)
	go func() {
		out, code := runKVS(t, 3*time.Minute, "groups", "remove", nodes[2].Addr, "1")
		done <- result{out, code}
	}()
	waitMovePhase(t, ctx, nodes[0].Addr, 2, "copying", true)
	if out, code := runKVS(t, clusterWait, "slots", "cancel", nodes[0].Addr, "2"); code != 0 {
		t.Fatalf("kvs slots cancel 2: exit %d\n%s", code, out)
	}
	res := <-done
	if res.code == 0 || !strings.Contains(res.out, "cancelled") || !strings.Contains(res.out, "group 1 stays") {
		t.Fatalf("kvs groups remove 1 with its move cancelled: exit %d\n%s", res.code, res.out)
	}
	if counts := slotsOf(t, nodes, 2); counts[1] != 7192 {
		t.Fatalf("group 1 after its emptying was cancelled: %v", counts)
	}
	waitGroupsPlaced(t, nodes, []int{1, 2, 3}, 3)

	// Group 1 goes: its slots to 2 and 3, its state off every node.
	out, code = runKVS(t, 3*time.Minute, "groups", "remove", nodes[2].Addr, "1")
	if code != 0 || !strings.Contains(out, "removed group 1") || !strings.Contains(out, "done") {
		t.Fatalf("kvs groups remove 1: exit %d\n%s", code, out)
	}
	t.Logf("kvs groups remove 1:\n%s", out)
	waitGroupsPlaced(t, nodes, []int{2, 3}, 3)
	counts := slotsOf(t, nodes, 3)
	if counts[1] != 0 || counts[2]+counts[3] != 16384 || counts[2]-counts[3] > 1 || counts[3]-counts[2] > 1 {
		t.Errorf("slots by group after removing group 1: %v, want them spread evenly over 2 and 3", counts)
	}
	for _, n := range nodes {
		dir := filepath.Join(n.DataDir(), "groups", "1")
		waitFor(t, n.Name+" to delete group 1's state", func() error {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s: %v", dir, err)
			}
			return nil
		})
	}
	cc.ReloadState(ctx)
	checkTotal("after removing group 1")
	load.check(t, ctx, cc)
	for _, k := range seeded {
		var v string
		waitFor(t, "GET "+k, func() error {
			var err error
			v, err = cc.Get(ctx, k).Result()
			return err
		})
		if v != "v-"+k+pad {
			t.Fatalf("GET %s after removing group 1: %q", k, v)
		}
	}
	for _, args := range [][]string{{"remove", nodes[0].Addr, "1"}} {
		if out, code := runKVS(t, clusterWait, append([]string{"groups"}, args...)...); code == 0 || !strings.Contains(out, "removed") {
			t.Errorf("kvs groups %v of a removed group: exit %d\n%s", args, code, out)
		}
	}

	// A backup of the cluster now, its group ids with a gap, restores
	// on one node that leads every group and holds every key.
	file := filepath.Join(t.TempDir(), "g.kvs")
	if out, code := runKVS(t, clusterWait, "backup", nodes[0].Addr, file); code != 0 {
		t.Fatalf("kvs backup after removing group 1: exit %d\n%s", code, out)
	}
	raftAddr := freeAddr(t)
	r1 := newKVS(t, "r1", KVSOptions{Durable: true, Extra: []string{"--node-id", "r1", "--raft-addr", raftAddr}})
	if out, code := runKVS(t, clusterWait, "restore", file, "--data-dir", r1.DataDir(), "--node-id", "r1", "--raft-addr", raftAddr); code != 0 {
		t.Fatalf("kvs restore: exit %d\n%s", code, out)
	}
	r1.Start()
	waitFor(t, "r1 to lead groups 0, 2 and 3", func() error {
		st, err := kvsStatus(r1.Addr)
		if err != nil {
			return err
		}
		if ids := groupIDs(st); !slices.Equal(ids, []int{2, 3}) {
			return fmt.Errorf("r1 lists groups %v", ids)
		}
		for _, g := range st.groups {
			if g[1] != "leader" {
				return fmt.Errorf("group %s: %s", g[0], g[1])
			}
		}
		return nil
	})
	if v := dialRaw(t, r1.Addr).Do("DBSIZE"); v.Kind != ':' || int64(atoiOr(v.Str, 0)) != want {
		t.Errorf("DBSIZE on the restored node: %s, want %d", v, want)
	}
	r1.Stop()

	// The next id is 4; a fourth node joining gets its replicas.
	out, code = runKVS(t, clusterWait, "groups", "add", nodes[0].Addr)
	if code != 0 || strings.TrimSpace(out) != "added group 4" {
		t.Fatalf("kvs groups add after a remove: exit %d\n%s", code, out)
	}
	waitGroupsPlaced(t, nodes, []int{2, 3, 4}, 3)
	n4 := newClusterNode(t, "n4", "--join", nodes[1].Addr)
	n4.Start()
	nodes = append(nodes, n4)
	waitGroupsPlaced(t, nodes, []int{2, 3, 4}, 3)
	if out, code := runKVS(t, clusterWait, "status", n4.Addr); code != 0 || !strings.Contains(out, "GROUP") {
		t.Errorf("kvs status on n4: exit %d\n%s", code, out)
	}
}
