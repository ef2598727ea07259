package test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Transactions end to end: go-redis's Watch and TxPipelined helpers,
// unchanged, against every mode.

const (
	watchGoroutines = 50
	watchIncrements = 8 // per goroutine
)

// watchIncr is go-redis's optimistic-locking example: read the counter
// under WATCH, write the next value in MULTI/EXEC, and start again when
// EXEC answers nil because another client got there first.
func watchIncr(ctx context.Context, c redis.UniversalClient, key string) error {
	for {
		err := c.Watch(ctx, func(tx *redis.Tx) error {
			n, err := tx.Get(ctx, key).Int()
			if err != nil && err != redis.Nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, key, n+1, 0)
				return nil
			})
			return err
		}, key)
		if err != redis.TxFailedErr {
			return err
		}
	}
}

// TestGoRedisWatchIncrement: 50 goroutines each add watchIncrements to one
// counter with watchIncr; no increment may be lost to a race (the count is
// exact), which is what WATCH is for.
func TestGoRedisWatchIncrement(t *testing.T) {
	onTargets(t, allTargets, func(t *testing.T, n *Node) {
		c := newClient(t, n, func(o *redis.Options) { o.PoolSize = watchGoroutines })
		ctx := testCtx(t)
		var wg sync.WaitGroup
		errs := make(chan error, watchGoroutines)
		for range watchGoroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range watchIncrements {
					if err := watchIncr(ctx, c, "watch:ctr"); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, err := c.Get(ctx, "watch:ctr").Int()
		if want := watchGoroutines * watchIncrements; err != nil || got != want {
			t.Fatalf("counter = %d, %v; want %d", got, err, want)
		}
	})
}

// TestGoRedisTxPipelinedModes: TxPipelined's replies, a runtime error among
// them, and a transaction's reads seeing its own writes, in every mode.
func TestGoRedisTxPipelinedModes(t *testing.T) {
	onTargets(t, allTargets, func(t *testing.T, n *Node) {
		c := newClient(t, n, nil)
		ctx := testCtx(t)
		var get *redis.StringCmd
		var incr *redis.IntCmd
		cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "tx:a", "x", 0)
			incr = p.Incr(ctx, "tx:a") // a runtime error: the others still run
			p.Set(ctx, "tx:b", "1", 0)
			get = p.Get(ctx, "tx:b")
			return nil
		})
		if err == nil || err.Error() != "ERR value is not an integer or out of range" || len(cmds) != 4 {
			t.Fatalf("TxPipelined: %d replies, err %v; want the INCR's error", len(cmds), err)
		}
		if incr.Err() == nil || get.Val() != "1" {
			t.Fatalf("INCR %v, GET %q %v", incr.Err(), get.Val(), get.Err())
		}
		if v, _ := c.Get(ctx, "tx:a").Result(); v != "x" {
			t.Fatalf("tx:a = %q after the transaction", v)
		}
	})
}

// TestClusterWatchIncrement: watchIncr's workers through go-redis's
// ClusterClient and through plain clients on every node (a follower
// forwards EXEC to the leader, carrying the versions it saw) while the
// leader is killed and restarted. Each increment also adds a token of its
// own to a set in the same transaction, so that after the run: the
// counter equals the number of tokens (no transaction applied half, or
// twice), and every acknowledged token is there (none lost). A worker
// whose EXEC's outcome is unknown (the leader died under it) looks for its
// token before trying again, as a client must.
func TestClusterWatchIncrement(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	waitLeader(t, nodes)
	ctx := testCtx(t)
	const ctr, tokens = "{w}:ctr", "{w}:tokens"
	clients := []redis.UniversalClient{readOnlyClusterClient(t, nodes)}
	for _, n := range nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1,
			PoolSize: watchGoroutines, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
		t.Cleanup(func() { rc.Close() })
		clients = append(clients, rc)
	}
	var acked sync.Map
	var done atomic.Int64
	const total = watchGoroutines * watchIncrements
	var wg sync.WaitGroup
	for g := range watchGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range watchIncrements {
				token := fmt.Sprintf("g%d-%d", g, i)
				c := clients[(g+i)%len(clients)]
				if err := incrOnce(ctx, c, ctr, tokens, token); err != nil {
					t.Errorf("%s: %v", token, err)
					return
				}
				acked.Store(token, true)
				done.Add(1)
			}
		}()
	}
	// Kill the leader once a third of the increments are in, and bring
	// it back; the workers carry on through the election.
	waitFor(t, "a third of the increments", func() error {
		if n := done.Load(); n < total/3 {
			return fmt.Errorf("%d of %d", n, total)
		}
		return nil
	})
	leader := waitLeader(t, nodes)
	leader.Kill()
	waitLeader(t, followers(nodes, leader))
	leader.Start()
	wg.Wait()

	leader = waitLeader(t, nodes)
	lc := newClient(t, leader, func(o *redis.Options) { o.MaxRetries = -1 })
	var n int
	var members []string
	if err := retryLeaderChange(t, func() error {
		var err error
		if err = lc.Set(ctx, "{w}:barrier", "1", 0).Err(); err != nil {
			return err
		}
		if n, err = lc.Get(ctx, ctr).Int(); err != nil {
			return err
		}
		members, err = lc.SMembers(ctx, tokens).Result()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range members {
		have[m] = true
	}
	if n != len(members) {
		t.Errorf("counter %d, but %d tokens: a transaction applied in part or twice", n, len(members))
	}
	lost := 0
	acked.Range(func(k, _ any) bool {
		if !have[k.(string)] {
			lost++
			t.Errorf("acknowledged increment %s lost", k)
		}
		return lost < 10
	})
	if len(members) != total {
		t.Errorf("%d tokens, want %d (every worker finished every increment)", len(members), total)
	}
}

// incrOnce adds one to ctr and token to tokens in one WATCHed transaction,
// exactly once: after an error whose outcome may be unknown it looks for
// token (under WATCH, so what it reads is what EXEC's check compares)
// before trying again.
func incrOnce(ctx context.Context, c redis.UniversalClient, ctr, tokens, token string) error {
	deadline := time.Now().Add(clusterWait)
	for {
		err := c.Watch(ctx, func(tx *redis.Tx) error {
			if in, err := tx.SIsMember(ctx, tokens, token).Result(); err != nil || in {
				return err
			}
			n, err := tx.Get(ctx, ctr).Int()
			if err != nil && err != redis.Nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, ctr, strconv.Itoa(n+1), 0)
				p.SAdd(ctx, tokens, token)
				return nil
			})
			return err
		}, ctr, tokens)
		switch {
		case err == nil:
			return nil
		case err == redis.TxFailedErr:
		case time.Now().After(deadline):
			return err
		case errors.Is(err, context.Canceled):
			return err
		default:
			time.Sleep(20 * time.Millisecond) // back off while the cluster elects; not synchronisation
		}
	}
}
