package test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client-side caching: CLIENT TRACKING's modes against redis-server and
// every kvs mode, and, in clusters, invalidations of a client on one node
// by writes sent to another.

// invalidated is the keys of an invalidation push (RESP3 ">2 invalidate
// keys") or of a message on __redis__:invalidate (RESP2 redirection);
// null says the push was a flush's. ok is false for any other value.
func invalidated(v Value) (keys []string, null, ok bool) {
	var body Value
	switch {
	case v.Kind == '>' && len(v.Elems) == 2 && v.Elems[0].Str == "invalidate":
		body = v.Elems[1]
	case (v.Kind == '*' || v.Kind == '>') && len(v.Elems) == 3 && v.Elems[0].Str == "message" &&
		v.Elems[1].Str == "__redis__:invalidate":
		body = v.Elems[2]
	default:
		return nil, false, false
	}
	if body.Null {
		return nil, true, true
	}
	for _, e := range body.Elems {
		keys = append(keys, e.Str)
	}
	slices.Sort(keys)
	return keys, false, true
}

// expectInvalidate reads the next value from c and requires it to be an
// invalidation of exactly keys (sorted).
func expectInvalidate(t *testing.T, c *rawConn, keys ...string) {
	t.Helper()
	v := c.Read()
	got, null, ok := invalidated(v)
	slices.Sort(keys)
	if !ok || null || !slices.Equal(got, keys) {
		t.Fatalf("got %s, want the invalidation of %q", v, keys)
	}
}

// doSkipPushes sends a command and returns its reply, collecting the
// invalidation pushes that come before it.
func doSkipPushes(t *testing.T, c *rawConn, seen map[string]bool, args ...string) Value {
	t.Helper()
	c.send(args...)
	for {
		v := c.Read()
		if v.Kind != '>' {
			return v
		}
		keys, _, ok := invalidated(v)
		if !ok {
			t.Fatalf("%s: unexpected push %s", showCommand(args), v)
		}
		for _, k := range keys {
			seen[k] = true
		}
	}
}

func mustOK(t *testing.T, v Value) {
	t.Helper()
	if v.Kind != '+' || v.Str != "OK" {
		t.Fatalf("got %s, want OK", v)
	}
}

func TestTracking(t *testing.T) {
	onTargets(t, append(slices.Clone(allTargets), targetOneNodeCluster, targetSharded), func(t *testing.T, n *Node) {
		w := dialRaw(t, n.Addr) // writes on another connection

		t.Run("resp3", func(t *testing.T) {
			c := dialHello(t, "3", n.Addr)[0]
			mustOK(t, c.Do("CLIENT", "TRACKING", "on"))
			w.Do("SET", "r3:k", "1")
			if v := c.Do("GET", "r3:k"); v.Str != "1" {
				t.Fatalf("GET: %s", v)
			}
			w.Do("SET", "r3:k", "2")
			expectInvalidate(t, c, "r3:k")
			// The key is no longer tracked: a second write tells nothing,
			// and the client's own write of a key it read comes after the
			// write's reply.
			w.Do("SET", "r3:k", "3")
			c.Do("GET", "r3:other")
			mustOK(t, c.Do("SET", "r3:other", "x"))
			expectInvalidate(t, c, "r3:other")
			// FLUSHALL: a null.
			c.Do("GET", "r3:k")
			w.Do("FLUSHALL")
			v := c.Read()
			if _, null, ok := invalidated(v); !ok || !null {
				t.Fatalf("after FLUSHALL: %s", v)
			}
			// A node of several groups flushes each: one null each.
			info := c.Do("CLIENT", "TRACKINGINFO")
			for info.Kind == '>' {
				if _, null, ok := invalidated(info); !ok || !null {
					t.Fatalf("after FLUSHALL: %s", info)
				}
				info = c.Read()
			}
			if !strings.Contains(string(info.Raw), "on") || c.Do("CLIENT", "GETREDIR").Str != "0" {
				t.Fatalf("TRACKINGINFO %s", info)
			}
			if l := c.Do("CLIENT", "INFO").Str; !strings.Contains(l, "flags=t ") || !strings.Contains(l, "redir=0 ") {
				t.Fatalf("CLIENT INFO: %s", l)
			}
			mustOK(t, c.Do("CLIENT", "TRACKING", "off"))
			if c.Do("CLIENT", "GETREDIR").Str != "-1" {
				t.Fatal("GETREDIR after OFF is not -1")
			}
		})

		t.Run("redirect", func(t *testing.T) {
			r := dialRaw(t, n.Addr)
			id := r.Do("CLIENT", "ID").Str
			r.Do("SUBSCRIBE", "__redis__:invalidate")
			c := dialRaw(t, n.Addr)
			mustOK(t, c.Do("CLIENT", "TRACKING", "on", "REDIRECT", id))
			if c.Do("CLIENT", "GETREDIR").Str != id {
				t.Fatal("GETREDIR is not the redirection")
			}
			c.Do("MGET", "rd{4}:a", "rd{4}:b")
			w.Do("SET", "rd{4}:b", "1")
			expectInvalidate(t, r, "rd{4}:b")
			w.Do("SET", "rd{4}:a", "1")
			expectInvalidate(t, r, "rd{4}:a")

			// BCAST with prefixes: one message per prefix.
			mustOK(t, c.Do("CLIENT", "TRACKING", "off"))
			mustOK(t, c.Do("CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", id, "PREFIX", "bc{1}a:", "PREFIX", "bc{1}b:"))
			if v := c.Do("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "bc{1}a:x"); !v.IsError() ||
				!strings.HasPrefix(v.Str, "ERR Prefix 'bc{1}a:x' overlaps with an existing prefix 'bc{1}a:'") {
				t.Fatalf("overlapping prefix: %s", v)
			}
			w.Do("MSET", "bc{1}a:1", "1", "bc{1}b:1", "2", "bc{1}c:1", "3")
			var got []string
			for range 2 {
				keys, _, ok := invalidated(r.Read())
				if !ok {
					t.Fatal("not an invalidation")
				}
				got = append(got, keys...)
			}
			slices.Sort(got)
			if !slices.Equal(got, []string{"bc{1}a:1", "bc{1}b:1"}) {
				t.Fatalf("BCAST: %q", got)
			}
			// NOLOOP: the client's own writes are left out.
			mustOK(t, c.Do("CLIENT", "TRACKING", "off"))
			mustOK(t, c.Do("CLIENT", "TRACKING", "on", "BCAST", "REDIRECT", id, "NOLOOP", "PREFIX", "nl:"))
			mustOK(t, c.Do("SET", "nl:mine", "1"))
			w.Do("SET", "nl:theirs", "1")
			expectInvalidate(t, r, "nl:theirs")
			if l := c.Do("CLIENT", "INFO").Str; !strings.Contains(l, "flags=tB ") || !strings.Contains(l, "redir="+id+" ") {
				t.Fatalf("CLIENT INFO: %s", l)
			}
		})

		t.Run("optin-optout", func(t *testing.T) {
			c := dialHello(t, "3", n.Addr)[0]
			mustOK(t, c.Do("CLIENT", "TRACKING", "on", "OPTIN"))
			if v := c.Do("CLIENT", "CACHING", "no"); !v.IsError() {
				t.Fatalf("CACHING no in OPTIN: %s", v)
			}
			c.Do("GET", "oi:1") // not tracked
			mustOK(t, c.Do("CLIENT", "CACHING", "yes"))
			c.Do("GET", "oi:2") // tracked
			c.Do("GET", "oi:3") // not tracked: CACHING was for one command
			w.Do("SET", "oi:1", "x")
			w.Do("SET", "oi:3", "x")
			w.Do("SET", "oi:2", "x")
			expectInvalidate(t, c, "oi:2")

			o := dialHello(t, "3", n.Addr)[0]
			mustOK(t, o.Do("CLIENT", "TRACKING", "on", "OPTOUT"))
			mustOK(t, o.Do("CLIENT", "CACHING", "no"))
			o.Do("GET", "oo:1") // not tracked
			o.Do("GET", "oo:2") // tracked
			w.Do("SET", "oo:1", "x")
			w.Do("SET", "oo:2", "x")
			expectInvalidate(t, o, "oo:2")
			if v := o.Do("CLIENT", "TRACKING", "on", "OPTIN"); !v.IsError() {
				t.Fatalf("OPTOUT to OPTIN: %s", v)
			}
		})

		t.Run("noloop", func(t *testing.T) {
			c := dialHello(t, "3", n.Addr)[0]
			mustOK(t, c.Do("CLIENT", "TRACKING", "on", "NOLOOP"))
			c.Do("MGET", "nl{2}:1", "nl{2}:2")
			mustOK(t, c.Do("SET", "nl{2}:1", "mine"))
			w.Do("SET", "nl{2}:2", "theirs")
			expectInvalidate(t, c, "nl{2}:2")
		})

		t.Run("transaction", func(t *testing.T) {
			c := dialHello(t, "3", n.Addr)[0]
			mustOK(t, c.Do("CLIENT", "TRACKING", "on"))
			w.Do("MSET", "tx{3}a", "1", "tx{3}b", "2")
			c.Do("GET", "tx{3}a")
			c.Do("MULTI")
			c.Do("INCR", "tx{3}a")
			c.Do("GET", "tx{3}b")
			if v := c.Do("EXEC"); len(v.Elems) != 2 {
				t.Fatalf("EXEC: %s", v)
			}
			expectInvalidate(t, c, "tx{3}a")
			// The read inside the transaction tracked tx{3}b.
			w.Do("SET", "tx{3}b", "3")
			expectInvalidate(t, c, "tx{3}b")
		})
	})
}

// TestTrackingCluster: in a three-node cluster a client tracking on one
// node is invalidated by writes sent to another node, whichever node
// leads: with one group, and with three groups on two replicas each,
// where a node lacks a group and forwards its reads (those keys are
// invalidated right after the read's reply).
func TestTrackingCluster(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"one-group", nil},
		{"three-groups", []string{"--groups", "3", "--replicas", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nodes := startCluster(t, 3, tc.extra...)
			waitLeader(t, nodes)
			for i, n := range nodes {
				c := dialHello(t, "3", n.Addr)[0]
				mustOK(t, c.Do("CLIENT", "TRACKING", "on"))
				other := dialRaw(t, nodes[(i+1)%len(nodes)].Addr)
				seen := map[string]bool{}
				var keys []string
				for j := range 12 {
					k := "ct:" + n.Name + ":" + string(rune('a'+j))
					keys = append(keys, k)
					if v := other.DoRetry("SET", k, "1"); v.IsError() {
						t.Fatalf("SET %s: %s", k, v)
					}
					// The node may not have applied the write yet: read
					// until the value shows.
					deadline := time.Now().Add(clusterWait)
					for doSkipPushes(t, c, seen, "GET", k).Str != "1" {
						if time.Now().After(deadline) {
							t.Fatalf("%s never showed %s", n.Name, k)
						}
						time.Sleep(5 * time.Millisecond)
					}
					// Only an invalidation after this read counts: of a
					// key whose group the node holds, the one the write
					// below causes; of another, the one that follows the
					// read's reply at once, since the node never sees the
					// writes of a group it does not hold.
					seen[k] = false
				}
				for _, k := range keys {
					if v := other.DoRetry("SET", k, "2"); v.IsError() {
						t.Fatalf("SET %s: %s", k, v)
					}
				}
				for _, k := range keys {
					for !seen[k] {
						keys, _, ok := invalidated(c.Read())
						if !ok {
							t.Fatalf("%s: expected invalidations", n.Name)
						}
						for _, k := range keys {
							seen[k] = true
						}
					}
				}
			}
		})
	}
}

// TestTrackingGoRedisCache: go-redis's client-side cache against
// redis-server and kvs: a GET fills the cache, and another client's write
// empties it, so the next GET reads the new value.
func TestTrackingGoRedisCache(t *testing.T) {
	onTargets(t, []target{targetRedis, targetMemory, targetDurable, targetOneNodeCluster}, func(t *testing.T, n *Node) {
		ctx := testCtx(t)
		cache := redis.NewLocalCache(redis.CacheConfig{MaxEntries: 32})
		c := newClient(t, n, func(o *redis.Options) {
			o.Protocol = 3
			o.ClientSideCache = cache
			o.PoolSize = 1
		})
		w := newClient(t, n, nil)
		if err := w.Set(ctx, "csc", "v1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		pollFor(t, "the cache to hold csc", clusterWait, 10*time.Millisecond, func() error {
			if got, err := c.Get(ctx, "csc").Result(); err != nil || got != "v1" {
				t.Fatalf("GET: %q, %v", got, err)
			}
			if cache.Len() < 1 {
				return fmt.Errorf("cache holds %d entries", cache.Len())
			}
			return nil
		})
		if err := w.Set(ctx, "csc", "v2", 0).Err(); err != nil {
			t.Fatal(err)
		}
		pollFor(t, "the cached csc to be invalidated", clusterWait, 10*time.Millisecond, func() error {
			if got, err := c.Get(ctx, "csc").Result(); err != nil || got != "v2" {
				return fmt.Errorf("GET: %q, %v", got, err)
			}
			return nil
		})
	})
}
