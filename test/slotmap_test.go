package test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// initialSlotMap is the slot map a cluster of three data groups is made
// with, as KVS.STATUS's slot_map writes its runs: redis-cli's split.
const initialSlotMap = "0-5460:1,5461-10922:2,10923-16383:3"

// checkSlotMap checks that node reports the stored slot map, version 1,
// and that its CLUSTER SLOTS lists exactly that map's runs, each served by
// its group's leader as the node's status names it.
func checkSlotMap(n *Node) error {
	st, err := kvsStatus(n.Addr)
	if err != nil {
		return err
	}
	if v, m := st.fields["slot_map_version"], st.fields["slot_map"]; v != "1" || m != initialSlotMap {
		return fmt.Errorf("%s routes by slot map version %q, %q; want the stored version 1, %q", n.Name, v, m, initialSlotMap)
	}
	addrs := map[string]string{} // node id -> client address
	for _, m := range st.members {
		addrs[m[0]] = m[2]
	}
	c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return err
	}
	var got []string
	for _, r := range slots {
		got = append(got, fmt.Sprintf("%d-%d", r.Start, r.End))
	}
	runs := strings.Split(initialSlotMap, ",")
	var want []string
	for _, run := range runs {
		span, _, _ := strings.Cut(run, ":")
		want = append(want, span)
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: CLUSTER SLOTS ranges %v, want the slot map's %v", n.Name, got, want)
	}
	for i, run := range runs {
		_, g, _ := strings.Cut(run, ":")
		gi, _ := strconv.Atoi(g)
		leader := ""
		if gi < len(st.groups) {
			leader = addrs[st.groups[gi][2]]
		}
		if len(slots[i].Nodes) == 0 || slots[i].Nodes[0].Addr != leader {
			return fmt.Errorf("%s: CLUSTER SLOTS range %s served by %v, want group %d's leader %q", n.Name, want[i], slots[i].Nodes, gi, leader)
		}
	}
	return nil
}

// TestShardedSlotMap: a sharded cluster's meta group holds its slot map,
// version 1 (the split it was made with), which every node installs and
// answers CLUSTER SLOTS by; after every node has stopped and started again
// the map is still version 1 everywhere, and kvs status says so.
func TestShardedSlotMap(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, "--groups", "3")
	waitSpread(t, nodes)
	for _, n := range nodes {
		waitFor(t, n.Name+" to route by the stored slot map", func() error { return checkSlotMap(n) })
	}
	for _, n := range nodes {
		n.Stop()
	}
	for _, n := range nodes {
		n.Start()
	}
	waitMembers(t, nodes, 3)
	waitSpread(t, nodes)
	for _, n := range nodes {
		waitFor(t, n.Name+" to route by the stored slot map after the restart", func() error { return checkSlotMap(n) })
	}
	out, code := runKVS(t, clusterWait, "status", nodes[1].Addr)
	if code != 0 || !strings.Contains(out, "slot map: version 1\n") || !strings.Contains(out, "5461-10922") {
		t.Errorf("kvs status: exit %d\n%s", code, out)
	}
}

// shardedUpgradeFrom is the last kvs whose sharded clusters kept no slot
// map in their meta group.
const shardedUpgradeFrom = "9168d39"

// TestShardedSlotMapUpgrade: a sharded cluster made by a kvs that kept no
// slot map gets version 1 stored on its first start on today's, with its
// keys where they were.
func TestShardedSlotMapUpgrade(t *testing.T) {
	t.Parallel()
	old := buildOldKVS(t, shardedUpgradeFrom, t.TempDir())
	n := newClusterNode(t, "n1", "--bootstrap", "--groups", "3")
	n.Bin = old
	n.Start()
	waitLeadsEvery(t, n, 3)
	rc := dialRaw(t, n.Addr)
	keys := []string{"a", "b", "c", "d", "e", "f"} // of every group
	for _, k := range keys {
		if v := rc.Do("SET", k, "v"+k); v.Str != "OK" {
			t.Fatalf("SET %s on the old kvs: %s", k, v)
		}
	}
	if st, err := kvsStatus(n.Addr); err != nil || st.fields["slot_map_version"] != "" {
		t.Fatalf("the old kvs reports a slot map version %q (%v): not the kvs this test needs", st.fields["slot_map_version"], err)
	}
	n.Stop()
	n.Bin = requireKVS(t)
	n.Start()
	waitLeadsEvery(t, n, 3)
	waitFor(t, "the upgraded node to store and route by the slot map", func() error { return checkSlotMap(n) })
	rc = dialRaw(t, n.Addr)
	for _, k := range keys {
		if v := rc.Do("GET", k); v.Str != "v"+k {
			t.Errorf("GET %s after the upgrade: %s", k, v)
		}
	}
}
