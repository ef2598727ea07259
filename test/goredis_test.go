package test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// newClient returns a go-redis client for n with default options apart
// from those set by tweak, closed when t ends.
func newClient(t testing.TB, n *Node, tweak func(*redis.Options)) *redis.Client {
	t.Helper()
	opts := &redis.Options{Addr: n.Addr}
	if tweak != nil {
		tweak(opts)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestGoRedis runs ordinary go-redis usage with default options (HELLO 3,
// CLIENT SETINFO, pooled connections) and with a RESP2 client.
func TestGoRedis(t *testing.T) {
	onTargets(t, allTargets, func(t *testing.T, n *Node) {
		for _, proto := range []int{3, 2} {
			t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
				c := newClient(t, n, func(o *redis.Options) {
					if proto == 2 {
						o.Protocol = 2
					}
				})
				testGoRedisBasics(t, c, fmt.Sprintf("p%d:", proto))
				testGoRedisPipeline(t, c, fmt.Sprintf("p%d:pipe:", proto))
			})
		}
	})
}

func testGoRedisBasics(t *testing.T, c *redis.Client, prefix string) {
	ctx := testCtx(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Ping(ctx).Err())
	k := prefix + "k"
	must(c.Set(ctx, k, "v", 0).Err())
	if v, err := c.Get(ctx, k).Result(); err != nil || v != "v" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if _, err := c.Get(ctx, prefix+"missing").Result(); err != redis.Nil {
		t.Fatalf("Get of a missing key: err %v, want redis.Nil", err)
	}
	for i := int64(1); i <= 3; i++ {
		if v, err := c.Incr(ctx, prefix+"ctr").Result(); err != nil || v != i {
			t.Fatalf("Incr = %d, %v; want %d", v, err, i)
		}
	}
	if err := c.Incr(ctx, k).Err(); err == nil || err.Error() != "ERR value is not an integer or out of range" {
		t.Fatalf("Incr of a string: %v", err)
	}
	if ok, err := c.Expire(ctx, k, time.Hour).Result(); err != nil || !ok {
		t.Fatalf("Expire = %v, %v", ok, err)
	}
	if ttl, err := c.TTL(ctx, k).Result(); err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("TTL = %v, %v", ttl, err)
	}
	if ttl, err := c.TTL(ctx, prefix+"ctr").Result(); err != nil || ttl != -1 {
		t.Fatalf("TTL without expiry = %v, %v; want -1ns (go-redis's encoding of -1)", ttl, err)
	}
	if f, err := c.IncrByFloat(ctx, prefix+"f", 2.5).Result(); err != nil || f != 2.5 {
		t.Fatalf("IncrByFloat = %v, %v", f, err)
	}
	vals, err := c.MGet(ctx, k, prefix+"missing", prefix+"ctr").Result()
	if err != nil || len(vals) != 3 || vals[0] != "v" || vals[1] != nil || vals[2] != "3" {
		t.Fatalf("MGet = %#v, %v", vals, err)
	}
	if n, err := c.Del(ctx, k, prefix+"missing").Result(); err != nil || n != 1 {
		t.Fatalf("Del = %d, %v", n, err)
	}
	// go-redis sends HELLO and CLIENT SETINFO itself; check by hand that
	// the server really speaks the protocol the client asked for.
	hello, err := c.Do(ctx, "HELLO").Result()
	if err != nil {
		t.Fatalf("HELLO: %v", err)
	}
	if proto := helloProto(hello); proto != int64(c.Options().Protocol) {
		t.Fatalf("HELLO reports proto %v (reply %#v); client uses %d", proto, hello, c.Options().Protocol)
	}
}

// helloProto digs "proto" out of a HELLO reply, a map in RESP3 and a flat
// list in RESP2.
func helloProto(v any) int64 {
	switch m := v.(type) {
	case map[any]any:
		p, _ := m["proto"].(int64)
		return p
	case []any:
		for i := 0; i+1 < len(m); i += 2 {
			if m[i] == "proto" {
				p, _ := m[i+1].(int64)
				return p
			}
		}
	}
	return -1
}

func testGoRedisPipeline(t *testing.T, c *redis.Client, prefix string) {
	ctx := testCtx(t)
	const n = 1000
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			p.Set(ctx, fmt.Sprintf("%s%d", prefix, i), i, 0)
			p.Incr(ctx, prefix+"ctr")
		}
		return nil
	})
	if err != nil || len(cmds) != 2*n {
		t.Fatalf("Pipelined: %d replies, %v", len(cmds), err)
	}
	for i := 0; i < n; i++ {
		if v, err := cmds[2*i+1].(*redis.IntCmd).Result(); err != nil || v != int64(i+1) {
			t.Fatalf("pipelined INCR %d = %d, %v", i, v, err)
		}
	}
	gets, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			p.Get(ctx, fmt.Sprintf("%s%d", prefix, i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, cmd := range gets {
		if v := cmd.(*redis.StringCmd).Val(); v != fmt.Sprint(i) {
			t.Fatalf("pipelined GET %d = %q", i, v)
		}
	}
}

// TestGoRedisTx: MULTI/EXEC through TxPipelined, where supported.
func TestGoRedisTx(t *testing.T) {
	onTargets(t, []target{targetRedis, targetMemory}, func(t *testing.T, n *Node) {
		c := newClient(t, n, nil)
		ctx := testCtx(t)
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "a", "1", 0)
			p.Incr(ctx, "a")
			return nil
		})
		if err != nil && strings.Contains(err.Error(), "unknown command") {
			t.Skipf("MULTI/EXEC not supported yet: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := c.Get(ctx, "a").Result(); v != "2" {
			t.Fatalf("after transaction a = %q", v)
		}
	})
}

// TestGoRedisContextTimeout: an expired context fails the call with
// context.DeadlineExceeded and leaves the client usable; with
// ContextTimeoutEnabled a deadline in the middle of a large pipeline must
// not leave replies behind on a pooled connection for the next caller.
func TestGoRedisContextTimeout(t *testing.T) {
	onTargets(t, allTargets, func(t *testing.T, n *Node) {
		ctx := testCtx(t)
		c := newClient(t, n, nil)
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel()
		if err := c.Get(expired, "k").Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get with an expired context: %v, want context.DeadlineExceeded", err)
		}
		if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
			t.Fatalf("Get after a timeout = %q, %v", v, err)
		}

		ct := newClient(t, n, func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.PoolSize = 1 })
		short, cancel2 := context.WithTimeout(ctx, time.Millisecond)
		defer cancel2()
		_, err := ct.Pipelined(short, func(p redis.Pipeliner) error {
			for i := 0; i < 50000; i++ {
				p.Set(short, fmt.Sprintf("big%d", i), i, 0)
			}
			return nil
		})
		t.Logf("50000-command pipeline under a 1ms deadline: err %v", err)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
			t.Fatalf("pipeline under a short deadline: %v", err)
		}
		for i := 0; i < 10; i++ { // each reply must belong to its own command
			if v, err := ct.Echo(ctx, i).Result(); err != nil || v != fmt.Sprint(i) {
				t.Fatalf("ECHO %d after an interrupted pipeline = %q, %v", i, v, err)
			}
		}
	})
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// TestGoRedisScan: a full SCAN returns every key, whatever the cursor
// encoding, while the iterator pages through it with COUNT and MATCH.
func TestGoRedisScan(t *testing.T) {
	onTargets(t, allTargets, func(t *testing.T, n *Node) {
		ctx := testCtx(t)
		c := newClient(t, n, nil)
		const keys = 10000
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < keys; i++ {
				p.Set(ctx, fmt.Sprintf("key:%05d", i), "x", 0)
			}
			p.Set(ctx, "other", "x", 0)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, count := range []int64{0, 7, 1000} {
			seen := make(map[string]int, keys)
			it := c.Scan(ctx, 0, "key:*", count).Iterator()
			for it.Next(ctx) {
				seen[it.Val()]++
			}
			if err := it.Err(); err != nil {
				t.Fatalf("SCAN COUNT %d: %v", count, err)
			}
			if len(seen) != keys {
				t.Errorf("SCAN MATCH key:* COUNT %d returned %d distinct keys, want %d", count, len(seen), keys)
			}
			for i := 0; i < keys; i++ {
				if k := fmt.Sprintf("key:%05d", i); seen[k] == 0 {
					t.Fatalf("SCAN COUNT %d missed %s", count, k)
				}
			}
			if seen["other"] != 0 {
				t.Fatalf("SCAN MATCH key:* returned other")
			}
		}
	})
}
