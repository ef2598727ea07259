package fsm

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"

	"kvs/lua"
	"kvs/resp"
)

// Scripts and functions run in Redis's own Lua 5.1 (package lua), in
// interpreters built as Redis 7.0 builds EVAL's and FUNCTION's: the same
// sandbox, libraries, errors and conversions. What this file adds is the
// store's side: which interpreter a run uses, the compiled chunks each
// keeps, and the run itself, which is the lua.Host its interpreter calls
// back (redis.call, redis.acl_check_cmd, the count hook).
//
// Determinism: a script that may write runs inside apply on every replica
// and at every replay, in whichever interpreter the node has at hand, so
// nothing a run sees may depend on the interpreter's history: package lua
// starts every run from a fresh interpreter's state and numbers its
// objects alike everywhere; math.random and the random choices of the
// commands a script calls are seeded from the entry (Command.Int2); TIME
// is the entry's clock; and a runaway script is stopped after the same
// number of Lua instructions everywhere (Command.Float), by
// (*scriptRun).Checkpoint.

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
// checked), and ACL the store's ACL table as the script runs (user name to
// rule line, nil for the built-in default user alone), or the user's rule
// line the entry carried (FlagScriptRules): the parser checks each call
// against it, never against a table of its own, so the answer follows the
// log. CheckOnly
// asks only whether User may run the command (redis.acl_check_cmd): the
// parser answers a ReplyBool, or an error for a command it does not know.
type ParseContext struct {
	Now       int64
	Rand      *rand.Rand
	ReadOnly  bool
	User      string
	ACL       map[string]string
	CheckOnly bool
	// OOM: memory was over maxmemory when the script was proposed
	// (FlagScriptOOM); NoReplicas: its node had too few good replicas
	// (FlagScriptNoReplicas). Dirty is the parser's, false when the run
	// starts: it marks that the script has called a write (Redis's
	// SCRIPT_WRITE_DIRTY), after which no call is refused for either.
	OOM, NoReplicas, Dirty bool
	// SlotsTold: the store has been told which slots it owns (slots.go),
	// and refuses the calls on keys of the others itself, by the slots it
	// owns at this entry: a parser must not refuse them by a slot map of
	// its own, which moves of slots make wrong.
	SlotsTold bool
	// Level is the highest level of the commands the script may call
	// (calllevel.go): a parser answers a call of a command of a higher
	// level as a command it does not know, as every replica of a kvs
	// that does not know it answers.
	Level int
	// DB is the database the script runs its calls in: the command's
	// at its start. A parser's SELECT changes it for the rest of the
	// script (and answers the call itself).
	DB      uint16
	Scratch any
}

// SetCommandParser installs the parser redis.call uses. Without one,
// every redis.call fails with "Unknown Redis command called from script".
func (s *Store) SetCommandParser(p CommandParser) {
	s.mu.Lock()
	s.parser = p
	s.mu.Unlock()
}

// ErrBudget is the reply to a script stopped by its instruction budget
// (script-write-budget). The writes it made before it was stopped stay,
// as Redis keeps a script's writes when it fails.
const ErrBudget = "ERR Script ran past its instruction budget (script-write-budget) and was stopped"

// scriptRun is one execution of a script or function, and the lua.Host
// its interpreter calls back.
type scriptRun struct {
	s        *Store
	now      int64
	readOnly bool
	rnd      *rand.Rand
	pc       ParseContext
	who      scriptCaller // the ACL user it runs as, and by which rules
	// oom and noReplicas are FlagScriptOOM and FlagScriptNoReplicas.
	oom, noReplicas bool
	cmd             Command // the command redis.call is running
	db              uint16  // the database its calls run in (SELECT)
	// st is what decides whether the run goes on: its budget, the busy
	// threshold, a kill (script_state.go).
	st scriptState
	// budgetStop is the error a run past its budget raises (Checkpoint).
	budgetStop string
	// met collects the keys its reads find expired (expire.go); nil: no
	// one asked.
	met *[][]byte
}

// table is the ACL table the run's calls are checked against.
func (w scriptCaller) table(s *Store) map[string]string {
	if w.rules != nil {
		return w.rules
	}
	return s.acl
}

// firstCheckpoint is the number of instructions before the first call of
// Checkpoint.
func (r *scriptRun) firstCheckpoint() int { return int(r.st.first()) }

// Checkpoint is the one function the interpreter's count hook calls, after
// executed more Lua instructions (of one thread: the main one or a
// coroutine): the run's state decides there whether it goes on
// (scriptState.checkpoint). A run past its budget is stopped at the same
// instruction on every replica: the hook is set to fire exactly where the
// budget ends, and from then on at every instruction, raising the stop,
// so that no pcall catches it for good; a killed run is stopped the same
// way.
func (r *scriptRun) Checkpoint(executed int) (next int, stop string) {
	n, err := r.st.checkpoint(int64(executed))
	switch err {
	case nil:
		return int(n), ""
	case errBudget:
		return 0, r.budgetStop
	}
	return 0, errKilledText
}

// Stopping reports whether the run must stop at its next instruction: a
// call of a write found it killed, and refused.
func (r *scriptRun) Stopping() bool { return r.st.stop != nil }

// exceeded reports whether the run stopped at its instruction budget.
func (r *scriptRun) exceeded() bool { return r.st.stop == errBudget }

// Call runs one redis.call or redis.pcall, under the lock the script
// holds, and appends its reply as RESP in protocol resp.
func (r *scriptRun) Call(args [][]byte, resp int, reply []byte) []byte {
	rep := r.s.callLocked(r, args)
	return appendRESP(reply, &rep, resp)
}

// ACLCheck answers redis.acl_check_cmd: whether the user running the
// script may run the command with these arguments.
func (r *scriptRun) ACLCheck(args [][]byte) (bool, string) {
	s := r.s
	if s.parser == nil {
		return false, "ERR Invalid command passed to redis.acl_check_cmd()"
	}
	r.pc.Now, r.pc.Rand, r.pc.ReadOnly = r.now, r.rnd, r.readOnly
	r.pc.User, r.pc.CheckOnly = r.who.user, true
	r.pc.SlotsTold = s.slots != nil
	r.pc.Level = s.callLevel
	r.pc.ACL = r.who.table(s)
	_, rep, _ := s.parser(&r.pc, args)
	r.pc.CheckOnly = false
	if rep.Kind == ReplyError {
		return false, rep.Str
	}
	return rep.Int != 0, ""
}

// callLocked runs one command of a script under the lock the script holds.
func (s *Store) callLocked(run *scriptRun, args [][]byte) Reply {
	if s.parser == nil {
		return errorReply("ERR Unknown Redis command called from script")
	}
	run.pc.Now, run.pc.Rand, run.pc.ReadOnly = run.now, run.rnd, run.readOnly
	run.pc.User, run.pc.CheckOnly = run.who.user, false
	run.pc.OOM, run.pc.NoReplicas = run.oom, run.noReplicas
	run.pc.SlotsTold = s.slots != nil
	run.pc.Level = s.callLevel
	if run.who.user != "" {
		run.pc.ACL = run.who.table(s)
	}
	var r Reply
	var answered bool
	// The command lives in the run, not on the heap a pointer to a local
	// would put it on.
	cmd := &run.cmd
	run.pc.DB = run.db
	*cmd, r, answered = s.parser(&run.pc, args)
	run.db = run.pc.DB
	if answered {
		return r
	}
	cmd.DB = run.db
	sp := cmd.Op.spec()
	if sp == nil {
		return errorReply("ERR This Redis command is not allowed from script")
	}
	if sp.write {
		if run.readOnly {
			return errorReply("ERR Write commands are not allowed from read-only scripts.")
		}
		if !run.st.markDirty() {
			// Killed before its first write: it must not write, and
			// stops at its next instruction (Stopping).
			run.st.stop = errKilled
			return errorReply(ErrScriptKilled)
		}
		return s.applyLocked(run.now, cmd)
	}
	if err := cmd.Validate(); err != nil {
		panic(err)
	}
	if cmd.DB != s.cur {
		// A script that SELECTed another database: switching needs the
		// exclusive lock, which a read-only script of database 0 does
		// not hold. It stops, and runs again from the start under that
		// lock (it wrote nothing).
		if !s.excl {
			run.st.stop = errExclusive
			return errorReply(ErrScriptKilled)
		}
		var rep Reply
		s.inDBLocked(cmd.DB, func() { rep = s.readInsideLocked(run.now, cmd, !run.readOnly, run.met) })
		return rep
	}
	return s.readInsideLocked(run.now, cmd, !run.readOnly, run.met)
}

// luaVM is one interpreter and what it keeps from run to run: the chunks
// it compiled, and the run, with its random source.
type luaVM struct {
	st *lua.State
	// scripts are an Eval interpreter's compiled scripts, by SHA1;
	// libraries a Function interpreter's compiled libraries, by code.
	scripts   map[string]compiledScript
	libraries map[string]lua.Ref
	run       scriptRun
	pcg       rand.PCG
	rnd       *rand.Rand
}

type compiledScript struct {
	ref lua.Ref
	sha string
	// noWrites: the body's shebang says flags=no-writes, so the script
	// runs read-only even where the proposer did not know (an EVALSHA of
	// a script loaded earlier in its pipeline).
	noWrites bool
}

// maxCompiled bounds the chunks one interpreter keeps; past it, it
// forgets them all and compiles again what runs next.
const maxCompiled = 10000

func newLuaVM(kind lua.Kind) *luaVM {
	vm := &luaVM{st: lua.New(kind)}
	vm.rnd = rand.New(&vm.pcg)
	return vm
}

// newRun returns the run named name (a script's SHA1, a function's name)
// in vm, reusing vm's: it is valid until the next newRun. Its random
// source is seeded with seed, as rand.New(rand.NewPCG(seed, 0x5c1a))
// would be, and it stops after budget instructions (0: never). The caller
// says what runs it (run.st.track) and ends it (run.st.end).
func (vm *luaVM) newRun(s *Store, now int64, readOnly bool, name string, seed uint64, maxInstr int64) *scriptRun {
	pc := vm.run.pc
	vm.pcg.Seed(seed, 0x5c1a)
	vm.run = scriptRun{s: s, now: now, readOnly: readOnly, rnd: vm.rnd,
		pc: ParseContext{Scratch: pc.Scratch}, budgetStop: "-" + ErrBudget, db: s.cur}
	vm.run.st.begin(s, name, readOnly, maxInstr)
	return &vm.run
}

// script returns the compiled script sha, compiling body (which it is
// the SHA1 of) if vm has not yet, or the reply to a body that does not
// compile.
func (vm *luaVM) script(sha, body string) (compiledScript, Reply, bool) {
	if c, ok := vm.scripts[sha]; ok {
		return c, Reply{}, true
	}
	ref, e := vm.st.Load(blankShebang(body), "@user_script")
	if e != "" {
		return compiledScript{}, errorReply("ERR Error compiling script (new function): " + errorLine(e)), false
	}
	if len(vm.scripts) >= maxCompiled {
		for _, c := range vm.scripts {
			vm.st.Unref(c.ref)
		}
		clear(vm.scripts)
	}
	if vm.scripts == nil {
		vm.scripts = make(map[string]compiledScript)
	}
	c := compiledScript{ref, strings.Clone(sha), shebangNoWrites(body)}
	vm.scripts[c.sha] = c
	return c, Reply{}, true
}

// library returns the compiled library code, or the error of code that
// does not compile.
func (vm *luaVM) library(code string) (lua.Ref, string) {
	if ref, ok := vm.libraries[code]; ok {
		return ref, ""
	}
	ref, e := vm.st.Load(blankShebang(code), "@user_function")
	if e != "" {
		return 0, "ERR Error compiling function: " + errorLine(e)
	}
	if len(vm.libraries) >= maxCompiled {
		for _, r := range vm.libraries {
			vm.st.Unref(r)
		}
		clear(vm.libraries)
	}
	if vm.libraries == nil {
		vm.libraries = make(map[string]lua.Ref)
	}
	vm.libraries[code] = ref
	return ref, ""
}

// blankShebang cuts a "#!" first line (Redis's, not Lua's), keeping its
// newline, so that lines keep their numbers.
func blankShebang(src string) string {
	if !strings.HasPrefix(src, "#!") {
		return src
	}
	if i := strings.IndexByte(src, '\n'); i >= 0 {
		return src[i:]
	}
	return ""
}

// shebangNoWrites reports whether body's "#!lua" shebang declares the
// no-writes flag.
func shebangNoWrites(body string) bool {
	if !strings.HasPrefix(body, "#!") {
		return false
	}
	end := strings.IndexByte(body, '\n')
	if end < 0 {
		return false
	}
	parts, _ := resp.SplitArgs(body[:end])
	for _, p := range parts {
		if flags, ok := strings.CutPrefix(p, "flags="); ok {
			for _, f := range strings.Split(flags, ",") {
				if f == "no-writes" {
					return true
				}
			}
		}
	}
	return false
}

// errorLine is text made one line, as Redis's addReplyErrorFormat makes
// it: newlines at the end cut, the others turned into spaces.
func errorLine(text string) string {
	text = strings.TrimRight(text, "\r\n")
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(text)
}

// vmPool holds a store's interpreters: for each kind, one for writes,
// used only under the exclusive lock, and idle ones for reads, which run
// concurrently.
type vmPool struct {
	mu    sync.Mutex // guards the fields below
	write [2]*luaVM  // by lua.Kind
	idle  [2][]*luaVM
}

// maxIdleVMs bounds the idle read interpreters kept per kind.
var maxIdleVMs = 2 * runtime.GOMAXPROCS(0)

func (p *vmPool) get(kind lua.Kind, readOnly bool) *luaVM {
	p.mu.Lock()
	if !readOnly {
		vm := p.write[kind]
		if vm == nil {
			vm = newLuaVM(kind)
			p.write[kind] = vm
		}
		p.mu.Unlock()
		return vm
	}
	n := len(p.idle[kind])
	if n == 0 {
		p.mu.Unlock()
		return newLuaVM(kind)
	}
	vm := p.idle[kind][n-1]
	p.idle[kind] = p.idle[kind][:n-1]
	p.mu.Unlock()
	return vm
}

func (p *vmPool) put(vm *luaVM, kind lua.Kind, readOnly bool) {
	if !readOnly {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle[kind]) < maxIdleVMs {
		p.idle[kind] = append(p.idle[kind], vm)
		return
	}
	vm.st.Close()
}

// checker compiles the bodies SCRIPT LOAD is given, before they are
// proposed, in an interpreter of its own.
var checker struct {
	sync.Mutex
	st *lua.State
}

// CompileScript reports Redis's error text if body does not compile
// (SCRIPT LOAD checks before proposing).
func CompileScript(body []byte) string {
	checker.Lock()
	defer checker.Unlock()
	if checker.st == nil {
		checker.st = lua.New(lua.Eval)
	}
	ref, e := checker.st.Load(blankShebang(string(body)), "@user_script")
	if e != "" {
		return "ERR Error compiling script (new function): " + errorLine(e)
	}
	checker.st.Unref(ref)
	return ""
}

// ScriptStats is what INFO memory reports of scripts and functions.
type ScriptStats struct {
	Scripts, Libraries, Functions int
	// ScriptBytes and FunctionBytes estimate the memory the loaded script
	// bodies and library code take; EvalVM and FunctionVM are the heaps
	// of the node's interpreters of each kind, as Lua counts them.
	ScriptBytes, FunctionBytes int64
	EvalVM, FunctionVM         int64
}

// Estimated bookkeeping per loaded script (its SHA1 and entry) and per
// library (its name, its functions' entries).
const scriptOverhead, libraryOverhead = 96, 256

// scriptStatsLocked returns the store's ScriptStats (ScriptStatsServing).
func (s *Store) scriptStatsLocked() ScriptStats {
	var st ScriptStats
	for name, v := range s.meta {
		switch {
		case strings.HasPrefix(name, scriptMetaPrefix):
			st.Scripts++
			st.ScriptBytes += int64(len(v)) + scriptOverhead
		case strings.HasPrefix(name, libraryMetaPrefix):
			st.Libraries++
			st.FunctionBytes += int64(len(v)) + libraryOverhead
		case strings.HasPrefix(name, functionMetaPrefix):
			st.Functions++
		}
	}
	st.EvalVM, st.FunctionVM = s.vms.memory(lua.Eval), s.vms.memory(lua.Function)
	return st
}

// memory is the heap of the interpreters of kind not running a script:
// with the store's lock held, every one but the reads in progress.
func (p *vmPool) memory(kind lua.Kind) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	if vm := p.write[kind]; vm != nil {
		n += vm.st.Memory()
	}
	for _, vm := range p.idle[kind] {
		n += vm.st.Memory()
	}
	return n
}

// reset closes the interpreters of kind, as Redis's SCRIPT FLUSH starts a
// new one: what they compiled and hold goes with them. Called under the
// store's exclusive lock, when none of them runs.
func (p *vmPool) reset(kind lua.Kind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if vm := p.write[kind]; vm != nil {
		vm.st.Close()
		p.write[kind] = nil
	}
	for _, vm := range p.idle[kind] {
		vm.st.Close()
	}
	p.idle[kind] = nil
}
