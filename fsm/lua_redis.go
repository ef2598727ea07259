package fsm

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The redis table of the script API and Redis's conversions between Lua
// values and replies.

const (
	replAll = 3
	logWarn = 3
	// The version scripts see, the one INFO and HELLO report
	// (server.DefaultRedisVersion).
	redisVer  = "7.2.4"
	redisVerN = 0x070204
)

func (vm *luaVM) redisLib() *lua.LTable {
	L := vm.L
	t := L.NewTable()
	fns := []struct {
		name string
		fn   lua.LGFunction
	}{
		{"call", func(L *lua.LState) int { return vm.redisCall(L, true) }},
		{"pcall", func(L *lua.LState) int { return vm.redisCall(L, false) }},
		{"error_reply", redisErrorReply},
		{"status_reply", redisStatusReply},
		{"sha1hex", redisSHA1Hex},
		{"log", vm.redisLog},
		{"setresp", vm.redisSetResp},
		{"acl_check_cmd", vm.redisACLCheckCmd},
		{"set_repl", vm.redisSetRepl},
		{"replicate_commands", func(L *lua.LState) int { L.Push(lua.LTrue); return 1 }},
		{"breakpoint", func(L *lua.LState) int { L.Push(lua.LFalse); return 1 }},
		{"debug", func(L *lua.LState) int { return 0 }},
		{"register_function", func(L *lua.LState) int {
			raiseErrorTable(L, "ERR redis.register_function can only be called on FUNCTION LOAD command")
			return 0
		}},
	}
	for _, f := range fns {
		t.RawSetString(f.name, L.NewFunction(f.fn))
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"REPL_NONE", 0}, {"REPL_AOF", 1}, {"REPL_SLAVE", 2}, {"REPL_REPLICA", 2}, {"REPL_ALL", replAll},
		{"LOG_DEBUG", 0}, {"LOG_VERBOSE", 1}, {"LOG_NOTICE", 2}, {"LOG_WARNING", logWarn}} {
		t.RawSetString(c.name, lua.LNumber(c.v))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(redisVer))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(redisVerN))
	return t
}

// redisCall is redis.call (raise: an error reply raises it) and
// redis.pcall (returns it as a table).
func (vm *luaVM) redisCall(L *lua.LState, raise bool) int {
	run := vm.run
	fail := func(text string) int {
		if raise {
			raiseErrorTable(L, text)
		}
		t := L.NewTable()
		t.RawSetString("err", lua.LString(text))
		L.Push(t)
		return 1
	}
	if run == nil || run.s == nil {
		return fail("ERR redis.call/pcall can only be called inside a script invocation")
	}
	n := L.GetTop()
	if n == 0 {
		return fail("ERR Please specify at least one argument for this redis lib call")
	}
	args, ok := vm.callArguments(L, n)
	if !ok {
		return fail("ERR Lua redis lib command arguments must be strings or integers")
	}
	L.SetTop(0)
	r := run.s.callLocked(run, args)
	if r.Kind == ReplyError {
		return fail(r.Str)
	}
	L.Push(replyToLua(L, run.resp, &r))
	return 1
}

// callArguments copies the n arguments of a redis.call, Lua strings and
// numbers (as %.17g), into vm's buffers, which the next call reuses. Each
// argument's capacity ends at its length, so that appending to one never
// overwrites the next.
func (vm *luaVM) callArguments(L *lua.LState, n int) ([][]byte, bool) {
	buf, ends := vm.callBuf[:0], vm.callEnds[:0]
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			buf = append(buf, v...)
		case lua.LNumber:
			buf = appendLuaNumber(buf, float64(v))
		default:
			return nil, false
		}
		ends = append(ends, len(buf))
	}
	args := vm.callArgs[:0]
	start := 0
	for _, end := range ends {
		args = append(args, buf[start:end:end])
		start = end
	}
	vm.callBuf, vm.callEnds, vm.callArgs = buf, ends, args
	return args, true
}

// appendLuaNumber appends f as redis.call passes a number, %.17g, which
// for an integer below 1e15 is its decimal digits: those (a TTL, a limit)
// take the faster integer formatting.
func appendLuaNumber(b []byte, f float64) []byte {
	if i := int64(f); float64(i) == f && i > -1e15 && i < 1e15 && (i != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(b, i, 10)
	}
	return strconv.AppendFloat(b, f, 'g', 17, 64)
}

// redisACLCheckCmd is redis.acl_check_cmd(command, args...): whether the
// user running the script may run the command with these arguments.
func (vm *luaVM) redisACLCheckCmd(L *lua.LState) int {
	run := vm.run
	if run == nil || run.s == nil {
		raiseErrorTable(L, "ERR redis.acl_check_cmd can only be called inside a script invocation")
		return 0
	}
	n := L.GetTop()
	if n == 0 {
		raiseErrorTable(L, "ERR Please specify at least one argument for this redis lib call")
		return 0
	}
	args, ok := vm.callArguments(L, n)
	if !ok {
		raiseErrorTable(L, "ERR Lua redis lib command arguments must be strings or integers")
		return 0
	}
	L.SetTop(0)
	s := run.s
	if s.parser == nil {
		raiseErrorTable(L, "ERR Invalid command passed to redis.acl_check_cmd()")
		return 0
	}
	run.pc.Now, run.pc.Rand, run.pc.ReadOnly = run.now, run.rnd, run.readOnly
	run.pc.User, run.pc.CheckOnly = run.user, true
	run.pc.ACL, run.pc.ACLGen = s.acl, s.aclGen.Load()
	_, r, _ := s.parser(&run.pc, args)
	run.pc.CheckOnly = false
	if r.Kind == ReplyError {
		raiseErrorTable(L, r.Str)
		return 0
	}
	L.Push(lua.LBool(r.Int != 0))
	return 1
}

// callLocked runs one command of a script under the lock the script holds.
func (s *Store) callLocked(run *scriptRun, args [][]byte) Reply {
	if s.parser == nil {
		return errorReply("ERR Unknown Redis command called from script")
	}
	run.pc.Now, run.pc.Rand, run.pc.ReadOnly = run.now, run.rnd, run.readOnly
	run.pc.User, run.pc.CheckOnly = run.user, false
	run.pc.OOM = run.oom
	if run.user != "" {
		run.pc.ACL, run.pc.ACLGen = s.acl, s.aclGen.Load()
	}
	var r Reply
	var answered bool
	// The command lives in the run, not on the heap a pointer to a local
	// would put it on.
	cmd := &run.cmd
	*cmd, r, answered = s.parser(&run.pc, args)
	if answered {
		return r
	}
	sp := cmd.Op.spec()
	if sp == nil {
		return errorReply("ERR This Redis command is not allowed from script")
	}
	if sp.write {
		if run.readOnly {
			return errorReply("ERR Write commands are not allowed from read-only scripts.")
		}
		if !run.budget.st.markDirty() {
			// Killed before its first write: it must not write.
			run.budget.halt(errKilled)
			return errorReply(ErrScriptKilled)
		}
		return s.applyLocked(run.now, cmd)
	}
	if err := cmd.Validate(); err != nil {
		panic(err)
	}
	return s.readInsideLocked(run.now, cmd, !run.readOnly)
}

// errReplyArgs is what redis.error_reply and redis.status_reply return
// (not raise) when not given one string, as Redis does.
const errReplyArgs = "ERR wrong number or type of arguments"

func redisErrorReply(L *lua.LState) int {
	msg, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, errReplyArgs))
		return 1
	}
	// As Redis's luaPushErrorBuff: the first word is the error code, ERR
	// when there is only one word.
	text := strings.TrimPrefix(string(msg), "-")
	if !strings.Contains(text, " ") {
		text = "ERR " + text
	}
	t := L.NewTable()
	t.RawSetString("err", lua.LString(text))
	L.Push(t)
	return 1
}

func redisStatusReply(L *lua.LState) int {
	msg, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, errReplyArgs))
		return 1
	}
	t := L.NewTable()
	t.RawSetString("ok", lua.LString(msg))
	L.Push(t)
	return 1
}

func errorTable(L *lua.LState, text string) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("err", lua.LString(text))
	return t
}

func redisSHA1Hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseErrorTable(L, "ERR wrong number of arguments")
	}
	sum := sha1.Sum([]byte(L.ToString(1)))
	L.Push(lua.LString(hex.EncodeToString(sum[:])))
	return 1
}

// redisLog checks its arguments as Redis does and logs nothing: a
// script's log lines would be written once per replica and replay.
func (vm *luaVM) redisLog(L *lua.LState) int {
	if L.GetTop() < 2 {
		raiseErrorTable(L, "ERR redis.log() requires two arguments or more.")
	}
	if _, ok := L.Get(1).(lua.LNumber); !ok {
		raiseErrorTable(L, "ERR First argument must be a number (log level).")
	}
	if lvl := int(L.Get(1).(lua.LNumber)); lvl < 0 || lvl > logWarn {
		raiseErrorTable(L, "ERR Invalid debug level.")
	}
	return 0
}

func (vm *luaVM) redisSetResp(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseErrorTable(L, "ERR redis.setresp() requires one argument.")
	}
	v := L.CheckInt(1)
	if v != 2 && v != 3 {
		raiseErrorTable(L, "ERR RESP version must be 2 or 3.")
	}
	if vm.run != nil {
		vm.run.resp = v
	}
	return 0
}

// redisSetRepl accepts Redis's replication flags: every kvs script's
// effects reach every replica through the log, so they change nothing.
func (vm *luaVM) redisSetRepl(L *lua.LState) int {
	if vm.run == nil {
		raiseErrorTable(L, "ERR redis.set_repl can only be called inside a script invocation")
	}
	if L.GetTop() != 1 {
		raiseErrorTable(L, "ERR redis.set_repl() requires two arguments.")
	}
	if f := L.CheckInt(1); f < 0 || f > replAll {
		raiseErrorTable(L, "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0
}

// replyToLua converts a command's reply into a Lua value, as Redis does
// for the protocol the script chose with redis.setresp.
func replyToLua(L *lua.LState, resp int, r *Reply) lua.LValue {
	switch r.Kind {
	case ReplyNil, ReplyNilArray:
		if resp == 3 {
			return lua.LNil
		}
		return lua.LFalse
	case ReplyStatus:
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(r.Str))
		return t
	case ReplyError:
		t := L.CreateTable(0, 1)
		t.RawSetString("err", lua.LString(r.Str))
		return t
	case ReplyInt:
		return luaNumber(r.Int)
	case ReplyBool:
		if resp == 3 {
			return lua.LBool(r.Int != 0)
		}
		return luaNumber(r.Int)
	case ReplyBulk, ReplyBigNumber, ReplyVerbatim:
		if resp == 3 && r.Kind == ReplyBigNumber {
			t := L.CreateTable(0, 1)
			t.RawSetString("big_number", lua.LString(r.Bulk))
			return t
		}
		return lua.LString(r.Bulk)
	case ReplyDouble:
		if resp == 3 {
			f, _ := strconv.ParseFloat(string(r.Bulk), 64)
			t := L.CreateTable(0, 1)
			t.RawSetString("double", lua.LNumber(f))
			return t
		}
		return lua.LString(r.Bulk)
	case ReplyMap:
		if resp == 3 {
			m := L.CreateTable(0, len(r.Array)/2)
			for i := 0; i+1 < len(r.Array); i += 2 {
				m.RawSet(replyToLua(L, resp, &r.Array[i]), replyToLua(L, resp, &r.Array[i+1]))
			}
			t := L.CreateTable(0, 1)
			t.RawSetString("map", m)
			return t
		}
	case ReplySet:
		if resp == 3 {
			m := L.CreateTable(0, len(r.Array))
			for i := range r.Array {
				m.RawSet(replyToLua(L, resp, &r.Array[i]), lua.LTrue)
			}
			t := L.CreateTable(0, 1)
			t.RawSetString("set", m)
			return t
		}
	case ReplyBulks:
		t := L.CreateTable(int(r.Int), 0)
		for b, i := r.Bulk, 1; len(b) > 0; i++ {
			var e []byte
			e, b = NextBulk(b)
			t.RawSetInt(i, lua.LString(e))
		}
		return t
	case ReplyPairs:
		if resp == 2 {
			t := L.CreateTable(2*len(r.Array), 0)
			for i := range r.Array {
				for j := range r.Array[i].Array {
					t.Append(replyToLua(L, resp, &r.Array[i].Array[j]))
				}
			}
			return t
		}
	}
	t := L.CreateTable(len(r.Array), 0)
	for i := range r.Array {
		t.RawSetInt(i+1, replyToLua(L, resp, &r.Array[i]))
	}
	return t
}

// smallNumbers are the Lua numbers 0 to 1023 as values, made once: the
// integer replies a script sees most (EXPIRE's 1, an INCR of a counter,
// DEL's count) then cost no allocation each. A number is immutable, so
// every interpreter shares them.
var smallNumbers = func() (t [1024]lua.LValue) {
	for i := range t {
		t[i] = lua.LNumber(i)
	}
	return t
}()

// luaNumber returns n as a Lua value.
func luaNumber(n int64) lua.LValue {
	if n >= 0 && n < int64(len(smallNumbers)) {
		return smallNumbers[n]
	}
	return lua.LNumber(n)
}

// luaToReply converts a script's result into a reply, as Redis does.
func luaToReply(run *scriptRun, v lua.LValue, depth int) Reply {
	if depth > maxReplyNesting {
		return errorReply("ERR reached lua stack limit")
	}
	switch v := v.(type) {
	case lua.LString:
		return Reply{Kind: ReplyBulk, Bulk: []byte(v)}
	case lua.LBool:
		if run.resp == 2 {
			if v {
				return Reply{Kind: ReplyInt, Int: 1}
			}
			return replyNil
		}
		r := Reply{Kind: ReplyBool}
		if v {
			r.Int = 1
		}
		return r
	case lua.LNumber:
		return Reply{Kind: ReplyInt, Int: luaInt(float64(v))}
	case *lua.LTable:
		return tableToReply(run, v, depth)
	}
	return replyNil
}

// luaInt is C's (long long) cast of a Lua number, saturating where C's is
// undefined.
func luaInt(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return math.MinInt64
	case f >= math.MaxInt64:
		return math.MinInt64 // what x86's conversion yields
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

func tableToReply(run *scriptRun, t *lua.LTable, depth int) Reply {
	if e, ok := t.RawGetString("err").(lua.LString); ok {
		return errorReply(oneLine(string(e)))
	}
	if s, ok := t.RawGetString("ok").(lua.LString); ok {
		return Reply{Kind: ReplyStatus, Str: oneLine(string(s))}
	}
	if d, ok := t.RawGetString("double").(lua.LNumber); ok {
		return Reply{Kind: ReplyDouble, Bulk: formatDouble(float64(d))}
	}
	if s, ok := t.RawGetString("big_number").(lua.LString); ok {
		return Reply{Kind: ReplyBigNumber, Bulk: []byte(oneLine(string(s)))}
	}
	if vt, ok := t.RawGetString("verbatim_string").(*lua.LTable); ok {
		f, fok := vt.RawGetString("format").(lua.LString)
		s, sok := vt.RawGetString("string").(lua.LString)
		if fok && sok {
			return Reply{Kind: ReplyVerbatim, Str: string(f), Bulk: []byte(s)}
		}
	}
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		var out []Reply
		for k, v := m.Next(lua.LNil); k != lua.LNil; k, v = m.Next(k) {
			out = append(out, luaToReply(run, k, depth+1), luaToReply(run, v, depth+1))
		}
		return Reply{Kind: ReplyMap, Array: out}
	}
	if m, ok := t.RawGetString("set").(*lua.LTable); ok {
		var out []Reply
		for k, _ := m.Next(lua.LNil); k != lua.LNil; k, _ = m.Next(k) {
			out = append(out, luaToReply(run, k, depth+1))
		}
		return Reply{Kind: ReplySet, Array: out}
	}
	out := []Reply{}
	for i := 1; ; i++ {
		v := t.RawGetInt(i)
		if v == lua.LNil {
			break
		}
		out = append(out, luaToReply(run, v, depth+1))
	}
	return Reply{Kind: ReplyArray, Array: out}
}

// formatDouble formats a double reply as Redis 7.0's addReplyDouble
// (%.17g, and inf, -inf, nan spelled so).
func formatDouble(f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return []byte("inf")
	case math.IsInf(f, -1):
		return []byte("-inf")
	case math.IsNaN(f):
		return []byte("nan")
	}
	return strconv.AppendFloat(nil, f, 'g', 17, 64)
}
