package test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// An upgrade from the last kvs of a cluster level to today's, one node at
// a time, never lets a command reach a node that cannot apply it.
type levelUpgrade struct {
	// from is the last kvs of level fromLevel (a commit of this
	// repository's history).
	from      string
	fromLevel int
	// cmd is a command that came with the next level, and call the name a
	// script calls it by: an older kvs does not know it.
	cmd  func(ctx context.Context, c *redis.Client, key string) error
	call string
	// keep, when set, is a command of the level from which scripts are
	// marked (fsm.CallLevelFrom, 3) or later, which a script must keep
	// calling throughout the upgrade: a script holds every command of the
	// cluster's level, no more and no less.
	keep string
}

// level2From is the last kvs of cluster level 2: it has no HyperLogLog
// and no geo commands, whose ops it would stop at.
const level2From = "54ff861"

// TestLevel3Upgrade: a cluster of three nodes and three groups of the last
// kvs of level 2 is upgraded one node at a time. While an older node runs,
// a PFADD is refused wherever it is sent (an upgraded node holds it back
// for the cluster's level, an old one does not know it) and a script's
// call of PFADD fails as an unknown command, so that nothing of either is
// applied and no node stops; once every node is upgraded and the cluster
// records today's level, both work, the scripts of every data group
// included.
func TestLevel3Upgrade(t *testing.T) {
	t.Parallel()
	testLevelUpgrade(t, levelUpgrade{from: level2From, fromLevel: 2, call: "pfadd",
		cmd: func(ctx context.Context, c *redis.Client, key string) error { return c.PFAdd(ctx, key, "x").Err() }})
}

// level3From is the last kvs of cluster level 3: it has no streams and no
// databases but 0.
const level3From = "ad0c001"

// TestLevel4Upgrade: the same from the last kvs of level 3, past XADD;
// throughout, a script keeps calling PFADD, a command of level 3, which
// the entries' mark of the cluster's level (3 until the last node is
// upgraded) lets it.
func TestLevel4Upgrade(t *testing.T) {
	t.Parallel()
	testLevelUpgrade(t, levelUpgrade{from: level3From, fromLevel: 3, call: "xadd", keep: "pfadd",
		cmd: func(ctx context.Context, c *redis.Client, key string) error {
			return c.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []string{"f", "v"}}).Err()
		}})
}

func testLevelUpgrade(t *testing.T, u levelUpgrade) {
	old := buildOldKVS(t, u.from, t.TempDir())
	nodes := startOldShardedCluster(t, old)
	waitClusterLevel(t, nodes[0], strconv.Itoa(u.fromLevel))
	next := u.fromLevel + 1

	ctx := context.Background()
	running := func(when string) {
		t.Helper()
		for _, n := range nodes {
			if n.isExited() {
				t.Fatalf("%s stopped %s: %v\n%s", n.Name, when, n.exitErr(), n.LogTail(40))
			}
		}
	}
	// A hash tag in each group's slots, for the command's key and a
	// script's.
	var keys []string
	for _, r := range [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}} {
		keys = append(keys, "{"+keyInSlots("t", r)+"}")
	}
	script := "return redis.pcall('" + u.call + "', KEYS[1], '*', 'f', 'v')"
	if u.call == "pfadd" {
		script = "return redis.pcall('pfadd', KEYS[1], 'x')"
	}
	keepScript := "return redis.call('" + u.keep + "', KEYS[1], 'x')"
	keeps := func(c *redis.Client, key, when string) {
		t.Helper()
		if u.keep == "" {
			return
		}
		if err := settled(t, func() error { return c.Eval(ctx, keepScript, []string{key}).Err() }); err != nil {
			t.Errorf("a script's %s on %s %s: %v", u.keep, key, when, err)
		}
	}
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
			want := "ERR unknown command '" + u.call + "'"
			if n == n1 {
				want = fmt.Sprintf("ERR apply level: the entry needs level %d and the cluster's level is %d", next, u.fromLevel)
			}
			if err := settled(t, func() error { return u.cmd(ctx, c, "new"+k) }); err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s new%s through %s with an old node in the cluster: %v; want %q", u.call, k, n.Name, err, want)
			}
			keeps(c, "keep"+k, "with an old node in the cluster, through "+n.Name)
			if n != n1 {
				continue
			}
			var v any
			err := settled(t, func() (err error) {
				v, err = c.Eval(ctx, script, []string{"s" + k}).Result()
				return err
			})
			if err == nil || !strings.Contains(err.Error(), "Unknown Redis command called from script") {
				t.Errorf("a script's %s on s%s through %s with an old node in the cluster: %v, %v; want the unknown command's error", u.call, k, n.Name, v, err)
			}
		}
		c.Close()
	}
	running("after the new commands in a cluster of old and new nodes")

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
				got, err := c.Exists(ctx, "new"+k, "s"+k).Result()
				if err != nil {
					return err
				}
				if got != 0 {
					t.Fatalf("%s holds %d of new%s and s%s: a refused command was applied", n.Name, got, k, k)
				}
				return nil
			})
		}
		c.Close()
	}
	c := redis.NewClient(&redis.Options{Addr: n1.Addr, MaxRetries: -1})
	defer c.Close()
	for _, k := range keys {
		if err := u.cmd(ctx, c, "new"+k); err != nil {
			t.Errorf("%s new%s at the new level: %v", u.call, k, err)
		}
		keeps(c, "keep"+k, "at the new level")
		// Every node's proposers see the cluster's level within a poll
		// (keepLevel).
		waitFor(t, "a script's "+u.call+" on s"+k+" at the new level", func() error {
			_, err := c.Eval(ctx, script, []string{"s" + k}).Result()
			return err
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
