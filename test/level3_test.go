package test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// level2From is the last kvs of cluster level 2: it has no HyperLogLog
// and no geo commands, whose ops it would stop at.
const level2From = "54ff861"

// TestLevel3Upgrade: a cluster of three nodes and three groups of the last
// kvs of level 2 is upgraded one node at a time. While an older node runs,
// a PFADD is refused wherever it is sent (an upgraded node holds it back
// for the cluster's level, an old one does not know it) and a script's
// call of PFADD fails as an unknown command, so that nothing of either is
// applied and no node stops; once every node is upgraded and the cluster
// records level 3, both work, the scripts of every data group included.
func TestLevel3Upgrade(t *testing.T) {
	t.Parallel()
	old := buildOldKVS(t, level2From, t.TempDir())
	nodes := startOldShardedCluster(t, old)
	waitClusterLevel(t, nodes[0], "2")

	ctx := context.Background()
	running := func(when string) {
		t.Helper()
		for _, n := range nodes {
			if n.isExited() {
				t.Fatalf("%s stopped %s: %v\n%s", n.Name, when, n.exitErr(), n.LogTail(40))
			}
		}
	}
	// A hash tag in each group's slots, for a PFADD key and a script's.
	var keys []string
	for _, r := range [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}} {
		keys = append(keys, "{"+keyInSlots("t", r)+"}")
	}
	const script = "return redis.pcall('pfadd', KEYS[1], 'x')"
	n1 := nodes[0]
	n1.Stop()
	n1.Bin = requireKVS(t)
	n1.Start()
	waitMembers(t, nodes, 3)
	running("after n1's upgrade")
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		for _, k := range keys {
			// The upgraded node refuses it for the cluster's level, whether
			// it leads the key's group or would forward it; an old one
			// does not know it.
			want := "ERR unknown command 'pfadd'"
			if n == n1 {
				want = "ERR apply level: the entry needs level 3 and the cluster's level is 2"
			}
			if err := settled(t, func() error { return c.PFAdd(ctx, "hll"+k, "x").Err() }); err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("PFADD hll%s through %s with an old node in the cluster: %v; want %q", k, n.Name, err, want)
			}
			if n != n1 {
				continue
			}
			var v any
			err := settled(t, func() (err error) {
				v, err = c.Eval(ctx, script, []string{"s" + k}).Result()
				return err
			})
			if err == nil || !strings.Contains(err.Error(), "Unknown Redis command called from script") {
				t.Errorf("a script's PFADD on s%s through %s with an old node in the cluster: %v, %v; want the unknown command's error", k, n.Name, v, err)
			}
		}
		c.Close()
	}
	running("after PFADDs in a cluster of old and new nodes")

	for _, n := range nodes[1:] {
		n.Stop()
		n.Bin = requireKVS(t)
		n.Start()
		waitMembers(t, nodes, 3)
		running("after " + n.Name + "'s upgrade")
	}
	for _, n := range nodes {
		waitClusterLevel(t, n, kvsLevel)
	}
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		for _, k := range keys {
			// Nothing of the refused commands was applied, on any node
			// (once it serves: a node just restarted answers LOADING
			// until it has caught up).
			waitFor(t, n.Name+" to answer EXISTS", func() error {
				got, err := c.Exists(ctx, "hll"+k, "s"+k).Result()
				if err != nil {
					return err
				}
				if got != 0 {
					t.Fatalf("%s holds %d of hll%s and s%s: a refused command was applied", n.Name, got, k, k)
				}
				return nil
			})
		}
		c.Close()
	}
	c := redis.NewClient(&redis.Options{Addr: n1.Addr, MaxRetries: -1})
	defer c.Close()
	for _, k := range keys {
		if n, err := c.PFAdd(ctx, "hll"+k, "x").Result(); err != nil || n != 1 {
			t.Errorf("PFADD hll%s at level 3: %d, %v", k, n, err)
		}
		// Each data group's leader copies the level into its group
		// within a round of tending.
		waitFor(t, "a script's PFADD on s"+k+" at level 3", func() error {
			v, err := c.Eval(ctx, script, []string{"s" + k}).Result()
			if err != nil {
				return err
			}
			if v != int64(1) {
				return fmt.Errorf("script returned %v", v)
			}
			return nil
		})
	}
	running("at the end")
}

// settled runs do until it answers other than a cluster settling after a
// restart would (no leader yet, a leader changing, a node catching up),
// and returns that answer.
func settled(t *testing.T, do func() error) error {
	t.Helper()
	var last error
	waitFor(t, "an answer of a settled cluster", func() error {
		last = do()
		if last != nil {
			for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "LOADING"} {
				if strings.HasPrefix(last.Error(), p) {
					return last
				}
			}
		}
		return nil
	})
	return last
}
