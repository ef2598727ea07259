package server

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"kvs/fsm"
	"kvs/group"
)

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

func verbatim(s string, proto int) string {
	if proto == 3 {
		return "=" + strconv.Itoa(len(s)+4) + "\r\ntxt:" + s + "\r\n"
	}
	return bulk(s)
}

func portOf(tb testing.TB, s *Server) string {
	_, p, err := net.SplitHostPort(s.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestClusterTopologyReplies(t *testing.T) {
	p := startPair(t, false, true)
	lport, fport := portOf(t, p.leader), portOf(t, p.follower)
	lid, fid := p.leaderID, p.followID
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			rc := dialRaw(t, p.follower)
			rc.do("HELLO", strconv.Itoa(proto))
			emptyMap, m7, m2 := "*0\r\n", "*14\r\n", "*4\r\n"
			if proto == 3 {
				emptyMap, m7, m2 = "%0\r\n", "%7\r\n", "%2\r\n"
			}
			node := func(port, id string) string {
				return "*4\r\n" + bulk("127.0.0.1") + ":" + port + "\r\n" + bulk(id) + emptyMap
			}
			shardNode := func(id, port, role string) string {
				return m7 + bulk("id") + bulk(id) + bulk("port") + ":" + port + "\r\n" +
					bulk("ip") + bulk("127.0.0.1") + bulk("endpoint") + bulk("127.0.0.1") +
					bulk("role") + bulk(role) + bulk("replication-offset")
			}
			nodes := lid + " 127.0.0.1:" + lport + "@17001 master - 0 0 3 connected 0-16383\n" +
				fid + " 127.0.0.1:" + fport + "@17002 myself,slave " + lid + " 0 0 3 connected\n"
			info := "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n" +
				"cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:2\r\ncluster_size:1\r\n" +
				"cluster_current_epoch:3\r\ncluster_my_epoch:3\r\ncluster_stats_messages_sent:0\r\n" +
				"cluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"
			steps := []struct {
				args []string
				want string
			}{
				{[]string{"CLUSTER", "SLOTS"}, "*1\r\n*4\r\n:0\r\n:16383\r\n" + node(lport, lid) + node(fport, fid)},
				{[]string{"CLUSTER", "SHARDS"}, "*1\r\n" + m2 + bulk("slots") + "*2\r\n:0\r\n:16383\r\n" + bulk("nodes") + "*2\r\n" +
					shardNode(lid, lport, "master") + ":11\r\n" + bulk("health") + bulk("online") +
					shardNode(fid, fport, "replica") + ":10\r\n" + bulk("health") + bulk("online")},
				{[]string{"CLUSTER", "NODES"}, verbatim(nodes, proto)},
				{[]string{"CLUSTER", "INFO"}, verbatim(info, proto)},
				{[]string{"CLUSTER", "MYID"}, bulk(fid)},
				{[]string{"CLUSTER", "KEYSLOT", "foo"}, ":12182\r\n"},
				{[]string{"cluster", "replicas", lid}, "*1\r\n" + bulk(strings.TrimSuffix(strings.SplitAfter(nodes, "\n")[1], "\n"))},
				{[]string{"CLUSTER", "SLAVES", fid}, "-ERR The specified node is not a master\r\n"},
				{[]string{"CLUSTER", "REPLICAS", "nope"}, "-ERR Unknown node nope\r\n"},
				{[]string{"CLUSTER", "SLOTS", "x"}, "-ERR wrong number of arguments for 'cluster|slots' command\r\n"},
				{[]string{"CLUSTER", "NOPE"}, "-ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.\r\n"},
				{[]string{"CLUSTER"}, "-ERR wrong number of arguments for 'cluster' command\r\n"},
				{[]string{"CLUSTER", "ADDSLOTS", "1"}, "-ERR CLUSTER ADDSLOTS is not supported: kvs is one shard owning every slot, served by its Raft leader\r\n"},
			}
			for _, st := range steps {
				if got := rc.do(st.args...); got != st.want {
					t.Errorf("%q:\n got %q\nwant %q", st.args, got, st.want)
				}
			}
		})
	}

	// No leader: no slot is served.
	p.fc.set(func(f *fakeCluster) { f.leaderOK = false })
	rc := dialRaw(t, p.follower)
	if got := rc.do("CLUSTER", "SLOTS"); got != "*0\r\n" {
		t.Errorf("CLUSTER SLOTS without a leader: %q", got)
	}
	if got := rc.do("CLUSTER", "INFO"); !strings.HasPrefix(got, "$") || !strings.Contains(got, "cluster_state:fail\r\ncluster_slots_assigned:0\r\n") {
		t.Errorf("CLUSTER INFO without a leader: %q", got)
	}
}

func TestRoleAndReplicationInfo(t *testing.T) {
	p := startPair(t, false, true)
	lport, fport := portOf(t, p.leader), portOf(t, p.follower)
	l, f := dialRaw(t, p.leader), dialRaw(t, p.follower)
	if got, want := l.do("ROLE"), "*3\r\n"+bulk("master")+":10\r\n*1\r\n*3\r\n"+bulk("127.0.0.1")+bulk(fport)+bulk("11"); got != want {
		t.Errorf("ROLE on leader: %q, want %q", got, want)
	}
	if got, want := f.do("ROLE"), "*5\r\n"+bulk("slave")+bulk("127.0.0.1")+":"+lport+"\r\n"+bulk("connected")+":10\r\n"; got != want {
		t.Errorf("ROLE on follower: %q, want %q", got, want)
	}
	li := l.do("INFO", "replication")
	for _, want := range []string{"\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=" + fport + ",state=online,offset=11,lag=0\r\n", "master_repl_offset:10\r\n"} {
		if !strings.Contains(li, want) {
			t.Errorf("INFO replication on leader lacks %q:\n%s", want, li)
		}
	}
	fi := f.do("INFO", "replication")
	for _, want := range []string{"\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:" + lport + "\r\nmaster_link_status:up\r\n", "slave_repl_offset:10\r\n", "master_replid:" + p.leaderID + "\r\n"} {
		if !strings.Contains(fi, want) {
			t.Errorf("INFO replication on follower lacks %q:\n%s", want, fi)
		}
	}
	if got := f.do("INFO", "cluster"); !strings.Contains(got, "cluster_enabled:1\r\n") {
		t.Errorf("INFO cluster: %q", got)
	}
	if got := f.do("HELLO", "3"); !strings.Contains(got, bulk("mode")+bulk("cluster")+bulk("role")+bulk("replica")) {
		t.Errorf("HELLO on follower: %q", got)
	}

	p.fc.set(func(f *fakeCluster) { f.leaderOK = false })
	fi = f.do("INFO", "replication")
	if !strings.Contains(fi, "master_host:\r\nmaster_port:0\r\nmaster_link_status:down\r\n") {
		t.Errorf("INFO replication without a leader:\n%s", fi)
	}
}

// TestStandaloneClusterCommands: without a Cluster the cluster commands
// answer as redis-server 7 without cluster support.
func TestStandaloneClusterCommands(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"CLUSTER", "SLOTS"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"CLUSTER", "INFO"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"CLUSTER", "HELP"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"CLUSTER", "KEYSLOT", "foo"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"CLUSTER", "SLOTS", "x"}, "-ERR wrong number of arguments for 'cluster|slots' command\r\n"},
		{[]string{"CLUSTER", "foo"}, "-ERR unknown subcommand 'foo'. Try CLUSTER HELP.\r\n"},
		{[]string{"READONLY"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"READWRITE"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"ROLE"}, "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"},
		{[]string{"KVS.STATUS"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"KVS.JOIN", "n2", "a:1", "b:2"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"KVS.REMOVE", "n2"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"KVS.FORWARD", "x"}, "-ERR This instance has cluster support disabled\r\n"},
		{[]string{"INFO", "replication"}, bulk("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n" +
			"master_failover_state:no-failover\r\nmaster_replid:" + s.replID + "\r\n" +
			"master_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:0\r\n" +
			"second_repl_offset:-1\r\nrepl_backlog_active:0\r\nrepl_backlog_size:1048576\r\n" +
			"repl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n")},
		{[]string{"INFO", "cluster"}, bulk("# Cluster\r\ncluster_enabled:0\r\n")},
	}
	for _, st := range steps {
		if got := rc.do(st.args...); got != st.want {
			t.Errorf("%q:\n got %q\nwant %q", st.args, got, st.want)
		}
	}
}

func TestKVSAdminCommands(t *testing.T) {
	p := startPair(t, false, true)
	lport, fport := portOf(t, p.leader), portOf(t, p.follower)
	f := dialRaw(t, p.follower)

	want := "*30\r\n" + bulk("id") + bulk("n2") + bulk("addr") + bulk("127.0.0.1:"+fport) +
		bulk("raft_addr") + bulk("127.0.0.1:17002") + bulk("state") + bulk("follower") +
		bulk("term") + ":3\r\n" + bulk("last_index") + ":12\r\n" + bulk("commit_index") + ":11\r\n" +
		bulk("applied_index") + ":10\r\n" + bulk("apply_delay_p50_us") + ":250\r\n" +
		bulk("apply_delay_p99_us") + ":1500\r\n" + bulk("leader_id") + bulk("n1") +
		bulk("leader_addr") + bulk("127.0.0.1:"+lport) +
		bulk("apply_level") + ":1\r\n" + bulk("cluster_level") + ":0\r\n" + bulk("members") + "*3\r\n" +
		"*4\r\n" + bulk("n1") + bulk("127.0.0.1:17001") + bulk("127.0.0.1:"+lport) + bulk("leader") +
		"*4\r\n" + bulk("n2") + bulk("127.0.0.1:17002") + bulk("127.0.0.1:"+fport) + bulk("follower") +
		"*4\r\n" + bulk("n3") + bulk("127.0.0.1:17003") + bulk("") + bulk("nonvoter")
	if got := f.do("KVS.STATUS"); got != want {
		t.Errorf("KVS.STATUS:\n got %q\nwant %q", got, want)
	}
	f.do("HELLO", "3")
	if got := f.do("KVS.STATUS"); !strings.HasPrefix(got, "%15\r\n"+bulk("id")+bulk("n2")) {
		t.Errorf("KVS.STATUS in RESP3: %q", got)
	}

	// On a follower, membership changes are relayed to the leader.
	p.fc.set(func(f *fakeCluster) { f.joinErr = fmt.Errorf("%w", ErrNotLeader) })
	if got := f.do("KVS.JOIN", "n4", "127.0.0.1:17004", "127.0.0.1:7004"); got != "+OK\r\n" {
		t.Errorf("KVS.JOIN on follower: %q", got)
	}
	if got := f.do("KVS.REMOVE", "n3"); got != "+OK\r\n" {
		t.Errorf("KVS.REMOVE on follower: %q", got)
	}
	// A joining node says how many groups it holds, how many replicas
	// of each it places, and the level of entries it applies.
	if got := f.do("KVS.JOIN", "n6", "127.0.0.1:17006", "127.0.0.1:7006", "1", "0", "1"); got != "+OK\r\n" {
		t.Errorf("KVS.JOIN with a level on follower: %q", got)
	}
	if got := f.do("KVS.JOIN", "n7", "a:1", "b:2", "1", "0", "x"); got != "-ERR invalid apply level 'x'\r\n" {
		t.Errorf("KVS.JOIN with a level not a number: %q", got)
	}
	if got := f.do("KVS.JOIN", "n7", "a:1", "b:2", "1", "0", "-1"); got != "-ERR invalid apply level '-1'\r\n" {
		t.Errorf("KVS.JOIN with a negative level: %q", got)
	}
	p.lc.set(func(f *fakeCluster) {
		if strings.Join(f.joins, ",") != "n4 127.0.0.1:17004 127.0.0.1:7004,n3 - -,n6 127.0.0.1:17006 127.0.0.1:7006 level 1" {
			t.Errorf("the leader saw %q", f.joins)
		}
	})
	// The leader's refusal of a node below the cluster's level reaches
	// the client as it is.
	p.lc.set(func(f *fakeCluster) {
		f.joinErr = group.Levels{Meta: func(string) (string, bool) { return "1", true }}.Admits("n8", 0)
	})
	if got := f.do("KVS.JOIN", "n8", "a:1", "b:2"); !strings.HasPrefix(got, "-ERR apply level: node n8 applies replicated entries up to level 0 and the cluster's level is 1: ") {
		t.Errorf("KVS.JOIN of a node below the cluster's level: %q", got)
	}
	p.lc.set(func(f *fakeCluster) { f.joinErr = nil })
	// Two nodes that each think the other leads: one hop, then an error.
	p.lc.set(func(f *fakeCluster) { f.joinErr = fmt.Errorf("%w", ErrNotLeader) })
	if got := f.do("KVS.JOIN", "n5", "a:1", "b:2"); got != "-TRYAGAIN not the leader, the write was not applied\r\n" {
		t.Errorf("KVS.JOIN relayed to a node that does not lead: %q", got)
	}
	p.lc.set(func(f *fakeCluster) { f.joinErr = fmt.Errorf("server already a member") })
	if got := f.do("KVS.JOIN", "n5", "a:1", "b:2"); got != "-ERR server already a member\r\n" {
		t.Errorf("KVS.JOIN failing on the leader: %q", got)
	}
	if got := f.do("KVS.JOIN", "n5"); got != "-ERR wrong number of arguments for 'kvs.join' command\r\n" {
		t.Errorf("KVS.JOIN arity: %q", got)
	}
	if got := dialRaw(t, p.leader).do("KVS.FORWARD", "garbage"); !strings.HasPrefix(got, "-ERR invalid forwarded request: ") {
		t.Errorf("KVS.FORWARD garbage: %q", got)
	}
}

// TestGoRedisClusterClient: go-redis's ClusterClient with ReadOnly learns
// the topology from CLUSTER SLOTS, sends writes to the leader and reads to
// the follower.
func TestGoRedisClusterClient(t *testing.T) {
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			p := startPair(t, false, true)
			ctx := context.Background()
			c := redis.NewClusterClient(&redis.ClusterOptions{
				Addrs:    []string{p.follower.Addr().String()},
				ReadOnly: true,
				Protocol: proto,
			})
			defer c.Close()
			for i := range 20 {
				key := fmt.Sprintf("key%d", i)
				if err := c.Set(ctx, key, i, 0).Err(); err != nil {
					t.Fatalf("SET %s: %v", key, err)
				}
			}
			p.proposer.mu.Lock()
			calls := p.proposer.calls
			p.proposer.mu.Unlock()
			if calls < 20 {
				t.Fatalf("the leader proposed %d batches for 20 SETs", calls)
			}
			p.follower.peers.mu.Lock()
			forwarded := len(p.follower.peers.idle)
			p.follower.peers.mu.Unlock()
			if forwarded != 0 {
				t.Errorf("writes went through the follower (%d pooled connections)", forwarded)
			}
			before := p.follower.Stats().KeyspaceHits
			for i := range 20 {
				v, err := c.Get(ctx, fmt.Sprintf("key%d", i)).Int()
				if err != nil || v != i {
					t.Fatalf("GET key%d: %v, %v", i, v, err)
				}
			}
			if hits := p.follower.Stats().KeyspaceHits - before; hits != 20 {
				t.Errorf("the follower served %d of 20 GETs", hits)
			}
			if err := c.Get(ctx, "nokey").Err(); err != redis.Nil {
				t.Errorf("GET missing key: %v", err)
			}
			if err := c.Incr(ctx, "key1").Err(); err != nil {
				t.Errorf("INCR: %v", err)
			}
		})
	}
}

// TestGoRedisFollowsMoved: a ClusterClient whose view says the follower is
// the master is redirected to the leader.
func TestGoRedisFollowsMoved(t *testing.T) {
	p := startPair(t, false, true)
	ctx := context.Background()
	follower := p.follower.Addr().String()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		ReadOnly: true,
		ClusterSlots: func(ctx context.Context) ([]redis.ClusterSlot, error) {
			return []redis.ClusterSlot{{Start: 0, End: fsm.ClusterSlots - 1, Nodes: []redis.ClusterNode{{Addr: follower}}}}, nil
		},
	})
	defer c.Close()
	// ClusterSlots options disable READONLY in go-redis; send it so the
	// follower treats the connection as cluster-aware.
	c.OnNewNode(func(rdb *redis.Client) {
		rdb.Options().OnConnect = func(ctx context.Context, cn *redis.Conn) error {
			return cn.ReadOnly(ctx).Err()
		}
	})
	ctxT, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Set(ctxT, "foo", "bar", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := dialRaw(t, p.leader).do("GET", "foo"); got != "$3\r\nbar\r\n" {
		t.Errorf("GET foo on the leader: %q", got)
	}
	// Redirected, not forwarded: the follower never dialled the leader.
	p.follower.peers.mu.Lock()
	defer p.follower.peers.mu.Unlock()
	if n := len(p.follower.peers.idle); n != 0 {
		t.Errorf("the follower forwarded the write (%d pooled connections)", n)
	}
}
