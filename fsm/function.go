package fsm

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"kvs/lua"
	"kvs/resp"
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
	// a no-writes function (FUNCTION STATS shows which). Apart from every
	// FlagScript* bit, which OpEval's flags are.
	FlagFCallRO          Flags = 1 << 6
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
	registerOp(OpFCall, opSpec{name: "FCALL", write: true, args: argsAtLeast(1), flags: FlagScriptUser | FlagScriptRules,
		check: checkNumKeys, apply: applyFCall, keys: scriptKeys, composite: true})
	registerOp(OpFCallRO, opSpec{name: "FCALL_RO", args: argsAtLeast(1), flags: FlagFCallBadKeys | FlagScriptUser | FlagScriptRules | FlagFCallRO,
		check: checkNumKeys, read: readFCall, readMet: readFCallMet, keys: scriptKeys})
	registerOp(OpFunctionLoad, opSpec{name: "FUNCTION", write: true, args: 1, flags: FlagFunctionReplace,
		apply: applyFunctionLoad, keys: keysNone})
	registerOp(OpFunctionDelete, opSpec{name: "FUNCTION", write: true, args: 1, apply: applyFunctionDelete, keys: keysNone})
	registerOp(OpFunctionFlush, opSpec{name: "FUNCTION", write: true, args: 0, apply: applyFunctionFlush, keys: keysNone})
	registerOp(OpFunctionList, opSpec{name: "FUNCTION", args: argsAny, flags: FlagFunctionPattern | FlagFunctionWithCode,
		check: checkFunctionList, read: readFunctionList, keys: keysNone})
	registerOp(OpFunctionStats, opSpec{name: "FUNCTION", args: 0, read: readFunctionStats, keys: keysNone})
}

func checkFunctionList(c *Command) error {
	if want := int(c.Flags & FlagFunctionPattern); len(c.Args) != want {
		return fmt.Errorf("%d args with pattern flag %d", len(c.Args), want)
	}
	return nil
}

// Script flags, in Redis's order (scripts_flags_def, lua.FlagNames),
// which FUNCTION LIST reports them in.
const (
	scriptNoWrites = 1 << iota
	scriptAllowOOM
)

// library is what a library's code registers, derived from the code alone.
type library struct {
	name  string
	code  string
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
	parts, ok := resp.SplitArgs(code[:end])
	if !ok || len(parts) == 0 {
		return "", "ERR Invalid library metadata"
	}
	engine, name, named := "", "", false
	if len(parts[0]) > 2 {
		engine = parts[0][2:]
	}
	for _, p := range parts[1:] {
		if len(p) < 5 || !strings.EqualFold(p[:5], "name=") {
			return "", "ERR Invalid metadata value given: " + errorLine(p)
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
		return "", "ERR Engine '" + errorLine(engine) + "' not found"
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
	vm := s.vms.get(lua.Function, true)
	defer s.vms.put(vm, lua.Function, true)
	ref, e := vm.library(code)
	if e != "" {
		return libraryResult{err: e}
	}
	run := vm.newRun(s, 0, true, "", 0, functionLoadBudget)
	// A library's top level at FUNCTION LOAD is never busy and cannot be
	// killed, as in Redis (a load has its own timeout): its state knows
	// no store.
	run.st.s = nil
	run.budgetStop = "FUNCTION LOAD timeout"
	registered, e := vm.st.Library(ref, run.firstCheckpoint(), run)
	if e != "" {
		return libraryResult{err: "ERR Error registering functions: " + errorLine(e)}
	}
	if len(registered) == 0 {
		return libraryResult{err: "ERR No functions registered"}
	}
	lib := &library{name: name, code: code}
	for _, f := range registered {
		lib.funcs = append(lib.funcs, libFunction{name: f.Name, desc: f.Desc, hasDesc: f.HasDesc, flags: f.Flags})
	}
	slices.SortFunc(lib.funcs, func(a, b libFunction) int { return strings.Compare(a.name, b.name) })
	return libraryResult{lib: lib}
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
	return s.runFunction(now, c, false, &s.expired.met, s.applyServe)
}

func readFCall(s *Store, now int64, c *Command) Reply { return readFCallMet(s, now, c, nil) }

// readFCallMet is readFCall collecting the expired keys the function's
// reads meet into *met (nil: none).
func readFCallMet(s *Store, now int64, c *Command, met *[][]byte) Reply {
	return s.runFunction(now, c, true, met, nil)
}

// runFunction runs the function c calls under the lock the caller holds:
// exclusive for OpFCall, shared for OpFCallRO. The expired keys its reads
// meet are appended to *met (nil: none); whileBusy is what its caller
// serves once it is busy (nil: nothing).
func (s *Store) runFunction(now int64, c *Command, shared bool, met *[][]byte, whileBusy func()) Reply {
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
	vm := s.vms.get(lua.Function, shared)
	defer s.vms.put(vm, lua.Function, shared)
	ref, e := vm.library(lib.code)
	if e != "" {
		panic(fmt.Sprintf("fsm: library %q no longer compiles: %s", lib.name, e))
	}
	run := vm.newRun(s, now, shared || noWrites, f.name, uint64(c.Int2), int64(c.Float))
	run.st.track(c, true, s.entryOf(shared), whileBusy)
	defer run.st.end()
	run.met = met
	keys, argv, who := scriptArgs(c)
	run.who = who
	out, e := vm.st.FCall(ref, f.name, keys, argv, uint64(c.Int2), run.firstCheckpoint(), run)
	switch {
	case run.exceeded():
		return errorReply(ErrBudget)
	case run.st.stop == errExclusive:
		return replyRetryExclusive
	case e != "" && run.st.killed():
		// Killed while its library's top level ran again.
		return errorReply(ErrScriptKilled)
	case e != "":
		// The top level ran when the library was loaded, and depends on
		// its code alone.
		panic(fmt.Sprintf("fsm: library %q no longer loads: %s", lib.name, e))
	}
	return replyFromRESP(out)
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
	s.vms.reset(lua.Function)
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
			for k, n := range lua.FlagNames {
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
