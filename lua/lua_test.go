package lua

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// testHost answers redis.call with a few commands over a map, and counts
// instructions against a budget as the store does.
type testHost struct {
	data     map[string]string
	budget   int // instructions left; stop below 0
	limited  bool
	executed int
	stopped  bool
	panicOn  string // a command whose call panics
	// stopOn is a command whose call refuses and stops the run, as a
	// store's call of a write refuses a killed script: the run raises
	// "killed" from its next instruction on.
	stopOn   string
	stopping bool
}

func newHost() *testHost { return &testHost{data: map[string]string{}} }

func (h *testHost) Call(args [][]byte, resp int, reply []byte) []byte {
	switch strings.ToLower(string(args[0])) {
	case h.panicOn:
		panic("host panic")
	case h.stopOn:
		h.stopping = true
		return append(reply, "-ERR refused\r\n"...)
	case "set":
		h.data[string(args[1])] = string(args[2])
		return append(reply, "+OK\r\n"...)
	case "get":
		v, ok := h.data[string(args[1])]
		if !ok {
			if resp == 3 {
				return append(reply, "_\r\n"...)
			}
			return append(reply, "$-1\r\n"...)
		}
		return append(append(append(append(reply, '$'), strconv.Itoa(len(v))...), "\r\n"+v...), "\r\n"...)
	case "incr":
		n, _ := strconv.Atoi(h.data[string(args[1])])
		n++
		h.data[string(args[1])] = strconv.Itoa(n)
		return append(append(append(reply, ':'), strconv.Itoa(n)...), "\r\n"...)
	case "echo":
		return append(reply, "*2\r\n$1\r\na\r\n%1\r\n$1\r\nk\r\n,1.5\r\n"...)
	}
	return append(reply, "-ERR Unknown Redis command called from script\r\n"...)
}

func (h *testHost) ACLCheck(args [][]byte) (bool, string) {
	if string(args[0]) == "nosuch" {
		return false, "ERR Invalid command passed to redis.acl_check_cmd()"
	}
	return string(args[0]) != "flushall", ""
}

func (h *testHost) Stopping() bool { return h.stopping }

func (h *testHost) Checkpoint(executed int) (int, string) {
	if h.stopping {
		return 0, "killed"
	}
	h.executed += executed
	if !h.limited {
		return 100000, ""
	}
	h.budget -= executed
	if h.budget <= 0 {
		h.stopped = true
		return 0, "-BUSY stopped"
	}
	return min(h.budget, 100000), ""
}

func (h *testHost) first() int {
	if h.limited {
		return min(h.budget, 100000)
	}
	return 100000
}

// eval compiles and runs src in s with keys and args, as EVAL does.
func eval(t *testing.T, s *State, h *testHost, src string, keys, args []string) string {
	t.Helper()
	ref, e := s.Load(src, "@user_script")
	if e != "" {
		return "compile: " + e
	}
	defer s.Unref(ref)
	return string(s.Run(ref, "sha", bs(keys), bs(args), 1, h.first(), h))
}

func bs(ss []string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, []byte(s))
	}
	return out
}

// TestErrorTexts: compile and runtime errors are Lua 5.1's, word for word,
// as redis-server 7.0 reports them.
func TestErrorTexts(t *testing.T) {
	s := New(Eval)
	defer s.Close()
	for _, tc := range []struct{ src, want string }{
		{"return +", "compile: user_script:1: unexpected symbol near '+'"},
		{"return 1 +", "compile: user_script:1: unexpected symbol near '<eof>'"},
		{"local x = 'a\n", "compile: user_script:1: unfinished string near ''a'"},
		{"local x; return x.y", "-ERR user_script:1: attempt to index local 'x' (a nil value) script: sha, on @user_script:1.\r\n"},
		{"local t = {} return #t.list", "-ERR user_script:1: attempt to get length of field 'list' (a nil value) script: sha, on @user_script:1.\r\n"},
		{"local f; f()", "-ERR user_script:1: attempt to call local 'f' (a nil value) script: sha, on @user_script:1.\r\n"},
		{"local x; return x + 1", "-ERR user_script:1: attempt to perform arithmetic on local 'x' (a nil value) script: sha, on @user_script:1.\r\n"},
		{"return nosuch()", "-ERR user_script:1: Script attempted to access nonexistent global variable 'nosuch' script: sha, on @user_script:1.\r\n"},
		{"\n\nerror('boom')", "-ERR user_script:3: boom script: sha, on @user_script:3.\r\n"},
		{"error({err='MY custom'})", "-MY custom script: sha, on @user_script:1.\r\n"},
		{"error(nil)", "-ERR nil script: sha, on @user_script:1.\r\n"},
		{"error({})", "-ERR unknown error script: sha, on @user_script:1.\r\n"},
		{"return redis.call('nosuch')", "-ERR Unknown Redis command called from script script: sha, on @user_script:1.\r\n"},
		{"return redis.pcall('nosuch')", "-ERR Unknown Redis command called from script\r\n"},
		{"return redis.call()", "-ERR Please specify at least one argument for this redis lib call script: sha, on @user_script:1.\r\n"},
		{"return redis.call('get', {})", "-ERR Lua redis lib command arguments must be strings or integers script: sha, on @user_script:1.\r\n"},
		{"x = 1", "-ERR user_script:1: Attempt to modify a readonly table script: sha, on @user_script:1.\r\n"},
		{"local function f() return f() + 1 end return f()", "-ERR user_script:1: stack overflow script: sha, on @user_script:1.\r\n"},
		{"return {err='line1\\nline2\\n'}", "-line1 line2\r\n"},
	} {
		if got := eval(t, s, newHost(), tc.src, nil, nil); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.src, got, tc.want)
		}
	}
}

// TestNumbers: Lua 5.1 reads and prints numbers as C's strtod and %.14g
// do, and redis.call passes them as %.17g.
func TestNumbers(t *testing.T) {
	s := New(Eval)
	defer s.Close()
	h := newHost()
	for _, tc := range []struct{ src, want string }{
		{"return tostring(tonumber('1e3'))", "1000"},
		{"return tostring(tonumber('0x10'))", "16"},
		{"return tostring(tonumber(' 5 '))", "5"},
		{"return tostring(tonumber('1e'))", "nil"},
		{"return tostring(1/3)", "0.33333333333333"},
		{"return tostring(2^53)", "9.007199254741e+15"},
		{"local x = 0 return tostring(-x)", "-0"},
		{"local x = 0 return tostring(x/x)", "-nan"},
		{"local x = 0 return tostring(1/x)", "inf"},
		{"return tostring(1e15)", "1e+15"},
		{"return tostring(100000000000000)", "1e+14"},
		{"return string.format('%d %5.2f %x %g', 3.9, 2.345, 255, 1e20)", "3  2.35 ff 1e+20"},
		{"redis.call('set', 'n', 1/3) return redis.call('get', 'n')", "0.33333333333333331"},
		{"redis.call('set', 'n', 2^53 + 1) return redis.call('get', 'n')", "9007199254740992"},
	} {
		got := eval(t, s, h, tc.src, nil, nil)
		want := fmt.Sprintf("$%d\r\n%s\r\n", len(tc.want), tc.want)
		if got != want {
			t.Errorf("%q: %q, want %q", tc.src, got, want)
		}
	}
	// redis.call's number arguments are %.17g, integers or not, on either
	// side of the bounds of the integer shortcut.
	for _, n := range []string{"0", "-0", "1", "-1", "60", "1e15 - 1", "1e15", "1e15 + 1", "-1e15 + 1", "-1e15", "-1e15 - 1",
		"0.5", "-2.5", "1e16", "2^53", "1e17", "1e300", "-1e300", "2^63", "-2^63", "123456789012345"} {
		got := eval(t, s, h, "redis.call('set', 'n', "+n+") return redis.call('get', 'n')", nil, nil)
		f := eval(t, s, h, "return string.format('%.17g', "+n+")", nil, nil)
		if got != f {
			t.Errorf("redis.call's argument %s: %q, want %q", n, got, f)
		}
	}
	// A number reply is the integer part.
	if got := eval(t, s, h, "return 3.99", nil, nil); got != ":3\r\n" {
		t.Errorf("return 3.99: %q", got)
	}
}

// TestConversions: replies to Lua and back, RESP2 and RESP3.
func TestConversions(t *testing.T) {
	s := New(Eval)
	defer s.Close()
	h := newHost()
	for _, tc := range []struct{ src, want string }{
		{"return {1, 'a', {2}, true, false, nil, 3}", "*0000000005\r\n:1\r\n$1\r\na\r\n*0000000001\r\n:2\r\n:1\r\n_\r\n"},
		{"redis.setresp(3) return {true, false}", "*0000000002\r\n#t\r\n#f\r\n"},
		{"return redis.call('get', 'missing')", "_\r\n"},
		{"return type(redis.call('get', 'missing'))", "$7\r\nboolean\r\n"},
		{"redis.setresp(3) return type(redis.call('get', 'missing'))", "$3\r\nnil\r\n"},
		{"local r = redis.call('echo') return {r[1], tostring(r[2].map.k.double), redis.status_reply('S')}", "*0000000003\r\n$1\r\na\r\n$3\r\n1.5\r\n+S\r\n"},
		{"return {double = 1.5}", ",1.5\r\n"},
		{"local x = 0 return {double = -1/x}", ",-inf\r\n"},
		{"return {big_number = '12\\r\\n3'}", "(12  3\r\n"},
		{"return {verbatim_string = {format = 'mkdown', string = 'x'}}", "=5\r\nmkd:x\r\n"},
		{"return {map = {k = 1}}", "%0000000001\r\n$1\r\nk\r\n:1\r\n"},
		{"return {set = {k = true}}", "~0000000001\r\n$1\r\nk\r\n"},
		{"return redis.error_reply('MY err')", "-MY err\r\n"},
		{"return redis.error_reply('plain')", "-ERR plain\r\n"},
		{"return redis.sha1hex('abc')", "$40\r\na9993e364706816aba3e25717850c26c9cd0d89d\r\n"},
		{"return {KEYS[1], ARGV[1], #KEYS, #ARGV}", "*0000000004\r\n$1\r\nk\r\n$1\r\na\r\n:1\r\n:1\r\n"},
		{"return redis.acl_check_cmd('get', 'x')", ":1\r\n"},
		{"return redis.acl_check_cmd('flushall')", "_\r\n"},
		{"return redis.acl_check_cmd('nosuch')", "-ERR Invalid command passed to redis.acl_check_cmd() script: sha, on @user_script:1.\r\n"},
		{"return pcall(redis.call, 'nosuch')", "_\r\n"},
		{"local ok, e = pcall(redis.call, 'nosuch') return e", "$44\r\nERR Unknown Redis command called from script\r\n"},
	} {
		if got := eval(t, s, h, tc.src, []string{"k"}, []string{"a"}); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.src, got, tc.want)
		}
	}
	// A reply nested too deep ends in Redis's error at the limit.
	got := eval(t, s, h, "local a = {} a[1] = a return a", nil, nil)
	if !strings.HasSuffix(got, "-ERR reached lua stack limit\r\n") || strings.Count(got, "*0000000001\r\n") != 33 {
		t.Errorf("a recursive table: %q", got)
	}
}

// TestLibraries: cjson, cmsgpack, struct and bit, as Redis ships them.
func TestLibraries(t *testing.T) {
	s := New(Eval)
	defer s.Close()
	h := newHost()
	for _, tc := range []struct{ src, want string }{
		{"return cjson.encode({1, 2, {a = 'x/y'}})", `[1,2,{"a":"x\/y"}]`},
		{"return cjson.encode(cjson.decode('[1,2.5,\"x\",true,null]'))", `[1,2.5,"x",true,null]`},
		{"local ok, e = pcall(cjson.decode, '{') return e", "Expected object key string but found T_END at character 2"},
		{"local ok, e = pcall(cjson.decode, '{x') return e", "Expected object key string but found invalid token at character 2"},
		{"local ok, e = pcall(cjson.decode, '[1 2]') return e", "Expected comma or array end but found T_NUMBER at character 4"},
		{"local ok, e = pcall(cjson.encode, {[1] = 1, [100] = 1}) return e", "Cannot serialise table: excessively sparse array"},
		{"local t = cmsgpack.unpack(cmsgpack.pack({1, 'a', {b = 2}})) return t[2] .. t[3].b", "a2"},
		{"local e = cmsgpack.pack(0.1) local h = '' for i = 1, #e do h = h .. string.format('%02x', e:byte(i)) end return h", "cb3fb999999999999a"},
		{"return tostring(struct.unpack('>I2', struct.pack('>I2', 258)))", "258"},
		{"return bit.tohex(bit.bxor(0xff, bit.lshift(1, 4)), 4)", "00ef"},
	} {
		got := eval(t, s, h, tc.src, nil, nil)
		want := fmt.Sprintf("$%d\r\n%s\r\n", len(tc.want), tc.want)
		if got != want {
			t.Errorf("%q:\n got %q\nwant %q", tc.src, got, want)
		}
	}
}

// TestRandom: math.randomseed(n) gives Redis's sequence
// (redisLrand48); without it, the run's seed decides.
func TestRandom(t *testing.T) {
	s := New(Eval)
	defer s.Close()
	h := newHost()
	if got := eval(t, s, h, "math.randomseed(42) return tostring(math.random())", nil, nil); got != "$16\r\n0.74452500033403\r\n" {
		t.Errorf("math.random after math.randomseed(42): %q", got)
	}
	ref, _ := s.Load("return {math.random(100), math.random(100), math.random(100)}", "@user_script")
	a := string(s.Run(ref, "sha", nil, nil, 7, 0, h))
	b := string(s.Run(ref, "sha", nil, nil, 7, 0, h))
	c := string(s.Run(ref, "sha", nil, nil, 8, 0, h))
	if a != b || a == c {
		t.Errorf("seed 7: %q and %q; seed 8: %q", a, b, c)
	}
}

// TestBudgetExact: the count hook stops a script exactly where its budget
// ends, and a run with one more instruction of budget does no less work.
func TestBudgetExact(t *testing.T) {
	s := New(Eval)
	defer s.Close()
	src := "local i = 0 while true do i = i + 1 redis.call('set', 'n', i) end"
	prev := -1
	for _, budget := range []int{1000, 1000, 1001, 250_000, 250_001} {
		h := newHost()
		h.limited, h.budget = true, budget
		got := eval(t, s, h, src, nil, nil)
		if !h.stopped || !strings.HasPrefix(got, "-BUSY stopped") {
			t.Fatalf("budget %d: %q, stopped %v", budget, got, h.stopped)
		}
		if h.executed != budget {
			t.Errorf("budget %d: stopped after %d instructions", budget, h.executed)
		}
		n, _ := strconv.Atoi(h.data["n"])
		if n < prev {
			t.Errorf("budget %d: n=%d after %d", budget, n, prev)
		}
		prev = n
	}
	// A pcall does not catch the stop for good.
	h := newHost()
	h.limited, h.budget = true, 5000
	got := eval(t, s, h, "while true do pcall(function() while true do end end) end", nil, nil)
	if !h.stopped || !strings.HasPrefix(got, "-") {
		t.Errorf("a pcall loop: %q", got)
	}
}

// TestStoppingCall: a call that answers the run is stopping stops it at
// the next instruction, where the hook raises Checkpoint's error, however
// far the next count was and whether or not a pcall caught the call's.
func TestStoppingCall(t *testing.T) {
	s := New(Eval)
	defer s.Close()
	for _, src := range []string{
		"redis.pcall('stop') return 'went on'",
		"pcall(redis.call, 'stop') return 'went on'",
		"local ok = pcall(function() redis.call('stop') end) while true do end",
		"local co = coroutine.create(function() redis.pcall('stop') return 1 end) coroutine.resume(co) return 'went on'",
	} {
		h := newHost()
		h.stopOn = "stop"
		if got, want := eval(t, s, h, src, nil, nil), "-ERR killed script: sha, on @user_script:1.\r\n"; got != want {
			t.Errorf("%q: %q, want %q", src, got, want)
		}
	}
}

// TestDeterministicOrder: pairs visits table, function and coroutine keys
// in the same order in two fresh interpreters, and in one that ran other
// scripts first; tostring prints the same numbers.
func TestDeterministicOrder(t *testing.T) {
	src := `local keys, t = {}, {}
for i = 1, 50 do
  local k
  if i % 3 == 0 then k = {} elseif i % 3 == 1 then k = function() return i end else k = coroutine.create(function() end) end
  keys[k] = i
  t[#t + 1] = k
end
local order = {}
for k, v in pairs(keys) do order[#order + 1] = v .. '=' .. tostring(k) end
return table.concat(order, ',')`
	run := func(s *State) string { return eval(t, s, newHost(), src, nil, nil) }
	a, b := New(Eval), New(Eval)
	defer a.Close()
	defer b.Close()
	for i := 0; i < 20; i++ {
		eval(t, b, newHost(), "local t = {} for i = 1, 1000 do t[{}] = function() end end return #t", nil, nil)
	}
	first := run(a)
	if second := run(b); first != second {
		t.Fatalf("two interpreters differ:\n%s\n%s", first, second)
	}
	if again := run(a); again != first {
		t.Fatalf("a second run differs:\n%s\n%s", first, again)
	}
	if !strings.Contains(first, "=table: 0x") || !strings.Contains(first, "=function: 0x") || !strings.Contains(first, "=thread: 0x") {
		t.Fatalf("tostring: %s", first)
	}
}

// TestHostPanic: a panic in a Host method unwinds the script and panics
// again in Go; the interpreter goes on serving.
func TestHostPanic(t *testing.T) {
	s := New(Eval)
	defer s.Close()
	h := newHost()
	h.panicOn = "boom"
	func() {
		defer func() {
			if p := recover(); p != "host panic" {
				t.Fatalf("recovered %v", p)
			}
		}()
		eval(t, s, h, "pcall(redis.call, 'boom') return 1", nil, nil)
		t.Fatal("no panic")
	}()
	if got := eval(t, s, h, "return redis.call('incr', 'x')", nil, nil); got != ":1\r\n" {
		t.Fatalf("after the panic: %q", got)
	}
}

// TestCallbacksRaiseSafely: scripts that raise inside and around the C
// functions (a huge unpack, deep recursion through pcall, error objects
// of every type) end in replies, and the interpreter goes on.
func TestCallbacksRaiseSafely(t *testing.T) {
	s := New(Eval)
	defer s.Close()
	h := newHost()
	for _, src := range []string{
		"return unpack({}, 1, 1e8)",
		"local t = {} for i = 1, 8000 do t[i] = i end return redis.call('set', 'k', unpack(t))",
		"local function f(n) return pcall(f, n + 1) end return f(1)",
		"local function f() return redis.call('get', f()) end return f()",
		"error(true)", "error(1.5)", "error(function() end)", "error(coroutine.create(function() end))",
		"error(setmetatable({}, {__index = function() error('again') end}))",
		"return cjson.decode(string.rep('[', 100000))",
		"return cmsgpack.unpack(string.rep('\\145', 100000))",
	} {
		if got := eval(t, s, h, src, nil, nil); got == "" {
			t.Errorf("%q: no reply", src)
		}
	}
	if got := eval(t, s, h, "return 1", nil, nil); got != ":1\r\n" {
		t.Fatalf("afterwards: %q", got)
	}
}

// TestFunctionLibrary: a library's top level registers its functions, and
// FCall runs it again before calling one.
func TestFunctionLibrary(t *testing.T) {
	s := New(Function)
	defer s.Close()
	code := "\nlocal n = 0\nredis.register_function('inc', function(keys, args) n = n + 1 return {n, keys[1], args[1]} end)\n" +
		"redis.register_function{function_name='ro', callback=function() return redis.call('get', 'x') end, flags={'no-writes', 'ALLOW-OOM'}, description='reads'}\n"
	ref, e := s.Load(code, "@user_function")
	if e != "" {
		t.Fatal(e)
	}
	h := newHost()
	funcs, e := s.Library(ref, h.first(), h)
	if e != "" || len(funcs) != 2 {
		t.Fatalf("%v %q", funcs, e)
	}
	want := map[string]Registered{"inc": {Name: "inc"}, "ro": {Name: "ro", Desc: "reads", HasDesc: true, Flags: 3}}
	for _, f := range funcs {
		if want[f.Name] != f {
			t.Errorf("registered %+v", f)
		}
	}
	for i := 0; i < 2; i++ {
		out, e := s.FCall(ref, "inc", bs([]string{"k"}), bs([]string{"a"}), 1, h.first(), h)
		if e != "" || string(out) != "*0000000003\r\n:1\r\n$1\r\nk\r\n$1\r\na\r\n" {
			t.Fatalf("FCALL inc: %q %q", out, e)
		}
	}
	bad, _ := s.Load("\nredis.register_function('a-b', function() end)", "@user_function")
	if _, e := s.Library(bad, h.first(), h); e != "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long" {
		t.Errorf("a bad name: %q", e)
	}
	bad, _ = s.Load("\nredis.call('ping')", "@user_function")
	if _, e := s.Library(bad, h.first(), h); e != "ERR user_function:2: Script attempted to access nonexistent global variable 'call'" {
		t.Errorf("redis.call at load: %q", e)
	}
	h.limited, h.budget = true, 1000
	loop, _ := s.Load("\nwhile true do end", "@user_function")
	if _, e := s.Library(loop, h.first(), h); e != "BUSY stopped" {
		t.Errorf("a loop at load: %q", e)
	}
	if s.Memory() < 1024 {
		t.Errorf("memory %d", s.Memory())
	}
}
