package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestBackupShardedSpread: four nodes, four groups of two replicas each,
// so that no node holds every group. kvs backup of one node takes the
// groups it lacks from the nodes that hold them and writes one backup of
// the whole cluster; restored as a one-node cluster, it holds every key
// written, with its value, and no other. With both replicas of a group
// it lacks down, kvs backup fails naming that group and leaves the FILE
// it was given as it was.
func TestBackupShardedSpread(t *testing.T) {
	t.Parallel()
	const groups, r, keys = 4, 2, 400
	nodes := startCluster(t, 4, "--groups", "4", "--replicas", "2")
	waitPlaced(t, nodes, groups, r)
	ctx := testCtx(t)
	setThroughClusterClient(t, ctx, nodes, "bk", keys)

	from := nodes[0]
	st, err := kvsStatus(from.Addr)
	if err != nil {
		t.Fatal(err)
	}
	var lacks []string // the groups from holds no replica of
	for _, g := range st.groups {
		if g[1] == "none" {
			lacks = append(lacks, g[0])
		}
	}
	if len(lacks) == 0 {
		t.Fatalf("%s holds every group: %v", from.Name, st.groups)
	}
	dir := testDir(t)
	file := filepath.Join(dir, "spread.kvsb")
	out, code := runKVS(t, clusterWait, "backup", from.Addr, file)
	if code != 0 {
		t.Fatalf("kvs backup %s: exit %d\n%s", from.Addr, code, out)
	}
	t.Logf("kvs backup: %s", strings.TrimSpace(out))
	if want := "groups " + strings.Join(lacks, ", ") + " held elsewhere were taken from other nodes"; !strings.Contains(out, want) || strings.Contains(out, "warning") {
		t.Errorf("kvs backup's report lacks %q, or warns:\n%s", want, out)
	}

	checkRestoredCluster(t, ctx, file, groups, "bk", keys)

	// Both replicas of a group from lacks down: no node gives it.
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var killed []string
	for i, gm := range st.groupMembers {
		if st.groups[i][0] != lacks[0] {
			continue
		}
		for _, m := range gm {
			for _, n := range nodes {
				if n.Name == m[0] {
					n.Kill()
					killed = append(killed, n.Name)
				}
			}
		}
	}
	if len(killed) != r {
		t.Fatalf("killed %v for group %s, whose replicas are %v", killed, lacks[0], st.groupMembers)
	}
	out, code = runKVS(t, clusterWait, "backup", from.Addr, file)
	t.Logf("kvs backup with group %s's replicas down: %s", lacks[0], strings.TrimSpace(out))
	if want := "group " + lacks[0] + ": no node holding it gave a backup of it"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("kvs backup with group %s's replicas %v down: exit %d, %q; want exit 1 and %q", lacks[0], killed, code, out, want)
	}
	if now, err := os.ReadFile(file); err != nil || !bytes.Equal(now, good) {
		t.Errorf("%s changed by a failed backup (%v)", file, err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "spread.kvsb.") {
			t.Errorf("a failed backup left %s", e.Name())
		}
	}
}

// TestBackupShardedTLS: kvs backup --tls of a cluster whose nodes talk
// mutual TLS (--tls-cluster yes) and where no node holds every group
// takes each group it lacks over TLS from the node that holds it, as
// KVS.STATUS gives its TLS address.
func TestBackupShardedTLS(t *testing.T) {
	t.Parallel()
	const groups, keys = 3, 90
	e := newTLSEnv(t)
	nodes := startTLSCluster(t, e, 3, "--groups", "3", "--replicas", "2")
	waitPlaced(t, nodes, groups, 2)
	ctx := testCtx(t)
	// A plain client of n1 has its writes forwarded to each group's leader.
	c := redis.NewClient(&redis.Options{Addr: nodes[0].Addr, MaxRetries: -1})
	defer c.Close()
	for i := range keys {
		k := fmt.Sprintf("bt:%d", i)
		if err := retryLeaderChange(t, func() error { return c.Set(ctx, k, i, 0).Err() }); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	file := filepath.Join(testDir(t), "tls.kvsb")
	tlsArgs := []string{"--tls", "--cacert", e.ca.file, "--cert", e.client.cert, "--key", e.client.key}
	out, code := runKVS(t, clusterWait, append(append([]string{"backup"}, tlsArgs...), nodes[0].TLSAddr, file)...)
	if code != 0 || !strings.Contains(out, "held elsewhere were taken from other nodes") {
		t.Fatalf("kvs backup --tls %s: exit %d\n%s", nodes[0].TLSAddr, code, out)
	}
	checkRestoredCluster(t, ctx, file, groups, "bt", keys)
	// Without --tls the TLS port is not spoken to.
	if out, code := runKVS(t, clusterWait, "backup", "--timeout", "2s", nodes[0].TLSAddr, file+".plain"); code == 0 {
		t.Errorf("kvs backup without --tls of a TLS port: exit 0\n%s", out)
	}
}

// checkRestoredCluster restores file, a backup of a cluster of groups data
// groups, into a fresh one-node cluster, and checks that it holds the
// keys prefix:0 to prefix:keys-1, each with its number, and no other.
func checkRestoredCluster(t *testing.T, ctx context.Context, file string, groups int, prefix string, keys int) {
	t.Helper()
	raftAddr := freeAddr(t)
	r1 := newKVS(t, "r1", KVSOptions{Durable: true, Extra: []string{"--node-id", "r1", "--raft-addr", raftAddr}})
	out, code := runKVS(t, clusterWait, "restore", file, "--data-dir", r1.DataDir(), "--node-id", "r1", "--raft-addr", raftAddr)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("restored %d keys", keys)) {
		t.Fatalf("kvs restore: exit %d\n%s", code, out)
	}
	r1.Start()
	waitLeadsEvery(t, r1, groups)
	c := redis.NewClient(&redis.Options{Addr: r1.Addr, MaxRetries: -1})
	defer c.Close()
	if n, err := c.DBSize(ctx).Result(); err != nil || n != int64(keys) {
		t.Errorf("DBSIZE on the restored node, which leads every group: %d, %v; want %d", n, err, keys)
	}
	pipe := c.Pipeline()
	gets := make([]*redis.StringCmd, keys)
	for i := range keys {
		gets[i] = pipe.Get(ctx, fmt.Sprintf(prefix+":%d", i))
	}
	pipe.Exec(ctx)
	for i, g := range gets {
		if v, err := g.Result(); err != nil || v != itoa(i) {
			t.Errorf("GET %s:%d on the restored node: %q, %v", prefix, i, v, err)
		}
	}
}
