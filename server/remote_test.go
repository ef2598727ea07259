package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"kvs/fsm"
)

// fakeRemote is Config.Remote over a table the test sets: each group's
// members, the leader marked.
type fakeRemote struct {
	mu      sync.Mutex
	members map[int][]Member
}

func (f *fakeRemote) Leader(group int) (Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members[group] {
		if m.Leader {
			return m, m.RESPAddr != ""
		}
	}
	return Member{}, false
}

func (f *fakeRemote) Members(group int) []Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Member(nil), f.members[group]...)
}

// splitPair is two nodes of a cluster whose slots are in groups 1 (slots
// 0-8191) and 2 (8192-16383), group 0 holding none, as cmd/kvs builds it:
// both hold group 0, which n1 leads; n1 holds group 1 alone and n2 group
// 2 alone, each leading its own.
type splitPair struct {
	n1, n2 *Server
	// stores[node][group]; nil where the node holds no replica.
	stores [2][3]*fsm.Store
	fakes  [2][3]*fakeCluster
	// remotes[node] tells the node where the groups it holds no replica
	// of are.
	remotes [2]*fakeRemote
}

func startSplitPair(t *testing.T) *splitPair {
	t.Helper()
	p := &splitPair{}
	slots := make([]uint16, fsm.ClusterSlots)
	for s := range slots {
		slots[s] = uint16(1 + s*2/fsm.ClusterSlots)
	}
	meta := [2]*fsm.Store{fsm.NewStore(), fsm.NewStore()}
	remotes := [2]*fakeRemote{{}, {}}
	var servers [2]*Server
	for n := range 2 {
		self := fmt.Sprintf("n%d", n+1)
		groups := make([]Group, 3)
		for g := range 3 {
			p.fakes[n][g] = &fakeCluster{selfID: self, term: 2}
		}
		var prop0 Proposer = refusingProposer{t}
		if n == 0 {
			prop0 = &replicatingProposer{stores: meta[:]}
		}
		groups[0] = Group{Store: meta[n], Proposer: prop0, Raft: p.fakes[n][0]}
		// Node n holds group n+1, and leads it.
		g := n + 1
		st := fsm.NewStore()
		p.stores[n][g] = st
		groups[g] = Group{Store: st, Proposer: &replicatingProposer{stores: []*fsm.Store{st}}, Raft: p.fakes[n][g]}
		servers[n] = startServer(t, Config{Store: meta[n], Groups: groups, Slots: slots, Remote: remotes[n],
			Cluster: p.fakes[n][0], Replicas: 1, DisableActiveExpiry: true})
	}
	addr := func(n int) string { return servers[n].Addr().String() }
	member := func(n int, leader bool) Member {
		return Member{ID: fmt.Sprintf("n%d", n+1), RaftAddr: fmt.Sprintf("127.0.0.1:1700%d", n+1), RESPAddr: addr(n), Leader: leader, Voter: true}
	}
	for n := range 2 {
		p.fakes[n][0].set(func(f *fakeCluster) { f.members, f.leaderOK = []Member{member(0, true), member(1, false)}, true })
		g := n + 1
		p.fakes[n][g].set(func(f *fakeCluster) { f.members, f.leaderOK = []Member{member(n, true)}, true })
		// The other node's group, as the metadata tells it.
		remotes[n].members = map[int][]Member{2 - n: {member(1-n, true)}}
	}
	p.n1, p.n2, p.remotes = servers[0], servers[1], remotes
	return p
}

// TestRemoteGroups: a node holding no replica of a group forwards its
// keyed commands to the group's leader, reads and transactions included;
// a READONLY connection, and the commands that cannot be forwarded
// (blocking pops, WATCH, those that read the store themselves), get MOVED
// to that leader; the topology commands show the group with its leader
// as master; a replica handed over at run time serves, and taken away
// stops serving.
func TestRemoteGroups(t *testing.T) {
	p := startSplitPair(t)
	k1, k2 := keyIn(0, 2, 0), keyIn(1, 2, 0) // of groups 1 and 2
	h2 := p.n2.Addr().String()
	moved := fmt.Sprintf("-MOVED %d %s\r\n", fsm.KeySlot(k2), h2)
	rc := dialRaw(t, p.n1)
	for _, step := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"SET", k1, "a"}, "+OK\r\n"},
		{[]string{"SET", k2, "b"}, "+OK\r\n"},
		{[]string{"GET", k2}, "$1\r\nb\r\n"},
		{[]string{"APPEND", k2, "c"}, ":2\r\n"},
		{[]string{"STRLEN", k2}, ":2\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"INCR", "{" + k2 + "}n"}, "+QUEUED\r\n"},
		{[]string{"GET", k2}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n:1\r\n$2\r\nbc\r\n"},
		{[]string{"BLPOP", k2, "0"}, moved},
		{[]string{"WATCH", k2}, moved},
		{[]string{"OBJECT", "ENCODING", k2}, moved},
		{[]string{"SPUBLISH", k2, "m"}, moved},
		{[]string{"MEMORY", "USAGE", k2}, moved},
		{[]string{"DBSIZE"}, ":1\r\n"}, // the groups n1 leads
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", fmt.Sprint(fsm.KeySlot(k2))}, ":0\r\n"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", fmt.Sprint(fsm.KeySlot(k1))}, ":1\r\n"},
	} {
		if got := rc.do(step.cmd...); got != step.want {
			t.Errorf("%q on n1: %q, want %q", step.cmd, got, step.want)
		}
	}
	if got := keysOf(p.stores[1][2]); len(got) != 2 {
		t.Errorf("n2's group 2 holds %q, want %s and its {tag} key", got, k2)
	}
	ro := dialRaw(t, p.n1)
	ro.do("READONLY")
	for _, cmd := range [][]string{{"GET", k2}, {"SET", k2, "x"}} {
		if got := ro.do(cmd...); got != moved {
			t.Errorf("%q on a READONLY connection to n1: %q, want %q", cmd, got, moved)
		}
	}
	if got := ro.do("GET", k1); got != "$1\r\na\r\n" {
		t.Errorf("READONLY GET of n1's own group: %q", got)
	}
	slots := rc.do("CLUSTER", "SLOTS")
	host, port, _ := strings.Cut(h2, ":")
	if want := fmt.Sprintf(":8192\r\n:16383\r\n*4\r\n$%d\r\n%s\r\n:%s\r\n", len(host), host, port); !strings.Contains(slots, want) {
		t.Errorf("CLUSTER SLOTS on n1 %q lacks group 2 with n2 as master (%q)", slots, want)
	}
	if status := rc.do("KVS.STATUS"); !strings.Contains(status, "$4\r\nnone\r\n$2\r\nn2\r\n") || !strings.Contains(status, "$8\r\nreplicas\r\n:1\r\n") {
		t.Errorf("KVS.STATUS on n1 does not show group 2 held elsewhere, led by n2: %q", status)
	}
	if got := rc.do("KVS.JOIN", "n9", "127.0.0.1:1", "127.0.0.1:2", "3", "2"); !strings.Contains(got, "start it with the cluster's --replicas") {
		t.Errorf("KVS.JOIN of a node with another replica count: %q", got)
	}

	// n1 is handed a replica of group 2 (kept in step by n2's proposer):
	// it serves it, and stops once it is taken away.
	st := fsm.NewStore()
	p.n1.PrepareGroupStore(2, st)
	prop := &replicatingProposer{stores: []*fsm.Store{p.stores[1][2], st}}
	p.n2.SetLocalGroup(2, &Group{Store: p.stores[1][2], Proposer: prop, Raft: p.fakes[1][2]})
	follower := &fakeCluster{selfID: "n1", term: 2}
	follower.set(func(f *fakeCluster) {
		f.members, f.leaderOK = []Member{
			{ID: "n1", RESPAddr: p.n1.Addr().String(), Voter: true},
			{ID: "n2", RESPAddr: h2, Leader: true, Voter: true},
		}, true
	})
	if err := p.n1.SetLocalGroup(2, &Group{Store: st, Proposer: refusingProposer{t}, Raft: follower}); err != nil {
		t.Fatal(err)
	}
	if got := rc.do("SET", k2, "local"); got != "+OK\r\n" {
		t.Fatalf("SET through n1, now a follower of group 2: %q", got)
	}
	if got := keysOf(st); len(got) != 1 || got[0] != k2 {
		t.Errorf("n1's new replica of group 2 holds %q, want the key written since", got)
	}
	if got := ro.do("GET", k2); got != "$5\r\nlocal\r\n" {
		t.Errorf("READONLY GET of group 2 on n1, which holds a replica now: %q", got)
	}
	if err := p.n1.SetLocalGroup(2, nil); err != nil {
		t.Fatal(err)
	}
	if got := ro.do("GET", k2); got != moved {
		t.Errorf("READONLY GET of group 2 on n1 after its replica was taken away: %q", got)
	}
	if err := p.n1.SetLocalGroup(0, nil); err == nil {
		t.Error("SetLocalGroup took the home group away")
	}
}

// TestKeylessScriptGroups: on a cluster whose meta group holds no slots, a
// script without keys runs in the data group the node leads, EVAL, EVAL_RO,
// EVALSHA, FCALL, in a transaction too, and touches that group's keys, not
// the other's; a node that holds no data group sends it to the leader of
// slot 0's group, from a READONLY connection too, and says it follows no
// master.
func TestKeylessScriptGroups(t *testing.T) {
	p := startSplitPair(t)
	k1, k2 := keyIn(0, 2, 0), keyIn(1, 2, 0) // of groups 1 and 2
	nonLocal := "-" + errScriptNonLocal + " script: "
	set := "return redis.call('SET', ARGV[1], ARGV[2])"
	get := "return redis.call('GET', ARGV[1])"
	lib := "#!lua name=lib\nredis.register_function('setf', function(keys, args) return redis.call('SET', args[1], 'f') end)"
	n1, n2 := dialRaw(t, p.n1), dialRaw(t, p.n2)
	if got := n1.do("FUNCTION", "LOAD", lib); got != bulk("lib") {
		t.Fatalf("FUNCTION LOAD: %q", got)
	}
	for _, step := range []struct {
		rc   *rawConn
		cmd  []string
		want string
	}{
		{n1, []string{"EVAL", set, "0", k1, "a"}, "+OK\r\n"},
		{n1, []string{"EVAL", set, "0", k2, "a"}, nonLocal},
		{n1, []string{"EVAL_RO", get, "0", k1}, bulk("a")},
		{n1, []string{"EVALSHA", fsm.ScriptSHA([]byte(set)), "0", k1, "b"}, "+OK\r\n"},
		{n1, []string{"SCRIPT", "EXISTS", fsm.ScriptSHA([]byte(set))}, "*1\r\n:1\r\n"},
		{n1, []string{"FCALL", "setf", "0", k1}, "+OK\r\n"},
		{n1, []string{"FCALL", "setf", "0", k2}, nonLocal},
		{n1, []string{"MULTI"}, "+OK\r\n"},
		{n1, []string{"EVAL", get, "0", k1}, "+QUEUED\r\n"},
		{n1, []string{"EXEC"}, "*1\r\n" + bulk("f")},
		{n2, []string{"EVAL", set, "0", k2, "c"}, "+OK\r\n"},
		{n2, []string{"EVAL", set, "0", k1, "c"}, nonLocal},
	} {
		if got := step.rc.do(step.cmd...); !strings.HasPrefix(got, step.want) {
			t.Errorf("%q: %q, want %q", step.cmd, got, step.want)
		}
	}
	if got := keysOf(p.stores[0][1]); len(got) != 1 || got[0] != k1 {
		t.Errorf("n1's group 1 holds %q, want [%s]", got, k1)
	}
	if got := n1.do("INFO", "memory"); !strings.Contains(got, "\r\nnumber_of_cached_scripts:2\r\n") || !strings.Contains(got, "\r\nnumber_of_libraries:1\r\n") {
		t.Errorf("INFO memory on n1 does not count the two scripts EVAL cached and the library: %q", got)
	}
	if got := keysOf(p.stores[1][2]); len(got) != 1 || got[0] != k2 {
		t.Errorf("n2's group 2 holds %q, want [%s]", got, k2)
	}

	// Group 1 moves to n2, and n1 holds no data group.
	st := fsm.NewStore()
	st.Apply(1, 0, []fsm.Command{{Op: fsm.OpFunctionLoad, Args: [][]byte{[]byte(lib)}}})
	p.n2.PrepareGroupStore(1, st)
	lead := &fakeCluster{selfID: "n2", term: 2}
	lead.set(func(f *fakeCluster) {
		f.members, f.leaderOK = []Member{{ID: "n2", RESPAddr: p.n2.Addr().String(), Leader: true, Voter: true}}, true
	})
	if err := p.n2.SetLocalGroup(1, &Group{Store: st, Proposer: &replicatingProposer{stores: []*fsm.Store{st}}, Raft: lead}); err != nil {
		t.Fatal(err)
	}
	p.remotes[0].mu.Lock()
	p.remotes[0].members[1] = lead.members
	p.remotes[0].mu.Unlock()
	if err := p.n1.SetLocalGroup(1, nil); err != nil {
		t.Fatal(err)
	}
	ro := dialRaw(t, p.n1)
	ro.do("READONLY")
	for _, step := range []struct {
		rc   *rawConn
		cmd  []string
		want string
	}{
		{n1, []string{"EVAL", set, "0", k1, "d"}, "+OK\r\n"},
		{n1, []string{"EVAL_RO", get, "0", k1}, bulk("d")},
		{ro, []string{"EVAL", set, "0", k1, "e"}, "+OK\r\n"},
		{ro, []string{"FCALL", "setf", "0", k2}, nonLocal},
		{n1, []string{"ROLE"}, "*5\r\n" + bulk("slave") + bulk("") + ":0\r\n" + bulk("connect") + ":0\r\n"},
	} {
		if got := step.rc.do(step.cmd...); !strings.HasPrefix(got, step.want) {
			t.Errorf("%q on n1, holding no data group: %q, want %q", step.cmd, got, step.want)
		}
	}
	if got := keysOf(st); len(got) != 1 || got[0] != k1 {
		t.Errorf("n2's new replica of group 1 holds %q, want [%s]", got, k1)
	}
	if got := n1.do("CLUSTER", "NODES"); !strings.Contains(got, " myself,slave - 0 0 2 connected\n") {
		t.Errorf("CLUSTER NODES on n1, holding no data group: %q", got)
	}
}
