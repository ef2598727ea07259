package test

import (
	"strconv"
	"strings"
	"testing"
)

// dumpFixture fills a server with a key of every type in each encoding
// redis-server 7.0 gives it (small and large), the keys named for it.
func dumpFixture(c *rawConn) []string {
	long := strings.Repeat("v", 100)
	c.Do("SET", "d:str", "hello")
	c.Do("SET", "d:int", "-123456789")
	c.Do("SET", "d:raw", strings.Repeat("abc", 40))
	c.Do("RPUSH", "d:list", "a", "1", "-70000", long)
	c.Do("SADD", "d:intset", "1", "-5", "99999999999")
	c.Do("SADD", "d:set", "a", "b", "3")
	c.Do("ZADD", "d:zset", "1.5", "a", "-2", "b", "inf", "c")
	c.Do("ZADD", "d:zsetlong", "1", long, "2", "m")
	c.Do("HSET", "d:hash", "f", "v")
	c.Do("HSET", "d:hashlong", "f", long)
	big := func(cmd, key string, args func(i int) []string) {
		for i := 0; i < 700; i += 100 {
			a := []string{cmd, key}
			for j := i; j < i+100; j++ {
				a = append(a, args(j)...)
			}
			c.Do(a...)
		}
	}
	big("RPUSH", "d:biglist", func(i int) []string { return []string{"element-" + strconv.Itoa(i) + "-" + long} })
	big("SADD", "d:bigset", func(i int) []string { return []string{"m" + strconv.Itoa(i)} })
	big("ZADD", "d:bigzset", func(i int) []string { return []string{strconv.Itoa(i) + ".5", "m" + strconv.Itoa(i)} })
	big("HSET", "d:bighash", func(i int) []string { return []string{"f" + strconv.Itoa(i), "v" + strconv.Itoa(i)} })
	return []string{"d:str", "d:int", "d:raw", "d:list", "d:intset", "d:set", "d:zset", "d:zsetlong", "d:hash",
		"d:hashlong", "d:biglist", "d:bigset", "d:bigzset", "d:bighash"}
}

// sameValue fails t unless key holds the same type, encoding and value on
// both connections (the differential test's renderings of each type).
func sameValue(t *testing.T, from, to *rawConn, key, toKey string) {
	t.Helper()
	typ := from.Do("TYPE", key).Str
	if got := to.Do("TYPE", toKey).Str; got != typ {
		t.Errorf("%s: type %s, want %s", key, got, typ)
		return
	}
	if a, b := from.Do("OBJECT", "ENCODING", key).Str, to.Do("OBJECT", "ENCODING", toKey).Str; a != b {
		t.Errorf("%s: encoding %s, want %s", key, b, a)
	}
	if typ == "string" {
		if a, b := from.Do("GET", key).Str, to.Do("GET", toKey).Str; a != b {
			t.Errorf("%s: value %.100q, want %.100q", key, b, a)
		}
		return
	}
	dt := diffTypeByName(typ)
	if dt == nil {
		t.Fatalf("%s: no rendering of %s", key, typ)
	}
	if a, b := dt.dump(from, key), dt.dump(to, toKey); a != b {
		t.Errorf("%s: value differs:\n got %.200s\nwant %.200s", key, b, a)
	}
}

// TestDumpRestoreWithRedis moves every type both ways between
// redis-server and kvs (in memory, durable and cluster modes) with DUMP
// and RESTORE, checking values, encodings and TTLs.
func TestDumpRestoreWithRedis(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	for _, mode := range []string{"memory", "durable", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			ref := dialRaw(t, startRedis(t).Addr)
			var node *Node
			switch mode {
			case "memory":
				node = startKVS(t, KVSOptions{})
			case "durable":
				node = startKVS(t, KVSOptions{Durable: true, Fsync: "no"})
			default:
				nodes := startCluster(t, 3) // it waits for the cluster's level: RESTORE is of level 3
				node = waitLeader(t, nodes)
			}
			kvs := dialRaw(t, node.Addr)
			keys := dumpFixture(ref)
			for _, key := range keys {
				// redis-server -> kvs, with a relative TTL.
				p := ref.Do("DUMP", key)
				if r := kvs.Do("RESTORE", key, "100000", p.Str); r.Str != "OK" {
					t.Fatalf("%s: RESTORE into kvs: %v", key, r)
				}
				sameValue(t, ref, kvs, key, key)
				if ttl, _ := strconv.Atoi(kvs.Do("PTTL", key).Str); ttl <= 90000 || ttl > 100000 {
					t.Errorf("%s: PTTL %d after RESTORE 100000", key, ttl)
				}
				// kvs -> redis-server, with an absolute deadline.
				q := kvs.Do("DUMP", key)
				if q.Kind != '$' || q.Null {
					t.Fatalf("%s: DUMP from kvs: %v", key, q)
				}
				if r := ref.Do("RESTORE", key+":back", "4102444800000", q.Str, "ABSTTL"); r.Str != "OK" {
					t.Fatalf("%s: RESTORE into redis-server: %v", key, r)
				}
				sameValue(t, kvs, ref, key, key+":back")
				if at := ref.Do("PEXPIRETIME", key+":back").Str; at != "4102444800000" {
					t.Errorf("%s: PEXPIRETIME %s", key, at)
				}
				if typ := ref.Do("TYPE", key).Str; typ != "hash" && !(typ == "set" && ref.Do("OBJECT", "ENCODING", key).Str == "hashtable") {
					// Redis's order is deterministic here: the same bytes.
					if q.Str != p.Str {
						t.Errorf("%s: kvs's DUMP is not redis-server's", key)
					}
				}
			}
			if mode == "durable" {
				node.Restart()
				kvs = dialRaw(t, node.Addr)
				for _, key := range keys {
					sameValue(t, ref, kvs, key, key)
				}
			}
		})
	}
}

// TestRestoreIdleAndFreq: RESTORE's IDLETIME under an LRU policy and FREQ
// under an LFU one read back from OBJECT as on redis-server (Redis's own
// tests of them need a server the suite started: needs:config-maxmemory).
func TestRestoreIdleAndFreq(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	for _, n := range []*Node{startRedis(t), startKVS(t, KVSOptions{})} {
		c := dialRaw(t, n.Addr)
		c.Do("SET", "foo", "bar")
		p := c.Do("DUMP", "foo").Str
		c.Do("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
		if r := c.Do("RESTORE", "idle", "0", p, "IDLETIME", "1000"); r.Str != "OK" {
			t.Fatalf("%s: RESTORE IDLETIME: %v", n.Name, r)
		}
		if idle, _ := strconv.Atoi(c.Do("OBJECT", "IDLETIME", "idle").Str); idle < 1000 || idle > 1010 {
			t.Errorf("%s: OBJECT IDLETIME %d after RESTORE IDLETIME 1000", n.Name, idle)
		}
		c.Do("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
		if r := c.Do("RESTORE", "freq", "0", p, "FREQ", "100"); r.Str != "OK" {
			t.Fatalf("%s: RESTORE FREQ: %v", n.Name, r)
		}
		if freq := c.Do("OBJECT", "FREQ", "freq").Str; freq != "100" {
			t.Errorf("%s: OBJECT FREQ %s after RESTORE FREQ 100", n.Name, freq)
		}
		// IDLETIME under an LFU policy is accepted and changes nothing.
		if r := c.Do("RESTORE", "idle2", "0", p, "IDLETIME", "1000"); r.Str != "OK" {
			t.Fatalf("%s: RESTORE IDLETIME under LFU: %v", n.Name, r)
		}
		if freq := c.Do("OBJECT", "FREQ", "idle2").Str; freq != "5" {
			t.Errorf("%s: OBJECT FREQ %s of a key restored with IDLETIME under LFU", n.Name, freq)
		}
		c.Do("CONFIG", "SET", "maxmemory-policy", "noeviction")
	}
}
