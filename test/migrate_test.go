package test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// migrateScenario runs MIGRATE from src to dst through its cases (one
// key, KEYS with a missing one, TTL, NOKEY, BUSYKEY passed through,
// COPY and REPLACE, option errors, an unreachable target, AUTH and AUTH2
// against a target with a password) and returns every reply, src's and
// dst's, as text. dead is an address nothing listens on.
func migrateScenario(t *testing.T, src, dst *Node, dead string) []string {
	t.Helper()
	ctx := testCtx(t)
	s := redis.NewClient(&redis.Options{Addr: src.Addr, Protocol: 2, MaxRetries: -1})
	defer s.Close()
	dc := redis.NewClient(&redis.Options{Addr: dst.Addr, Protocol: 2, MaxRetries: -1, PoolSize: 1})
	defer dc.Close()
	d := dc.Conn() // one connection: it stays logged in when dst gets a password
	defer d.Close()
	host, port, _ := net.SplitHostPort(dst.Addr)
	deadHost, deadPort, _ := net.SplitHostPort(dead)
	var out []string
	do := func(c interface {
		Do(context.Context, ...any) *redis.Cmd
	}, args ...any) {
		v, err := c.Do(ctx, args...).Result()
		// The targets' ports differ from run to run.
		line := strings.NewReplacer(dst.Addr, "DST", host+" "+port+" ", "DST ", dead, "DEAD", deadHost+" "+deadPort+" ", "DEAD ").
			Replace(fmt.Sprintf("%v -> ", args))
		if err != nil {
			out = append(out, line+"error "+err.Error())
			return
		}
		out = append(out, line+fmt.Sprint(v))
	}
	for _, c := range []*redis.Client{s} {
		if err := c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	do(s, "SET", "a", "1")
	do(s, "SET", "b", "2", "PX", "100000")
	do(s, "RPUSH", "l", "x", "y", "z")
	do(s, "HSET", "h", "f", "v")
	do(s, "MIGRATE", host, port, "a", "0", "5000")
	do(d, "GET", "a")
	do(s, "EXISTS", "a")
	do(s, "MIGRATE", host, port, "", "0", "5000", "KEYS", "b", "l", "nosuch")
	do(s, "EXISTS", "b", "l")
	do(d, "LRANGE", "l", "0", "-1")
	pttl, err := d.PTTL(ctx, "b").Result()
	out = append(out, fmt.Sprintf("b's TTL kept: %v %v", err, pttl.Milliseconds() > 50000 && pttl.Milliseconds() <= 100000))
	do(s, "MIGRATE", host, port, "nosuch", "0", "5000")
	do(s, "MIGRATE", host, port, "", "0", "5000", "KEYS", "nosuch", "nosuch2")
	do(s, "SET", "a", "2")
	do(s, "MIGRATE", host, port, "a", "0", "5000")
	do(s, "GET", "a")
	do(s, "MIGRATE", host, port, "a", "0", "5000", "COPY", "REPLACE")
	do(s, "GET", "a")
	do(d, "GET", "a")
	do(s, "MIGRATE", host, port, "a", "0", "5000", "KEYS", "x")
	do(s, "MIGRATE", host, port, "a", "0", "5000", "AUTH")
	do(s, "MIGRATE", host, port, "a", "0", "5000", "AUTH2", "u")
	do(s, "MIGRATE", host, port, "a", "0", "5000", "NOSUCH")
	do(s, "MIGRATE", host, port, "a", "0", "x")
	do(s, "MIGRATE", host, port, "a", "x", "5000")
	do(s, "MIGRATE", deadHost, deadPort, "a", "0", "1000")
	do(s, "GET", "a")

	// Databases: the keys of the source connection's database go to
	// destination-db (the cached connection to the target gets a SELECT
	// when its database differs), and leave the source's database alone.
	s2 := redis.NewClient(&redis.Options{Addr: src.Addr, Protocol: 2, MaxRetries: -1, DB: 2})
	defer s2.Close()
	do(s2, "SET", "a", "in db 2")
	do(s2, "SET", "d", "db2-d", "PX", "100000")
	do(s2, "MIGRATE", host, port, "", "3", "5000", "KEYS", "a", "d")
	do(s2, "EXISTS", "a", "d")
	do(s, "GET", "a")
	do(d, "SELECT", "3")
	do(d, "MGET", "a", "d")
	pttl, err = d.PTTL(ctx, "d").Result()
	out = append(out, fmt.Sprintf("d's TTL kept: %v %v", err, pttl.Milliseconds() > 50000 && pttl.Milliseconds() <= 100000))
	do(d, "SELECT", "0")
	do(d, "GET", "d")
	do(s2, "SET", "e", "db2-e")
	do(s2, "MIGRATE", host, port, "e", "3", "5000", "COPY")
	do(s2, "MIGRATE", host, port, "e", "0", "5000")
	do(s2, "EXISTS", "e")
	do(d, "GET", "e")
	do(s2, "SET", "f", "db2-f")
	do(s2, "MIGRATE", host, port, "f", "99", "5000")
	do(s2, "MIGRATE", host, port, "f", "-1", "5000")
	do(s2, "EXISTS", "f")
	do(s2, "MIGRATE", host, port, "f", "3", "5000")
	do(d, "SELECT", "3")
	do(d, "MGET", "e", "f")
	do(d, "SELECT", "0")

	do(d, "CONFIG", "SET", "requirepass", "pw")
	do(d, "AUTH", "pw")
	do(s, "MIGRATE", host, port, "h", "0", "5000", "AUTH", "bad")
	do(s, "EXISTS", "h")
	do(s, "MIGRATE", host, port, "h", "0", "5000", "AUTH", "pw")
	do(d, "HGETALL", "h")
	do(s, "SET", "c", "3")
	do(s, "MIGRATE", host, port, "", "0", "5000", "REPLACE", "AUTH2", "default", "pw", "KEYS", "c", "a")
	do(s, "EXISTS", "a", "c")
	do(d, "MGET", "a", "c")
	do(d, "CONFIG", "SET", "requirepass", "")
	return out
}

// TestMigrate: MIGRATE from kvs answers as from redis-server, to a
// redis-server and to kvs, and redis-server's MIGRATE to kvs (AUTH,
// AUTH2, SELECT 0, pipelined RESTOREs) answers as to a redis-server.
func TestMigrate(t *testing.T) {
	t.Parallel()
	rsrc := startRedis(t)
	rdst := newRedis(t, "redis-dst")
	rdst.Start()
	k := startKVS(t, KVSOptions{})
	kdst := newKVS(t, "kvs-dst", KVSOptions{Durable: true})
	kdst.Start()
	dead := freeAddr(t)

	want := migrateScenario(t, rsrc, rdst, dead)
	for _, tc := range []struct {
		name     string
		src, dst *Node
	}{
		{"kvs to redis", k, rdst},
		{"redis to kvs", rsrc, kdst},
		{"kvs to kvs", k, kdst},
	} {
		got := migrateScenario(t, tc.src, tc.dst, dead)
		if len(got) != len(want) {
			t.Fatalf("%s: %d replies; want %d", tc.name, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: %s\n  want %s", tc.name, got[i], want[i])
			}
		}
	}

	ctx := testCtx(t)
	c := redis.NewClient(&redis.Options{Addr: k.Addr})
	defer c.Close()
	// RESTORE-ASKING, what a Redis Cluster node's MIGRATE sends, is
	// RESTORE.
	r := redis.NewClient(&redis.Options{Addr: rsrc.Addr})
	defer r.Close()
	r.RPush(ctx, "asked", "a", "b")
	payload, err := r.Dump(ctx, "asked").Result()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.Do(ctx, "RESTORE-ASKING", "asked", "0", payload).Result(); err != nil || v != "OK" {
		t.Fatalf("RESTORE-ASKING: %v, %v", v, err)
	}
	if err := c.Do(ctx, "RESTORE-ASKING", "asked", "0", payload).Err(); err == nil || err.Error() != "BUSYKEY Target key name already exists." {
		t.Fatalf("RESTORE-ASKING of an existing key: %v; want BUSYKEY", err)
	}
	if v, err := c.LRange(ctx, "asked", 0, -1).Result(); err != nil || fmt.Sprint(v) != "[a b]" {
		t.Fatalf("after RESTORE-ASKING: %v, %v", v, err)
	}
	// The connection to the target is cached, and closed once unused
	// for 10 seconds (Redis's INFO field).
	info, err := c.Info(ctx, "stats").Result()
	if err != nil || !strings.Contains(info, "migrate_cached_sockets:") {
		t.Fatalf("INFO stats: %v, %v; want migrate_cached_sockets", info, err)
	}
	if strings.Contains(info, "migrate_cached_sockets:0\r") {
		t.Fatalf("INFO stats after MIGRATEs: %q; want a cached connection", info)
	}
}

// TestMigrateSharded: on a kvs node of several groups MIGRATE is routed
// by its keys as Redis Cluster routes it: keys of different slots are
// CROSSSLOT, as from a redis-server with cluster-enabled; keys of one
// slot move (sent as RESTORE-ASKING) and leave their group through its
// log.
func TestMigrateSharded(t *testing.T) {
	t.Parallel()
	rc := startRedisCluster(t)
	n := startShardedNode(t, 3)
	dst := startRedis(t)
	host, port, _ := net.SplitHostPort(dst.Addr)
	ctx := testCtx(t)
	for _, node := range []*Node{rc, n} {
		c := redis.NewClient(&redis.Options{Addr: node.Addr})
		defer c.Close()
		for _, k := range []string{"a", "b", "{t}a", "{t}b"} {
			if err := c.Set(ctx, k, "v"+k, 0).Err(); err != nil {
				t.Fatalf("%s: SET %s: %v", node.Name, k, err)
			}
		}
		err := c.Do(ctx, "MIGRATE", host, port, "", "0", "5000", "KEYS", "a", "b").Err()
		if err == nil || err.Error() != "CROSSSLOT Keys in request don't hash to the same slot" {
			t.Fatalf("%s: MIGRATE of keys of two slots: %v; want CROSSSLOT", node.Name, err)
		}
		if v, err := c.Do(ctx, "MIGRATE", host, port, "", "0", "5000", "REPLACE", "KEYS", "{t}a", "{t}b").Result(); err != nil || v != "OK" {
			t.Fatalf("%s: MIGRATE of keys of one slot: %v, %v; want OK", node.Name, v, err)
		}
		if v, err := c.Exists(ctx, "{t}a", "{t}b").Result(); err != nil || v != 0 {
			t.Fatalf("%s: EXISTS after MIGRATE: %v, %v; want 0", node.Name, v, err)
		}
	}
	d := redis.NewClient(&redis.Options{Addr: dst.Addr})
	defer d.Close()
	if v, err := d.MGet(ctx, "{t}a", "{t}b").Result(); err != nil || fmt.Sprint(v) != "[v{t}a v{t}b]" {
		t.Fatalf("target's keys: %v, %v", v, err)
	}
}
