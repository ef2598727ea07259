package server

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"kvs/fsm"
)

type fakeGroupAdmin struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (f *fakeGroupAdmin) call(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return f.err
}

func (f *fakeGroupAdmin) Add(n int) ([]int, error) {
	if err := f.call(fmt.Sprintf("add %d", n)); err != nil {
		return nil, err
	}
	var ids []int
	for i := range n {
		ids = append(ids, 3+i)
	}
	return ids, nil
}

func (f *fakeGroupAdmin) Empty(id int) ([]uint64, error) {
	if err := f.call(fmt.Sprintf("empty %d", id)); err != nil {
		return nil, err
	}
	return []uint64{7, 8}, nil
}

func (f *fakeGroupAdmin) Remove(id int) error { return f.call(fmt.Sprintf("remove %d", id)) }

// TestGroupsCommand: KVS.GROUPS's arguments and replies; group 0 is
// refused before the admin is asked, and a node whose slots are not
// spread over groups refuses it.
func TestGroupsCommand(t *testing.T) {
	fa := &fakeGroupAdmin{}
	srv, _ := startSharded(t, 2, func(c *Config) { c.GroupAdmin = fa })
	c := dialRaw(t, srv)
	usage := "ERR unknown subcommand or wrong number of arguments for '%s'. Try KVS.GROUPS ADD [n], KVS.GROUPS EMPTY id, KVS.GROUPS REMOVE id or KVS.GROUPS LIST."
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"KVS.GROUPS", "ADD"}, "*1\r\n:3\r\n"},
		{[]string{"KVS.GROUPS", "add", "2"}, "*2\r\n:3\r\n:4\r\n"},
		{[]string{"KVS.GROUPS", "ADD", "0"}, "-ERR the number of groups to add must be positive\r\n"},
		{[]string{"KVS.GROUPS", "ADD", "x"}, "-" + errNotInteger + "\r\n"},
		{[]string{"KVS.GROUPS", "EMPTY", "1"}, "*2\r\n:7\r\n:8\r\n"},
		{[]string{"KVS.GROUPS", "REMOVE", "1"}, "+OK\r\n"},
		{[]string{"KVS.GROUPS", "REMOVE", "0"}, "-ERR group 0 is the meta group: it holds no slots and is on every node, and cannot be removed\r\n"},
		{[]string{"KVS.GROUPS", "REMOVE", "one"}, "-" + errNotInteger + "\r\n"},
		{[]string{"KVS.GROUPS", "REMOVE"}, "-" + fmt.Sprintf(usage, "REMOVE") + "\r\n"},
		{[]string{"KVS.GROUPS", "FROB"}, "-" + fmt.Sprintf(usage, "FROB") + "\r\n"},
		{[]string{"KVS.GROUPS"}, "-ERR wrong number of arguments for 'kvs.groups' command\r\n"},
	} {
		if got := c.do(tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	fa.mu.Lock()
	if got := strings.Join(fa.calls, ","); got != "add 1,add 2,empty 1,remove 1" {
		t.Errorf("the admin saw %s", got)
	}
	fa.err = errors.New("group 2 is the cluster's last data group: its slots have nowhere to go")
	fa.mu.Unlock()
	if got := c.do("KVS.GROUPS", "REMOVE", "2"); got != "-ERR group 2 is the cluster's last data group: its slots have nowhere to go\r\n" {
		t.Errorf("a refused removal: %q", got)
	}
	fa.mu.Lock()
	fa.err = fmt.Errorf("%w", ErrNoLeader)
	fa.mu.Unlock()
	if got := c.do("KVS.GROUPS", "ADD"); got != "-"+errNoLeader+"\r\n" {
		t.Errorf("an add without a meta leader: %q", got)
	}
	plain := dialRaw(t, startServer(t, Config{}))
	if got := plain.do("KVS.GROUPS", "LIST"); got != "-"+errNoGroupAdmin+"\r\n" {
		t.Errorf("KVS.GROUPS without groups: %q", got)
	}
	for _, cat := range []string{"admin", "dangerous"} {
		if got := c.do("ACL", "CAT", cat); !strings.Contains(got, "\r\nkvs.groups\r\n") {
			t.Errorf("ACL CAT %s does not list kvs.groups: %q", cat, got)
		}
	}
}

// TestSetGroups: a group added at run time is a group held elsewhere,
// listed by the topology commands as a shard without slots (not in
// CLUSTER SLOTS), that a slot map may then give slots; one removed stays
// while the map in force gives it slots or a replica of it is served, and
// is gone after.
func TestSetGroups(t *testing.T) {
	p := startSplitPair(t)
	n2 := Member{ID: "n2", RaftAddr: "127.0.0.1:17002", RESPAddr: p.n2.Addr().String(), Leader: true, Voter: true}
	p.remotes[0].mu.Lock()
	p.remotes[0].members[3] = []Member{n2}
	p.remotes[0].mu.Unlock()
	srv := p.n1
	if kept, err := srv.SetGroups([]int{1, 2, 3}); err != nil || kept != nil {
		t.Fatalf("SetGroups 1 2 3: %v %v", kept, err)
	}
	if g := srv.router.group(3); g == nil || !g.remote() {
		t.Fatalf("group 3 after SetGroups: %+v", g)
	}
	rc := dialRaw(t, srv)
	if got := rc.do("CLUSTER", "SHARDS"); strings.Count(got, "$5\r\nslots\r\n") != 3 || !strings.Contains(got, "$5\r\nslots\r\n*0\r\n") {
		t.Errorf("CLUSTER SHARDS with a group without slots: %q", got)
	}
	if got := rc.do("CLUSTER", "SLOTS"); !strings.HasPrefix(got, "*2\r\n") {
		t.Errorf("CLUSTER SLOTS with a group without slots: %q", got)
	}
	table := slices.Clone(srv.router.slotMap().slots)
	for s := range 100 {
		table[s] = 3
	}
	if err := srv.SetSlotMap(1, table); err != nil {
		t.Fatalf("a map giving group 3 slots: %v", err)
	}
	bad := slices.Clone(table)
	bad[0] = 4
	if err := srv.SetSlotMap(2, bad); err == nil {
		t.Fatal("a map naming group 4, which the node does not know, was installed")
	}
	k := ""
	for i := 0; ; i++ {
		if k = fmt.Sprintf("g3:%d", i); fsm.KeySlot(k) < 100 {
			break
		}
	}
	ro := dialRaw(t, srv)
	if got := ro.do("READONLY"); got != "+OK\r\n" {
		t.Fatalf("READONLY: %q", got)
	}
	if got := ro.do("GET", k); got != fmt.Sprintf("-MOVED %d %s\r\n", fsm.KeySlot(k), p.n2.Addr()) {
		t.Errorf("GET of a key of group 3 on a READONLY connection: %q", got)
	}

	// Group 1 leaves the list: the map still gives it slots, and this
	// node serves it.
	if kept, err := srv.SetGroups([]int{2, 3}); err != nil || !slices.Equal(kept, []int{1}) {
		t.Fatalf("SetGroups 2 3: kept %v, %v; want [1]", kept, err)
	}
	for s := range table {
		if table[s] == 1 {
			table[s] = 3
		}
	}
	if err := srv.SetSlotMap(2, table); err != nil {
		t.Fatal(err)
	}
	if kept, err := srv.SetGroups([]int{2, 3}); err != nil || !slices.Equal(kept, []int{1}) {
		t.Fatalf("SetGroups 2 3 with group 1 served here: kept %v, %v; want [1]", kept, err)
	}
	if err := srv.SetLocalGroup(1, nil); err != nil {
		t.Fatal(err)
	}
	if g := srv.router.group(1); g != nil {
		t.Fatalf("group 1 after its replica was taken away: %+v", g)
	}
	if _, err := srv.ProposeGroup(1, []fsm.Command{{Op: fsm.OpSet, Args: [][]byte{[]byte(k), []byte("v")}}}); err == nil {
		t.Error("ProposeGroup to a removed group succeeded")
	}
	if got := rc.do("KVS.BACKUP", "GROUPS", "1"); got != "-ERR backup: no group 1 (the cluster's groups are 0, 2, 3)\r\n" {
		t.Errorf("KVS.BACKUP GROUPS 1 after group 1 went: %q", got)
	}
	// A replica of a group not listed yet, handed over, makes it one.
	st := fsm.NewStore()
	if err := srv.SetLocalGroup(5, &Group{Store: st, Proposer: &replicatingProposer{stores: []*fsm.Store{st}}, Raft: p.fakes[0][1]}); err != nil {
		t.Fatal(err)
	}
	if g := srv.router.group(5); g == nil || g.remote() {
		t.Fatalf("group 5 after SetLocalGroup: %+v", g)
	}
}
