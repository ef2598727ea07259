package fsm

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// testParser stands in for the server's parser: SET, GET, INCR, SADD,
// SPOP (seeded from the script) and TIME, enough to drive scripts.
func testParser(p *ParseContext, args [][]byte) (Command, Reply, bool) {
	switch strings.ToLower(string(args[0])) {
	case "set":
		return Command{Op: OpSet, Args: args[1:3]}, Reply{}, false
	case "get":
		return Command{Op: OpGet, Args: args[1:2]}, Reply{}, false
	case "incr":
		return Command{Op: OpIncrBy, Args: args[1:2], Int: 1}, Reply{}, false
	case "sadd":
		return Command{Op: OpSAdd, Args: args[1:]}, Reply{}, false
	case "spop":
		return Command{Op: OpSPop, Args: args[1:2], Int2: p.Rand.Int64()}, Reply{}, false
	case "rpush":
		return Command{Op: OpRPush, Args: args[1:]}, Reply{}, false
	case "lrange":
		a, _ := strconv.ParseInt(string(args[2]), 10, 64)
		b, _ := strconv.ParseInt(string(args[3]), 10, 64)
		return Command{Op: OpLRange, Args: args[1:2], Int: a, Int2: b}, Reply{}, false
	case "time":
		return Command{}, arr(bulk(strconv.FormatInt(p.Now/1000, 10)), bulk(strconv.FormatInt(p.Now%1000*1000, 10))), true
	}
	return Command{}, errr("ERR Unknown Redis command called from script"), true
}

func newScriptStore() *Store {
	s := NewStore()
	s.SetCommandParser(testParser)
	return s
}

func eval(body string, seed int64, budget float64, keysAndArgs ...string) Command {
	cmd := c(OpEval, append([]string{body}, keysAndArgs...)...)
	cmd.Int2, cmd.Float = seed, budget
	return cmd
}

// TestScriptDeterminism replays the same entries, with scripts that use
// math.random, TIME, table iteration, tostring of tables, SPOP and a
// runaway loop stopped by its budget, on two stores: the replies and the
// snapshots must be identical.
func TestScriptDeterminism(t *testing.T) {
	scripts := []string{
		`for i = 1, 20 do redis.call('set', 'r' .. i, math.random(1000000)) end return math.random()`,
		`local t = redis.call('time') return redis.call('set', 'now', t[1] .. '.' .. t[2])`,
		`local t = {} for i = 1, 50 do t['k' .. (i * 7919 % 101)] = i end
		 t.k3 = nil t.z = 1
		 local s = '' for k, v in pairs(t) do s = s .. k .. '=' .. v .. ',' end
		 return redis.call('set', 'order', s)`,
		`return redis.call('set', 'addr', tostring({}) .. tostring(tostring) .. tostring(function() end))`,
		`for i = 1, 30 do redis.call('sadd', 's', 'm' .. i) end
		 return redis.call('set', 'popped', redis.call('spop', 's') .. redis.call('spop', 's'))`,
		`local i = 0 while true do i = i + 1 redis.call('set', 'spin', i) end`,
	}
	run := func() ([][]Reply, []byte) {
		s := newScriptStore()
		var replies [][]Reply
		for i, body := range scripts {
			replies = append(replies, s.Apply(uint64(i+1), 1700000000123+int64(i), []Command{eval(body, 42+int64(i), 5000)}))
		}
		return replies, snapshotBytes(t, s)
	}
	r1, snap1 := run()
	r2, snap2 := run()
	for i := range r1 {
		if !replyEqual(r1[i][0], r2[i][0]) {
			t.Errorf("script %d: replies differ: %v and %v", i, r1[i][0], r2[i][0])
		}
	}
	if !bytes.Equal(snap1, snap2) {
		t.Fatal("snapshots of the same entries differ")
	}
	if r1[len(r1)-1][0].Kind != ReplyError || r1[len(r1)-1][0].Str != ErrBudget {
		t.Fatalf("runaway script: %v, want the budget's error", r1[len(r1)-1][0])
	}
	s := NewStore()
	if _, err := s.Restore(bytes.NewReader(snap1)); err != nil {
		t.Fatal(err)
	}
	if r := s.Read(0, c(OpGet, "now")); string(r.Bulk) != "1700000000.124000" {
		t.Errorf("TIME in a script: %q, want the entry's clock", r.Bulk)
	}
	if r := s.Read(0, c(OpGet, "spin")); r.Kind != ReplyBulk {
		t.Errorf("writes of the stopped script: %v, want kept", r)
	}
}

func replyEqual(a, b Reply) bool {
	return string(AppendReplies(nil, []Reply{a})) == string(AppendReplies(nil, []Reply{b}))
}

// TestScriptBudgetExact checks the budget counts instructions: a script
// stopped at n instructions has done the same work every time, and one
// more instruction of budget lets it do no less.
func TestScriptBudgetExact(t *testing.T) {
	body := `local i = 0 while true do i = i + 1 redis.call('set', 'n', i) end`
	var prev int64
	for _, budget := range []float64{1000, 1000, 1001, 1023, 1024, 1025, 2048, 2049, 5000} {
		s := newScriptStore()
		s.Apply(1, 1, []Command{eval(body, 1, budget)})
		n, _ := strconv.ParseInt(string(s.Read(1, c(OpGet, "n")).Bulk), 10, 64)
		if n < prev || n == 0 {
			t.Fatalf("budget %v: n=%d after %d", budget, n, prev)
		}
		prev = n
	}
}

func TestScriptSandbox(t *testing.T) {
	s := newScriptStore()
	for _, tc := range []struct{ body, want string }{
		{`x = 1`, "ERR user_script:1: Attempt to modify a readonly table script: "},
		{`return tostring(os)`, "ERR user_script:1: Script attempted to access nonexistent global variable 'os' script: "},
		{`string.foo = 1`, "ERR user_script:1: Attempt to modify a readonly table script: "},
		{`rawset(_G, 'x', 1)`, "ERR user_script:1: Attempt to modify a readonly table script: "},
		{`getfenv(0).redis = nil`, "ERR user_script:1: Script attempted to access nonexistent global variable 'getfenv' script: "},
		{`setfenv(1, {})`, "ERR user_script:1: Script attempted to access nonexistent global variable 'setfenv' script: "},
		{`setmetatable(_G, {})`, "ERR user_script:1: cannot change a protected metatable script: "},
		{`rawset(getmetatable(_G), 'x', 1)`, "ERR user_script:1: bad argument #1 to rawset (table expected, got boolean) script: "},
		{`table.insert(string, 1)`, "ERR user_script:1: Attempt to modify a readonly table script: "},
		{`getmetatable('').__index.upper = nil`, "ERR user_script:1: attempt to index a non-table object(boolean) with key '__index' script: "},
		{`return redis.call('nosuch')`, "ERR Unknown Redis command called from script script: "},
		{`error('boom')`, "ERR user_script:1: boom script: "},
	} {
		r := s.Apply(0, 1, []Command{eval(tc.body, 1, 0)})[0]
		if r.Kind != ReplyError || !strings.HasPrefix(r.Str, tc.want) {
			t.Errorf("%s: %v, want %q...", tc.body, r, tc.want)
		}
	}
	// Nothing a script did is visible to the next one.
	if r := s.Apply(0, 1, []Command{eval(`return type(string.upper)`, 1, 0)})[0]; string(r.Bulk) != "function" {
		t.Errorf("string.upper after the scripts: %v", r)
	}
}

// TestScriptRunsShareNothing checks that what one run does to KEYS, ARGV,
// the random source and tostring's numbering is not seen by the next,
// though the runs share one interpreter and environment, and refill the
// KEYS and ARGV tables a run left plain arrays.
func TestScriptRunsShareNothing(t *testing.T) {
	dirty := []string{
		`KEYS[2] = 'extra' KEYS.x = 1 ARGV[1] = 'changed' setmetatable(ARGV, {__index = function() return 'meta' end})
		math.randomseed(7) tostring({}) tostring({}) _G = 'changed' KEYS = {} ARGV = nil
		return 1`,
		// The tables themselves changed, and left in place.
		`KEYS[2] = 'extra' ARGV[1] = 'changed' ARGV[2] = 'added' return 1`,
		`KEYS[1] = nil table.insert(ARGV, 'more') return 1`,
		`KEYS.x = 1 KEYS.x = nil ARGV[10] = 'far' return 1`,
		`KEYS.x = 1 rawset(ARGV, 'y', 2) return 1`,
		`KEYS[-1] = 'negative' ARGV[0] = 'zero' ARGV[1.5] = 'half' return 1`,
		`setmetatable(KEYS, {__index = function() return 'meta' end}) return 1`,
		`ARGV[1] = KEYS KEYS[1] = ARGV return 1`,
		`KEYS[2] = 'a' KEYS[3] = 'b' table.remove(KEYS) table.remove(ARGV) return 1`,
		`KEYS[2] = 'extra' KEYS.y = 1 ARGV[1] = 'changed' error('stopped')`,
		`KEYS = nil ARGV = 1 _G = nil return 1`,
	}
	probe := `local function count(t) local n = 0 for _ in pairs(t) do n = n + 1 end return n end
		return {#KEYS, count(KEYS), tostring(KEYS[1]), tostring(KEYS[2]), tostring(KEYS.x), tostring(KEYS[-1]), tostring(getmetatable(KEYS)),
		#ARGV, count(ARGV), tostring(ARGV[1]), tostring(ARGV[2]), tostring(ARGV[5]), tostring(ARGV[0]), tostring(getmetatable(ARGV)),
		tostring(math.random(1000000)), tostring({}), type(_G), tostring(rawequal(_G, _G._G))}`
	probes := [][]string{{"k", "a"}, {}, {"k1", "k2", "a1", "a2", "a3"}}
	keys := []int64{1, 0, 2}
	fresh := newScriptStore()
	var want []Reply
	for i, args := range probes {
		want = append(want, fresh.Apply(0, 1, []Command{eval(probe, 3, 0, args...).i(keys[i])})[0])
	}
	s := newScriptStore()
	for _, d := range dirty {
		for i, args := range probes {
			s.Apply(0, 1, []Command{eval(d, 5, 0, args...).i(keys[i])})
			for j, args := range probes {
				if r := s.Apply(0, 1, []Command{eval(probe, 3, 0, args...).i(keys[j])})[0]; !replyEqual(r, want[j]) {
					t.Fatalf("after %q with %q, the probe with %q: %v, want %v", d, probes[i], args, r, want[j])
				}
			}
		}
	}
	if r := s.Read(1, c(OpGet, "missing")); r.Kind != ReplyNil {
		t.Fatal(r)
	}
	exp := arr(in(1), in(1), bulk("k"), bulk("nil"), bulk("nil"), bulk("nil"), bulk("nil"),
		in(1), in(1), bulk("a"), bulk("nil"), bulk("nil"), bulk("nil"), bulk("nil"))
	w := want[0]
	if len(w.Array) != 18 || !replyEqual(Reply{Kind: ReplyArray, Array: w.Array[:14]}, exp) || string(w.Array[15].Bulk) != "table: 0x1" ||
		string(w.Array[16].Bulk) != "table" || string(w.Array[17].Bulk) != "true" {
		t.Fatalf("probe: %v", w)
	}
	if w := want[2]; w.Array[0].Int != 2 || w.Array[7].Int != 3 || string(w.Array[11].Bulk) != "nil" {
		t.Fatalf("probe with two keys and three arguments: %v", w)
	}
}

func TestScriptCacheAndFlush(t *testing.T) {
	s := newScriptStore()
	body := "return redis.call('incr', KEYS[1])"
	sha := ScriptSHA([]byte(body))
	if r := s.Apply(0, 1, []Command{c(OpEval, sha, "k").i(1).fl(FlagScriptSHA)})[0]; r.Str != ErrNoScript {
		t.Fatalf("EVALSHA before EVAL: %v", r)
	}
	s.Apply(0, 1, []Command{c(OpEval, body, "k").i(1)})
	if r := s.Apply(0, 1, []Command{c(OpEval, sha, "k").i(1).fl(FlagScriptSHA)})[0]; r.Int != 2 {
		t.Fatalf("EVALSHA after EVAL: %v", r)
	}
	snap := snapshotBytes(t, s)
	restored := newScriptStore()
	if _, err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if _, ok := restored.Script(strings.ToUpper(sha)); !ok {
		t.Fatal("script not in the snapshot")
	}
	s.Apply(0, 1, []Command{c(OpScriptFlush)})
	if r := s.Read(1, c(OpScriptExists, sha)); r.Array[0].Int != 0 {
		t.Fatal("script still there after SCRIPT FLUSH")
	}
}

func TestScriptConversions(t *testing.T) {
	s := newScriptStore()
	for _, tc := range []struct {
		body string
		want Reply
	}{
		{`return {1, 'a', {2}, redis.status_reply('OK'), true, false, 3.9, nil, 5}`,
			arr(in(1), bulk("a"), arr(in(2)), status("OK"), in(1), replyNil, in(3))},
		{`redis.setresp(3) return {true, false, {double=1.5}, {map={a=1}}, {set={x=true}}, {big_number='123'}}`,
			arr(Reply{Kind: ReplyBool, Int: 1}, Reply{Kind: ReplyBool}, Reply{Kind: ReplyDouble, Bulk: []byte("1.5")},
				Reply{Kind: ReplyMap, Array: []Reply{bulk("a"), in(1)}}, Reply{Kind: ReplySet, Array: []Reply{bulk("x")}},
				Reply{Kind: ReplyBigNumber, Bulk: []byte("123")})},
		{`return redis.call('get', 'missing')`, replyNil},
		{`redis.setresp(3) return tostring(redis.call('get', 'missing'))`, bulk("nil")},
		{`return tostring(redis.call('get', 'missing'))`, bulk("false")},
		{`return redis.pcall('nosuch')`, errr("ERR Unknown Redis command called from script")},
		{`return cjson.encode({1, 2, {a = 'x/y'}, {}, 0.1, 1e20})`, bulk(`[1,2,{"a":"x\/y"},{},0.1,1e+20]`)},
		{`local t = cjson.decode('{"a":[1,null,true]}') return {t.a[1], type(t.a[2]), tostring(t.a[3])}`,
			arr(in(1), bulk("userdata"), bulk("true"))},
		{`return bit.band(0xff, 0x0f) + bit.lshift(1, 4)`, in(31)},
		{`return redis.sha1hex('abc')`, bulk("a9993e364706816aba3e25717850c26c9cd0d89d")},
		// A range reply held flat (ReplyBulks) reaches Lua as a table.
		{`redis.call('rpush', 'l', 'a', 'bb', 'ccc') local t = redis.call('lrange', 'l', 0, -1) return {#t, t[1], t[3]}`,
			arr(in(3), bulk("a"), bulk("ccc"))},
	} {
		r := s.Apply(0, 1, []Command{eval(tc.body, 1, 0)})[0]
		if !replyEqual(r, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.body, r, tc.want)
		}
	}
}

// TestAppendLuaNumber: redis.call's argument of a number is %.17g, and the
// integer shortcut agrees with it on either side of its bounds.
func TestAppendLuaNumber(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1, 60, 1e15 - 1, 1e15, 1e15 + 1, -1e15 + 1, -1e15, -1e15 - 1,
		0.5, -2.5, 1e16, 1 << 53, 1e17, 1e300, -1e300, math.MaxInt64, math.MinInt64, math.NaN(), math.Inf(1), math.Inf(-1), 123456789012345} {
		want := strconv.AppendFloat(nil, f, 'g', 17, 64)
		if got := appendLuaNumber([]byte("x"), f); string(got) != "x"+string(want) {
			t.Errorf("appendLuaNumber(%v) = %q, want %q", f, got[1:], want)
		}
	}
}

// TestScriptRedisCallSpecialized: a script whose main chunk reads
// redis.call and redis.pcall from upvalues (specializeRedisCalls) answers
// what the plain compiled script answers, after as many instructions, and
// the rate limiter's reads are all rewritten.
func TestScriptRedisCallSpecialized(t *testing.T) {
	scripts := []string{
		rateLimiter,
		`for i = 1, 3 do redis.call('INCR', KEYS[1]) end return redis.pcall('GET', KEYS[1])`,
		// A jump lands between the two reads: the register holds t or redis.
		`local t = {call = function() return 'mine' end} return (ARGV[1] == 'x' and t or redis).call('PING')`,
		`local t = {call = function() return 'mine' end} return (ARGV[1] == 'y' and t or redis).call('PING')`,
		`local t = {pcall = function() return 'mine' end} return (ARGV[1] ~= 'x' or redis).pcall('PING')`,
		`local redis = {call = function() return 'shadowed' end} return redis.call('PING')`,
		`return tostring(rawequal(redis.call, (function() return redis.call end)()))`,
		`local f = function() return redis.call('INCR', KEYS[1]) end return f() + f()`,
		`return redis.pcall('NOSUCH')['err']`,
		"local a = 1\n\nredis.call('NOSUCH')",
		`local r = redis return r.call('PING')['ok'] .. tostring(redis.call == r.call)`,
		`return redis.call('PING', redis.pcall('ECHO', 'x'))`,
	}
	run := func(proto *lua.FunctionProto) (Reply, int64) {
		s := newScriptStore()
		vm := newLuaVM()
		const budget = 1 << 20
		r := vm.runEval(vm.newRun(s, 1, false, "sha", 1, budget), proto, [][]byte{[]byte("k")}, [][]byte{[]byte("x")})
		return r, vm.budget.instructions()
	}
	for _, body := range scripts {
		plain, err := compileLua(body, "user_script")
		if err != nil {
			t.Fatal(err)
		}
		special, _ := compileLua(body, "user_script")
		specializeRedisCalls(special)
		want, wantN := run(plain)
		if got, n := run(special); !replyEqual(got, want) || n != wantN {
			t.Errorf("%q: specialized %v after %d instructions, plain %v after %d", body, got, n, want, wantN)
		}
	}
	// gopher-lua's compiler puts a MOVE where a jump lands between the
	// two reads, so the guard is checked on code made by hand.
	jmp := func(sBx int) uint32 { return uint32(lua.OP_JMP)<<opShift | uint32(sBx+maxArgBx>>1) }
	for _, c := range []struct {
		code    []uint32
		rewrite bool
	}{
		{[]uint32{instABC(lua.OP_GETGLOBAL, 0, 0, 0), instABC(lua.OP_GETTABLEKS, 0, 0, 1|rkConst), jmp(-3)}, true},  // lands on the first
		{[]uint32{instABC(lua.OP_GETGLOBAL, 0, 0, 0), instABC(lua.OP_GETTABLEKS, 0, 0, 1|rkConst), jmp(-2)}, false}, // on the second
		{[]uint32{instABC(lua.OP_TEST, 0, 0, 0), instABC(lua.OP_GETGLOBAL, 0, 0, 0), instABC(lua.OP_GETTABLEKS, 0, 0, 1|rkConst)}, false},
		{[]uint32{instABC(lua.OP_GETGLOBAL, 0, 0, 0), instABC(lua.OP_GETTABLEKS, 1, 0, 1|rkConst)}, false},
	} {
		p := &lua.FunctionProto{Code: slices.Clone(c.code), Constants: []lua.LValue{lua.LString("redis"), lua.LString("call")}}
		specializeRedisCalls(p)
		if rewritten := !slices.Equal(p.Code, c.code); rewritten != c.rewrite {
			t.Errorf("code %x: rewritten %v, want %v", c.code, rewritten, c.rewrite)
		}
	}
	p, _ := compileScript(ScriptSHA([]byte(rateLimiter)), []byte(rateLimiter))
	for pc, inst := range p.Code {
		if opcode(inst) == lua.OP_GETGLOBAL && constString(p, argBx(inst)) == "redis" {
			t.Errorf("the rate limiter still reads the global redis at %d", pc)
		}
	}
	if p.NumUpvalues != numRedisUpvalues {
		t.Errorf("the rate limiter has %d upvalues", p.NumUpvalues)
	}
}

// TestArgTableReuse: a run's KEYS and ARGV are the last run's tables,
// emptied and refilled: in place, and exactly as long as the arguments,
// when the last run left a dense array; from a fresh table otherwise, so
// that a sparse array an earlier script made is not kept (every later run
// would scan its nils).
func TestArgTableReuse(t *testing.T) {
	vm := newLuaVM()
	items := [][]byte{[]byte("a"), []byte("b")}
	// check pops tb's array from its end: want in reverse, then nothing,
	// which only an array exactly len(want) long gives. It empties tb.
	check := func(name string, tb *lua.LTable, want ...string) {
		t.Helper()
		if tb.Metatable != lua.LNil || !hashEmpty(tb, tb.MaxN()) {
			t.Errorf("%s: a metatable or a key outside the array", name)
		}
		for i := len(want) - 1; i >= 0; i-- {
			if got := tb.Remove(0); got != lua.LString(want[i]) {
				t.Errorf("%s: [%d] = %v, want %s", name, i+1, got, want[i])
				return
			}
		}
		if got := tb.Remove(0); got != lua.LNil {
			t.Errorf("%s: %v after the arguments", name, got)
		}
	}
	for _, c := range []struct {
		name   string
		change func(*lua.LTable)
	}{
		{"untouched", func(*lua.LTable) {}},
		{"changed in place", func(tb *lua.LTable) { tb.RawSetInt(1, lua.LString("x")) }},
		{"appended", func(tb *lua.LTable) { tb.Append(lua.LString("c")) }},
		{"shortened", func(tb *lua.LTable) { tb.Remove(0) }},
		{"last nil", func(tb *lua.LTable) { tb.RawSetInt(2, lua.LNil) }},
		{"sparse", func(tb *lua.LTable) { tb.RawSetInt(1000, lua.LString("far")); tb.RawSetInt(1000, lua.LNil) }},
		{"hash key", func(tb *lua.LTable) { tb.RawSetString("x", lua.LTrue) }},
		{"metatable", func(tb *lua.LTable) { tb.Metatable = vm.L.NewTable() }},
	} {
		for _, want := range [][][]byte{items, items[:1], nil} {
			tb := vm.argTable(nil, items)
			c.change(tb)
			if got := vm.argTable(tb, want); got != tb {
				t.Errorf("%s: a new table", c.name)
			}
			var w []string
			for _, b := range want {
				w = append(w, string(b))
			}
			check(c.name, tb, w...)
		}
	}
	// A hole before the last value: refilled correctly, then replaced.
	tb := vm.argTable(nil, items)
	tb.RawSetInt(2, lua.LNil)
	tb.RawSetInt(1000, lua.LString("far"))
	if got := vm.argTable(tb, items[:1]); got.Len() != 1 || got.RawGetInt(1) != lua.LString("a") {
		t.Fatalf("after a hole: %v", got.RawGetInt(1))
	}
	check("after a hole, the next run", vm.argTable(tb, items), "a", "b")
}

// TestSetScriptUser: the user rides after the ARGV, replaces one already
// there, and is not counted among the keys and arguments.
func TestSetScriptUser(t *testing.T) {
	c := Command{Op: OpEval, Int: 1, Args: [][]byte{[]byte("return 1"), []byte("k"), []byte("a")}}
	SetScriptUser(&c, "alice")
	SetScriptUser(&c, "bob")
	keys, argv, user := scriptArgs(&c)
	if len(keys) != 1 || string(keys[0]) != "k" || len(argv) != 1 || string(argv[0]) != "a" || user != "bob" {
		t.Fatalf("keys %q argv %q user %q", keys, argv, user)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Int = 3 // the user is not a key
	if err := c.Validate(); err == nil {
		t.Fatal("a key count reaching into the user was accepted")
	}
	other := Command{Op: OpSet, Args: [][]byte{[]byte("k"), []byte("v")}}
	SetScriptUser(&other, "alice")
	if other.Flags != 0 || len(other.Args) != 2 {
		t.Fatalf("SET was changed: %+v", other)
	}
}

// instructions is how many instructions b's run has run.
func (b *budget) instructions() int64 { return b.st.used + b.run - b.left }
