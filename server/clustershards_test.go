package server

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"kvs/fsm"
)

// shardedPair is two nodes holding two groups, each node leading one:
// group 0 (slots 0-8191) led by n1, group 1 (8192-16383) by n2.
type shardedPair struct {
	n1, n2 *Server
	// stores[node][group]
	stores [2][2]*fsm.Store
	// fakes[node][group]: node's view of group's raft.
	fakes [2][2]*fakeCluster
}

func startShardedPair(t *testing.T, opts ...func(*Config)) *shardedPair {
	t.Helper()
	p := &shardedPair{}
	for n := range 2 {
		for g := range 2 {
			p.stores[n][g] = fsm.NewStore()
		}
	}
	slots := make([]uint16, fsm.ClusterSlots)
	for s := range slots {
		slots[s] = uint16(s * 2 / fsm.ClusterSlots)
	}
	fakes := &p.fakes
	var servers [2]*Server
	for n := range 2 {
		var groups []Group
		for g := range 2 {
			fakes[n][g] = &fakeCluster{selfID: fmt.Sprintf("n%d", n+1), term: 2}
			var prop Proposer = refusingProposer{t}
			if g == n {
				prop = &replicatingProposer{stores: []*fsm.Store{p.stores[n][g], p.stores[1-n][g]}}
			}
			groups = append(groups, Group{Store: p.stores[n][g], Proposer: prop, Raft: fakes[n][g]})
		}
		cfg := Config{Store: p.stores[n][0], Groups: groups, Slots: slots,
			Cluster: fakes[n][0], DisableActiveExpiry: true}
		for _, o := range opts {
			o(&cfg)
		}
		servers[n] = startServer(t, cfg)
	}
	for n := range 2 {
		for g := range 2 {
			members := []Member{
				{ID: "n1", RaftAddr: "127.0.0.1:17001", RESPAddr: servers[0].Addr().String(), Leader: g == 0, Voter: true},
				{ID: "n2", RaftAddr: "127.0.0.1:17002", RESPAddr: servers[1].Addr().String(), Leader: g == 1, Voter: true},
			}
			fakes[n][g].set(func(f *fakeCluster) { f.members, f.leaderOK = members, true })
		}
	}
	p.n1, p.n2 = servers[0], servers[1]
	return p
}

// TestShardedForwarding: a node forwards a write of a group it follows to
// that group's leader, which applies it to the group on both nodes; a
// cluster-aware client gets MOVED to that leader instead; the keyless
// commands count the groups a node leads.
func TestShardedForwarding(t *testing.T) {
	p := startShardedPair(t)
	k0, k1 := keyIn(0, 2, 0), keyIn(1, 2, 0)
	rc := dialRaw(t, p.n1)
	for _, k := range []string{k0, k1} {
		if got := rc.do("SET", k, "v"); got != "+OK\r\n" {
			t.Fatalf("SET %s through n1: %q", k, got)
		}
		if got := rc.do("GET", k); got != "$1\r\nv\r\n" {
			t.Errorf("GET %s on n1: %q", k, got)
		}
	}
	for n := range 2 {
		for g, k := range []string{k0, k1} {
			if got := keysOf(p.stores[n][g]); len(got) != 1 || got[0] != k {
				t.Errorf("node %d group %d holds %q, want [%s]", n+1, g, got, k)
			}
		}
	}
	if got := rc.do("DBSIZE"); got != ":1\r\n" {
		t.Errorf("DBSIZE on n1 (leading group 0): %q", got)
	}
	for _, k := range []string{k0, k1} {
		slot := strconv.Itoa(fsm.KeySlot(k))
		if got := rc.do("CLUSTER", "COUNTKEYSINSLOT", slot); got != ":1\r\n" {
			t.Errorf("CLUSTER COUNTKEYSINSLOT %s on n1: %q", slot, got)
		}
		if got := rc.do("OBJECT", "ENCODING", k); got != "$6\r\nembstr\r\n" {
			t.Errorf("OBJECT ENCODING %s on n1: %q", k, got)
		}
	}
	ro := dialRaw(t, p.n1)
	if got := ro.do("READONLY"); got != "+OK\r\n" {
		t.Fatalf("READONLY: %q", got)
	}
	slot := fsm.KeySlot(k1)
	want := fmt.Sprintf("-MOVED %d %s\r\n", slot, p.n2.Addr())
	if got := ro.do("SET", k1, "w"); got != want {
		t.Errorf("SET of group 1 on a READONLY connection to n1: %q, want %q", got, want)
	}
	if got := ro.do("SET", k0, "w"); got != "+OK\r\n" {
		t.Errorf("SET of group 0 on a READONLY connection to its leader: %q", got)
	}
	if got := ro.do("GET", k1); got != "$1\r\nv\r\n" {
		t.Errorf("READONLY GET of group 1 on n1: %q", got)
	}
}

// TestShardedClusterSlots: CLUSTER SLOTS, SHARDS, NODES and INFO show each
// group as a shard whose master is its leader.
func TestShardedClusterSlots(t *testing.T) {
	p := startShardedPair(t)
	rc := dialRaw(t, p.n1)
	id1, id2 := nodeID("n1"), nodeID("n2")
	h1, h2 := p.n1.Addr().String(), p.n2.Addr().String()
	node := func(addr, id string) string {
		host, port, _ := strings.Cut(addr, ":")
		return fmt.Sprintf("*4\r\n$%d\r\n%s\r\n:%s\r\n$40\r\n%s\r\n*0\r\n", len(host), host, port, id)
	}
	want := "*2\r\n" +
		"*4\r\n:0\r\n:8191\r\n" + node(h1, id1) + node(h2, id2) +
		"*4\r\n:8192\r\n:16383\r\n" + node(h2, id2) + node(h1, id1)
	if got := rc.do("CLUSTER", "SLOTS"); got != want {
		t.Errorf("CLUSTER SLOTS:\n%q\nwant\n%q", got, want)
	}
	nodes := rc.do("CLUSTER", "NODES")
	for _, w := range []string{id1 + " " + h1 + "@17001 myself,master - 0 0 2 connected 0-8191\n",
		id2 + " " + h2 + "@17002 master - 0 0 2 connected 8192-16383\n"} {
		if !strings.Contains(nodes, w) {
			t.Errorf("CLUSTER NODES %q lacks %q", nodes, w)
		}
	}
	shards := rc.do("CLUSTER", "SHARDS")
	if !strings.HasPrefix(shards, "*2\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:8191\r\n") ||
		!strings.Contains(shards, "*2\r\n:8192\r\n:16383\r\n") {
		t.Errorf("CLUSTER SHARDS: %q", shards)
	}
	info := rc.do("CLUSTER", "INFO")
	for _, w := range []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_size:2"} {
		if !strings.Contains(info, w) {
			t.Errorf("CLUSTER INFO %q lacks %q", info, w)
		}
	}
}

// TestShardedStatus: KVS.STATUS on a sharded node says how many replicas
// each group has (0: on every node) and lists each group with its own
// members, which may differ from the cluster's (group 0's) while a group
// follows a membership change.
func TestShardedStatus(t *testing.T) {
	p := startShardedPair(t)
	p.fakes[0][1].set(func(f *fakeCluster) {
		f.members = append(f.members, Member{ID: "n3", RaftAddr: "127.0.0.1:17003"})
	})
	got := dialRaw(t, p.n1).do("KVS.STATUS")
	member := func(id, addr, role string) string { return "*3\r\n" + bulk(id) + bulk(addr) + bulk(role) }
	want := bulk("replicas") + ":0\r\n" +
		bulk("slot_map_version") + ":0\r\n" + bulk("slot_map") + bulk("0-8191:0,8192-16383:1") +
		bulk("groups") + "*2\r\n" +
		"*6\r\n:0\r\n" + bulk("leader") + bulk("n1") + ":11\r\n:10\r\n*2\r\n" +
		member("n1", "127.0.0.1:17001", "leader") + member("n2", "127.0.0.1:17002", "follower") +
		"*6\r\n:1\r\n" + bulk("follower") + bulk("n2") + ":11\r\n:10\r\n*3\r\n" +
		member("n1", "127.0.0.1:17001", "follower") + member("n2", "127.0.0.1:17002", "leader") +
		member("n3", "127.0.0.1:17003", "nonvoter")
	if !strings.HasPrefix(got, "*38\r\n") || !strings.HasSuffix(got, want) {
		t.Errorf("KVS.STATUS on n1:\n got %q\nwant it to end with %q", got, want)
	}
}

// TestShardedKeylessReadsLinearizable: with linearizable reads, DBSIZE,
// KEYS, SCAN and RANDOMKEY on a node that does not lead the home group
// answer for the groups that node leads, each past its read barrier, and
// are not forwarded to the home group's leader, which would answer for
// its own groups: summed over the masters, as cluster clients sum DBSIZE,
// the home group's keys counted once per node and the others' never.
func TestShardedKeylessReadsLinearizable(t *testing.T) {
	p := startShardedPair(t, func(c *Config) { c.LinearizableReads = true })
	k0, k1 := keyIn(0, 2, 0), keyIn(1, 2, 0)
	rc := dialRaw(t, p.n2)
	for _, k := range []string{k0, k1} {
		if got := rc.do("SET", k, "v"); got != "+OK\r\n" {
			t.Fatalf("SET %s through n2: %q", k, got)
		}
	}
	barriers := p.fakes[1][1].barriers.Load()
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"DBSIZE"}, ":1\r\n"},
		{[]string{"KEYS", "*"}, "*1\r\n" + bulk(k1)},
		{[]string{"SCAN", "0", "COUNT", "100"}, "*2\r\n" + bulk("0") + "*1\r\n" + bulk(k1)},
		{[]string{"RANDOMKEY"}, bulk(k1)},
	}
	for _, st := range steps {
		if got := rc.do(st.args...); got != st.want {
			t.Errorf("%v on n2: %q, want %q", st.args, got, st.want)
		}
	}
	if got := p.fakes[1][1].barriers.Load() - barriers; got != int64(len(steps)) {
		t.Errorf("%d read barriers on n2's group 1 for %d reads", got, len(steps))
	}
	if got := dialRaw(t, p.n1).do("DBSIZE"); got != ":1\r\n" {
		t.Errorf("DBSIZE on n1: %q", got)
	}
	// A barrier that fails is the read's answer.
	p.fakes[1][1].set(func(f *fakeCluster) { f.barrierErr = fmt.Errorf("%w: lost the lease", ErrNotLeader) })
	if got := rc.do("DBSIZE"); !strings.HasPrefix(got, "-TRYAGAIN") {
		t.Errorf("DBSIZE on n2 with a failing barrier: %q", got)
	}
}

// TestShardedRole: ROLE, INFO replication, HELLO and CLUSTER REPLICAS say
// of each node what CLUSTER NODES does: each node leading a group is a
// master without replicas; once n1 leads both groups, n2 is the replica
// of n1, its first group's master, at its applied index of that group,
// and n1 lists it at the group's commit index.
func TestShardedRole(t *testing.T) {
	p := startShardedPair(t)
	id1, id2 := nodeID("n1"), nodeID("n2")
	port1, port2 := portOf(t, p.n1), portOf(t, p.n2)
	n1, n2 := dialRaw(t, p.n1), dialRaw(t, p.n2)
	master := "*3\r\n" + bulk("master") + ":10\r\n*0\r\n"
	for _, rc := range []*rawConn{n1, n2} {
		if got := rc.do("ROLE"); got != master {
			t.Errorf("ROLE of a node leading a group: %q, want %q", got, master)
		}
		if got := rc.do("INFO", "replication"); !strings.Contains(got, "\r\nrole:master\r\nconnected_slaves:0\r\n") {
			t.Errorf("INFO replication of a node leading a group: %q", got)
		}
	}
	if got := n2.do("CLUSTER", "REPLICAS", id1); got != "*0\r\n" {
		t.Errorf("CLUSTER REPLICAS of n1: %q", got)
	}

	leadBoth(t, p)
	if got, want := n1.do("ROLE"), "*3\r\n"+bulk("master")+":10\r\n*1\r\n*3\r\n"+bulk("127.0.0.1")+bulk(port2)+bulk("11"); got != want {
		t.Errorf("ROLE on n1, leading both groups: %q, want %q", got, want)
	}
	if got, want := n2.do("ROLE"), "*5\r\n"+bulk("slave")+bulk("127.0.0.1")+":"+port1+"\r\n"+bulk("connected")+":10\r\n"; got != want {
		t.Errorf("ROLE on n2, leading none: %q, want %q", got, want)
	}
	if got := n1.do("INFO", "replication"); !strings.Contains(got, "\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port="+port2+",state=online,offset=11,lag=0\r\n") {
		t.Errorf("INFO replication on n1: %q", got)
	}
	info := n2.do("INFO", "replication")
	for _, want := range []string{"\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:" + port1 + "\r\nmaster_link_status:up\r\n",
		"slave_repl_offset:10\r\n", "master_replid:" + id1 + "\r\n", "master_repl_offset:10\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO replication on n2 lacks %q:\n%s", want, info)
		}
	}
	line := id2 + " " + p.n2.Addr().String() + "@17002 slave " + id1 + " 0 0 2 connected"
	if got := n2.do("CLUSTER", "NODES"); !strings.Contains(got, "\n"+strings.Replace(line, " slave", " myself,slave", 1)+"\n") {
		t.Errorf("CLUSTER NODES on n2 lacks n2 as n1's replica: %q", got)
	}
	if got, want := n1.do("CLUSTER", "REPLICAS", id1), "*1\r\n"+bulk(line); got != want {
		t.Errorf("CLUSTER REPLICAS of n1: %q, want %q", got, want)
	}
	if got := n1.do("CLUSTER", "SLAVES", id2); got != "-"+errNotMaster+"\r\n" {
		t.Errorf("CLUSTER SLAVES of n2, which leads no group: %q", got)
	}
	if got := n2.do("HELLO", "3"); !strings.Contains(got, bulk("role")+bulk("replica")) {
		t.Errorf("HELLO on n2: %q", got)
	}
	if got := n1.do("HELLO", "3"); !strings.Contains(got, bulk("role")+bulk("master")) {
		t.Errorf("HELLO on n1: %q", got)
	}
}

// leadBoth hands group 1's leadership to n1, which then leads both groups
// of p, and n2 none.
func leadBoth(t *testing.T, p *shardedPair) {
	t.Helper()
	members := []Member{
		{ID: "n1", RaftAddr: "127.0.0.1:17001", RESPAddr: p.n1.Addr().String(), Leader: true, Voter: true},
		{ID: "n2", RaftAddr: "127.0.0.1:17002", RESPAddr: p.n2.Addr().String(), Voter: true},
	}
	lead := &fakeCluster{selfID: "n1", term: 2}
	lead.set(func(f *fakeCluster) { f.members, f.leaderOK = members, true })
	prop := &replicatingProposer{stores: []*fsm.Store{p.stores[0][1], p.stores[1][1]}}
	if err := p.n1.SetLocalGroup(1, &Group{Store: p.stores[0][1], Proposer: prop, Raft: lead}); err != nil {
		t.Fatal(err)
	}
	p.fakes[0][1] = lead
	p.fakes[1][1].set(func(f *fakeCluster) { f.members = members })
}

// TestShardedKeylessScriptFollower: a node that leads no group runs a
// script without keys in its first group, on that group's leader, from a
// READONLY connection too, which is redirected only for a script that
// declares keys, to their slot.
func TestShardedKeylessScriptFollower(t *testing.T) {
	p := startShardedPair(t)
	leadBoth(t, p)
	k0, k1 := keyIn(0, 2, 0), keyIn(1, 2, 0)
	set := "return redis.call('SET', ARGV[1], 'v')"
	nonLocal := "-" + errScriptNonLocal + " script: "
	rc, ro := dialRaw(t, p.n2), dialRaw(t, p.n2)
	ro.do("READONLY")
	for _, step := range []struct {
		rc   *rawConn
		cmd  []string
		want string
	}{
		{rc, []string{"EVAL", set, "0", k0}, "+OK\r\n"},
		{rc, []string{"EVAL", set, "0", k1}, nonLocal},
		{ro, []string{"EVAL", set, "0", k0}, "+OK\r\n"},
		{ro, []string{"EVAL", "return redis.call('SET', KEYS[1], 'v')", "1", k0},
			fmt.Sprintf("-MOVED %d %s\r\n", fsm.KeySlot(k0), p.n1.Addr())},
	} {
		if got := step.rc.do(step.cmd...); !strings.HasPrefix(got, step.want) {
			t.Errorf("%q on n2: %q, want %q", step.cmd, got, step.want)
		}
	}
	for n := range 2 {
		if got := keysOf(p.stores[n][0]); len(got) != 1 || got[0] != k0 {
			t.Errorf("node %d's group 0 holds %q, want [%s]", n+1, got, k0)
		}
	}
}

// TestShardedMinReplicas: min-replicas-to-write judges each write by the
// good replicas of the group it goes to, on the node leading that group,
// for its own clients and for the writes a follower forwards to it.
func TestShardedMinReplicas(t *testing.T) {
	p := startShardedPair(t)
	leadBoth(t, p)
	p.fakes[0][0].good.Store(1)
	p.fakes[0][1].good.Store(0)
	n1, n2 := dialRaw(t, p.n1), dialRaw(t, p.n2)
	for _, rc := range []*rawConn{n1, n2} {
		if got := rc.do("CONFIG", "SET", "min-replicas-to-write", "1"); got != "+OK\r\n" {
			t.Fatalf("CONFIG SET: %q", got)
		}
	}
	for _, rc := range []*rawConn{n1, n2} {
		if got := rc.do("SET", keyIn(0, 2, 1), "v"); got != "+OK\r\n" {
			t.Errorf("SET in the group with a good replica: %q", got)
		}
		if got := rc.do("SET", keyIn(1, 2, 1), "v"); got != noReplicas {
			t.Errorf("SET in the group without one: %q", got)
		}
		if got := rc.do("EVAL", "return redis.call('set', KEYS[1], 2)", "1", keyIn(1, 2, 2)); !strings.HasPrefix(got, "-"+errNoReplicas) {
			t.Errorf("a script writing in the group without one: %q", got)
		}
	}
	p.fakes[0][1].good.Store(1)
	if got := n2.do("SET", keyIn(1, 2, 1), "v"); got != "+OK\r\n" {
		t.Errorf("SET once the group has a good replica: %q", got)
	}
}
