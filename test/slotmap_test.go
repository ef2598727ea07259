package test

import (
	"context"
	"fmt"
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
	var runs []string
	for _, r := range slots {
		if len(r.Nodes) == 0 {
			return fmt.Errorf("%s: CLUSTER SLOTS range %d-%d has no master", n.Name, r.Start, r.End)
		}
		g := -1
		for i, row := range st.groups {
			if l := row[2]; l != "" && addrs[l] == r.Nodes[0].Addr {
				g = i
			}
		}
		runs = append(runs, fmt.Sprintf("%d-%d:%d", r.Start, r.End, g))
	}
	if got := strings.Join(runs, ","); got != initialSlotMap {
		return fmt.Errorf("%s: CLUSTER SLOTS gives %s (range:group its master leads), want %s", n.Name, got, initialSlotMap)
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
