package test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestDatabasesDurableRestart keeps keys in database 3 across restarts of
// a durable node: replayed from the log, then restored from the snapshot
// SAVE compacts the log to, then from that snapshot and the log after it.
func TestDatabasesDurableRestart(t *testing.T) {
	t.Parallel()
	n := newKVS(t, "kvs", KVSOptions{Durable: true})
	n.Start()
	c := dialRaw(t, n.Addr)
	for _, cmd := range [][]string{
		{"SET", "k", "zero"},
		{"SELECT", "3"},
		{"SET", "k", "three"},
		{"HSET", "h", "f", "v"},
		{"SET", "ttl", "x", "EX", "1000"},
		{"SELECT", "5"},
		{"SET", "gone", "x"},
		{"MOVE", "gone", "6"},
		{"SELECT", "7"},
		{"SET", "flushed", "x"},
		{"FLUSHDB"},
	} {
		if v := c.Do(cmd...); v.IsError() {
			t.Fatalf("%q: %s", cmd, v)
		}
	}
	check := func(when string) {
		t.Helper()
		c := dialRaw(t, n.Addr)
		for _, q := range []struct {
			db   string
			cmd  []string
			want string
		}{
			{"0", []string{"GET", "k"}, "zero"},
			{"0", []string{"DBSIZE"}, "1"},
			{"3", []string{"GET", "k"}, "three"},
			{"3", []string{"HGET", "h", "f"}, "v"},
			{"3", []string{"DBSIZE"}, "3"},
			{"5", []string{"DBSIZE"}, "0"},
			{"6", []string{"GET", "gone"}, "x"},
			{"7", []string{"DBSIZE"}, "0"},
		} {
			c.Do("SELECT", q.db)
			if v := c.Do(q.cmd...); v.Str != q.want {
				t.Errorf("%s: db %s %q: %s, want %s", when, q.db, q.cmd, v, q.want)
			}
		}
		c.Do("SELECT", "3")
		if v := c.Do("TTL", "ttl"); v.Str == "" || v.Str[0] == '-' {
			t.Errorf("%s: TTL in db 3: %s", when, v)
		}
		info := c.Do("INFO", "keyspace").Str
		for _, line := range []string{"db0:keys=1,expires=0", "db3:keys=3,expires=1", "db6:keys=1,expires=0"} {
			if !strings.Contains(info, line) {
				t.Errorf("%s: INFO keyspace lacks %s:\n%s", when, line, info)
			}
		}
	}
	check("before restart")
	n.Restart()
	check("after replaying the log")
	if v := dialRaw(t, n.Addr).Do("SAVE"); v.IsError() {
		t.Fatalf("SAVE: %s", v)
	}
	n.Restart()
	check("after restoring the snapshot")
	c = dialRaw(t, n.Addr)
	c.Do("SELECT", "3")
	c.Do("SET", "later", "y")
	n.Restart()
	c = dialRaw(t, n.Addr)
	c.Do("SELECT", "3")
	if v := c.Do("GET", "later"); v.Str != "y" {
		t.Errorf("a write after the snapshot in db 3: %s", v)
	}
}

// TestDatabasesCluster writes in database 2 of a one-group cluster on the
// leader and reads it in database 2 on a follower, and the other way round
// (a follower forwards its writes, with their database, to the leader).
func TestDatabasesCluster(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	waitLevel(t, nodes...)
	follower := followers(nodes, leader)[0]
	ctx := testCtx(t)
	lc := newClient(t, leader, func(o *redis.Options) { o.DB = 2 })
	if err := retryLeaderChange(t, func() error { return lc.Set(ctx, "k", "in-two", 0).Err() }); err != nil {
		t.Fatal(err)
	}
	fc := newClient(t, follower, func(o *redis.Options) { o.DB = 2 })
	f0 := newClient(t, follower, nil)
	waitFor(t, "the write of db 2 on the follower", func() error {
		if v, err := fc.Get(ctx, "k").Result(); err != nil || v != "in-two" {
			return fmt.Errorf("GET k in db 2 on %s: %q %v", follower.Name, v, err)
		}
		return nil
	})
	if v, err := f0.Get(ctx, "k").Result(); err != redis.Nil {
		t.Errorf("GET k in db 0 on the follower: %q %v", v, err)
	}
	if err := fc.Set(ctx, "f", "from-follower", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := fc.Move(ctx, "f", 4).Result(); err != nil || !n {
		t.Fatalf("MOVE through the follower: %v %v", n, err)
	}
	l4 := newClient(t, leader, func(o *redis.Options) { o.DB = 4 })
	if v, err := l4.Get(ctx, "f").Result(); err != nil || v != "from-follower" {
		t.Errorf("GET f in db 4 on the leader: %q %v", v, err)
	}
	if n, err := lc.DBSize(ctx).Result(); err != nil || n != 1 {
		t.Errorf("DBSIZE of db 2 on the leader: %d %v", n, err)
	}
}

// TestDatabasesShardedRefused checks that a cluster of several groups has
// database 0 alone and refuses the others with Redis Cluster's errors.
func TestDatabasesShardedRefused(t *testing.T) {
	t.Parallel()
	n := startShardedNode(t, 3)
	c := dialRaw(t, n.Addr)
	for _, q := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"SELECT", "0"}, "+OK\r\n"},
		{[]string{"SELECT", "1"}, "-ERR SELECT is not allowed in cluster mode\r\n"},
		{[]string{"SELECT", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"SET", "a", "1"}, "+OK\r\n"},
		{[]string{"MOVE", "a", "1"}, "-ERR MOVE is not allowed in cluster mode\r\n"},
		{[]string{"SWAPDB", "0", "1"}, "-ERR SWAPDB is not allowed in cluster mode\r\n"},
		{[]string{"COPY", "a", "{a}b", "DB", "1"}, "-ERR Copying to another database is not allowed in cluster mode\r\n"},
		{[]string{"COPY", "a", "{a}b", "DB", "0"}, ":1\r\n"},
		{[]string{"EVAL", "return redis.call('SELECT', '1')", "0"}, "-ERR SELECT is not allowed in cluster mode script: 2f8ed3e1e6a2ad5a0e2f0f0d0da6dd0d0e8c0e8d, on @user_script:1.\r\n"},
		{[]string{"FLUSHDB"}, "+OK\r\n"},
		{[]string{"DBSIZE"}, ":0\r\n"},
	} {
		v := c.Do(q.cmd...)
		if q.cmd[0] == "EVAL" {
			if !strings.HasPrefix(string(v.Raw), "-ERR SELECT is not allowed in cluster mode") {
				t.Errorf("%q: %q", q.cmd, v.Raw)
			}
			continue
		}
		if string(v.Raw) != q.want {
			t.Errorf("%q: %q, want %q", q.cmd, v.Raw, q.want)
		}
	}
}

// TestDatabasesClusterSnapshot has a follower that was down catch up from
// the leader's snapshot, which must carry the databases other than 0.
func TestDatabasesClusterSnapshot(t *testing.T) {
	t.Parallel()
	small := []string{"--raft-snapshot-entries", "64", "--raft-trailing-logs", "16", "--raft-snapshot-interval", "100ms"}
	nodes := startCluster(t, 3, small...)
	leader := waitLeader(t, nodes)
	waitLevel(t, nodes...)
	victim := followers(nodes, leader)[0]
	victim.Stop()
	ctx := testCtx(t)
	c3 := newClient(t, leader, func(o *redis.Options) { o.DB = 3 })
	// One at a time, each its own entry: more than raft keeps cached in
	// front of its log, so the follower can catch up from a snapshot only.
	for i := range 600 {
		if err := retryLeaderChange(t, func() error { return c3.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err() }); err != nil {
			t.Fatal(err)
		}
	}
	victim.Start()
	v3 := newClient(t, victim, func(o *redis.Options) { o.DB = 3 })
	waitFor(t, "database 3 on the follower", func() error {
		if v, err := v3.Get(ctx, "k599").Result(); err != nil || v != "599" {
			return fmt.Errorf("GET k599 in db 3: %q %v", v, err)
		}
		if n, err := v3.DBSize(ctx).Result(); err != nil || n != 600 {
			return fmt.Errorf("DBSIZE of db 3: %d %v", n, err)
		}
		return nil
	})
	if n, err := newClient(t, victim, nil).DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE of db 0 on the follower: %d %v", n, err)
	}
}
