package test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Read-your-writes on a three-node cluster at light load, one write then
// one read at a time. Before followers were told of each commit at once, a
// follower learned of a commit only with raft's next append, 50 to 100 ms
// later, and a read right after a write acknowledged by the leader missed
// it every time. No timing is asserted: the checks count stale reads.

const rywRounds = 1000

// setUntilOK SETs key to val, repeating it after a leadership change on a
// busy machine (a SET of one value is safe to repeat).
func setUntilOK(ctx context.Context, t *testing.T, c redis.Cmdable, key, val string) {
	t.Helper()
	if err := retryLeaderChange(t, func() error { return c.Set(ctx, key, val, 0).Err() }); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
}

// TestReadYourWritesOnFollower: a plain client on a follower, whose writes
// the follower forwards, reads each of them back on the same connection.
func TestReadYourWritesOnFollower(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	ctx := testCtx(t)
	c := redis.NewClient(&redis.Options{Addr: followers(nodes, leader)[0].Addr, PoolSize: 1})
	defer c.Close()
	stale := 0
	for i := range rywRounds {
		k, v := fmt.Sprintf("ryw:%d", i), fmt.Sprintf("v%d", i)
		setUntilOK(ctx, t, c, k, v)
		if got, err := c.Get(ctx, k).Result(); err != nil || got != v {
			stale++
			if stale <= 5 {
				t.Errorf("GET %s right after SET on the follower: %q, %v", k, got, err)
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d of %d reads on the follower missed the connection's own write", stale, rywRounds)
	}
}

// TestReadYourWritesClusterClient: go-redis's ClusterClient with ReadOnly
// sends each SET to the leader and each GET to a follower, on other
// connections; the follower's READONLY reads catch up with the leader first.
func TestReadYourWritesClusterClient(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	waitLeader(t, nodes)
	ctx := testCtx(t)
	cc := readOnlyClusterClient(t, nodes)
	stale := 0
	for i := range rywRounds {
		k, v := fmt.Sprintf("cc:%d", i), fmt.Sprintf("v%d", i)
		setUntilOK(ctx, t, cc, k, v)
		if got, err := cc.Get(ctx, k).Result(); err != nil || got != v {
			stale++
			if stale <= 5 {
				t.Errorf("ClusterClient GET %s right after SET: %q, %v", k, got, err)
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d of %d ClusterClient reads missed a write the leader had acknowledged", stale, rywRounds)
	}
}

// BenchmarkFollowerLag measures how long a write acknowledged by the
// leader takes to be visible on a follower to a plain (not READONLY)
// client: SET on the leader, then GET on the follower until it answers.
// "light" sends one write every 20 ms; "loaded" does the same while 16
// other connections write to the leader as fast as they can. It reports
// the lag's p50 and p99 in milliseconds.
func BenchmarkFollowerLag(b *testing.B) {
	for _, load := range []string{"light", "loaded"} {
		b.Run(load, func(b *testing.B) {
			nodes := startCluster(b, 3)
			leader := waitLeader(b, nodes)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if load == "loaded" {
				for w := range 16 {
					go func() {
						c := redis.NewClient(&redis.Options{Addr: leader.Addr, PoolSize: 1})
						defer c.Close()
						for i := 0; ctx.Err() == nil; i++ {
							c.Set(ctx, fmt.Sprintf("load:%d:%d", w, i%1000), "x", 0)
						}
					}()
				}
			}
			lc := redis.NewClient(&redis.Options{Addr: leader.Addr, PoolSize: 1})
			fc := redis.NewClient(&redis.Options{Addr: followers(nodes, leader)[0].Addr, PoolSize: 1})
			defer lc.Close()
			defer fc.Close()
			lags := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				k := fmt.Sprintf("lag:%d", i)
				if err := lc.Set(ctx, k, "1", 0).Err(); err != nil {
					b.Fatal(err)
				}
				acked := time.Now()
				for fc.Exists(ctx, k).Val() != 1 {
				}
				lags = append(lags, time.Since(acked))
				time.Sleep(20 * time.Millisecond)
			}
			b.StopTimer()
			sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			b.ReportMetric(ms(lags[(len(lags)-1)/2]), "p50-ms")
			b.ReportMetric(ms(lags[(len(lags)-1)*99/100]), "p99-ms")
		})
	}
}
