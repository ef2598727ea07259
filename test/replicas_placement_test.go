package test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A sharded cluster whose groups are each on --replicas nodes, not all:
// where each group's replicas go as nodes join and leave, and what a node
// that holds no replica of a key's group does with its commands.

// placeWait bounds a wait for the groups to reach their placement: each
// replica moved is added, caught up from a snapshot, promoted and the one
// it replaces removed, a few rounds of tending each. A hang detector.
const placeWait = 120 * time.Second

// placement is where kvs puts data group k's replicas (docs/cluster.md):
// r nodes consecutive in id order from the one at k modulo their count,
// the first its preferred leader.
func placement(k int, ids []string, r int) []string {
	ids = slices.Sorted(slices.Values(ids))
	r = min(r, len(ids))
	var out []string
	for i := range r {
		out = append(out, ids[(k+i)%len(ids)])
	}
	return out
}

// waitPlaced waits until, on every one of nodes, each of groups data
// groups has exactly the voters the placement over nodes gives it (the
// node's own replicas as it reports them, and each group's members as it
// knows them), and each node leads the groups it is the first replica of.
func waitPlaced(t *testing.T, nodes []*Node, groups, r int) {
	t.Helper()
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.Name)
	}
	pollFor(t, fmt.Sprintf("the groups placed on %v", ids), placeWait, 100*time.Millisecond, func() error {
		for _, n := range nodes {
			st, err := kvsStatus(n.Addr)
			if err != nil {
				return fmt.Errorf("%s: %v", n.Name, err)
			}
			if len(st.groups) != groups+1 {
				return fmt.Errorf("%s lists %d groups", n.Name, len(st.groups))
			}
			for k := 1; k <= groups; k++ {
				want := placement(k, ids, r)
				row := st.groups[k]
				if len(row) < 5 || len(st.groupMembers) <= k {
					return fmt.Errorf("%s: group %d: %v", n.Name, k, row)
				}
				var members []string
				for _, m := range st.groupMembers[k] {
					if len(m) < 3 || m[2] == "nonvoter" {
						return fmt.Errorf("%s sees group %d with members %v", n.Name, k, st.groupMembers[k])
					}
					members = append(members, m[0])
				}
				if !slices.Equal(members, slices.Sorted(slices.Values(want))) {
					return fmt.Errorf("%s sees group %d on %v, want %v", n.Name, k, members, want)
				}
				state := row[1]
				switch {
				case !slices.Contains(want, n.Name) && state != "none":
					return fmt.Errorf("%s holds a replica of group %d (%s), placed on %v", n.Name, k, state, want)
				case slices.Contains(want, n.Name) && state == "none":
					return fmt.Errorf("%s holds no replica of group %d, placed on %v", n.Name, k, want)
				case want[0] == n.Name && state != "leader":
					return fmt.Errorf("%s does not lead group %d (%s), placed on %v", n.Name, k, state, want)
				case row[2] != want[0]:
					return fmt.Errorf("%s names %q the leader of group %d, placed on %v", n.Name, row[2], k, want)
				}
			}
		}
		return nil
	})
}

// keyOffNode returns a key whose slot's group node holds no replica of,
// and that group's leader's address, as node's CLUSTER SLOTS says.
func keyOffNode(t *testing.T, node *Node) (string, int, string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: node.Addr, MaxRetries: -1})
	defer c.Close()
	ctx := testCtx(t)
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		k := "off:" + strconv.Itoa(i)
		slot, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range slots {
			if int64(r.Start) > slot || slot > int64(r.End) {
				continue
			}
			if !slices.ContainsFunc(r.Nodes, func(n redis.ClusterNode) bool { return n.Addr == node.Addr }) {
				return k, int(slot), r.Nodes[0].Addr
			}
		}
		if i > 10000 {
			t.Fatalf("%s holds a replica of every group: %v", node.Name, slots)
		}
	}
}

// TestShardedReplicas: five nodes, five groups of three replicas. Every
// group ends on the three nodes the placement names, each node leading
// one; go-redis's ClusterClient writes and reads through them; a plain
// client on a node without a replica of a key's group is served
// (forwarded), and a READONLY one is sent to the group's leader; a node
// killed under load loses no acknowledged write; kvs remove of it gives
// its groups replicas on the live nodes, and a node that joins gets its
// share.
func TestShardedReplicas(t *testing.T) {
	t.Parallel()
	const groups, r = 5, 3
	nodes := startCluster(t, 5, "--groups", "5", "--replicas", "3")
	waitPlaced(t, nodes, groups, r)
	if out, code := runKVS(t, clusterWait, "status", nodes[0].Addr); code != 0 || !strings.Contains(out, "replicas: 3") || !strings.Contains(out, "REPLICAS") {
		t.Errorf("kvs status: exit %d\n%s", code, out)
	}

	ctx := testCtx(t)
	cc := setThroughClusterClient(t, ctx, nodes, "rk", 500)
	for i := range 500 {
		k := fmt.Sprintf("rk:%d", i)
		var v string
		err := retryLeaderChange(t, func() (err error) { v, err = cc.Get(ctx, k).Result(); return err })
		if err != nil || v != itoa(i) {
			t.Fatalf("ClusterClient GET %s = %q, %v", k, v, err)
		}
	}
	if n, err := cc.DBSize(ctx).Result(); err != nil || n != 500 {
		t.Errorf("ClusterClient DBSIZE (summed over the masters): %d, %v; want 500", n, err)
	}

	// A plain client of a node without a replica of the key's group.
	key, slot, leader := keyOffNode(t, nodes[0])
	rc := dialRaw(t, nodes[0].Addr)
	if v := rc.DoRetry("SET", key, "here"); v.Str != "OK" {
		t.Fatalf("SET %s through %s, which holds no replica of its group: %s", key, nodes[0].Name, v)
	}
	if v := rc.DoRetry("GET", key); v.Str != "here" {
		t.Errorf("GET %s through %s: %s", key, nodes[0].Name, v)
	}
	if v := rc.DoRetry("INCR", key+"{n}"); v.Kind == '-' {
		t.Errorf("INCR through %s: %s", nodes[0].Name, v)
	}
	ro := dialRaw(t, nodes[0].Addr)
	ro.Do("READONLY")
	if v, want := ro.Do("GET", key), fmt.Sprintf("MOVED %d %s", slot, leader); v.Str != want {
		t.Errorf("READONLY GET %s on %s: %s, want %s", key, nodes[0].Name, v, want)
	}

	// kill -9 under load: every acknowledged write survives.
	stop := make(chan struct{})
	load, wg := runClusterLoad(nodes, 6, stop)
	waitFor(t, "writes under load", func() error { return load.ackedAtLeast(200) })
	victim := nodes[2]
	victim.Kill()
	after := load.ackedCount() + 200
	waitFor(t, "writes after the kill", func() error { return load.ackedAtLeast(after) })
	close(stop)
	wg.Wait()
	live := slices.Delete(slices.Clone(nodes), 2, 3)
	for _, n := range live {
		load.verifyEach(t, n)
	}

	// kvs remove of the killed node: its groups get replicas on the live
	// nodes, three each again.
	if out, code := runKVS(t, clusterWait, "remove", nodes[0].Addr, victim.Name); code != 0 {
		t.Fatalf("kvs remove %s: exit %d\n%s", victim.Name, code, out)
	}
	waitPlaced(t, live, groups, r)
	load.verifyEach(t, live[len(live)-1])

	// A node that joins (learning the groups and the replicas from the
	// member it asks) gets its share, with the data.
	n6 := newClusterNode(t, "n6", "--join", nodes[1].Addr)
	n6.Start()
	live = append(live, n6)
	waitPlaced(t, live, groups, r)
	load.verifyEach(t, n6)
	if v := dialRaw(t, n6.Addr).DoRetry("GET", key); v.Str != "here" {
		t.Errorf("GET %s through n6: %s", key, v)
	}
}
