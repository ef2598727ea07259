package test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// maxmemory and its policies, end to end: fill past maxmemory and check
// which keys go, in memory mode and in a cluster.

const evictValue = 256 << 10

// usedMemory is INFO memory's used_memory.
func usedMemory(t *testing.T, c *rawConn) int64 {
	t.Helper()
	v, err := strconv.ParseInt(infoOf(t, c, "memory", "used_memory"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// setMaxmemory sets maxmemory to room bytes over what c's node uses now,
// with policy. The policy comes first (LRU and LFU allocate their access
// records), then MEMORY PURGE, so that used memory is measured after a
// collection, with what the server has allocated as it started.
func setMaxmemory(t *testing.T, c *rawConn, policy string, room int64) int64 {
	t.Helper()
	for _, cmd := range [][]string{{"CONFIG", "SET", "maxmemory-policy", policy}, {"MEMORY", "PURGE"}} {
		if v := c.Do(cmd...); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("%v = %s", cmd, v)
		}
	}
	limit := usedMemory(t, c) + room
	if v := c.Do("CONFIG", "SET", "maxmemory", strconv.FormatInt(limit, 10)); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("CONFIG SET maxmemory %d = %s", limit, v)
	}
	return limit
}

// present lists which of keys exist.
func present(t *testing.T, c *rawConn, keys []string) []string {
	t.Helper()
	var out []string
	for _, k := range keys {
		if v := c.Do("EXISTS", k); string(v.Raw) == ":1\r\n" {
			out = append(out, k)
		}
	}
	return out
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// TestEvictionPolicies fills a node to four times its maxmemory under each
// policy: noeviction refuses writes with Redis's OOM error but serves reads
// and DEL; the volatile policies keep every key without a TTL, and
// volatile-ttl evicts the keys due soonest first; allkeys-lru and
// allkeys-lfu keep a key that is read between every two writes. Under each
// evicting policy used memory comes back under maxmemory, evicted_keys
// counts, and "evicted" is announced.
func TestEvictionPolicies(t *testing.T) {
	val := strings.Repeat("v", evictValue)
	room := int64(8 << 20)
	fill := int(4 * room / evictValue)
	for _, policy := range []string{"noeviction", "allkeys-random", "allkeys-lru", "allkeys-lfu",
		"volatile-random", "volatile-ttl", "volatile-lru", "volatile-lfu"} {
		t.Run(policy, func(t *testing.T) {
			n := startKVS(t, KVSOptions{})
			c := dialRaw(t, n.Addr)
			keep := names("keep:", 8)
			for _, k := range keep {
				c.Do("SET", k, val)
			}
			limit := setMaxmemory(t, c, policy, room)
			c.Do("CONFIG", "SET", "notify-keyspace-events", "Ee")
			sub := dialRaw(t, n.Addr)
			sub.Do("SUBSCRIBE", "__keyevent@0__:evicted")

			ttl := names("ttl:", fill)
			oom := 0
			tracked := strings.HasSuffix(policy, "-lru") || strings.HasSuffix(policy, "-lfu")
			for i, k := range ttl {
				if tracked {
					c.Do("GET", "keep:0") // the hot key
				}
				// Later keys are due later: volatile-ttl evicts the first.
				v := c.Do("SET", k, val, "PX", strconv.Itoa(3600_000+1000*i))
				switch {
				case string(v.Raw) == "+OK\r\n":
				case string(v.Raw) == "-OOM command not allowed when used memory > 'maxmemory'.\r\n":
					oom++
				default:
					t.Fatalf("SET %s = %s", k, v)
				}
			}
			if policy == "noeviction" {
				if oom == 0 {
					t.Fatalf("filled to %d bytes over a maxmemory of %d and no SET was refused", usedMemory(t, c), limit)
				}
				if v := c.Do("GET", "keep:0"); len(v.Raw) < evictValue {
					t.Fatalf("GET under OOM = %d bytes", len(v.Raw))
				}
				if got := present(t, c, keep); len(got) != len(keep) {
					t.Fatalf("noeviction lost keys: %q left of %q", got, keep)
				}
				for _, k := range ttl {
					c.Do("DEL", k)
				}
				if v := c.Do("SET", "after", "x"); string(v.Raw) != "+OK\r\n" {
					t.Fatalf("SET after DEL freed memory = %s", v)
				}
				if v := infoOf(t, c, "stats", "evicted_keys"); v != "0" {
					t.Fatalf("noeviction evicted %s keys", v)
				}
				return
			}
			if oom != 0 {
				t.Fatalf("%s refused %d SETs with OOM", policy, oom)
			}
			pollFor(t, "used memory under maxmemory", 20*time.Second, 20*time.Millisecond, func() error {
				if u := usedMemory(t, c); u > limit {
					return fmt.Errorf("used_memory %d, maxmemory %d", u, limit)
				}
				return nil
			})
			// The evictor may still be at work (a collection can show more
			// memory in use): poll until evicted_keys and the keys left agree.
			pollFor(t, "evicted_keys to count the keys gone", 20*time.Second, 20*time.Millisecond, func() error {
				evicted, _ := strconv.Atoi(infoOf(t, c, "stats", "evicted_keys"))
				left := present(t, c, append(append([]string{}, keep...), ttl...))
				if evicted == 0 || len(left) != len(keep)+len(ttl)-evicted {
					return fmt.Errorf("evicted_keys %d, %d keys left of %d", evicted, len(left), len(keep)+len(ttl))
				}
				return nil
			})
			if strings.HasPrefix(policy, "volatile-") {
				if got := present(t, c, keep); len(got) != len(keep) {
					t.Fatalf("%s evicted keys without a TTL: %q left of %q", policy, got, keep)
				}
			}
			if tracked && len(present(t, c, keep[:1])) == 0 {
				t.Fatalf("%s evicted keep:0, read between every two writes", policy)
			}
			if policy == "volatile-ttl" {
				got := present(t, c, ttl)
				if len(got) == 0 || !slices.Equal(got, ttl[len(ttl)-len(got):]) {
					t.Fatalf("volatile-ttl kept %q: not the keys due last", got)
				}
			}
			if v := sub.Read(); !strings.Contains(string(v.Raw), "__keyevent@0__:evicted") {
				t.Fatalf("evicted notification = %s", v)
			}
		})
	}
}

// TestClusterEviction: in a cluster only the leader evicts, through the
// log, so after evictions the followers hold exactly the leader's keys.
// One SET per log entry and small values keep what Raft's log cache holds
// (its last 512 entries, which count in used memory) well under the room
// given.
func TestClusterEviction(t *testing.T) {
	const room, value = 6 << 20, 4 << 10
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	c := dialRaw(t, leader.Addr)
	limit := setMaxmemory(t, c, "allkeys-random", room)
	for _, n := range followers(nodes, leader) {
		// A follower with no limit of its own: it deletes what the leader
		// evicts, nothing more.
		if v := dialRaw(t, n.Addr).Do("CONFIG", "GET", "maxmemory"); !strings.Contains(string(v.Raw), "$1\r\n0\r\n") {
			t.Fatalf("follower maxmemory = %s", v)
		}
	}
	val := strings.Repeat("v", value)
	keys := names("k:", 2*room/value)
	for _, k := range keys {
		if v := c.DoRetry("SET", k, val); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("SET %s = %s", k, v)
		}
	}
	pollFor(t, "the leader under maxmemory", 20*time.Second, 20*time.Millisecond, func() error {
		if u := usedMemory(t, c); u > limit {
			return fmt.Errorf("used_memory %d, maxmemory %d", u, limit)
		}
		return nil
	})
	want := present(t, c, keys)
	t.Logf("the leader kept %d of %d keys", len(want), len(keys))
	if evicted, _ := strconv.Atoi(infoOf(t, c, "stats", "evicted_keys")); evicted == 0 || len(want) == len(keys) {
		t.Fatalf("leader: evicted_keys %d, %d of %d keys left", evicted, len(want), len(keys))
	}
	for _, n := range followers(nodes, leader) {
		f := dialRaw(t, n.Addr)
		// The leader may evict again after want was read (used memory is
		// measured at its collections, whose timing a busy machine moves):
		// compare with what it holds now.
		waitFor(t, n.Name+" holding the leader's keys", func() error {
			now := present(t, c, keys)
			if got := present(t, f, keys); !slices.Equal(got, now) {
				return fmt.Errorf("%d keys, leader %d", len(got), len(now))
			}
			return nil
		})
		if v := infoOf(t, f, "stats", "evicted_keys"); v != "0" {
			t.Fatalf("%s evicted %s keys of its own", n.Name, v)
		}
	}
}

// TestEvictionDurable: in durable mode evictions are written to the log
// like any write, so a restart brings back exactly the keys left after
// them.
func TestEvictionDurable(t *testing.T) {
	n := startKVS(t, KVSOptions{Durable: true})
	c := dialRaw(t, n.Addr)
	limit := setMaxmemory(t, c, "allkeys-lru", 8<<20)
	val := strings.Repeat("v", evictValue)
	keys := names("k:", int(4*(8<<20)/evictValue))
	for _, k := range keys {
		if v := c.Do("SET", k, val); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("SET %s = %s", k, v)
		}
	}
	pollFor(t, "used memory under maxmemory", 20*time.Second, 20*time.Millisecond, func() error {
		if u := usedMemory(t, c); u > limit {
			return fmt.Errorf("used_memory %d, maxmemory %d", u, limit)
		}
		return nil
	})
	// Evictions stop once under the limit; without a limit no more come.
	if v := c.Do("CONFIG", "SET", "maxmemory", "0"); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("CONFIG SET maxmemory 0 = %s", v)
	}
	// An eviction proposed just before may still be on its way to disk:
	// wait until evicted_keys counts every key gone.
	var want []string
	pollFor(t, "evicted_keys to count the keys gone", 20*time.Second, 20*time.Millisecond, func() error {
		evicted, _ := strconv.Atoi(infoOf(t, c, "stats", "evicted_keys"))
		want = present(t, c, keys)
		if len(want) != len(keys)-evicted {
			return fmt.Errorf("evicted_keys %d, %d of %d keys left", evicted, len(want), len(keys))
		}
		return nil
	})
	if len(want) == len(keys) || len(want) == 0 {
		t.Fatalf("%d of %d keys left", len(want), len(keys))
	}
	n.Restart()
	if got := present(t, dialRaw(t, n.Addr), keys); !slices.Equal(got, want) {
		t.Fatalf("after a restart %d keys, before it %d", len(got), len(want))
	}
}
