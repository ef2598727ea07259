package server

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"kvs/fsm"
)

// startSharded runs a server whose slots are spread evenly over n memory
// groups, and returns it with the groups' stores.
func startSharded(t *testing.T, n int, opts ...func(*Config)) (*Server, []*fsm.Store) {
	t.Helper()
	var groups []Group
	var stores []*fsm.Store
	for range n {
		st := fsm.NewStore()
		stores = append(stores, st)
		groups = append(groups, Group{Store: st})
	}
	slots := make([]uint16, fsm.ClusterSlots)
	for s := range slots {
		slots[s] = uint16(s * n / fsm.ClusterSlots)
	}
	cfg := Config{Store: stores[0], Groups: groups, Slots: slots}
	for _, o := range opts {
		o(&cfg)
	}
	return startServer(t, cfg), stores
}

// keyIn returns a key whose slot is in group g of n (even split), the
// i-th such key.
func keyIn(g, n, i int) string {
	for j := 0; ; j++ {
		k := "k" + strconv.Itoa(j)
		if fsm.KeySlot(k)*n/fsm.ClusterSlots == g {
			if i == 0 {
				return k
			}
			i--
		}
	}
}

func keysOf(st *fsm.Store) []string {
	r := st.Read(time.Now().UnixMilli(), fsm.Command{Op: fsm.OpKeys, Args: [][]byte{[]byte("*")}})
	var out []string
	for _, e := range r.Array {
		out = append(out, string(e.Bulk))
	}
	slices.Sort(out)
	return out
}

// TestShardedRouting: on a node whose slots are spread over groups, each
// key lives in its slot's group, commands of one pipeline reach their own
// groups in order, and keys of different slots in one command get Redis
// Cluster's CROSSSLOT.
func TestShardedRouting(t *testing.T) {
	const n = 3
	s, stores := startSharded(t, n)
	rc := dialRaw(t, s)
	var pipe []byte
	var want []string
	for g := range n {
		for i := range 4 {
			k := keyIn(g, n, i)
			pipe = append(pipe, encodeCommand("SET", k, "v"+k)...)
			pipe = append(pipe, encodeCommand("GET", k)...)
			want = append(want, "+OK\r\n", fmt.Sprintf("$%d\r\nv%s\r\n", len(k)+1, k))
		}
	}
	rc.send(pipe)
	for i, w := range want {
		if got := rc.reply(); got != w {
			t.Fatalf("reply %d: %q, want %q", i, got, w)
		}
	}
	for g, st := range stores {
		var ks []string
		for i := range 4 {
			ks = append(ks, keyIn(g, n, i))
		}
		slices.Sort(ks)
		if got := keysOf(st); !slices.Equal(got, ks) {
			t.Errorf("group %d holds %q, want %q", g, got, ks)
		}
	}
	a, b := keyIn(0, n, 0), keyIn(1, n, 0)
	cross := "-" + errCrossSlot + "\r\n"
	for _, cmd := range [][]string{{"MSET", a, "1", b, "2"}, {"MGET", a, b}, {"DEL", a, b}, {"RENAME", a, b},
		{"EVAL", "return 1", "2", a, b}, {"WATCH", a, b}} {
		if got := rc.do(cmd...); got != cross {
			t.Errorf("%q: %q, want CROSSSLOT", cmd, got)
		}
	}
	if got := rc.do("MSET", "{t}a", "1", "{t}b", "2"); got != "+OK\r\n" {
		t.Errorf("MSET with one hash tag: %q", got)
	}
	if got := rc.do("DBSIZE"); got != fmt.Sprintf(":%d\r\n", 4*n+2) {
		t.Errorf("DBSIZE: %q, want %d", got, 4*n+2)
	}
}

// TestShardedTransaction: a transaction's commands, and the keys it
// watches, must share a slot; EXEC of one that does not discards it with
// CROSSSLOT, as Redis Cluster's EXEC does.
func TestShardedTransaction(t *testing.T) {
	const n = 3
	s, stores := startSharded(t, n)
	rc := dialRaw(t, s)
	a, b := keyIn(1, n, 0), keyIn(2, n, 0)
	for _, step := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", a, "1"}, "+QUEUED\r\n"},
		{[]string{"SET", b, "1"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "-" + errCrossSlot + "\r\n"},
		{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
		{[]string{"WATCH", a}, "+OK\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", b, "1"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "-" + errCrossSlot + "\r\n"},
		{[]string{"WATCH", b}, "+OK\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"SET", b, "2"}, "+QUEUED\r\n"},
		{[]string{"INCR", b}, "+QUEUED\r\n"},
		{[]string{"PING"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*3\r\n+OK\r\n:3\r\n+PONG\r\n"},
		{[]string{"GET", b}, "$1\r\n3\r\n"},
		// What writes to every group is no part of a transaction,
		// which is applied in one group.
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"FLUSHALL"}, "-ERR 'flushall' cannot be queued in a transaction on a node of several groups: it writes to every group, and a transaction is applied in one\r\n"},
		{[]string{"function", "LOAD", "#!lua name=l\nredis.register_function('f', function() return 1 end)"},
			"-ERR 'function|load' cannot be queued in a transaction on a node of several groups: it writes to every group, and a transaction is applied in one\r\n"},
		{[]string{"SCRIPT", "EXISTS", "abc"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "-EXECABORT Transaction discarded because of previous errors.\r\n"},
		{[]string{"GET", b}, "$1\r\n3\r\n"},
	} {
		if got := rc.do(step.cmd...); got != step.want {
			t.Fatalf("%q: %q, want %q", step.cmd, got, step.want)
		}
	}
	if got := keysOf(stores[2]); !slices.Equal(got, []string{b}) {
		t.Errorf("group 2 holds %q, want [%s]", got, b)
	}
	if got := keysOf(stores[1]); len(got) != 0 {
		t.Errorf("group 1 holds %q: the refused transaction wrote", got)
	}
}

// TestShardedKeyspace: DBSIZE, KEYS, SCAN, RANDOMKEY and FLUSHALL answer
// for every group, and expired keys are deleted in each.
func TestShardedKeyspace(t *testing.T) {
	const n = 4
	s, stores := startSharded(t, n)
	rc := dialRaw(t, s)
	var all []string
	for i := range 200 {
		k := "key:" + strconv.Itoa(i)
		all = append(all, k)
		if got := rc.do("SET", k, "v"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
	}
	slices.Sort(all)
	for g, st := range stores {
		if len(keysOf(st)) == 0 {
			t.Fatalf("group %d holds no key of 200", g)
		}
	}
	if got := rc.do("DBSIZE"); got != ":200\r\n" {
		t.Errorf("DBSIZE: %q", got)
	}
	keys := parseArray(t, rc.do("KEYS", "*"))
	slices.Sort(keys)
	if !slices.Equal(keys, all) {
		t.Errorf("KEYS * found %d keys, want the 200", len(keys))
	}
	seen := map[string]int{}
	cursor := "0"
	for {
		r := rc.do("SCAN", cursor, "COUNT", "7")
		// *2 $n cursor *m ...
		lines := strings.SplitN(r, "\r\n", 4)
		cursor = lines[2]
		for _, k := range parseArray(t, lines[3]) {
			seen[k]++
		}
		if cursor == "0" {
			break
		}
	}
	if len(seen) != 200 {
		t.Errorf("SCAN found %d distinct keys, want 200", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("SCAN returned %s %d times: each key comes once while nothing changes", k, n)
		}
	}
	if got := rc.do("RANDOMKEY"); !strings.HasPrefix(got, "$") || got == "$-1\r\n" {
		t.Errorf("RANDOMKEY: %q", got)
	}
	if got := rc.do("FLUSHALL"); got != "+OK\r\n" {
		t.Fatalf("FLUSHALL: %q", got)
	}
	for g, st := range stores {
		if ks := keysOf(st); len(ks) != 0 {
			t.Errorf("group %d holds %d keys after FLUSHALL", g, len(ks))
		}
	}
	for i := range 40 {
		if got := rc.do("SET", "exp:"+strconv.Itoa(i), "v", "PX", "1"); got != "+OK\r\n" {
			t.Fatalf("SET PX: %q", got)
		}
	}
	eventually(t, "active expiry to delete the keys of every group", func() bool {
		for _, st := range stores {
			if st.Stats(0).Keys != 0 {
				return false
			}
		}
		return true
	})
}

// TestShardedBlocking: a blocked pop on a key of one group is served by a
// push to it through another connection.
func TestShardedBlocking(t *testing.T) {
	const n = 3
	s, _ := startSharded(t, n)
	k := keyIn(2, n, 0)
	blocked, pusher := dialRaw(t, s), dialRaw(t, s)
	blocked.send(encodeCommand("BLPOP", k, "0"))
	eventually(t, "the client to block", func() bool { return s.blocked.count() == 1 })
	if got := pusher.do("RPUSH", k, "x"); got != ":1\r\n" {
		t.Fatalf("RPUSH: %q", got)
	}
	want := fmt.Sprintf("*2\r\n$%d\r\n%s\r\n$1\r\nx\r\n", len(k), k)
	if got := blocked.reply(); got != want {
		t.Errorf("BLPOP: %q, want %q", got, want)
	}
}

// parseArray returns the bulk strings of a RESP2 array reply.
func parseArray(t *testing.T, r string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(r, "\r\n"), "\r\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "*") {
		t.Fatalf("not an array: %q", r)
	}
	var out []string
	for i := 2; i < len(lines); i += 2 {
		out = append(out, lines[i])
	}
	return out
}

// TestShardedScripts: a function or script loaded through a sharded node
// runs on the keys of every group, and a flush removes it from all.
func TestShardedScripts(t *testing.T) {
	const n = 3
	s, _ := startSharded(t, n)
	rc := dialRaw(t, s)
	lib := "#!lua name=lib\nredis.register_function('setget', function(keys, args) redis.call('SET', keys[1], args[1]) return redis.call('GET', keys[1]) end)"
	if got := rc.do("FUNCTION", "LOAD", lib); got != "$3\r\nlib\r\n" {
		t.Fatalf("FUNCTION LOAD: %q", got)
	}
	if got := rc.do("FUNCTION", "LOAD", lib); got != "-ERR Library 'lib' already exists\r\n" {
		t.Errorf("FUNCTION LOAD again: %q", got)
	}
	sha := strings.Split(rc.do("SCRIPT", "LOAD", "return redis.call('INCR', KEYS[1])"), "\r\n")[1]
	for g := range n {
		k := keyIn(g, n, 0)
		if got := rc.do("FCALL", "setget", "1", k, "v"); got != "$1\r\nv\r\n" {
			t.Errorf("FCALL on group %d: %q", g, got)
		}
		if got := rc.do("EVALSHA", sha, "1", keyIn(g, n, 1)); got != ":1\r\n" {
			t.Errorf("EVALSHA on group %d: %q", g, got)
		}
	}
	if got := rc.do("FUNCTION", "FLUSH"); got != "+OK\r\n" {
		t.Fatalf("FUNCTION FLUSH: %q", got)
	}
	if got := rc.do("SCRIPT", "FLUSH"); got != "+OK\r\n" {
		t.Fatalf("SCRIPT FLUSH: %q", got)
	}
	for g := range n {
		if got := rc.do("FCALL", "setget", "1", keyIn(g, n, 0), "v"); !strings.HasPrefix(got, "-ERR Function not found") {
			t.Errorf("FCALL on group %d after FUNCTION FLUSH: %q", g, got)
		}
		if got := rc.do("EVALSHA", sha, "1", keyIn(g, n, 1)); !strings.HasPrefix(got, "-NOSCRIPT") {
			t.Errorf("EVALSHA on group %d after SCRIPT FLUSH: %q", g, got)
		}
	}
}

// TestShardedEvalSHA: a script EVAL cached in one group runs by its SHA on
// the keys of another, as one Redis node's script cache serves every key.
func TestShardedEvalSHA(t *testing.T) {
	const n = 3
	s, _ := startSharded(t, n)
	rc := dialRaw(t, s)
	script := "return redis.call('INCRBY', KEYS[1], ARGV[1])"
	if got := rc.do("EVAL", script, "1", keyIn(0, n, 0), "5"); got != ":5\r\n" {
		t.Fatalf("EVAL: %q", got)
	}
	sha := fsm.ScriptSHA([]byte(script))
	for g := range n {
		if got := rc.do("EVALSHA", sha, "1", keyIn(g, n, 2), "2"); got != ":2\r\n" {
			t.Errorf("EVALSHA on group %d: %q", g, got)
		}
	}
	if got := rc.do("EVALSHA", strings.Repeat("0", 40), "1", keyIn(1, n, 0)); !strings.HasPrefix(got, "-NOSCRIPT") {
		t.Errorf("EVALSHA of an unknown script: %q", got)
	}
	// SCRIPT EXISTS agrees: a script EVAL cached in the last group only
	// exists, though SCRIPT EXISTS answers from the node's first group.
	other := "return redis.call('GET', KEYS[1])"
	rc.do("EVAL", other, "1", keyIn(n-1, n, 0))
	if got := rc.do("SCRIPT", "EXISTS", fsm.ScriptSHA([]byte(other)), strings.Repeat("0", 40), sha); got != "*3\r\n:1\r\n:0\r\n:1\r\n" {
		t.Errorf("SCRIPT EXISTS of scripts cached in some groups: %q", got)
	}
}

// TestShardedScriptNonLocal: a script runs in its keys' group, and a call
// on a key of another group is refused with Redis Cluster's text, before
// anything is written there.
func TestShardedScriptNonLocal(t *testing.T) {
	const n = 3
	s, stores := startSharded(t, n)
	rc := dialRaw(t, s)
	a, b := keyIn(0, n, 0), keyIn(1, n, 0)
	script := "redis.call('SET', KEYS[1], 'x') return redis.call('SET', ARGV[1], 'y')"
	want := "-" + errScriptNonLocal + " script: "
	if got := rc.do("EVAL", script, "1", a, b); !strings.HasPrefix(got, want) {
		t.Errorf("EVAL touching another group's key: %q, want %q", got, want)
	}
	if got := keysOf(stores[1]); len(got) != 0 {
		t.Errorf("group 1 holds %q: the script wrote into the wrong group", got)
	}
	if got := keysOf(stores[0]); len(got) != 1 || got[0] != a {
		t.Errorf("group 0 holds %q, want [%s] (the write before the refused call stays, as in Redis)", got, a)
	}
	if got := rc.do("EVAL", "return redis.call('GET', ARGV[1])", "0", keyIn(0, n, 1)); got != "$-1\r\n" {
		t.Errorf("EVAL without keys, on a key of the home group: %q", got)
	}
	if got := rc.do("EVAL", "return redis.call('GET', ARGV[1])", "0", b); !strings.HasPrefix(got, want) {
		t.Errorf("EVAL without keys, on a key of another group: %q, want %q", got, want)
	}
}

// TestShardedShardChannels: shard channels of one command must share a
// slot, as Redis Cluster routes them.
func TestShardedShardChannels(t *testing.T) {
	const n = 3
	s, _ := startSharded(t, n)
	rc := dialRaw(t, s)
	a, b := keyIn(0, n, 0), keyIn(1, n, 0)
	if got := rc.do("SSUBSCRIBE", a, b); got != "-"+errCrossSlot+"\r\n" {
		t.Errorf("SSUBSCRIBE across slots: %q", got)
	}
	if got := rc.do("SPUBLISH", b, "m"); got != ":0\r\n" {
		t.Errorf("SPUBLISH: %q", got)
	}
	if got := rc.do("SSUBSCRIBE", "{c}1", "{c}2"); !strings.HasPrefix(got, "*3\r\n$10\r\nssubscribe\r\n") {
		t.Errorf("SSUBSCRIBE in one slot: %q", got)
	}
}

// TestShardedScriptReplay: a script's calls are checked against the group
// of the store that applies its entry, with the parser InstallScriptParser
// gives the stores of a node's groups before they replay their logs: the
// same entry touches a key of its own group and is refused another's,
// whatever node or replay applies it.
func TestShardedScriptReplay(t *testing.T) {
	stores := []*fsm.Store{fsm.NewStore(), fsm.NewStore(), fsm.NewStore()}
	slots := make([]uint16, fsm.ClusterSlots)
	for s := range slots {
		slots[s] = uint16(1 + s*2/fsm.ClusterSlots)
	}
	InstallScriptParser(Config{Store: stores[0], Groups: []Group{{Store: stores[0]}, {Store: stores[1]}, {Store: stores[2]}}, Slots: slots})
	keys := []string{"", keyIn(0, 2, 0), keyIn(1, 2, 0)} // of groups 1 and 2
	eval := func(key string) fsm.Command {
		return fsm.Command{Op: fsm.OpEval, Args: [][]byte{[]byte("return redis.call('SET', ARGV[1], 'v')"), []byte(key)}}
	}
	for g := 1; g <= 2; g++ {
		other := keys[3-g]
		r := stores[g].Apply(1, 0, []fsm.Command{eval(keys[g]), eval(other)})
		if r[0].Kind != fsm.ReplyStatus || r[0].Str != "OK" {
			t.Errorf("group %d's entry on its own key: %+v", g, r[0])
		}
		if r[1].Kind != fsm.ReplyError || !strings.HasPrefix(r[1].Str, errScriptNonLocal) {
			t.Errorf("group %d's entry on group %d's key: %+v", g, 3-g, r[1])
		}
		if got := keysOf(stores[g]); len(got) != 1 || got[0] != keys[g] {
			t.Errorf("group %d holds %q, want [%s]", g, got, keys[g])
		}
	}
	if r := stores[0].Apply(1, 0, []fsm.Command{eval(keys[1])}); r[0].Kind != fsm.ReplyError || !strings.HasPrefix(r[0].Str, errScriptNonLocal) {
		t.Errorf("the meta group's entry on a key: %+v", r[0])
	}
}

// TestShardedBusyScript: a script busy in a group other than the home is
// the one FUNCTION STATS shows and SCRIPT KILL and FUNCTION KILL stop.
func TestShardedBusyScript(t *testing.T) {
	for _, m := range busyModes {
		t.Run(m.name, func(t *testing.T) {
			const n = 3
			s, _ := startSharded(t, n, func(c *Config) { c.ConnGoroutines = m.goroutines })
			a := dialRaw(t, s)
			probes := busyProbes(t, s)
			k := keyIn(2, n, 0)
			code := "#!lua name=spin\nredis.register_function{function_name='spin', callback=function(keys, args) while true do end end, flags={'no-writes'}}"
			if r := a.do("FUNCTION", "LOAD", code); r != bulk("spin") {
				t.Fatal(r)
			}
			a.send(encodeCommand("FCALL", "spin", "1", k))
			busyFn := "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
			waitBusyReply(t, probes, busyFn)
			p := probes[0]
			if r := p.do("FUNCTION", "STATS"); !strings.Contains(r, "running_script") || !strings.Contains(r, bulk("spin")) {
				t.Errorf("FUNCTION STATS of a function busy in group 2: %q", r)
			}
			if r := p.do("SCRIPT", "KILL"); r != busyFn {
				t.Errorf("SCRIPT KILL of a function: %q", r)
			}
			if r := p.do("FUNCTION", "KILL"); r != "+OK\r\n" {
				t.Fatalf("FUNCTION KILL: %q", r)
			}
			if r := a.reply(); !strings.HasPrefix(r, "-"+fsm.ErrScriptKilled) {
				t.Fatalf("the function's reply: %q", r)
			}
			a.send(encodeCommand("EVAL", "while true do end", "1", k))
			waitBusyReply(t, probes, busyEvalText)
			if r := p.do("SCRIPT", "KILL"); r != "+OK\r\n" {
				t.Fatalf("SCRIPT KILL: %q", r)
			}
			if r := a.reply(); !strings.HasPrefix(r, "-"+fsm.ErrScriptKilled) {
				t.Fatalf("the script's reply: %q", r)
			}
		})
	}
}
