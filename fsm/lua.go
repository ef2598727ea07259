package fsm

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// The Lua runtime scripts run in (gopher-lua), sandboxed as Redis 7.0's:
// the base, table, string and math libraries, plus cjson, bit, struct-less
// redis; no io, os, debug, coroutine, print, loadfile, dofile, getfenv or
// setfenv. Every global and every library table is read-only: a script
// cannot create a global ("Attempt to modify a readonly table"), read a
// missing one ("Script attempted to access nonexistent global variable"),
// or change a library, so nothing a script does outlives it in the
// interpreter. That is what lets one interpreter, and one environment
// (whose only own fields, KEYS, ARGV and _G, each run finds as a fresh
// environment has them, KEYS and ARGV in the interpreter's own tables,
// emptied and refilled: argTable), serve many scripts while every replica,
// and every replay from a snapshot, stays identical.
//
// What would leak node-local state into a script is replaced: math.random
// draws from the run's seeded source, tostring of a table or function
// numbers it in the order the run first printed it (not its address), and
// collectgarbage does nothing.

// CommandParser turns the arguments of a redis.call into a command the
// store applies or reads, or answers it itself (TIME, PING, errors). The
// server installs it (SetCommandParser): argument parsing lives there.
// It is called under the store's lock, so it must not call the store.
type CommandParser func(p *ParseContext, args [][]byte) (cmd Command, r Reply, answered bool)

// ParseContext is what a CommandParser may use: the script's clock (the
// entry's now) instead of the wall clock, its seeded random source for
// choices the parser makes (SPOP's seed), and whether the script is read
// only. Scratch is the parser's own, kept for the run.
//
// User is the ACL user the script runs as ("" when its calls are not
// checked), and ACL and ACLGen the store's ACL table (user name to rule
// line, nil for the built-in default user alone) and its generation as
// the script runs: the parser checks each call against them, never
// against a table of its own, so the answer follows the log. CheckOnly
// asks only whether User may run the command (redis.acl_check_cmd): the
// parser answers a ReplyBool, or an error for a command it does not know.
type ParseContext struct {
	Now       int64
	Rand      *rand.Rand
	ReadOnly  bool
	User      string
	ACL       map[string]string
	ACLGen    uint64
	CheckOnly bool
	// OOM: memory was over maxmemory when the script was proposed
	// (FlagScriptOOM). Dirty is the parser's, false when the run starts:
	// it marks that the script has called a write (Redis's
	// SCRIPT_WRITE_DIRTY), after which no call is refused for OOM.
	OOM, Dirty bool
	Scratch    any
}

// SetCommandParser installs the parser redis.call uses. Without one,
// every redis.call fails with "Unknown Redis command called from script".
func (s *Store) SetCommandParser(p CommandParser) {
	s.mu.Lock()
	s.parser = p
	s.mu.Unlock()
}

// scriptRun is one execution of a script or function.
type scriptRun struct {
	s        *Store
	now      int64
	readOnly bool
	name     string // the SHA1, or the function's name, for error texts
	source   string // "@user_script" or "@user_function"
	rnd      *rand.Rand
	budget   *budget
	resp     int // the protocol redis.call replies are converted from (redis.setresp)
	pc       ParseContext
	user     string             // the ACL user it runs as ("": unchecked)
	oom      bool               // FlagScriptOOM
	ids      map[lua.LValue]int // tostring's numbering
	cmd      Command            // the command redis.call is running
}

// budget is the context a run's interpreter checks once per instruction
// (gopher-lua's mainLoopWithContext calls Done before each): it counts
// the instructions down and calls the run's checkpoint when the count
// runs out (script_state.go), which says how many may run until the next
// one, or that the run must stop: its budget is spent (at the same
// instruction on every replica) or it was killed.
type budget struct {
	st   scriptState
	left int64 // instructions before the next checkpoint
	run  int64 // what left counted down from
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// errBudget is what the interpreter raises once the budget is spent.
var errBudget = errors.New("script instruction budget exceeded")

// start readies b to count for st's run, whose state begin has set.
func (b *budget) start() {
	b.left = checkpointEvery
	if b.st.limit > 0 && b.st.limit < b.left {
		b.left = b.st.limit + 1
	}
	b.run = b.left
}

// newBudget is a budget of max instructions (0: none) for code that is no
// script's run, a library's top level at FUNCTION LOAD: it is never busy
// and cannot be killed.
func newBudget(max int64) *budget {
	b := &budget{st: scriptState{limit: max}}
	b.start()
	return b
}

func (b *budget) Done() <-chan struct{} {
	if b.left--; b.left > 0 {
		return nil
	}
	next, stop := b.st.checkpoint(b.run)
	b.left, b.run = next, next
	if stop != nil {
		return closedChan
	}
	return nil
}
func (b *budget) Err() error                              { return b.st.stop }
func (b *budget) Deadline() (deadline time.Time, ok bool) { return time.Time{}, false }
func (b *budget) Value(key any) any                       { return nil }

// halt ends the run at its next instruction, with err.
func (b *budget) halt(err error) {
	b.st.stop = err
	b.left, b.run = 1, 1
}

// exceeded reports whether the run stopped at its instruction budget.
func (b *budget) exceeded() bool { return b.st.stop == errBudget }

// ErrBudget is the reply to a script stopped by its instruction budget
// (script-write-budget). The writes it made before it was stopped stay,
// as Redis keeps a script's writes when it fails.
const ErrBudget = "ERR Script ran past its instruction budget (script-write-budget) and was stopped"

// compiled caches compiled scripts by SHA1 (and functions' libraries by
// the SHA1 of their code). Compiled protos are immutable and shared by
// every interpreter; the cache is per process and never replicated.
var compiled struct {
	sync.RWMutex
	m map[string]compiledProto
}

// compiledProto is a cached compiled script and the SHA1 it is cached by.
type compiledProto struct {
	proto *lua.FunctionProto
	sha   string
}

const maxCompiled = 10000

// compileScript returns body compiled, or Redis's error text for a body
// that does not compile.
func compileScript(sha string, body []byte) (*lua.FunctionProto, string) {
	if p, _ := compiledScript([]byte(sha)); p != nil {
		return p, ""
	}
	p, err := compileLua(string(body), "user_script")
	if err != nil {
		return nil, "ERR Error compiling script (new function): " + oneLine(err.Error())
	}
	specializeRedisCalls(p)
	compiled.Lock()
	if compiled.m == nil || len(compiled.m) >= maxCompiled {
		compiled.m = make(map[string]compiledProto)
	}
	compiled.m[sha] = compiledProto{p, sha}
	compiled.Unlock()
	return p, ""
}

// compiledScript returns the cached compiled script sha and the cache's
// copy of sha, or nil if it is not cached, without allocating.
func compiledScript(sha []byte) (*lua.FunctionProto, string) {
	compiled.RLock()
	c := compiled.m[string(sha)]
	compiled.RUnlock()
	return c.proto, c.sha
}

// CompileScript reports Redis's error text if body does not compile
// (SCRIPT LOAD checks before proposing), caching the compiled form.
func CompileScript(body []byte) string {
	_, e := compileScript(ScriptSHA(body), body)
	return e
}

func compileLua(src, name string) (*lua.FunctionProto, error) {
	// A shebang line (#!lua flags=...) is Redis's, not Lua's: blank it,
	// keeping the line count.
	if strings.HasPrefix(src, "#!") {
		if i := strings.IndexByte(src, '\n'); i >= 0 {
			src = src[i:]
		} else {
			src = ""
		}
	}
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		return nil, err
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, err
	}
	// A vararg function gets Lua 5.0's "arg" table of its extra
	// arguments, built at every call; the main chunk's has no name a
	// script could reach it by, so building it (a table and a 32-slot
	// map, each run) is only garbage.
	proto.IsVarArg &^= lua.VarArgNeedsArg
	return proto, nil
}

func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// vmPool holds the interpreters of a store: one for writes, used only
// under the exclusive lock, and a pool for reads, which run concurrently.
type vmPool struct {
	mu    sync.Mutex // guards write's creation
	write *luaVM
	read  sync.Pool
}

func (p *vmPool) get(readOnly bool) *luaVM {
	if !readOnly {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.write == nil {
			p.write = newLuaVM()
		}
		return p.write
	}
	if vm, ok := p.read.Get().(*luaVM); ok {
		return vm
	}
	return newLuaVM()
}

func (p *vmPool) put(vm *luaVM, readOnly bool) {
	if readOnly {
		p.read.Put(vm)
	}
}

// luaVM is one sandboxed interpreter.
type luaVM struct {
	L       *lua.LState
	hidden  *lua.LTable // the real globals, reachable only through proxies
	envMeta *lua.LTable // metatable of each run's global environment
	// env is the global environment EVAL runs in, the same table every
	// run: a script cannot change it (it is read-only, and setfenv is
	// not there), so only KEYS and ARGV differ from run to run.
	env *lua.LTable
	// protected are the read-only proxies, which rawset and the table
	// library refuse to change.
	protected  map[*lua.LTable]bool
	errHandler *lua.LFunction
	run        *scriptRun

	// What one run needs, kept from run to run so that a run allocates
	// none of it (newRun): the run, its seeded source and its budget.
	runBuf scriptRun
	pcg    rand.PCG
	rnd    *rand.Rand
	budget budget
	// The last script run, as a function value (runEval).
	lastProto *lua.FunctionProto
	lastFn    *lua.LFunction
	// redisUps are the upvalues of a specialized script's chunk
	// (specializeRedisCalls).
	redisUps []*lua.Upvalue
	// The KEYS and ARGV tables of the last run, which the next empties
	// and refills (argTable).
	keys, argv *lua.LTable
	// redis.call's arguments, in buffers reused from call to call: what
	// the store keeps of a command it copies (Apply's contract), and the
	// reply is converted to Lua values before the next call.
	callArgs [][]byte
	callBuf  []byte
	callEnds []int
}

const (
	errReadonlyTable = "Attempt to modify a readonly table"
	maxReplyNesting  = 32
)

func newLuaVM() *luaVM {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 200, RegistrySize: 1024 * 4, RegistryMaxSize: 1024 * 1024})
	vm := &luaVM{L: L, protected: make(map[*lua.LTable]bool)}
	for _, open := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(open.fn))
		L.Push(lua.LString(open.name))
		L.Call(1, 0)
	}
	G := L.G.Global
	for _, name := range []string{"dofile", "loadfile", "print", "_printregs", "module", "require", "newproxy", "coroutine", "_VERSION", "getfenv", "setfenv"} {
		G.RawSetString(name, lua.LNil)
	}
	G.RawSetString("_VERSION", lua.LString("Lua 5.1"))
	G.RawSetString("collectgarbage", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LNumber(0)); return 1 }))
	G.RawSetString("tostring", L.NewFunction(vm.tostring))
	G.RawSetString("getmetatable", L.NewFunction(luaGetMetatable))
	G.RawSetString("rawset", L.NewFunction(vm.rawset))
	tbl := G.RawGetString("table").(*lua.LTable)
	for _, name := range []string{"insert", "remove", "sort"} {
		orig := tbl.RawGetString(name).(*lua.LFunction)
		tbl.RawSetString(name, L.NewFunction(vm.guardTable(orig)))
	}
	math := G.RawGetString("math").(*lua.LTable)
	math.RawSetString("random", L.NewFunction(vm.mathRandom))
	math.RawSetString("randomseed", L.NewFunction(vm.mathRandomSeed))
	redis := vm.redisLib()
	vm.redisUps = redisUpvalues(redis)
	G.RawSetString("redis", redis)
	G.RawSetString("cjson", cjsonLib(L))
	G.RawSetString("bit", bitLib(L))

	// Protect the string metatable (reachable from any string).
	if mt, ok := L.GetMetatable(lua.LString("")).(*lua.LTable); ok {
		mt.RawSetString("__metatable", lua.LFalse)
	}
	// Hide the real globals behind proxies: the library tables first, then
	// the global table itself.
	G.ForEach(func(k, v lua.LValue) {
		if t, ok := v.(*lua.LTable); ok && k.String() != "_G" {
			G.RawSet(k, vm.proxy(t))
		}
	})
	vm.hidden = G
	G.RawSetString("_G", lua.LNil)
	pub := vm.proxy(G)
	L.G.Global = pub
	L.Env = pub

	// A run's environment reads through to the real globals, a table
	// lookup, and only a name missing there reaches globalIndex's error.
	missing := L.NewTable()
	missing.RawSetString("__index", L.NewFunction(vm.globalIndex))
	L.SetMetatable(G, missing)
	vm.envMeta = L.NewTable()
	vm.envMeta.RawSetString("__index", G)
	vm.envMeta.RawSetString("__newindex", L.NewFunction(raiseReadonly))
	vm.envMeta.RawSetString("__metatable", lua.LFalse)
	vm.errHandler = L.NewFunction(vm.onError)
	vm.env = vm.newEnv()
	vm.rnd = rand.New(&vm.pcg)
	return vm
}

// newRun returns the run of a script in vm, reusing vm's buffers: the
// returned run is valid until the next newRun. Its random source is
// seeded with seed, as rand.New(rand.NewPCG(seed, 0x5c1a)) would be, and
// it stops after budget instructions (0: never). The caller describes the
// run to its state (run.budget.st) and ends it (end) when it is over.
func (vm *luaVM) newRun(s *Store, now int64, readOnly bool, name string, seed uint64, maxInstr int64) *scriptRun {
	ids := vm.runBuf.ids
	clear(ids)
	pc := vm.runBuf.pc
	vm.pcg.Seed(seed, 0x5c1a)
	vm.budget.st.begin(s, name, readOnly, maxInstr)
	vm.budget.start()
	vm.runBuf = scriptRun{s: s, now: now, readOnly: readOnly, name: name, rnd: vm.rnd, budget: &vm.budget, ids: ids,
		pc: ParseContext{Scratch: pc.Scratch}}
	return &vm.runBuf
}

// proxy returns an empty read-only table reading through to t.
func (vm *luaVM) proxy(t *lua.LTable) *lua.LTable {
	L := vm.L
	p := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(raiseReadonly))
	mt.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(p, mt)
	vm.protected[p] = true
	return p
}

func raiseReadonly(L *lua.LState) int {
	L.RaiseError(errReadonlyTable)
	return 0
}

// globalIndex is the __index of the real globals, reached for a name they
// do not have: a global the sandbox does not define is an error, as in
// Redis.
func (vm *luaVM) globalIndex(L *lua.LState) int {
	L.RaiseError("Script attempted to access nonexistent global variable '%s'", L.Get(2).String())
	return 0
}

func luaGetMetatable(L *lua.LState) int {
	mt := L.GetMetatable(L.CheckAny(1))
	if t, ok := mt.(*lua.LTable); ok {
		if p := t.RawGetString("__metatable"); p != lua.LNil {
			L.Push(p)
			return 1
		}
	}
	L.Push(mt)
	return 1
}

// readOnly reports whether t is a library proxy or a run's globals.
func (vm *luaVM) readOnly(t *lua.LTable) bool {
	return vm.protected[t] || t.Metatable == vm.envMeta
}

func (vm *luaVM) rawset(L *lua.LState) int {
	t := L.CheckTable(1)
	if vm.readOnly(t) {
		L.RaiseError(errReadonlyTable)
	}
	t.RawSet(L.CheckAny(2), L.CheckAny(3))
	L.Push(t)
	return 1
}

// guardTable wraps a table-library function that changes its first
// argument so that it refuses the read-only tables.
func (vm *luaVM) guardTable(orig *lua.LFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		if t, ok := L.Get(1).(*lua.LTable); ok && vm.readOnly(t) {
			L.RaiseError(errReadonlyTable)
		}
		return orig.GFunction(L)
	}
}

// tostring is Lua's, except that a table, function or other reference is
// numbered by the order the run first converted it, not by its address,
// which differs between replicas.
func (vm *luaVM) tostring(L *lua.LState) int {
	v := L.CheckAny(1)
	if mt, ok := L.GetMetatable(v).(*lua.LTable); ok {
		if f := mt.RawGetString("__tostring"); f != lua.LNil {
			L.Push(f)
			L.Push(v)
			L.Call(1, 1)
			return 1
		}
	}
	switch v.Type() {
	case lua.LTTable, lua.LTFunction, lua.LTUserData, lua.LTThread, lua.LTChannel:
		run := vm.run
		if run.ids == nil {
			run.ids = make(map[lua.LValue]int)
		}
		id, ok := run.ids[v]
		if !ok {
			id = len(run.ids) + 1
			run.ids[v] = id
		}
		L.Push(lua.LString(v.Type().String() + ": 0x" + strconv.FormatInt(int64(id), 16)))
	default:
		L.Push(lua.LString(v.String()))
	}
	return 1
}

// mathRandom is Lua 5.1's math.random over the run's seeded source.
func (vm *luaVM) mathRandom(L *lua.LState) int {
	r := vm.run.rnd.Float64()
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := L.CheckInt64(1)
		if u < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(int64(r*float64(u)) + 1))
	default:
		l, u := L.CheckInt64(1), L.CheckInt64(2)
		if l > u {
			L.ArgError(2, "interval is empty")
		}
		L.Push(lua.LNumber(int64(r*float64(u-l+1)) + l))
	}
	return 1
}

func (vm *luaVM) mathRandomSeed(L *lua.LState) int {
	vm.run.rnd = rand.New(rand.NewPCG(uint64(L.CheckInt64(1)), 0x5c1a))
	return 0
}

// newEnv returns the global environment EVAL runs in, holding _G, and
// KEYS and ARGV once runEval sets them.
func (vm *luaVM) newEnv() *lua.LTable {
	env := vm.L.CreateTable(0, 3)
	env.RawSetString("_G", env)
	vm.L.SetMetatable(env, vm.envMeta)
	return env
}

func stringsTable(L *lua.LState, items [][]byte) *lua.LTable {
	t := L.CreateTable(len(items), 0)
	for _, b := range items {
		t.Append(lua.LString(b))
	}
	return t
}

// argTable returns a table of items, as stringsTable's, for KEYS or ARGV:
// last (the previous run's table, nil at first) emptied and filled again,
// so that a run allocates no table and the environment keeps its fields.
// A table its run left a dense array (no metatable, no key outside the
// array, a value in its last slot) is refilled where it is, and left
// exactly items long; anything else, a sparse array among them (whose
// length only a scan would tell), gets a fresh table's contents, so that
// no run keeps paying for what an earlier script did to its tables.
// Nothing else a run does can outlive it (the globals and libraries are
// read-only; a main chunk's only upvalues are redis.call and
// redis.pcall), so a refilled table is, to the next script, what a fresh
// one is.
func (vm *luaVM) argTable(last *lua.LTable, items [][]byte) *lua.LTable {
	switch {
	case last == nil:
		return stringsTable(vm.L, items)
	case len(items) == 0:
		*last = lua.LTable{Metatable: lua.LNil}
		return last
	}
	// Remove(0) takes the array's last slot, in constant time. MaxN is
	// then the array's length before Remove less one, unless a hole comes
	// before its last value: the refilled table keeps trailing nils, and
	// the next run replaces it.
	var top lua.LValue = lua.LNil
	if last.Metatable == lua.LNil {
		top = last.Remove(0)
	}
	n := 0
	if top != lua.LNil {
		n = last.MaxN()
	}
	if top == lua.LNil || !hashEmpty(last, n) {
		*last = *stringsTable(vm.L, items)
		return last
	}
	n++
	last.RawSetInt(n, top) // back, for the comparison below
	for i, b := range items {
		// A repeated argument (a limit, a window) keeps its string.
		if old, ok := last.RawGetInt(i + 1).(lua.LString); ok && string(old) == string(b) {
			continue
		}
		last.RawSetInt(i+1, lua.LString(b))
	}
	// Clear what is left after items, then shorten the array to items:
	// with a hole, the slots taken off the end may be trailing nils.
	for i := len(items) + 1; i <= n; i++ {
		last.RawSetInt(i, lua.LNil)
	}
	for ; n > len(items); n-- {
		last.Remove(0)
	}
	return last
}

// hashEmpty reports whether t, whose array holds nothing after n, has no
// key outside its array.
func hashEmpty(t *lua.LTable, n int) bool {
	var k lua.LValue = lua.LNil
	if n > 0 {
		// Next of the last array key: the first key after the array,
		// in the hash part.
		k, _ = t.Next(lua.LNumber(n))
	} else {
		k, _ = t.Next(lua.LNil)
	}
	return k == lua.LNil
}

// setEnv sets the environment's own field name to v, unless it holds v.
func (vm *luaVM) setEnv(name string, v lua.LValue) {
	if vm.env.RawGetString(name) != v {
		vm.env.RawSetString(name, v)
	}
}

// runEval runs a script's compiled body in vm's environment, with keys
// and args as KEYS and ARGV.
func (vm *luaVM) runEval(run *scriptRun, proto *lua.FunctionProto, keys, args [][]byte) Reply {
	L := vm.L
	// A main chunk's only upvalues are redis.call and redis.pcall
	// (specializeRedisCalls), and a script cannot change its function (no
	// setfenv), so the last one's value serves again.
	if vm.lastProto != proto {
		fn := L.NewFunctionFromProto(proto)
		if proto.NumUpvalues == numRedisUpvalues {
			copy(fn.Upvalues, vm.redisUps)
		}
		vm.lastProto, vm.lastFn = proto, fn
	}
	fn := vm.lastFn
	vm.keys = vm.argTable(vm.keys, keys)
	vm.argv = vm.argTable(vm.argv, args)
	// KEYS, ARGV and _G are the environment's only own fields, which a
	// script may assign (as in a fresh environment): each run finds all
	// three as a fresh environment has them.
	vm.setEnv("KEYS", vm.keys)
	vm.setEnv("ARGV", vm.argv)
	vm.setEnv("_G", vm.env)
	fn.Env = vm.env
	run.source = "@user_script"
	return vm.call(run, fn)
}

// call runs fn (with the arguments already pushed after it, nargs of
// them) as run and converts its result.
func (vm *luaVM) call(run *scriptRun, fn *lua.LFunction, fnArgs ...lua.LValue) Reply {
	L := vm.L
	run.resp = 2
	run.pc = ParseContext{Now: run.now, Rand: run.rnd, ReadOnly: run.readOnly, Scratch: run.pc.Scratch}
	vm.run = run
	L.SetContext(run.budget)
	defer func() {
		vm.run = nil
		L.RemoveContext()
		L.SetTop(0)
	}()
	L.Push(fn)
	for _, a := range fnArgs {
		L.Push(a)
	}
	err := L.PCall(len(fnArgs), 1, vm.errHandler)
	switch {
	case run.budget.exceeded():
		return errorReply(ErrBudget)
	case run.budget.st.killed():
		return vm.killedReply(run, err)
	}
	if err != nil {
		var ae *lua.ApiError
		if errors.As(err, &ae) {
			return vm.errorFromObject(run, ae.Object)
		}
		return errorReply("ERR " + oneLine(err.Error()))
	}
	return luaToReply(run, L.Get(-1), 0)
}

// killedReply is the reply to a run SCRIPT KILL or FUNCTION KILL stopped
// (err: what the interpreter raised last), which says where, as Redis's.
func (vm *luaVM) killedReply(run *scriptRun, err error) Reply {
	text := ErrScriptKilled
	var ae *lua.ApiError
	if errors.As(err, &ae) {
		if t, ok := ae.Object.(*lua.LTable); ok {
			if line, ok := t.RawGetString("line").(lua.LNumber); ok {
				text += " script: " + run.name + ", on " + run.source + ":" + strconv.Itoa(int(line)) + "."
			}
		}
	}
	return errorReply(text)
}

// onError is the message handler of a run (Redis's __redis__err__handler):
// it turns the error into a table {err=..., source=..., line=...} with the
// position of the Lua code that raised it.
func (vm *luaVM) onError(L *lua.LState) int {
	e := L.Get(1)
	t, ok := e.(*lua.LTable)
	if !ok || t.RawGetString("err").Type() != lua.LTString {
		msg := "nil"
		if e != lua.LNil {
			msg = lua.LVAsString(e)
			if msg == "" && e.Type() != lua.LTString {
				msg = e.String()
			}
		}
		t = L.NewTable()
		t.RawSetString("err", lua.LString("ERR "+msg))
	}
	for level := 0; ; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil {
			break
		}
		if dbg.What != "G" && dbg.CurrentLine > 0 {
			t.RawSetString("line", lua.LNumber(dbg.CurrentLine))
			break
		}
	}
	L.Push(t)
	return 1
}

// errorFromObject is the reply to a run that raised e (after onError).
func (vm *luaVM) errorFromObject(run *scriptRun, e lua.LValue) Reply {
	t, ok := e.(*lua.LTable)
	if !ok {
		return errorReply("ERR Error running script " + run.name + ", " + oneLine(lua.LVAsString(e)))
	}
	msg := oneLine(lua.LVAsString(t.RawGetString("err")))
	if line, ok := t.RawGetString("line").(lua.LNumber); ok {
		msg += " script: " + run.name + ", on " + run.source + ":" + strconv.Itoa(int(line)) + "."
	}
	return errorReply(msg)
}

// raiseErrorTable raises a Redis error table {err=text} from a Go function.
func raiseErrorTable(L *lua.LState, text string) {
	t := L.NewTable()
	t.RawSetString("err", lua.LString(text))
	L.Error(t, 1)
}

// context.Context is what gopher-lua takes; budget is one.
var _ context.Context = (*budget)(nil)
