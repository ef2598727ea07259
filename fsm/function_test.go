package fsm

import (
	"bytes"
	"strings"
	"testing"
)

func fcall(name string, seed int64, budget float64, nkeys int64, keysAndArgs ...string) Command {
	cmd := c(OpFCall, append([]string{name}, keysAndArgs...)...)
	cmd.Int, cmd.Int2, cmd.Float = nkeys, seed, budget
	return cmd
}

func fcallRO(name string, nkeys int64, keysAndArgs ...string) Command {
	cmd := fcall(name, 1, 0, nkeys, keysAndArgs...)
	cmd.Op = OpFCallRO
	return cmd
}

const libCounter = `#!lua name=counter
local calls = 0
local function bump(keys, args)
  calls = calls + 1
  return {redis.call('incr', keys[1]), calls}
end
redis.register_function('bump', bump)
redis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end,
  flags={'no-writes'}, description='reads the counter'}
redis.register_function{function_name='sneak', callback=function(keys) return redis.call('set', keys[1], 'x') end,
  flags={'no-writes'}}
`

func TestFunctionLifecycle(t *testing.T) {
	s := newScriptStore()
	other := "#!lua name=other\nredis.register_function('BUMP', function() return 1 end)"
	run(t, s, []step{
		{1, fcall("bump", 1, 0, 1, "n"), errr(ErrFunctionNotFound)},
		{1, c(OpFunctionLoad, libCounter), bulk("counter")},
		{1, c(OpFunctionLoad, libCounter), errr("ERR Library 'counter' already exists")},
		{1, c(OpFunctionLoad, libCounter).fl(FlagFunctionReplace), bulk("counter")},
		// Function names are one namespace, without regard to case.
		{1, c(OpFunctionLoad, other), errr("ERR Function BUMP already exists")},
		{1, fcall("bump", 1, 0, 1, "n"), arr(in(1), in(1))},
		// Each call starts from the library as loaded: calls is 1 again.
		{1, fcall("BUMP", 1, 0, 1, "n"), arr(in(2), in(1))},
		{1, fcallRO("peek", 1, "n"), bulk("2")},
		{1, fcallRO("bump", 1, "n"), errr(ErrFunctionWriteRO)},
		{1, fcall("sneak", 1, 0, 1, "n"), errr("ERR Write commands are not allowed from read-only scripts. script: sneak, on @user_function:10.")},
		{1, c(OpFunctionStats), Reply{Kind: ReplyMap, Array: []Reply{
			bulk("running_script"), replyNil,
			bulk("engines"), {Kind: ReplyMap, Array: []Reply{bulk("LUA"), {Kind: ReplyMap, Array: []Reply{
				bulk("libraries_count"), in(1), bulk("functions_count"), in(3)}}}}}}},
		{1, c(OpFunctionDelete, "Counter"), errr(ErrLibraryNotFound)},
		{1, c(OpFunctionDelete, "counter"), status("OK")},
		{1, fcall("bump", 1, 0, 1, "n"), errr(ErrFunctionNotFound)},
		{1, c(OpFunctionLoad, other), bulk("other")},
		{1, c(OpFunctionFlush), status("OK")},
		{1, c(OpFunctionList), arr()},
	})
	if len(s.MetaAll()) != 0 {
		t.Fatalf("metadata after FUNCTION FLUSH: %v", s.MetaAll())
	}
}

func TestFunctionList(t *testing.T) {
	s := newScriptStore()
	s.Apply(1, 1, []Command{c(OpFunctionLoad, libCounter)})
	s.Apply(2, 1, []Command{c(OpFunctionLoad, "#!lua name=alpha\nredis.register_function('a1', function() end)")})
	fn := func(name string, desc Reply, flags ...string) Reply {
		fl := []Reply{}
		for _, f := range flags {
			fl = append(fl, status(f))
		}
		return Reply{Kind: ReplyMap, Array: []Reply{bulk("name"), bulk(name), bulk("description"), desc,
			bulk("flags"), {Kind: ReplySet, Array: fl}}}
	}
	counter := []Reply{bulk("library_name"), bulk("counter"), bulk("engine"), bulk("LUA"), bulk("functions"),
		arr(fn("bump", replyNil), fn("peek", bulk("reads the counter"), "no-writes"), fn("sneak", replyNil, "no-writes"))}
	alpha := []Reply{bulk("library_name"), bulk("alpha"), bulk("engine"), bulk("LUA"), bulk("functions"), arr(fn("a1", replyNil))}
	run(t, s, []step{
		{1, c(OpFunctionList), arr(Reply{Kind: ReplyMap, Array: alpha}, Reply{Kind: ReplyMap, Array: counter})},
		{1, c(OpFunctionList, "COUNT*").fl(FlagFunctionPattern), arr(Reply{Kind: ReplyMap, Array: counter})},
		{1, c(OpFunctionList, "alpha").fl(FlagFunctionPattern | FlagFunctionWithCode), arr(Reply{Kind: ReplyMap,
			Array: append(alpha, bulk("library_code"), bulk("#!lua name=alpha\nredis.register_function('a1', function() end)"))})},
	})
}

func TestFunctionLoadErrors(t *testing.T) {
	s := newScriptStore()
	for _, tc := range []struct{ code, want string }{
		{"return 1", "ERR Missing library metadata"},
		{"#!lua name=x", "ERR Invalid library metadata"},
		{"#!lua\n", "ERR Library name was not given"},
		{"#!lua name=a-b\n", "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"},
		{"#!js name=x\n", "ERR Engine 'js' not found"},
		{"#!lua name=x\nreturn 1", "ERR No functions registered"},
		{"#!lua name=x\nredis.register_function('f', 1)", "ERR Error registering functions: ERR second argument to redis.register_function must be a function"},
		{"#!lua name=x\nredis.call('set', 'a', 'b')", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"},
		{"#!lua name=x\nlocal s = string.rep('a', 3)", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'string'"},
		{"#!lua name=x\nx = 1", "ERR Error registering functions: ERR user_function:2: Attempt to modify a readonly table"},
		{"#!lua name=x\nwhile true do end", "ERR Error registering functions: ERR FUNCTION LOAD timeout"},
		{"#!lua name=x\nredis.register_function{function_name='f', callback=function() end, flags={'fast'}}", "ERR Error registering functions: ERR unknown flag given"},
	} {
		if r := s.Apply(0, 1, []Command{c(OpFunctionLoad, tc.code)})[0]; r.Str != tc.want {
			t.Errorf("%q: %v, want %q", tc.code, r, tc.want)
		}
	}
	if len(s.MetaAll()) != 0 {
		t.Fatalf("metadata after failed loads: %v", s.MetaAll())
	}
}

// TestFunctionDeterminism replays the same entries (functions using
// math.random, TIME and a runaway loop) on two stores: identical replies
// and snapshots. A store restored from the snapshot, with the per-process
// library cache emptied as after a restart, still has the functions.
func TestFunctionDeterminism(t *testing.T) {
	lib := `#!lua name=det
redis.register_function('rnd', function(keys) return redis.call('set', keys[1], math.random(1000000) .. tostring({})) end)
redis.register_function('now', function(keys) local t = redis.call('time') return redis.call('set', keys[1], t[1]) end)
redis.register_function('spin', function(keys) local i = 0 while true do i = i + 1 redis.call('set', keys[1], i) end end)
`
	cmds := []Command{c(OpFunctionLoad, lib), fcall("rnd", 7, 5000, 1, "a"), fcall("now", 8, 5000, 1, "b"), fcall("spin", 9, 5000, 1, "c")}
	replay := func() ([]Reply, []byte) {
		s := newScriptStore()
		var replies []Reply
		for i, cmd := range cmds {
			replies = append(replies, s.Apply(uint64(i+1), 1700000000000+int64(i), []Command{cmd})[0])
		}
		return replies, snapshotBytes(t, s)
	}
	r1, snap1 := replay()
	r2, snap2 := replay()
	for i := range r1 {
		if !replyEqual(r1[i], r2[i]) {
			t.Errorf("entry %d: %v and %v", i, r1[i], r2[i])
		}
	}
	if !bytes.Equal(snap1, snap2) {
		t.Fatal("snapshots of the same entries differ")
	}
	if r1[3].Str != ErrBudget {
		t.Fatalf("runaway function: %v, want the budget's error", r1[3])
	}
	libraries.Lock()
	libraries.m = nil
	libraries.Unlock()
	s := newScriptStore()
	if _, err := s.Restore(bytes.NewReader(snap1)); err != nil {
		t.Fatal(err)
	}
	if found, noWrites, _ := s.Function("RND"); !found || noWrites {
		t.Fatalf("Function(RND) after restore: %v %v", found, noWrites)
	}
	if r := s.Apply(5, 1, []Command{fcall("now", 1, 0, 1, "b")})[0]; r.Str != "OK" {
		t.Fatalf("FCALL after restore: %v", r)
	}
}

func TestFunctionArguments(t *testing.T) {
	s := newScriptStore()
	s.Apply(1, 1, []Command{c(OpFunctionLoad, `#!lua name=args
redis.register_function('shape', function(keys, args) return {#keys, #args, keys[1], args[2]} end)
redis.register_function('globals', function() return KEYS end)
`)})
	run(t, s, []step{
		{1, fcall("shape", 1, 0, 2, "k1", "k2", "a1", "a2", "a3"), arr(in(2), in(3), bulk("k1"), bulk("a2"))},
		{1, fcall("globals", 1, 0, 0), errr("ERR user_function:3: Script attempted to access nonexistent global variable 'KEYS' script: globals, on @user_function:3.")},
	})
}

// TestEvalNoWritesCached: EVAL of a no-writes script is a write entry only
// to cache the body, and the script still may not write.
func TestEvalNoWritesCached(t *testing.T) {
	s := newScriptStore()
	body := "#!lua flags=no-writes\nreturn redis.call('set', 'k', 'v')"
	r := s.Apply(0, 1, []Command{eval(body, 1, 0).fl(FlagScriptNoWrites)})[0]
	if !strings.HasPrefix(r.Str, "ERR Write commands are not allowed from read-only scripts.") {
		t.Fatalf("a write from a no-writes EVAL: %v", r)
	}
	if _, ok := s.Script(ScriptSHA([]byte(body))); !ok {
		t.Fatal("the no-writes script is not cached")
	}
}

// TestFCallBadKeys: a refused key count is the reply only when the
// function exists where the call runs.
func TestFCallBadKeys(t *testing.T) {
	s := newScriptStore()
	bad := c(OpFCallRO, "bump", "ERR Bad number of keys provided").fl(FlagFCallBadKeys)
	run(t, s, []step{
		{1, bad, errr(ErrFunctionNotFound)},
		{1, c(OpFunctionLoad, libCounter), bulk("counter")},
		{1, bad, errr("ERR Bad number of keys provided")},
	})
}
