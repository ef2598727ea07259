package fsm

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Scripts that run long, as Redis 7.0's script.c has them. A run's
// interpreter calls its scriptState's checkpoint every so many
// instructions, from its count hook ((*scriptRun).Checkpoint, the only
// entry point an interpreter needs). There the run:
//
//   - stops at its instruction budget, if it has one: a script that may
//     write, run inside a logged entry's apply, carries a budget in its
//     command, so that every replica and every replay stops it at the same
//     instruction;
//   - reads the clock and, once it has run for busy-reply-threshold
//     milliseconds, turns busy: it joins the store's list of busy scripts,
//     which is what every other command consults (ScriptBusy, one atomic
//     load while no script is busy) to be answered BUSY, and from then on
//     lets its caller serve its other clients every millisecond or so
//     (whileBusy: Redis's processEventsWhileBlocked);
//   - stops if SCRIPT KILL or FUNCTION KILL asked it to (KillScript), which
//     only a busy script can be asked, and once stopped stops again at
//     every later checkpoint, so a pcall cannot catch the error and go on.
//
// The clock decides only what this node's other clients are told, never
// what the run does to the data: a run that can change replicated state
// (one that may write, inside a logged entry's apply) cannot be killed,
// and its end is its budget's, counted in instructions. A run that can be
// killed is one whose effects are this node's alone: a read-only run, or
// any run in memory mode, where there is no log to replay.
//
// A kill and a first write exclude each other (flags): SCRIPT KILL of a
// run that has not written makes its next write fail, and a run that has
// written cannot be killed, so a killed script never changed the data,
// as in Redis.

// Busy names what a store is busy with.
type Busy uint8

const (
	NotBusy      Busy = iota
	BusyEval          // a script (EVAL, EVALSHA): SCRIPT KILL stops it
	BusyFunction      // a function (FCALL): FUNCTION KILL stops it
)

// KillResult is what KillScript did.
type KillResult uint8

const (
	// KillNotBusy: no script is past the busy threshold.
	KillNotBusy KillResult = iota
	// Killed: the busy script stops at its next checkpoint.
	Killed
	// KillDirty: the busy script has written; it cannot be stopped.
	KillDirty
	// KillLogged: the busy script may write and runs inside the apply
	// of a logged entry, which every replica and every replay runs in
	// full; stopping it on one node would make that node differ.
	KillLogged
	// KillWrongKind: SCRIPT KILL of a function, or FUNCTION KILL of a
	// script.
	KillWrongKind
)

// errKilled is why a killed run stops, and errBudget why a run past its
// budget does.
var (
	errKilled = errors.New("script killed")
	errBudget = errors.New("script instruction budget exceeded")
	// errExclusive stops a read-only script of database 0, run under the
	// shared lock, that reads another database: it runs again under the
	// exclusive lock (db.go, retryExclusive).
	errExclusive = errors.New("script reads another database")
)

// errKilledText is what a killed run raises, as Redis's count hook does:
// its reply is ErrScriptKilled with the position of the code it stopped
// in.
const errKilledText = "Script killed by user with SCRIPT KILL..."

// ErrScriptKilled is Redis's error for a script SCRIPT KILL or FUNCTION
// KILL stopped.
const ErrScriptKilled = "ERR " + errKilledText

const (
	// checkpointEvery is how many instructions a run goes between
	// checkpoints when nothing asks for fewer: as Redis's count hook,
	// rarely enough that the call and the clock reading cost nothing.
	checkpointEvery = 100_000
	// checkpointFirst is how many go before the first: few, so that the
	// busy threshold is measured from near the run's start, and only
	// runs longer than that pay for the one early call.
	checkpointFirst = 1_000
	// serveEvery is how often a busy run lets its caller serve.
	serveEvery = int64(time.Millisecond)
)

// Bits of scriptState.flags.
const (
	runDirty  = 1 << iota // the run has called a write
	runKilled             // KillScript asked it to stop
)

// scriptState is one run's state beyond its interpreter.
type scriptState struct {
	s        *Store
	function bool   // FCALL (FUNCTION KILL's), not EVAL (SCRIPT KILL's)
	readOnly bool   // it cannot write
	logged   bool   // it runs inside the apply of a logged entry
	name     string // the SHA1, or the function's name
	cmd      *Command
	// whileBusy is called on the run's goroutine, with the store's lock
	// held, every serveEvery once the run is busy; nil when the caller
	// has nothing to serve.
	whileBusy func()

	limit int64 // the instruction budget, 0 for none
	used  int64 // instructions run so far
	stop  error // why the run must end; sticky
	// start is the monotonic clock at the first checkpoint, served at
	// the last whileBusy; 0 before.
	start, served int64
	busy          bool // in the store's busy list

	flags atomic.Uint32 // runDirty, runKilled

	// Set as it turns busy, for the others (FUNCTION STATS), and read
	// under the busy list's lock: when it started, the command that runs
	// it, and the libraries as it runs (they cannot change meanwhile:
	// FUNCTION LOAD and friends are not allowed from a script).
	since   time.Time
	command [][]byte
	meta    map[string]string
}

// begin readies st for a run named name with a budget of limit
// instructions (0: none). The run's caller then says what runs it (track).
func (st *scriptState) begin(s *Store, name string, readOnly bool, limit int64) {
	*st = scriptState{s: s, name: name, readOnly: readOnly, limit: limit}
}

// track tells st what the run is: it runs cmd, a function (FCALL) or a
// script; with whileBusy to call once busy (nil: none); and, for a run
// under the store's exclusive lock, inside the apply of the entry at index
// (0: memory mode's, which no log keeps).
func (st *scriptState) track(cmd *Command, function bool, index uint64, whileBusy func()) {
	st.cmd, st.function, st.logged, st.whileBusy = cmd, function, index != 0, whileBusy
}

// end takes st out of the busy list, if it is there, once its run is over.
func (st *scriptState) end() {
	if st.busy {
		st.s.busy.remove(st)
		st.busy = false
	}
	st.whileBusy, st.cmd = nil, nil
}

// first is how many instructions run before the first checkpoint.
func (st *scriptState) first() int64 {
	if st.limit > 0 {
		return min(st.limit, checkpointFirst)
	}
	return checkpointFirst
}

// checkpoint is called by the run's interpreter after n instructions
// (since the last call, or since the run began). It returns how many
// instructions may run before the next call, so that a budget stops the
// run after exactly its last instruction, or the error that ends the run:
// errBudget or errKilled. Once it has returned one it returns it at every
// call, asking to be called at the next instruction.
func (st *scriptState) checkpoint(n int64) (next int64, stop error) {
	if st.stop != nil {
		return 1, st.stop
	}
	st.used += n
	if st.limit > 0 && st.used >= st.limit {
		st.stop = errBudget
		return 1, st.stop
	}
	if st.flags.Load()&runKilled != 0 || st.s != nil && st.s.busy.stopping.Load() && st.killable() {
		st.stop = errKilled
		return 1, st.stop
	}
	// A library's top level at FUNCTION LOAD (no store) is never busy.
	if st.s != nil && st.watchClock() {
		st.stop = errKilled
		return 1, st.stop
	}
	next = checkpointEvery
	if st.limit > 0 {
		next = min(next, st.limit-st.used)
	}
	return next, nil
}

// watchClock turns the run busy once it has run past the busy threshold
// and then lets its caller serve every serveEvery. It reports whether the
// run was killed meanwhile.
func (st *scriptState) watchClock() (killed bool) {
	threshold := st.s.busy.threshold.Load()
	if threshold <= 0 && !st.busy {
		return false
	}
	now := monotime()
	switch {
	case st.start == 0:
		st.start = now
	case !st.busy && now-st.start >= threshold*int64(time.Millisecond):
		st.turnBusy(now)
	}
	if !st.busy || st.whileBusy == nil || now-st.served < serveEvery {
		return false
	}
	st.served = now
	st.whileBusy()
	return st.flags.Load()&runKilled != 0
}

// turnBusy puts st in the store's busy list, with what others are told
// of it. It runs on the run's goroutine, with the store's lock held.
func (st *scriptState) turnBusy(now int64) {
	st.busy = true
	st.served = now - serveEvery
	st.since = time.Now().Add(-time.Duration(now - st.start))
	st.command = st.callerCommand()
	st.meta = st.s.meta
	st.s.busy.add(st)
}

// callerCommand rebuilds the command a client sent to start the run (a
// copy: the entry's memory is not the run's to keep): FUNCTION STATS
// shows it.
func (st *scriptState) callerCommand() [][]byte {
	c := st.cmd
	if c == nil {
		return nil
	}
	var name string
	switch {
	case c.Op == OpFCall:
		name = "fcall"
	case c.Op == OpFCallRO && c.Flags&FlagFCallRO != 0:
		name = "fcall_ro"
	case c.Op == OpFCallRO:
		name = "fcall"
	case c.Op == OpEvalRO && c.Flags&FlagScriptSHA != 0:
		name = "evalsha_ro"
	case c.Op == OpEvalRO:
		name = "eval_ro"
	case c.Flags&FlagScriptSHA != 0:
		name = "evalsha"
	default:
		name = "eval"
	}
	keys, argv, _ := scriptArgs(c)
	out := make([][]byte, 0, 3+len(keys)+len(argv))
	out = append(out, []byte(name), slices.Clone(c.Args[0]), strconv.AppendInt(nil, c.Int, 10))
	for _, a := range keys {
		out = append(out, slices.Clone(a))
	}
	for _, a := range argv {
		out = append(out, slices.Clone(a))
	}
	return out
}

// markDirty records that the run is about to call a write. It reports
// false, recording nothing, when the run was killed first: the write
// must not happen.
func (st *scriptState) markDirty() bool {
	for {
		f := st.flags.Load()
		switch {
		case f&runKilled != 0:
			return false
		case f&runDirty != 0:
			return true
		case st.flags.CompareAndSwap(f, f|runDirty):
			return true
		}
	}
}

// killable reports whether stopping the run changes only this node's
// reply: it is read-only, or memory mode's (no log keeps it).
func (st *scriptState) killable() bool { return st.readOnly || !st.logged }

// killed reports whether the run stopped because it was killed.
func (st *scriptState) killed() bool { return st.stop == errKilled }

func (st *scriptState) kind() Busy {
	if st.function {
		return BusyFunction
	}
	return BusyEval
}

// monoEpoch is what monotime counts from.
var monoEpoch = time.Now()

// monotime is the monotonic clock in nanoseconds, never 0.
func monotime() int64 { return int64(time.Since(monoEpoch)) + 1 }

// busyScripts is a store's list of the runs past the busy threshold.
type busyScripts struct {
	// n is len(runs), read without the lock: what every command pays to
	// learn that no script is busy.
	n atomic.Int32
	// threshold is busy-reply-threshold in milliseconds; 0 or less:
	// never busy.
	threshold atomic.Int64
	// stopping: the server is stopping (StopScripts).
	stopping atomic.Bool

	mu   sync.Mutex     // guards the fields below
	runs []*scriptState // oldest first
	// turned is closed when a run turns busy, for the callers waiting
	// for the store's lock (lockSlow); nil while none waits.
	turned chan struct{}
}

func (b *busyScripts) add(st *scriptState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runs = append(b.runs, st)
	b.n.Store(int32(len(b.runs)))
	if b.turned != nil {
		close(b.turned)
		b.turned = nil
	}
}

func (b *busyScripts) remove(st *scriptState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.runs, st); i >= 0 {
		b.runs = slices.Delete(b.runs, i, i+1)
	}
	b.n.Store(int32(len(b.runs)))
}

// waitChan returns a channel closed when a run next turns busy, or busy
// true when one is busy already.
func (b *busyScripts) waitChan() (turned <-chan struct{}, busy bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.runs) > 0 {
		return nil, true
	}
	if b.turned == nil {
		b.turned = make(chan struct{})
	}
	return b.turned, false
}

// ScriptTurnsBusy returns a channel closed when a script next turns busy,
// or busy true when one is busy now: for a caller about to wait for
// something a script may hold up (the log's apply of its entry).
func (s *Store) ScriptTurnsBusy() (turned <-chan struct{}, busy bool) { return s.busy.waitChan() }

// ScriptRunning reports whether a call that may run a script (an entry
// holding EVAL, FCALL or EXEC; a read-only script) is under way: one
// atomic load.
func (s *Store) ScriptRunning() bool { return s.gate.scripts.Load() > 0 }

// StopScripts stops, at their next checkpoint, every run a kill cannot
// make replicas differ over (read-only ones, memory mode's), written or
// not, and every such run started later: the server is stopping, and no
// client can send SCRIPT KILL any more. Runs inside a logged entry's apply
// that may write go on to their end or budget.
func (s *Store) StopScripts() { s.busy.stopping.Store(true) }

// SetBusyThreshold sets busy-reply-threshold (lua-time-limit): how many
// milliseconds a script runs before it is busy (0 or less: never).
func (s *Store) SetBusyThreshold(ms int64) { s.busy.threshold.Store(ms) }

// ScriptBusy reports whether a script has run past the busy threshold,
// and of which kind the oldest such one is. While none has it costs one
// atomic load.
func (s *Store) ScriptBusy() Busy {
	if s.busy.n.Load() == 0 {
		return NotBusy
	}
	return s.scriptBusySlow()
}

func (s *Store) scriptBusySlow() Busy {
	s.busy.mu.Lock()
	defer s.busy.mu.Unlock()
	if len(s.busy.runs) == 0 {
		return NotBusy
	}
	return s.busy.runs[0].kind()
}

// KillScript is SCRIPT KILL (function false) and FUNCTION KILL (true)
// of the oldest busy script, with Redis's order of refusals. It also
// returns what that script is.
func (s *Store) KillScript(function bool) (KillResult, Busy) {
	b := &s.busy
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.runs) == 0 {
		return KillNotBusy, NotBusy
	}
	st := b.runs[0]
	kind := st.kind()
	switch {
	case !st.killable():
		return KillLogged, kind
	case st.flags.Load()&runDirty != 0:
		return KillDirty, kind
	case st.function != function:
		return KillWrongKind, kind
	}
	for {
		f := st.flags.Load()
		switch {
		case f&runDirty != 0:
			return KillDirty, kind // it wrote meanwhile
		case f&runKilled != 0 || st.flags.CompareAndSwap(f, f|runKilled):
			return Killed, kind
		}
	}
}

// BusyFunctionStats answers FUNCTION STATS while a script is busy,
// without the store's lock, which the script holds: Redis's reply naming
// the running function. It reports the kind of the busy script, and no
// reply when that is not a function (Redis then answers BUSY).
func (s *Store) BusyFunctionStats() (Reply, Busy) {
	b := &s.busy
	b.mu.Lock()
	if len(b.runs) == 0 {
		b.mu.Unlock()
		return Reply{}, NotBusy
	}
	st := b.runs[0]
	if !st.function {
		b.mu.Unlock()
		return Reply{}, BusyEval
	}
	name, meta, since := st.name, st.meta, st.since
	cmd := make([]Reply, len(st.command))
	for i, a := range st.command {
		cmd[i] = Reply{Kind: ReplyBulk, Bulk: a}
	}
	b.mu.Unlock()
	running := Reply{Kind: ReplyMap, Array: []Reply{
		bulkString("name"), bulkString(name),
		bulkString("command"), {Kind: ReplyArray, Array: cmd},
		bulkString("duration_ms"), IntReply(time.Since(since).Milliseconds()),
	}}
	libs, _ := s.librariesIn(meta)
	return functionStatsReply(libs, running), BusyFunction
}

// entryOf is the index a run's track is given: that of the entry being
// applied, for a run under the exclusive lock; 0 for one under the shared
// lock (a read, which no log keeps).
func (s *Store) entryOf(shared bool) uint64 {
	if shared {
		return 0
	}
	return s.entry
}
