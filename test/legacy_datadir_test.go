package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestLegacyDataDir starts today's kvs on data dirs written by kvs before
// the op table (testdata/legacy-v1: log entry version 1, snapshot version
// 2, keys in the old order), durable and single-node cluster, and checks
// that every key written then is there with its value and deadline; then
// that the node goes on writing (in today's formats) and restarts again.
func TestLegacyDataDir(t *testing.T) {
	for _, mode := range []string{"durable", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			// The cluster's node is n1, the id its raft configuration
			// holds; the harness finds the leader by name.
			n := newKVS(t, map[string]string{"durable": "kvs", "cluster": "n1"}[mode], KVSOptions{Durable: true})
			if err := os.CopyFS(n.DataDir(), os.DirFS(filepath.Join("testdata", "legacy-v1", mode))); err != nil {
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
			checkLegacyData(t, n, "on first start")
			ctx := context.Background()
			c := newClient(t, n, nil)
			if err := retryLeaderChange(t, func() error { return c.Set(ctx, "after", "upgrade", 0).Err() }); err != nil {
				t.Fatal(err)
			}
			n.Restart()
			if mode == "cluster" {
				waitLeader(t, []*Node{n})
			}
			checkLegacyData(t, n, "after a restart")
			c = newClient(t, n, nil)
			if v, err := c.Get(ctx, "after").Result(); err != nil || v != "upgrade" {
				t.Fatalf("write after the upgrade: %q, %v", v, err)
			}
		})
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
