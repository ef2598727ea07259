package test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterRestartServes restarts the leader of a three-node cluster
// after it has been down for a while under write load, and polls until the
// restarted node answers reads again instead of LOADING. It reports how
// long that took from the start of the process; it asserts only that the
// node serves, and serves every write acknowledged before it was stopped:
// how long is measured (docs/cluster.md), never asserted.
//
// While the node is down the new leader's RPCs to it fail; the test keeps
// it down long enough (downFor) for raft's retry backoff to reach its
// ceiling had nothing held it small.
func TestClusterRestartServes(t *testing.T) {
	t.Parallel()
	const downFor = 12 * time.Second
	for _, how := range []string{"sigterm", "kill"} {
		t.Run(how, func(t *testing.T) {
			nodes := startCluster(t, 3)
			old := waitLeader(t, nodes)
			ctx := testCtx(t)
			key := "before-" + how
			if err := retryLeaderChange(t, func() error { return newClient(t, old, nil).Set(ctx, key, "1", 0).Err() }); err != nil {
				t.Fatal(err)
			}
			waitValue(t, followers(nodes, old)[0], key, "1")
			if how == "kill" {
				old.Kill()
			} else {
				old.Stop()
			}
			acked := writeLoad(t, followers(nodes, old), downFor)
			if acked == 0 {
				t.Fatal("no write was acknowledged while the old leader was down")
			}

			start := time.Now()
			old.Start()
			pinged := time.Since(start)
			c := newClient(t, old, func(o *redis.Options) { o.MaxRetries = -1 })
			var served time.Duration
			pollFor(t, "reads on the restarted node", clusterWait, 5*time.Millisecond, func() error {
				v, err := c.Get(ctx, key).Result()
				if err != nil {
					return err
				}
				if v != "1" {
					return fmt.Errorf("GET %s = %q", key, v)
				}
				served = time.Since(start)
				return nil
			})
			t.Logf("%s: restarted old leader answered PING %v and served reads %v after it was started (%d writes while it was down %v)",
				how, pinged.Round(time.Millisecond), served.Round(time.Millisecond), acked, downFor)
		})
	}
}

// writeLoad writes distinct keys through nodes from four connections for
// d, retrying through leader changes, and returns how many were
// acknowledged.
func writeLoad(t testing.TB, nodes []*Node, d time.Duration) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var acked atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		c := newClient(t, nodes[w%len(nodes)], func(o *redis.Options) { o.MaxRetries = -1 })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				if c.Set(ctx, fmt.Sprintf("load:%d:%d", w, i), i, 0).Err() == nil {
					acked.Add(1)
					continue
				}
				// No leader for a moment: not a busy loop meanwhile.
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return acked.Load()
}
