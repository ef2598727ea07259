package fsm

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
)

// Functions (Redis 7): FUNCTION LOAD / DELETE / FLUSH / LIST / STATS,
// FCALL and FCALL_RO. A library is Lua code headed "#!lua name=<lib>"
// whose top level calls redis.register_function; it is replicated state,
// kept in the metadata map as
//
//	function/<library name>          -> the code, as loaded
//	function-name/<function, lower>  -> the library that holds it
//
// so libraries are in snapshots, survive restarts and failovers, and an
// FCALL finds its function with one lookup on every replica. LOAD, DELETE
// and FLUSH are writes. FCALL of a function that may write is a write
// (OpFCall) run inside Apply like EVAL, with the entry's clock, seed and
// instruction budget; FCALL_RO and FCALL of a no-writes function are reads
// (OpFCallRO).
//
// Determinism: Redis keeps a library's closures in its one interpreter, so
// a library's upvalues outlive a call there, on that node only. kvs runs a
// library's top level again (in the run's interpreter, under the run's
// budget) before every call, so each call starts from the library as
// loaded, on every replica and at every replay. What a library registers
// (names, flags, descriptions) is derived from its code alone and cached
// per process by code.
//
// As in Redis, the top level sees only redis.register_function, redis.log
// and the redis.LOG_* and REDIS_VERSION constants; the functions it
// registers see the whole script API when called, with keys and arguments
// as their two parameters (no KEYS or ARGV globals).

const (
	// OpFCall (FCALL): Args[0]=function name, Args[1:1+Int]=keys, the
	// rest its arguments; Int2 and Float as OpEval's. Reply: the
	// function's reply.
	OpFCall Op = opBaseScript + 5 + iota
	// OpFCallRO (FCALL_RO, and FCALL of a no-writes function): as
	// OpFCall, a read; a function without no-writes is refused.
	OpFCallRO
	// OpFunctionLoad: Args[0]=the library's code; FlagFunctionReplace.
	// Reply: the library's name.
	OpFunctionLoad
	// OpFunctionDelete: Args[0]=library name. Reply +OK.
	OpFunctionDelete
	// OpFunctionFlush: forget every library. Reply +OK.
	OpFunctionFlush
	// OpFunctionList: Args[0]=a LIBRARYNAME pattern with
	// FlagFunctionPattern; FlagFunctionWithCode. Reply as Redis's.
	OpFunctionList
	// OpFunctionStats: Reply as Redis's when no function is running.
	OpFunctionStats
)

// Flags of the function ops.
const (
	FlagFunctionReplace Flags = 1 << 0 // OpFunctionLoad: REPLACE
	// FlagFCallBadKeys, on OpFCallRO: the call's key count was refused
	// with the error Args[1], which is the reply unless the function is
	// not found (Redis looks for the function first).
	FlagFCallBadKeys Flags = 1 << 0
	// FlagFCallRO, on OpFCallRO: the client sent FCALL_RO, not FCALL of
	// a no-writes function (FUNCTION STATS shows which).
	FlagFCallRO          Flags = 1 << 5
	FlagFunctionPattern  Flags = 1 << 0 // OpFunctionList: Args[0] is LIBRARYNAME's pattern
	FlagFunctionWithCode Flags = 1 << 1 // OpFunctionList: WITHCODE
)

const (
	libraryMetaPrefix  = "function/"
	functionMetaPrefix = "function-name/"
	// functionLoadBudget bounds a library's top level at FUNCTION LOAD,
	// as Redis's 500 ms load timeout does, in instructions (the same on
	// every replica).
	functionLoadBudget = 10_000_000
)

// Redis's errors for functions.
const (
	ErrFunctionNotFound = "ERR Function not found"
	ErrLibraryNotFound  = "ERR Library not found"
	ErrFunctionWriteRO  = "ERR Can not execute a script with write flag using *_ro command."
	errBadName          = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
)

func init() {
	registerOp(OpFCall, opSpec{name: "FCALL", write: true, args: argsAtLeast(1), flags: FlagScriptUser,
		check: checkNumKeys, apply: applyFCall, keys: scriptKeys, composite: true})
	registerOp(OpFCallRO, opSpec{name: "FCALL_RO", args: argsAtLeast(1), flags: FlagFCallBadKeys | FlagScriptUser | FlagFCallRO,
		check: checkNumKeys, read: readFCall})
	registerOp(OpFunctionLoad, opSpec{name: "FUNCTION", write: true, args: 1, flags: FlagFunctionReplace,
		apply: applyFunctionLoad, keys: keysNone})
	registerOp(OpFunctionDelete, opSpec{name: "FUNCTION", write: true, args: 1, apply: applyFunctionDelete, keys: keysNone})
	registerOp(OpFunctionFlush, opSpec{name: "FUNCTION", write: true, args: 0, apply: applyFunctionFlush, keys: keysNone})
	registerOp(OpFunctionList, opSpec{name: "FUNCTION", args: argsAny, flags: FlagFunctionPattern | FlagFunctionWithCode,
		check: checkFunctionList, read: readFunctionList})
	registerOp(OpFunctionStats, opSpec{name: "FUNCTION", args: 0, read: readFunctionStats})
}

func checkFunctionList(c *Command) error {
	if want := int(c.Flags & FlagFunctionPattern); len(c.Args) != want {
		return fmt.Errorf("%d args with pattern flag %d", len(c.Args), want)
	}
	return nil
}

// Script flags, in Redis's order (scripts_flags_def), which FUNCTION LIST
// reports them in.
const (
	scriptNoWrites = 1 << iota
	scriptAllowOOM
	scriptAllowStale
	scriptNoCluster
	scriptAllowCrossSlot
)

var scriptFlagNames = []string{"no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"}

// library is what a library's code registers, derived from the code alone.
type library struct {
	name  string
	proto *lua.FunctionProto
	funcs []libFunction // sorted by name
}

type libFunction struct {
	name    string
	desc    string
	hasDesc bool
	flags   int
}

// find returns the function named name, in any case.
func (l *library) find(name string) *libFunction {
	for i := range l.funcs {
		if strings.EqualFold(l.funcs[i].name, name) {
			return &l.funcs[i]
		}
	}
	return nil
}

// libraries caches loaded libraries by their code; like compiled, it is
// per process and never replicated.
var libraries struct {
	sync.Mutex
	m map[string]libraryResult
}

type libraryResult struct {
	lib *library
	err string
}

const maxLibraries = 1000

// libraryName reads a library's "#!<engine> name=<lib>" header: its name,
// or Redis's error for a header it does not accept.
func libraryName(code string) (string, string) {
	if !strings.HasPrefix(code, "#!") {
		return "", "ERR Missing library metadata"
	}
	end := strings.IndexByte(code, '\n')
	if end < 0 {
		return "", "ERR Invalid library metadata"
	}
	parts := strings.Fields(code[:end])
	engine, name, named := parts[0][2:], "", false
	for _, p := range parts[1:] {
		if len(p) < 5 || !strings.EqualFold(p[:5], "name=") {
			return "", "ERR Invalid metadata value given: " + p
		}
		if named {
			return "", "ERR Invalid metadata value, name argument was given multiple times"
		}
		name, named = p[5:], true
	}
	switch {
	case !named:
		return "", "ERR Library name was not given"
	case !validFunctionName(name):
		return "", "ERR " + errBadName
	case !strings.EqualFold(engine, "lua"):
		return "", "ERR Engine '" + engine + "' not found"
	}
	return name, ""
}

// validFunctionName is Redis's rule for library and function names.
func validFunctionName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range []byte(name) {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// libraryOf returns what code registers, or Redis's error for code that
// does not compile or load, caching either.
func (s *Store) libraryOf(code string) (*library, string) {
	libraries.Lock()
	res, ok := libraries.m[code]
	libraries.Unlock()
	if ok {
		return res.lib, res.err
	}
	res = s.loadLibrary(code)
	libraries.Lock()
	if libraries.m == nil || len(libraries.m) >= maxLibraries {
		libraries.m = make(map[string]libraryResult)
	}
	libraries.m[code] = res
	libraries.Unlock()
	return res.lib, res.err
}

func (s *Store) loadLibrary(code string) libraryResult {
	name, e := libraryName(code)
	if e != "" {
		return libraryResult{err: e}
	}
	proto, err := compileLua(code, "user_function")
	if err != nil {
		return libraryResult{err: "ERR Error compiling function: " + oneLine(err.Error())}
	}
	lib := &library{name: name, proto: proto}
	vm := s.vms.get(true)
	defer s.vms.put(vm, true)
	_, e = vm.loadLibrary(proto, newBudget(functionLoadBudget), func(f registered) {
		lib.funcs = append(lib.funcs, f.libFunction)
	})
	if e != "" {
		return libraryResult{err: "ERR Error registering functions: " + e}
	}
	if len(lib.funcs) == 0 {
		return libraryResult{err: "ERR No functions registered"}
	}
	slices.SortFunc(lib.funcs, func(a, b libFunction) int { return strings.Compare(a.name, b.name) })
	return libraryResult{lib: lib}
}

// registered is one redis.register_function call.
type registered struct {
	libFunction
	callback *lua.LFunction
}

// loadLibrary runs a library's top level in a fresh environment that sees
// only the load-time API, calling each for every function it registers.
// It returns the environment, which the registered functions share, or
// the error text Redis puts after "Error registering functions: ".
func (vm *luaVM) loadLibrary(proto *lua.FunctionProto, b *budget, each func(registered)) (*lua.LTable, string) {
	L := vm.L
	seen := make(map[string]bool)
	register := func(L *lua.LState) int {
		f, e := registerArgs(L)
		if e == "" && !validFunctionName(f.name) {
			e = errBadName
		}
		if e == "" && seen[f.name] {
			e = "Function already exists in the library"
		}
		if e != "" {
			raiseErrorTable(L, "ERR "+e)
		}
		seen[f.name] = true
		each(f)
		return 0
	}
	api := L.CreateTable(0, 8)
	api.RawSetString("register_function", L.NewFunction(register))
	api.RawSetString("log", L.NewFunction(vm.redisLog))
	for _, c := range []struct {
		name string
		v    int
	}{{"LOG_DEBUG", 0}, {"LOG_VERBOSE", 1}, {"LOG_NOTICE", 2}, {"LOG_WARNING", logWarn}} {
		api.RawSetString(c.name, lua.LNumber(c.v))
	}
	api.RawSetString("REDIS_VERSION", lua.LString(redisVer))
	api.RawSetString("REDIS_VERSION_NUM", lua.LNumber(redisVerN))
	globals := L.CreateTable(0, 1)
	globals.RawSetString("redis", strictTable(L, api))
	env := strictTable(L, globals)

	fn := L.NewFunctionFromProto(proto)
	fn.Env = env
	L.SetContext(b)
	L.Push(fn)
	err := L.PCall(0, 0, nil)
	L.RemoveContext()
	L.SetTop(0)
	switch {
	case b.exceeded():
		return nil, "ERR FUNCTION LOAD timeout"
	case err != nil:
		return nil, loadError(err)
	}
	return env, ""
}

// loadError is the text of an error a library's top level raised.
func loadError(err error) string {
	if ae, ok := err.(*lua.ApiError); ok {
		if t, ok := ae.Object.(*lua.LTable); ok {
			if e, ok := t.RawGetString("err").(lua.LString); ok {
				return oneLine(string(e))
			}
		}
		return "ERR " + oneLine(lua.LVAsString(ae.Object))
	}
	return "ERR " + oneLine(err.Error())
}

// strictTable returns an empty read-only table reading through to t, in
// which a missing name is an error, as in the tables of Redis's load-time
// environment.
func strictTable(L *lua.LState, t *lua.LTable) *lua.LTable {
	p := L.NewTable()
	mt := L.CreateTable(0, 3)
	mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		k := L.Get(2)
		v := t.RawGet(k)
		if v == lua.LNil {
			L.RaiseError("Script attempted to access nonexistent global variable '%s'", lua.LVAsString(k))
		}
		L.Push(v)
		return 1
	}))
	mt.RawSetString("__newindex", L.NewFunction(raiseReadonly))
	mt.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(p, mt)
	return p
}

// luaString is Lua's lua_isstring with lua_tostring: strings and numbers.
func luaString(v lua.LValue) (string, bool) {
	switch v := v.(type) {
	case lua.LString:
		return string(v), true
	case lua.LNumber:
		return v.String(), true
	}
	return "", false
}

// registerArgs reads redis.register_function's arguments, positional
// (name, callback) or named ({function_name=, callback=, flags=,
// description=}), with Redis's errors.
func registerArgs(L *lua.LState) (registered, string) {
	var f registered
	switch L.GetTop() {
	case 2:
		name, ok := luaString(L.Get(1))
		if !ok {
			return f, "first argument to redis.register_function must be a string"
		}
		cb, ok := L.Get(2).(*lua.LFunction)
		if !ok {
			return f, "second argument to redis.register_function must be a function"
		}
		f.name, f.callback = name, cb
		return f, ""
	case 1:
	default:
		return f, "wrong number of arguments to redis.register_function"
	}
	t, ok := L.Get(1).(*lua.LTable)
	if !ok {
		return f, "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."
	}
	named := false
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		key, ok := luaString(k)
		if !ok {
			return f, "named argument key given to redis.register_function is not a string"
		}
		switch strings.ToLower(key) {
		case "function_name":
			if f.name, ok = luaString(v); !ok {
				return f, "function_name argument given to redis.register_function must be a string"
			}
			named = true
		case "description":
			if f.desc, ok = luaString(v); !ok {
				return f, "description argument given to redis.register_function must be a string"
			}
			f.hasDesc = true
		case "callback":
			if f.callback, ok = v.(*lua.LFunction); !ok {
				return f, "callback argument given to redis.register_function must be a function"
			}
		case "flags":
			ft, ok := v.(*lua.LTable)
			if !ok {
				return f, "flags argument to redis.register_function must be a table representing function flags"
			}
			if f.flags, ok = readScriptFlags(ft); !ok {
				return f, "unknown flag given"
			}
		default:
			return f, "unknown argument given to redis.register_function"
		}
	}
	switch {
	case !named:
		return f, "redis.register_function must get a function name argument"
	case f.callback == nil:
		return f, "redis.register_function must get a callback argument"
	}
	return f, ""
}

// readScriptFlags reads a flags array such as {'no-writes'}.
func readScriptFlags(t *lua.LTable) (int, bool) {
	flags := 0
	for i := 1; ; i++ {
		v := t.RawGetInt(i)
		if v == lua.LNil {
			return flags, true
		}
		s, ok := luaString(v)
		if !ok {
			return 0, false
		}
		j := slices.IndexFunc(scriptFlagNames, func(n string) bool { return strings.EqualFold(n, s) })
		if j < 0 {
			return 0, false
		}
		flags |= 1 << j
	}
}

// functionLocked returns the function FCALL name calls and its library.
func (s *Store) functionLocked(name string) (*library, *libFunction) {
	return s.functionIn(s.meta, name)
}

// functionIn is functionLocked in the metadata meta.
func (s *Store) functionIn(meta map[string]string, name string) (*library, *libFunction) {
	libName, ok := meta[functionMetaPrefix+strings.ToLower(name)]
	if !ok {
		return nil, nil
	}
	lib, e := s.libraryOf(meta[libraryMetaPrefix+libName])
	if e != "" {
		// A library is in the metadata only once it loaded, and loading
		// depends on its code alone.
		panic(fmt.Sprintf("fsm: library %q no longer loads: %s", libName, e))
	}
	return lib, lib.find(name)
}

// Function reports whether a function named name is loaded, whether it
// has the no-writes flag (FCALL of it is then a read), and whether it has
// allow-oom. The answer is the store's as of now; OpFCall and OpFCallRO
// look again when they run.
func (s *Store) Function(name string) (found, noWrites, allowOOM bool) {
	_, f := s.functionIn(s.publishedMeta(), name)
	if f == nil {
		return false, false, false
	}
	return true, f.flags&scriptNoWrites != 0, f.flags&scriptAllowOOM != 0
}

func applyFCall(s *Store, now int64, c *Command) Reply {
	return s.runFunction(now, c, false, s.applyServe)
}

func readFCall(s *Store, now int64, c *Command) Reply {
	return s.runFunction(now, c, true, nil)
}

// runFunction runs the function c calls under the lock the caller holds:
// exclusive for OpFCall, shared for OpFCallRO; whileBusy is what its
// caller serves once it is busy (nil: nothing).
func (s *Store) runFunction(now int64, c *Command, shared bool, whileBusy func()) Reply {
	lib, f := s.functionLocked(string(c.Args[0]))
	switch {
	case f == nil:
		return errorReply(ErrFunctionNotFound)
	case c.Flags&FlagFCallBadKeys != 0:
		return errorReply(string(c.Args[1]))
	}
	noWrites := f.flags&scriptNoWrites != 0
	if shared && !noWrites {
		return errorReply(ErrFunctionWriteRO)
	}
	vm := s.vms.get(shared)
	defer s.vms.put(vm, shared)
	run := newScriptRun(s, now, c, f.name, shared || noWrites)
	var index uint64
	if !shared {
		index = s.entry
	}
	run.budget.st.track(c, true, index, whileBusy)
	defer run.budget.st.end()
	run.source = "@user_function"
	var callback *lua.LFunction
	env, e := vm.loadLibrary(lib.proto, run.budget, func(r registered) {
		if r.name == f.name {
			callback = r.callback
		}
	})
	switch {
	case run.budget.exceeded():
		return errorReply(ErrBudget)
	case run.budget.st.killed():
		return vm.killedReply(run, nil)
	case e != "":
		panic(fmt.Sprintf("fsm: library %q no longer loads: %s", lib.name, e))
	}
	// The functions see the whole API from now on, as in Redis.
	vm.L.SetMetatable(env, vm.envMeta)
	keys, argv, user := scriptArgs(c)
	run.user = user
	return vm.call(run, callback, stringsTable(vm.L, keys), stringsTable(vm.L, argv))
}

// newScriptRun is a run of the function name for c, seeded and budgeted
// as runScript's runs are.
func newScriptRun(s *Store, now int64, c *Command, name string, readOnly bool) *scriptRun {
	b := new(budget)
	b.st.begin(s, name, readOnly, int64(c.Float))
	b.start()
	return &scriptRun{
		s: s, now: now, readOnly: readOnly, name: name,
		rnd:    rand.New(rand.NewPCG(uint64(c.Int2), 0x5c1a)),
		budget: b,
	}
}

// CheckLibraryHeader reports Redis's error for FUNCTION LOAD of code
// whose "#!lua name=<lib>" header it refuses, or "". Everything else
// FUNCTION LOAD checks depends on the libraries loaded, so Apply checks it.
func CheckLibraryHeader(code []byte) string {
	_, e := libraryName(string(code))
	return e
}

// checkFunctionLoadLocked checks FUNCTION LOAD in Redis's order: the
// header, whether the library exists, the code, and whether another
// library has a function of the same name.
func (s *Store) checkFunctionLoadLocked(code string, replace bool) (*library, string) {
	name, e := libraryName(code)
	if e != "" {
		return nil, e
	}
	if _, ok := s.meta[libraryMetaPrefix+name]; ok && !replace {
		return nil, "ERR Library '" + name + "' already exists"
	}
	lib, e := s.libraryOf(code)
	if e != "" {
		return nil, e
	}
	for _, f := range lib.funcs {
		if owner, ok := s.meta[functionMetaPrefix+strings.ToLower(f.name)]; ok && owner != name {
			return nil, "ERR Function " + f.name + " already exists"
		}
	}
	return lib, ""
}

func applyFunctionLoad(s *Store, now int64, c *Command) Reply {
	lib, e := s.checkFunctionLoadLocked(string(c.Args[0]), c.Flags&FlagFunctionReplace != 0)
	if e != "" {
		return errorReply(e)
	}
	next := s.metaWithoutLibrary(lib.name)
	next[libraryMetaPrefix+lib.name] = string(c.Args[0])
	for _, f := range lib.funcs {
		next[functionMetaPrefix+strings.ToLower(f.name)] = lib.name
	}
	s.setMetaMapLocked(next)
	return Reply{Kind: ReplyBulk, Bulk: []byte(lib.name)}
}

// metaWithoutLibrary returns a copy of the metadata without library name
// and its functions (the metadata map is replaced, never changed: see
// setMetaLocked).
func (s *Store) metaWithoutLibrary(name string) map[string]string {
	next := maps.Clone(s.meta)
	if next == nil {
		next = make(map[string]string)
	}
	delete(next, libraryMetaPrefix+name)
	maps.DeleteFunc(next, func(k, v string) bool {
		return v == name && strings.HasPrefix(k, functionMetaPrefix)
	})
	return next
}

func applyFunctionDelete(s *Store, now int64, c *Command) Reply {
	name := string(c.Args[0])
	if _, ok := s.meta[libraryMetaPrefix+name]; !ok {
		return errorReply(ErrLibraryNotFound)
	}
	next := s.metaWithoutLibrary(name)
	if len(next) == 0 {
		next = nil
	}
	s.setMetaMapLocked(next)
	return replyOK
}

func applyFunctionFlush(s *Store, now int64, c *Command) Reply {
	s.dropMetaPrefixLocked(libraryMetaPrefix)
	s.dropMetaPrefixLocked(functionMetaPrefix)
	return replyOK
}

// librariesLocked returns the loaded libraries and their code, by name.
func (s *Store) librariesLocked() (libs []*library, codes []string) {
	return s.librariesIn(s.meta)
}

// librariesIn returns the libraries the metadata meta holds, and their
// code, by name.
func (s *Store) librariesIn(meta map[string]string) (libs []*library, codes []string) {
	for _, name := range sortedMeta(meta) {
		if !strings.HasPrefix(name, libraryMetaPrefix) {
			continue
		}
		code := meta[name]
		lib, e := s.libraryOf(code)
		if e != "" {
			panic(fmt.Sprintf("fsm: library %q no longer loads: %s", name, e))
		}
		libs, codes = append(libs, lib), append(codes, code)
	}
	return libs, codes
}

func bulkString(s string) Reply { return Reply{Kind: ReplyBulk, Bulk: []byte(s)} }

// readFunctionList answers FUNCTION LIST, libraries in name order (Redis:
// its hash table's), functions in name order within each.
func readFunctionList(s *Store, now int64, c *Command) Reply {
	libs, codes := s.librariesLocked()
	out := []Reply{}
	for i, lib := range libs {
		// Redis matches LIBRARYNAME's pattern without regard to case.
		if c.Flags&FlagFunctionPattern != 0 && !matchGlob(strings.ToLower(string(c.Args[0])), strings.ToLower(lib.name)) {
			continue
		}
		funcs := make([]Reply, len(lib.funcs))
		for j, f := range lib.funcs {
			desc := replyNil
			if f.hasDesc {
				desc = bulkString(f.desc)
			}
			flags := []Reply{}
			for k, n := range scriptFlagNames {
				if f.flags&(1<<k) != 0 {
					flags = append(flags, Reply{Kind: ReplyStatus, Str: n})
				}
			}
			funcs[j] = Reply{Kind: ReplyMap, Array: []Reply{
				bulkString("name"), bulkString(f.name),
				bulkString("description"), desc,
				bulkString("flags"), {Kind: ReplySet, Array: flags},
			}}
		}
		m := []Reply{
			bulkString("library_name"), bulkString(lib.name),
			bulkString("engine"), bulkString("LUA"),
			bulkString("functions"), {Kind: ReplyArray, Array: funcs},
		}
		if c.Flags&FlagFunctionWithCode != 0 {
			m = append(m, bulkString("library_code"), bulkString(codes[i]))
		}
		out = append(out, Reply{Kind: ReplyMap, Array: m})
	}
	return Reply{Kind: ReplyArray, Array: out}
}

// readFunctionStats answers FUNCTION STATS when no script is busy
// (BusyFunctionStats answers it otherwise).
func readFunctionStats(s *Store, now int64, c *Command) Reply {
	libs, _ := s.librariesLocked()
	return functionStatsReply(libs, replyNil)
}

// functionStatsReply is FUNCTION STATS's reply: running is the busy
// function's map, or nil.
func functionStatsReply(libs []*library, running Reply) Reply {
	n := 0
	for _, lib := range libs {
		n += len(lib.funcs)
	}
	return Reply{Kind: ReplyMap, Array: []Reply{
		bulkString("running_script"), running,
		bulkString("engines"), {Kind: ReplyMap, Array: []Reply{
			bulkString("LUA"), {Kind: ReplyMap, Array: []Reply{
				bulkString("libraries_count"), IntReply(int64(len(libs))),
				bulkString("functions_count"), IntReply(int64(n)),
			}},
		}},
	}}
}
