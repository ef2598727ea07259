package fsm

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
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
	for _, budget := range []float64{1000, 1000, 1001, 5000} {
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
		{`rawset(_G, 'x', 1)`, "ERR Attempt to modify a readonly table script: "},
		{`getfenv(0).redis = nil`, "ERR user_script:1: Script attempted to access nonexistent global variable 'getfenv' script: "},
		{`setfenv(1, {})`, "ERR user_script:1: Script attempted to access nonexistent global variable 'setfenv' script: "},
		{`setmetatable(_G, {})`, "ERR Attempt to modify a readonly table script: "},
		{`rawset(getmetatable(_G), 'x', 1)`, "ERR Attempt to modify a readonly table script: "},
		{`table.insert(string, 1)`, "ERR Attempt to modify a readonly table script: "},
		{`getmetatable('').__index.upper = nil`, "ERR user_script:1: Attempt to modify a readonly table script: "},
		{`KEYS = {}`, "ERR user_script:1: Attempt to modify a readonly table script: "},
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
// the random source, tostring's numbering, cjson's settings, the
// collector and redis.setresp is not seen by the next, though the runs
// share one interpreter.
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
		`cjson.encode_max_depth(1) cjson.encode_keep_buffer(false) collectgarbage('stop') redis.setresp(3) return 1`,
	}
	probe := `local function count(t) local n = 0 for _ in pairs(t) do n = n + 1 end return n end
		return {#KEYS, count(KEYS), tostring(KEYS[1]), tostring(KEYS[2]), tostring(KEYS.x), tostring(KEYS[-1]), tostring(getmetatable(KEYS)),
		#ARGV, count(ARGV), tostring(ARGV[1]), tostring(ARGV[2]), tostring(ARGV[5]), tostring(ARGV[0]), tostring(getmetatable(ARGV)),
		tostring(math.random(1000000)), tostring({}), type(_G), tostring(rawequal(_G, _G._G)),
		cjson.encode({{1}}), type(redis.call('get', 'missing'))}`
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
	if len(w.Array) != 20 || string(w.Array[18].Bulk) != "[[1]]" || string(w.Array[19].Bulk) != "boolean" || !replyEqual(Reply{Kind: ReplyArray, Array: w.Array[:14]}, exp) || !strings.HasPrefix(string(w.Array[15].Bulk), "table: 0x") ||
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

// TestSetScriptUser: the user rides after the ARGV, replaces one already
// there, and is not counted among the keys and arguments.
func TestSetScriptUser(t *testing.T) {
	c := Command{Op: OpEval, Int: 1, Args: [][]byte{[]byte("return 1"), []byte("k"), []byte("a")}}
	SetScriptUser(&c, "alice")
	SetScriptUser(&c, "bob")
	keys, argv, who := scriptArgs(&c)
	if len(keys) != 1 || string(keys[0]) != "k" || len(argv) != 1 || string(argv[0]) != "a" || who.user != "bob" || who.rules != nil {
		t.Fatalf("keys %q argv %q who %+v", keys, argv, who)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Int = 3 // the user is not a key
	if err := c.Validate(); err == nil {
		t.Fatal("a key count reaching into the user was accepted")
	}
	// Rules ride before the user, and go when a user without them
	// replaces it.
	c.Int = 1
	SetScriptUserRules(&c, "carol", "on nopass ~x* +set")
	keys, argv, who = scriptArgs(&c)
	if len(keys) != 1 || len(argv) != 1 || string(argv[0]) != "a" || who.user != "carol" || who.rules["carol"] != "on nopass ~x* +set" {
		t.Fatalf("keys %q argv %q who %+v", keys, argv, who)
	}
	c.Int = 3 // the rules are not a key either
	if err := c.Validate(); err == nil {
		t.Fatal("a key count reaching into the rules was accepted")
	}
	c.Int = 1
	SetScriptUser(&c, "dave")
	keys, argv, who = scriptArgs(&c)
	if c.Flags&FlagScriptRules != 0 || len(c.Args) != 4 || len(argv) != 1 || who.user != "dave" || who.rules != nil {
		t.Fatalf("args %q who %+v", c.Args, who)
	}
	other := Command{Op: OpSet, Args: [][]byte{[]byte("k"), []byte("v")}}
	SetScriptUser(&other, "alice")
	if other.Flags != 0 || len(other.Args) != 2 {
		t.Fatalf("SET was changed: %+v", other)
	}
}

// TestEvalSHANoWritesAtApply: an EVALSHA proposed without the no-writes
// flag (its script was loaded earlier in the same pipeline, so the
// proposer did not see the shebang) still runs read-only.
func TestEvalSHANoWritesAtApply(t *testing.T) {
	s := newScriptStore()
	body := "#!lua flags=no-writes\nreturn redis.call('set', 'k', 'v')"
	s.Apply(0, 1, []Command{c(OpScriptLoad, body)})
	r := s.Apply(0, 1, []Command{c(OpEval, ScriptSHA([]byte(body))).fl(FlagScriptSHA)})[0]
	if !strings.HasPrefix(r.Str, "ERR Write commands are not allowed from read-only scripts.") {
		t.Fatalf("a write from a no-writes script: %v", r)
	}
}

// TestMemoryUsageLogical: a script's MEMORY USAGE (FlagMemoryLogical)
// depends on the value alone, not on whether a store holds it packed or
// large; sampling counts the first elements for every one.
func TestMemoryUsageLogical(t *testing.T) {
	values := []Command{
		c(OpSet, "s", "some value"),
		c(OpHSet, "h", "f1", "v1", "f2", "a longer value", "f3", "v3"),
		c(OpRPush, "l", "a", "bb", "ccc"),
		c(OpSAdd, "set", "m1", "m2", "member three"),
		zadd("z", 1.0, "one", 2.0, "two", 3.5, "three and a half"),
	}
	packed, large := NewStore(), NewStore()
	large.SetLimits(Limits{ListMaxListpackSize: 1})
	for _, s := range []*Store{packed, large} {
		s.Apply(0, t0, values)
	}
	for _, key := range []string{"s", "h", "l", "set", "z"} {
		for _, samples := range []int64{0, 1, 5} {
			cmd := c(OpMemoryUsage, key).fl(FlagMemoryLogical).i(samples)
			p, l := packed.Read(t0, cmd), large.Read(t0, cmd)
			if p.Kind != ReplyInt || p.Int < 50 || p.Int != l.Int {
				t.Errorf("%s, %d samples: %v packed, %v large", key, samples, p, l)
			}
		}
	}
	if r := packed.Read(t0, c(OpMemoryUsage, "missing").fl(FlagMemoryLogical)); r.Kind != ReplyNil {
		t.Errorf("a missing key: %v", r)
	}
}

// TestScriptCallLevel: in a gated store a script's calls keep to level 2
// unless its entry begins with a CallLevel, to the end of that entry
// only; reads and an ungated store's scripts may call every command.
func TestScriptCallLevel(t *testing.T) {
	levelParser := func(p *ParseContext, args [][]byte) (Command, Reply, bool) {
		return Command{}, Reply{Kind: ReplyInt, Int: int64(p.Level)}, true
	}
	script := eval(`return redis.call('level')`, 1, 0)
	apply := func(s *Store, cmds ...Command) []int64 {
		t.Helper()
		var out []int64
		for _, r := range s.Apply(0, 1, cmds) {
			if r.Kind == ReplyInt {
				out = append(out, r.Int)
			}
		}
		return out
	}
	s := NewStore()
	s.SetCommandParser(levelParser)
	if got := apply(s, script); !slices.Equal(got, []int64{ApplyLevel}) {
		t.Fatalf("an ungated store: levels %v, want every level (%d)", got, ApplyLevel)
	}
	s.GateScriptCalls()
	if got := apply(s, script, script); !slices.Equal(got, []int64{ungatedLevel, ungatedLevel}) {
		t.Fatalf("an entry without its level: %v, want %d", got, ungatedLevel)
	}
	if got := apply(s, script, CallLevel(ApplyLevel), script); !slices.Equal(got, []int64{ungatedLevel, ApplyLevel}) {
		t.Fatalf("an entry with its level after a script: %v, want %d then %d", got, ungatedLevel, ApplyLevel)
	}
	if got := apply(s, CallLevel(CallLevelFrom), script); !slices.Equal(got, []int64{CallLevelFrom}) {
		t.Fatalf("an entry of a cluster at level %d: %v", CallLevelFrom, got)
	}
	if got := apply(s, script); !slices.Equal(got, []int64{ungatedLevel}) {
		t.Fatalf("the next entry: %v; the level lasts one entry", got)
	}
	ro := eval(`return redis.call('level')`, 1, 0)
	ro.Op = OpEvalRO
	if r := s.Read(0, ro); r.Kind != ReplyInt || r.Int != ApplyLevel {
		t.Fatalf("a read-only script read outside the log: %+v, want level %d", r, ApplyLevel)
	}
	for l := CallLevelFrom; l <= ApplyLevel; l++ {
		if got := Level([]Command{CallLevel(l)}); got != l {
			t.Fatalf("CallLevel(%d) is an entry of level %d: a kvs of a lower level cannot apply it", l, got)
		}
		if c := CallLevel(l); c.Validate() != nil {
			t.Fatalf("CallLevel(%d): %v", l, c.Validate())
		}
	}
	for _, l := range []int{ungatedLevel, ApplyLevel + 1} {
		if c := CallLevel(l); c.Validate() == nil {
			t.Fatalf("CallLevel(%d) validates", l)
		}
	}
}
