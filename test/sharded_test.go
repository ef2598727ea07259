package test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A cluster whose slots are spread over several Raft groups (--groups):
// each group is on three nodes (--replicas), here every node while there
// are three, each node leads about as many as the others, and clients see
// a Redis Cluster of one shard per group.

// shardMasters returns, from a node's CLUSTER NODES, the nodes that lead a
// group and the slot ranges each serves.
func shardMasters(addr string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	text, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) >= 9 && strings.Contains(f[2], "master") {
			out[strings.Split(f[1], "@")[0]] = strings.Join(f[8:], " ")
		}
	}
	return out, nil
}

// ackedCount is how many writes the load has had acknowledged.
func (l *clusterLoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// ackedAtLeast reports an error until n writes are acknowledged.
func (l *clusterLoad) ackedAtLeast(n int) error {
	if got := l.ackedCount(); got < n {
		return fmt.Errorf("%d acknowledged, waiting for %d", got, n)
	}
	return nil
}

// verifyEach is verifyOn key by key (pipelined GETs), for keys that do not
// share a slot.
func (l *clusterLoad) verifyEach(t testing.TB, n *Node) {
	t.Helper()
	keys := l.ackedKeys()
	waitFor(t, fmt.Sprintf("%d acknowledged writes on %s", len(keys), n.Name), func() error {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		pipe := c.Pipeline()
		cmds := make([]*redis.StringCmd, len(keys))
		for i, k := range keys {
			cmds[i] = pipe.Get(ctx, k)
		}
		pipe.Exec(ctx)
		for i, cmd := range cmds {
			v, err := cmd.Result()
			if err != nil {
				return fmt.Errorf("GET %s: %v", keys[i], err)
			}
			if v != l.acked[keys[i]] {
				t.Fatalf("%s on %s = %q, want %q", keys[i], n.Name, v, l.acked[keys[i]])
			}
		}
		return nil
	})
}

// waitSpread waits until every one of nodes leads exactly one group, as
// the leadership spreading settles with as many groups as nodes.
func waitSpread(t testing.TB, nodes []*Node) {
	t.Helper()
	waitFor(t, "each node to lead one group", func() error {
		for _, n := range nodes {
			m, err := shardMasters(n.Addr)
			if err != nil {
				return err
			}
			if len(m) != len(nodes) {
				return fmt.Errorf("%s sees masters %v", n.Name, m)
			}
		}
		return nil
	})
}

// TestShardedCluster: three nodes, three groups. go-redis's ClusterClient
// writes and reads through CLUSTER SLOTS, a plain client's writes to any
// node are forwarded to their group's leader, keys of different slots get
// CROSSSLOT, a script without keys runs in the group its node leads, a
// node killed under load loses no acknowledged write and its groups fail
// over, and a node joining with --join learns the group count and gets its
// replicas (three a group on four nodes: a replica of each); ROLE says of
// each node what CLUSTER NODES does.
func TestShardedCluster(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, "--groups", "3")
	waitSpread(t, nodes)
	ctx := testCtx(t)
	cc := setThroughClusterClient(t, ctx, nodes, "sk", 300)
	n, err := cc.DBSize(ctx).Result()
	if err != nil || n != 300 {
		t.Errorf("ClusterClient DBSIZE (summed over the masters): %d, %v; want 300", n, err)
	}
	ro := readOnlyClusterClient(t, nodes)
	waitFor(t, "ReadOnly ClusterClient reads", func() error {
		for i := range 300 {
			v, err := ro.Get(ctx, fmt.Sprintf("sk:%d", i)).Result()
			if err != nil || v != itoa(i) {
				return fmt.Errorf("GET sk:%d = %q, %v", i, v, err)
			}
		}
		return nil
	})

	rc := dialRaw(t, nodes[0].Addr)
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		if v := rc.Do("SET", k, "v"+k); v.Str != "OK" {
			t.Fatalf("SET %s through n1: %s", k, v)
		}
	}
	if v := rc.Do("MSET", "a", "1", "b", "2"); v.Str != "CROSSSLOT Keys in request don't hash to the same slot" {
		t.Errorf("MSET across slots: %s", v)
	}
	if v := rc.Do("MSET", "{u}a", "1", "{u}b", "2"); v.Str != "OK" {
		t.Errorf("MSET in one slot: %s", v)
	}
	checkKeylessScripts(t, nodes)
	checkScriptACL(t, nodes)

	// A node with another group count is refused.
	odd := newClusterNode(t, "n9", "--groups", "2")
	odd.Start()
	if out, code := runKVS(t, clusterWait, "join", nodes[0].Addr, odd.Addr); code == 0 || !strings.Contains(out, "start it with the cluster's --groups") {
		t.Errorf("kvs join of a node with --groups 2: exit %d\n%s", code, out)
	}

	// kill -9 under load: every acknowledged write survives.
	stop := make(chan struct{})
	load, wg := runClusterLoad(nodes, 6, stop)
	waitFor(t, "writes under load", func() error { return load.ackedAtLeast(200) })
	nodes[1].Kill()
	after := load.ackedCount() + 200
	waitFor(t, "writes after the kill", func() error { return load.ackedAtLeast(after) })
	close(stop)
	wg.Wait()
	for _, n := range []*Node{nodes[0], nodes[2]} {
		load.verifyEach(t, n)
	}
	nodes[1].Start()
	load.verifyEach(t, nodes[1])
	waitSpread(t, nodes)

	// A fourth node with --join learns the count and gets every group.
	n4 := newClusterNode(t, "n4", "--join", nodes[2].Addr)
	n4.Start()
	waitFor(t, "n4 to hold every group", func() error {
		st, err := kvsStatus(n4.Addr)
		if err != nil {
			return err
		}
		if len(st.groups) != 4 {
			return fmt.Errorf("n4 holds %d groups, want the meta group and 3 data groups", len(st.groups))
		}
		for _, g := range st.groups {
			if g[2] == "" {
				return fmt.Errorf("n4 knows no leader of group %s", g[0])
			}
			// Three replicas a group on four nodes: n4 is placed in
			// every one.
			if g[1] == "none" {
				return fmt.Errorf("n4 holds no replica of group %s yet", g[0])
			}
		}
		return nil
	})
	load.verifyEach(t, n4)
	checkRoles(t, append(nodes, n4))
	// kvs remove takes n4 out of group 0, and every group follows.
	if out, code := runKVS(t, clusterWait, "remove", nodes[0].Addr, "n4"); code != 0 {
		t.Fatalf("kvs remove n4: exit %d\n%s", code, out)
	}
	waitFor(t, "n4 to leave every group", func() error {
		c := redis.NewClient(&redis.Options{Addr: nodes[0].Addr, MaxRetries: -1})
		defer c.Close()
		shards, err := c.ClusterShards(ctx).Result()
		if err != nil {
			return err
		}
		if len(shards) != 3 {
			return fmt.Errorf("%d shards", len(shards))
		}
		for _, sh := range shards {
			for _, n := range sh.Nodes {
				if fmt.Sprintf("%s:%d", n.IP, n.Port) == n4.Addr {
					return fmt.Errorf("n4 still in the shard of slots %v", sh.Slots)
				}
			}
		}
		return nil
	})

	// A backup holds every group at its own index, and restores as a
	// one-node cluster of as many groups, with every key. It is taken of
	// a node that holds every group: n3 gets back the one it gave up
	// while n4 was a member.
	waitFor(t, "n3 to hold every group", func() error {
		st, err := kvsStatus(nodes[2].Addr)
		if err != nil {
			return err
		}
		for _, g := range st.groups {
			if g[1] == "none" {
				return fmt.Errorf("n3 holds no replica of group %s", g[0])
			}
		}
		return nil
	})
	file := filepath.Join(t.TempDir(), "b.kvs")
	if out, code := runKVS(t, clusterWait, "backup", nodes[2].Addr, file); code != 0 {
		t.Fatalf("kvs backup of a sharded cluster: exit %d\n%s", code, out)
	}
	raftAddr := freeAddr(t)
	r1 := newKVS(t, "r1", KVSOptions{Durable: true, Extra: []string{"--node-id", "r1", "--raft-addr", raftAddr}})
	if out, code := runKVS(t, clusterWait, "restore", file, "--data-dir", r1.DataDir(), "--node-id", "r1", "--raft-addr", raftAddr); code != 0 {
		t.Fatalf("kvs restore: exit %d\n%s", code, out)
	}
	r1.Start()
	waitFor(t, "r1 to lead every group", func() error {
		st, err := kvsStatus(r1.Addr)
		if err != nil {
			return err
		}
		for _, g := range st.groups {
			if g[1] != "leader" {
				return fmt.Errorf("group %s: %s", g[0], g[1])
			}
		}
		if len(st.groups) != 4 {
			return fmt.Errorf("%d groups", len(st.groups))
		}
		return nil
	})
	load.verifyEach(t, r1)
	rr := dialRaw(t, r1.Addr)
	if v := rr.Do("GET", "sk:7"); v.Str != "7" {
		t.Errorf("GET sk:7 on the restored node: %s", v)
	}
	if v, want := rr.Do("DBSIZE"), 300+8+load.ackedCount(); v.Kind != ':' || atoiOr(v.Str, 0) < want {
		t.Errorf("DBSIZE on the restored node, which leads every group: %s, want at least %d", v, want)
	}

	out, code := runKVS(t, clusterWait, "status", nodes[0].Addr)
	if code != 0 || !strings.Contains(out, "GROUP") || !strings.Contains(out, "10923-16383") {
		t.Errorf("kvs status: exit %d\n%s", code, out)
	}
}

// checkKeylessScripts checks, on each of nodes (each leading one group),
// that a script without keys runs in the group the node leads: it writes
// a key of that group's slots, and a key of another's is refused with
// Redis Cluster's error; and that ROLE calls the node a master without
// replicas, as CLUSTER NODES, where every node is a master, does.
func checkKeylessScripts(t *testing.T, nodes []*Node) {
	t.Helper()
	set := "return redis.call('SET', ARGV[1], 'v')"
	for _, n := range nodes {
		waitFor(t, "a keyless script on "+n.Name+" to run in the group it leads", func() error {
			masters, err := shardMasters(n.Addr)
			if err != nil {
				return err
			}
			var own [2]int
			if _, err := fmt.Sscanf(masters[n.Addr], "%d-%d", &own[0], &own[1]); err != nil {
				return fmt.Errorf("%s leads %q", n.Name, masters[n.Addr])
			}
			other := [2]int{own[1] + 1, 16383}
			if own[1] == 16383 {
				other = [2]int{0, own[0] - 1}
			}
			rc := dialRaw(t, n.Addr)
			if v := rc.Do("EVAL", set, "0", keyInSlots("ks", own)); v.Str != "OK" {
				return fmt.Errorf("EVAL without keys on a key of %v: %s", own, v)
			}
			if v := rc.Do("EVAL", set, "0", keyInSlots("ks", other)); !strings.HasPrefix(v.Str, "ERR Script attempted to access a non local key in a cluster node") {
				return fmt.Errorf("EVAL without keys on a key of %v: %s", other, v)
			}
			if v := rc.Do("ROLE"); len(v.Elems) != 3 || v.Elems[0].Str != "master" || len(v.Elems[2].Elems) != 0 {
				return fmt.Errorf("ROLE: %s", v)
			}
			return nil
		})
	}
}

// checkScriptACL checks that a script's calls are checked against its
// user's rules in every group, on the node it was sent to and on the
// leaders it was forwarded to, though the data groups' stores hold no
// ACL table (the meta group's does).
func checkScriptACL(t *testing.T, nodes []*Node) {
	t.Helper()
	admin := dialRaw(t, nodes[0].Addr)
	if v := admin.Do("ACL", "SETUSER", "bob", "on", ">123", "+@scripting", "+set", "~x*"); v.Str != "OK" {
		t.Fatalf("ACL SETUSER: %s", v)
	}
	bob := dialRaw(t, nodes[0].Addr)
	waitFor(t, "bob's scripts to be checked by his rules in every group", func() error {
		if v := bob.Do("AUTH", "bob", "123"); v.Str != "OK" {
			return fmt.Errorf("AUTH: %s", v)
		}
		for i := range 12 {
			k := fmt.Sprintf("x%d", i)
			if v := bob.Do("EVAL", "return redis.call('SET', KEYS[1], 'v')", "1", k); v.Str != "OK" {
				return fmt.Errorf("SET %s from bob's script: %s", k, v)
			}
			if v := bob.Do("EVAL", "return redis.acl_check_cmd('set', KEYS[1], 1)", "1", k); v.Kind != ':' || v.Str != "1" {
				return fmt.Errorf("acl_check_cmd('set', %s): %s", k, v)
			}
			if v := bob.Do("EVAL", "return redis.acl_check_cmd('hset', KEYS[1], 'f', 1)", "1", k); !v.Null {
				return fmt.Errorf("acl_check_cmd('hset', %s): %s", k, v)
			}
			if v := bob.Do("EVAL", "return redis.call('HSET', KEYS[1], 'f', 1)", "1", k); !strings.HasPrefix(v.Str, "ERR The user executing the script can't run this command or subcommand") {
				return fmt.Errorf("HSET %s from bob's script: %s", k, v)
			}
		}
		return nil
	})
}

// checkRoles checks that ROLE on each of nodes says what the node's own
// CLUSTER NODES says of it: a master, with the nodes shown as its
// replicas, or the replica of the master shown. Leaderships may be
// moving: the two are polled until they agree.
func checkRoles(t *testing.T, nodes []*Node) {
	t.Helper()
	for _, n := range nodes {
		waitFor(t, "ROLE on "+n.Name+" to agree with its CLUSTER NODES", func() error {
			rc := dialRaw(t, n.Addr)
			text := rc.Do("CLUSTER", "NODES").Str
			addrs := map[string]string{} // node id -> host:port
			var me []string
			for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
				f := strings.Fields(line)
				if len(f) < 8 {
					return fmt.Errorf("CLUSTER NODES line %q", line)
				}
				addrs[f[0]] = strings.Split(f[1], "@")[0]
				if strings.HasPrefix(f[2], "myself,") {
					me = f
				}
			}
			var replicas []string
			for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
				if f := strings.Fields(line); me != nil && f[3] == me[0] {
					replicas = append(replicas, addrs[f[0]])
				}
			}
			role := rc.Do("ROLE")
			switch {
			case me == nil:
				return fmt.Errorf("no myself line in %q", text)
			case me[2] == "myself,master":
				if len(role.Elems) != 3 || role.Elems[0].Str != "master" || len(role.Elems[2].Elems) != len(replicas) {
					return fmt.Errorf("ROLE %s of a master whose replicas are %v", role, replicas)
				}
				for i, r := range role.Elems[2].Elems {
					if addr := r.Elems[0].Str + ":" + r.Elems[1].Str; addr != replicas[i] {
						return fmt.Errorf("ROLE %s of a master whose replicas are %v", role, replicas)
					}
				}
			default:
				want := addrs[me[3]]
				if me[3] == "-" {
					want = ":0" // holding no group, it follows no master
				}
				if len(role.Elems) != 5 || role.Elems[0].Str != "slave" || role.Elems[1].Str+":"+role.Elems[2].Str != want {
					return fmt.Errorf("ROLE %s of the replica of %s", role, want)
				}
			}
			return nil
		})
	}
}

// atoiOr is s as a number, or def.
func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

// startRedisCluster starts a redis-server with cluster support whose one
// node serves every slot: the reference for a kvs node of several groups,
// which refuses keys of different slots in one command as it does.
func startRedisCluster(t *testing.T) *Node {
	t.Helper()
	_, bus, _ := net.SplitHostPort(freeAddr(t))
	conf := filepath.Join(testDir(t), "redis-cluster", "nodes.conf")
	n := newRedis(t, "redis-cluster", "--cluster-enabled", "yes", "--cluster-config-file", conf, "--cluster-port", bus)
	n.Start()
	if v := dialRaw(t, n.Addr).Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); v.Str != "OK" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %s", v)
	}
	waitFor(t, "redis's cluster to be ok", func() error {
		if v := dialRaw(t, n.Addr).Do("CLUSTER", "INFO"); !strings.Contains(v.Str, "cluster_state:ok") {
			return fmt.Errorf("CLUSTER INFO: %s", v)
		}
		return nil
	})
	return n
}

// waitLeadsEvery waits until n leads every group of its cluster: the meta
// group and groups data groups.
func waitLeadsEvery(t *testing.T, n *Node, groups int) {
	t.Helper()
	waitFor(t, n.Name+" to lead every group", func() error {
		st, err := kvsStatus(n.Addr)
		if err != nil {
			return err
		}
		if len(st.groups) != groups+1 {
			return fmt.Errorf("%d groups", len(st.groups))
		}
		for _, g := range st.groups {
			if g[1] != "leader" {
				return fmt.Errorf("group %s: %s", g[0], g[1])
			}
		}
		return nil
	})
}

// startShardedNode starts a one-node kvs cluster of groups data groups and
// waits until it leads every group.
func startShardedNode(t *testing.T, groups int) *Node {
	t.Helper()
	n := newClusterNode(t, "n1", "--bootstrap", "--groups", strconv.Itoa(groups))
	n.Start()
	waitLeadsEvery(t, n, groups)
	waitLevel(t, n)
	return n
}

// setThroughClusterClient sets prefix:i to i for i below n through a
// go-redis ClusterClient over nodes, which it returns (closed at t's
// cleanup).
func setThroughClusterClient(t *testing.T, ctx context.Context, nodes []*Node, prefix string, n int) *redis.ClusterClient {
	t.Helper()
	var addrs []string
	for _, node := range nodes {
		addrs = append(addrs, node.Addr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { cc.Close() })
	for i := range n {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if err := retryLeaderChange(t, func() error { return cc.Set(ctx, k, i, 0).Err() }); err != nil {
			t.Fatalf("ClusterClient SET %s: %v", k, err)
		}
	}
	return cc
}
