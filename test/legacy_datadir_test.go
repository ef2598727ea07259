package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestLegacyDataDir starts today's kvs on data dirs written by older kvs,
// durable and single-node cluster, and checks that every key written then
// is there with its value and deadline; then that the node goes on writing
// (in today's formats) and restarts again:
//
//   - testdata/legacy-v1, before the op table: log entry version 1,
//     snapshot version 2, keys in the old order, strings only;
//   - testdata/legacy-v2, before replication groups: one store per node,
//     every type, an ACL user and a function library.
func TestLegacyDataDir(t *testing.T) {
	for _, tc := range []struct {
		version string
		check   func(t *testing.T, n *Node, when string)
	}{
		{"legacy-v1", checkLegacyData},
		{"legacy-v2", checkLegacyV2Data},
	} {
		for _, mode := range []string{"durable", "cluster"} {
			t.Run(tc.version+"/"+mode, func(t *testing.T) {
				t.Parallel()
				testLegacyDataDir(t, tc.version, mode, tc.check)
			})
		}
	}
}

func testLegacyDataDir(t *testing.T, version, mode string, check func(t *testing.T, n *Node, when string)) {
	n := newKVS(t, map[string]string{"durable": "kvs", "cluster": "n1"}[mode], KVSOptions{Durable: true})
	if err := os.CopyFS(n.DataDir(), os.DirFS(filepath.Join("testdata", version, mode))); err != nil {
		t.Fatal(err)
	}
	if mode == "cluster" {
		// The raft configuration names node n1; the raft
		// address may differ from the one it was written with.
		raftAddr := freeAddr(t)
		args := n.Args
		n.Args = func(n *Node) []string {
			return append(args(n), "--node-id", "n1", "--raft-addr", raftAddr)
		}
	}
	n.Start()
	if mode == "cluster" {
		waitLeader(t, []*Node{n})
	}
	check(t, n, "on first start")
	ctx := context.Background()
	c := newClient(t, n, nil)
	if err := retryLeaderChange(t, func() error { return c.Set(ctx, "after", "upgrade", 0).Err() }); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	if mode == "cluster" {
		waitLeader(t, []*Node{n})
	}
	check(t, n, "after a restart")
	c = newClient(t, n, nil)
	if v, err := c.Get(ctx, "after").Result(); err != nil || v != "upgrade" {
		t.Fatalf("write after the upgrade: %q, %v", v, err)
	}
}

// checkLegacyData checks what testdata/legacy-v1/load.sh wrote.
func checkLegacyData(t *testing.T, n *Node, when string) {
	t.Helper()
	ctx := context.Background()
	c := newClient(t, n, nil)
	want := map[string]string{
		"m:a": "1", "m:b": "2", "m:c": "3", "counter": "15", "float": "0.3",
		"app": "hello, world", "rng": "\x00\x00\x00abc", "ttl:abs": "v", "ttl:px": "v",
		"ren:dst": "moved", "{tag}a": "1", "{tag}b": "2", "": "empty-key", "bin": "a\tb",
	}
	for i := range 200 {
		want[fmt.Sprintf("str:%d", i)] = fmt.Sprintf("value-%d", i)
	}
	for k, v := range want {
		got, err := c.Get(ctx, k).Result()
		if err != nil || got != v {
			t.Fatalf("%s: GET %q = %q, %v; want %q", when, k, got, err, v)
		}
	}
	for _, k := range []string{"gone", "ren:src"} {
		if n, err := c.Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Fatalf("%s: deleted key %q exists (%d, %v)", when, k, n, err)
		}
	}
	deadlines := map[string]int64{"ttl:abs": 4102444800000, "ttl:px": 4102444800123}
	for k, at := range deadlines {
		if got, err := c.Do(ctx, "PEXPIRETIME", k).Int64(); err != nil || got != at {
			t.Fatalf("%s: PEXPIRETIME %q = %d, %v; want %d", when, k, got, err, at)
		}
	}
	// Every key is found by a full SCAN, in today's order.
	seen := map[string]bool{}
	iter := c.Scan(ctx, 0, "", 7).Iterator()
	for iter.Next(ctx) {
		seen[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if !seen[k] {
			t.Fatalf("%s: SCAN did not return %q (%d keys seen)", when, k, len(seen))
		}
	}
	if size, err := c.DBSize(ctx).Result(); err != nil || size < int64(len(want)) {
		t.Fatalf("%s: DBSIZE %d, %v; want at least %d", when, size, err, len(want))
	}
}

// checkLegacyV2Data checks what testdata/legacy-v2/load.sh wrote: legacy-v1's
// strings and, after them, every other type, the ACL user and the function.
func checkLegacyV2Data(t *testing.T, n *Node, when string) {
	t.Helper()
	checkLegacyData(t, n, when)
	ctx := context.Background()
	c := newClient(t, n, nil)
	seq := func(prefix string, from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, prefix+strconv.Itoa(i))
		}
		return out
	}
	same := func(what string, got []string, err error, want []string) {
		t.Helper()
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: %s = %q, %v; want %q", when, what, got, err, want)
		}
	}
	got, err := c.LRange(ctx, "list", 0, -1).Result()
	same("LRANGE list", got, err, []string{"z", "a", "b", "c"})
	got, err = c.LRange(ctx, "biglist", 0, -1).Result()
	same("LRANGE biglist", got, err, seq("", 1, 300))
	h, err := c.HGetAll(ctx, "hash").Result()
	if err != nil || len(h) != 2 || h["f1"] != "v1" || h["f2"] != "v2" {
		t.Fatalf("%s: HGETALL hash = %v, %v", when, h, err)
	}
	h, err = c.HGetAll(ctx, "bighash").Result()
	if err != nil || len(h) != 600 || h["f1"] != "v1" || h["f600"] != "v600" {
		t.Fatalf("%s: HGETALL bighash has %d fields, %v", when, len(h), err)
	}
	if at, err := c.Do(ctx, "PEXPIRETIME", "hash").Int64(); err != nil || at != 4102444800456 {
		t.Fatalf("%s: PEXPIRETIME hash = %d, %v", when, at, err)
	}
	sorted := func(key string) ([]string, error) {
		m, err := c.SMembers(ctx, key).Result()
		slices.Sort(m)
		return m, err
	}
	got, err = sorted("set")
	same("SMEMBERS set", got, err, []string{"a", "b", "c"})
	got, err = sorted("intset")
	same("SMEMBERS intset", got, err, []string{"1", "2", "3"})
	if n, err := c.SCard(ctx, "bigset").Result(); err != nil || n != 600 {
		t.Fatalf("%s: SCARD bigset = %d, %v", when, n, err)
	}
	z, err := c.ZRangeWithScores(ctx, "zset", 0, -1).Result()
	if err != nil || len(z) != 3 || z[0].Member != "c" || z[0].Score != -3 || z[1].Member != "a" || z[2].Score != 2.5 {
		t.Fatalf("%s: ZRANGE zset WITHSCORES = %v, %v", when, z, err)
	}
	got, err = c.ZRange(ctx, "bigzset", 0, -1).Result()
	same("ZRANGE bigzset", got, err, seq("m", 1, 200))
	if b, err := c.GetBit(ctx, "bits", 7).Result(); err != nil || b != 1 {
		t.Fatalf("%s: GETBIT bits 7 = %d, %v", when, b, err)
	}
	if v, err := c.Do(ctx, "FCALL", "hello", 0).Text(); err != nil || v != "hi" {
		t.Fatalf("%s: FCALL hello = %q, %v", when, v, err)
	}
	alice := newClient(t, n, func(o *redis.Options) { o.Username, o.Password = "alice", "secret" })
	if err := alice.Set(ctx, "app:x", "1", 0).Err(); err != nil {
		t.Fatalf("%s: alice's SET app:x: %v", when, err)
	}
	if err := alice.Set(ctx, "other", "1", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("%s: alice's SET other = %v, want NOPERM", when, err)
	}
}
