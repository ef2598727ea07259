package group

import (
	"errors"
	"strconv"
	"sync"
	"testing"

	"kvs/fsm"
)

func levelsOf(meta map[string]string) Levels {
	return Levels{Meta: func(name string) (string, bool) {
		v, ok := meta[name]
		return v, ok
	}}
}

func TestLevelsLowest(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta map[string]string
		ids  []string
		want int
	}{
		{"no members", nil, nil, 0},
		{"none published: a kvs from before levels", nil, []string{"n1", "n2"}, 0},
		{"every member at 1", map[string]string{"node/n1/level": "1", "node/n2/level": "1", "node/n3/level": "1"}, []string{"n1", "n2", "n3"}, 1},
		{"one member not yet upgraded", map[string]string{"node/n1/level": "1", "node/n3/level": "1"}, []string{"n1", "n2", "n3"}, 0},
		{"a non-member's level does not count", map[string]string{"node/n1/level": "1", "node/n9/level": "0"}, []string{"n1"}, 1},
		{"the lowest of several", map[string]string{"node/n1/level": "3", "node/n2/level": "2"}, []string{"n1", "n2"}, 2},
		{"an unreadable level is 0", map[string]string{"node/n1/level": "x", "node/n2/level": "1"}, []string{"n1", "n2"}, 0},
		{"a negative level is 0", map[string]string{"node/n1/level": "-2"}, []string{"n1"}, 0},
	} {
		if got := levelsOf(tc.meta).Lowest(tc.ids); got != tc.want {
			t.Errorf("%s: Lowest = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestLevelsAllowsAdmits(t *testing.T) {
	before := levelsOf(map[string]string{"node/n1/level": "1"})
	if got := before.Cluster(); got != 0 {
		t.Errorf("no recorded level: Cluster = %d, want 0", got)
	}
	if err := before.Allows(0); err != nil {
		t.Errorf("Allows(0) at level 0: %v", err)
	}
	if err := before.Allows(1); !errors.Is(err, ErrLevel) {
		t.Errorf("Allows(1) at level 0: %v, want ErrLevel", err)
	}
	if err := before.Admits("old", 0); err != nil {
		t.Errorf("Admits a level-0 node at level 0: %v", err)
	}

	at1 := levelsOf(map[string]string{ClusterLevelMeta: "1"})
	if got := at1.Cluster(); got != 1 {
		t.Errorf("Cluster = %d, want 1", got)
	}
	if err := at1.Allows(1); err != nil {
		t.Errorf("Allows(1) at level 1: %v", err)
	}
	if err := at1.Allows(2); !errors.Is(err, ErrLevel) {
		t.Errorf("Allows(2) at level 1: %v, want ErrLevel", err)
	}
	if err := at1.Admits("new", 1); err != nil {
		t.Errorf("Admits a level-1 node at level 1: %v", err)
	}
	if err := at1.Admits("newer", 2); err != nil {
		t.Errorf("Admits a level-2 node at level 1: %v", err)
	}
	err := at1.Admits("old", 0)
	if !errors.Is(err, ErrLevel) {
		t.Fatalf("Admits a level-0 node at level 1: %v, want ErrLevel", err)
	}
	t.Log(err)
}

// TestLevelGate: a node's groups refuse a batch whose entry needs a level
// above the cluster's, alone, and propose everything once the cluster
// reaches this kvs's level.
func TestLevelGate(t *testing.T) {
	tn := openNode(t, "n1", t.TempDir(), "127.0.0.1:0", true, []uint32{0}, false)
	g := tn.groups[0]
	eventually(t, "a leader", func() error {
		if !g.Node().IsLeader() {
			return errors.New("not yet")
		}
		return nil
	})
	var mu sync.Mutex
	meta := map[string]string{}
	levels := Levels{Meta: func(name string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := meta[name]
		return v, ok
	}}
	asked := 0
	tn.n.SetLevelGate(func(need int) error {
		mu.Lock()
		asked++
		mu.Unlock()
		return levels.Allows(need)
	})

	// The store is a cluster's: its scripts' calls follow their entry's
	// level; the parser answers a call with the level it was given.
	tn.stores[0].GateScriptCalls()
	tn.stores[0].SetCommandParser(func(p *fsm.ParseContext, args [][]byte) (fsm.Command, fsm.Reply, bool) {
		return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyInt, Int: int64(p.Level)}, true
	})
	script := fsm.Command{Op: fsm.OpEval, Args: [][]byte{[]byte("return redis.call('level')")}}
	callLevel := func() int64 {
		t.Helper()
		r, err := g.Proposer().Propose([]fsm.Command{script})
		if err != nil || len(r) != 1 || r[0].Kind != fsm.ReplyInt {
			t.Fatalf("EVAL: %+v, %v", r, err)
		}
		return r[0].Int
	}

	set := fsm.Command{Op: fsm.OpSet, Args: [][]byte{[]byte("k"), []byte("v")}}
	if l := callLevel(); l != 2 {
		t.Fatalf("a script's calls at cluster level 0 may use level %d, want 2", l)
	}
	txn := fsm.MetaTxn([]string{"a", ""}, []string{"a", "1"}) // level 2
	inExec := fsm.ExecCommand(nil, nil, []fsm.Command{txn})
	if _, err := g.Proposer().Propose([]fsm.Command{set}); err != nil {
		t.Fatalf("a level-0 batch at cluster level 0: %v", err)
	}
	for _, cmds := range [][]fsm.Command{{set, txn}, {inExec}} {
		if _, err := g.Proposer().Propose(cmds); !errors.Is(err, ErrLevel) {
			t.Fatalf("a level-2 batch at cluster level 0: err %v, want ErrLevel", err)
		}
	}
	if v, ok := tn.stores[0].Meta("a"); ok {
		t.Fatalf("a refused batch was applied: a = %q", v)
	}

	// During an upgrade from the level before this kvs's, scripts call
	// what that level has: the mark names it, and every member applies it.
	mu.Lock()
	meta[ClusterLevelMeta] = strconv.Itoa(fsm.ApplyLevel - 1)
	mu.Unlock()
	if l := callLevel(); l != fsm.ApplyLevel-1 {
		t.Fatalf("a script's calls at cluster level %d may use level %d", fsm.ApplyLevel-1, l)
	}

	mu.Lock()
	meta[ClusterLevelMeta] = strconv.Itoa(fsm.ApplyLevel)
	mu.Unlock()
	if _, err := g.Proposer().Propose([]fsm.Command{set, txn}); err != nil {
		t.Fatalf("at the cluster's level %d: %v", fsm.ApplyLevel, err)
	}
	if v, _ := tn.stores[0].Meta("a"); v != "1" {
		t.Fatalf("a = %q after the allowed batch, want 1", v)
	}
	if l := callLevel(); l != fsm.ApplyLevel {
		t.Fatalf("a script's calls at the cluster's level %d may use level %d", fsm.ApplyLevel, l)
	}
	mu.Lock()
	before := asked
	mu.Unlock()
	if _, err := g.Proposer().Propose([]fsm.Command{inExec}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != before {
		t.Fatalf("the gate was asked again after it allowed level %d: levels only grow", fsm.ApplyLevel)
	}
}
