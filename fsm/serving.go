package fsm

import (
	"runtime"
	"sync/atomic"
)

// Serving callers. A connection's goroutine (above all an event loop,
// which serves many clients) must not wait for the store's lock behind a
// script for longer than the busy threshold: once a script is busy, the
// clients it serves are to be answered BUSY, as Redis answers them. So
// the store's entry points for them (ReadServing, ApplyServing,
// WatchKeyServing) take the lock as any caller does when it is free or
// held by something that is no script, and otherwise wait on a goroutine
// of their own (lockSlow) which they abandon, reporting that they read or
// applied nothing, if a script turns busy first.
//
// Telling the two apart without a cost on every command is the gate: a
// call that may run a script (an entry holding EVAL, FCALL or EXEC, a
// read-only script) counts itself in gate.scripts before it asks for the
// lock, and a serving caller that finds the lock taken counts itself in
// gate.plain and then looks at gate.scripts: if no script is in flight
// it waits the plain way, as it would for any write. A script's call
// that counted itself then waits for gate.plain to drain before it asks
// for the lock, so a serving caller that saw no script never finds one
// queued ahead of it: whichever of the two counts itself first, the other
// sees it (the atomics are sequentially consistent), and the plain
// waiters wait only for what held or awaited the lock before them, which
// is no script. The cost is an atomic add or two per script's call and
// per contended serving call, none per uncontended one.
//
// Callers that may wait (the log's apply, snapshots, the cron loop's
// reads) take the lock as before; only a call of theirs that may run a
// script joins the gate.

// lockGate counts the calls that keep serving callers off the plain wait.
type lockGate struct {
	// scripts counts the calls that may run a script, from before they
	// ask for the lock until they release it.
	scripts atomic.Int32
	// plain counts the serving callers waiting the plain way, having
	// seen no script in flight.
	plain atomic.Int32
}

// runsScripts reports whether cmds may run a script.
func runsScripts(cmds []Command) bool {
	for i := range cmds {
		if isScriptOp(cmds[i].Op) {
			return true
		}
	}
	return false
}

// isScriptOp reports whether op runs a script, or may (EXEC's commands).
func isScriptOp(op Op) bool {
	switch op {
	case OpEval, OpEvalRO, OpFCall, OpFCallRO, OpExec:
		return true
	}
	return false
}

func (s *Store) lockRaw(write bool) {
	if write {
		s.mu.Lock()
		s.excl = true
	} else {
		s.mu.RLock()
	}
}

func (s *Store) unlockRaw(write bool) {
	if write {
		s.excl = false
		s.mu.Unlock()
	} else {
		s.mu.RUnlock()
	}
}

// enterScripts counts a call that may run a script in the gate, once the
// serving callers already waiting the plain way have the lock.
func (s *Store) enterScripts() {
	s.gate.scripts.Add(1)
	for s.gate.plain.Load() != 0 {
		runtime.Gosched()
	}
}

// lockWaiting takes the lock for a caller that may wait; scripts says the
// call may run a script.
func (s *Store) lockWaiting(write, scripts bool) {
	if scripts {
		s.enterScripts()
	}
	s.lockRaw(write)
}

// unlock releases what lockWaiting or lockServing took.
func (s *Store) unlock(write, scripts bool) {
	s.unlockRaw(write)
	if scripts {
		s.gate.scripts.Add(-1)
	}
}

// lockServing takes the lock for a serving caller, unless a script turns
// busy while it waits: then it reports false, holding nothing.
func (s *Store) lockServing(write, scripts bool) bool {
	var self int32
	if scripts {
		s.enterScripts()
		self = 1
	}
	if write && s.mu.TryLock() {
		s.excl = true
		return true
	}
	if !write && s.mu.TryRLock() {
		return true
	}
	s.gate.plain.Add(1)
	if s.gate.scripts.Load() == self {
		s.lockRaw(write)
		s.gate.plain.Add(-1)
		return true
	}
	s.gate.plain.Add(-1)
	if s.lockSlow(write) {
		return true
	}
	if scripts {
		s.gate.scripts.Add(-1)
	}
	return false
}

// lockSlow waits for the lock on a goroutine of its own until it gets it
// (true) or a script turns busy first (false, holding nothing). The
// goroutine ends once it has the lock, handing it over or, abandoned,
// releasing it.
func (s *Store) lockSlow(write bool) bool {
	turned, busy := s.busy.waitChan()
	if busy {
		return false
	}
	h := &lockHandoff{got: make(chan struct{})}
	go h.take(s, write)
	select {
	case <-h.got:
		return true
	case <-turned:
		if h.state.CompareAndSwap(handoffWaiting, handoffAbandoned) {
			return false
		}
		<-h.got
		return true
	}
}

// lockHandoff is a lock taken on one goroutine for another.
type lockHandoff struct {
	state atomic.Int32
	got   chan struct{} // closed once the lock is the waiter's
}

const (
	handoffWaiting = iota
	handoffTaken
	handoffAbandoned
)

func (h *lockHandoff) take(s *Store, write bool) {
	s.lockRaw(write)
	if h.state.CompareAndSwap(handoffWaiting, handoffTaken) {
		close(h.got)
		return
	}
	s.unlockRaw(write)
}

// ReadServing is ReadRef for a connection's goroutine: ok false, having
// read nothing, when a script turned busy while it waited for the lock.
// A script c runs calls whileBusy once busy (nil: nothing to serve), on
// this goroutine and with the lock held: the caller answers its other
// clients there, and must not call the store.
func (s *Store) ReadServing(now int64, c *Command, whileBusy func()) (r Reply, ok bool) {
	if c.DB != 0 {
		return s.readInDB(now, c, whileBusy, true)
	}
	if c.Op == OpGet && len(c.Args) == 1 && c.Flags == 0 {
		if !s.lockServing(false, false) {
			return Reply{}, false
		}
		return s.getHeld(now, c.Args[0]), true
	}
	sp := s.checkRead(c)
	scripts := isScriptOp(c.Op)
	if !s.lockServing(false, scripts) {
		return Reply{}, false
	}
	r = s.readHeld(now, c, sp, scripts, whileBusy)
	if scripts && isRetryExclusive(&r) {
		return s.readInDB(now, c, whileBusy, true)
	}
	return r, true
}

// ApplyServing is ApplyTo for memory mode's connections (entries of index
// 0): ok false, having applied nothing, when a script turned busy while
// it waited for the lock. A script of cmds calls whileBusy once busy, as
// ReadServing's does.
func (s *Store) ApplyServing(dst []Reply, now int64, cmds []Command, whileBusy func()) ([]Reply, bool) {
	scripts := runsScripts(cmds)
	if !s.lockServing(true, scripts) {
		return dst, false
	}
	s.applyServe = whileBusy
	dst = s.applyEntryLocked(dst, 0, now, cmds)
	s.applyServe = nil
	s.finishApply(scripts)
	return dst, true
}

// StatsServing is Stats for a connection's goroutine (INFO): ok false
// when a script turned busy while it waited for the lock.
func (s *Store) StatsServing(now int64) (Stats, bool) {
	if !s.lockServing(false, false) {
		return Stats{}, false
	}
	defer s.mu.RUnlock()
	return s.statsLocked(now), true
}

// ScriptStatsServing is ScriptStats for a connection's goroutine (INFO):
// ok false when a script turned busy while it waited for the lock.
func (s *Store) ScriptStatsServing() (ScriptStats, bool) {
	if !s.lockServing(false, false) {
		return ScriptStats{}, false
	}
	defer s.mu.RUnlock()
	return s.scriptStatsLocked(), true
}

// EvictableServing is Evictable for a connection's goroutine (maxmemory's
// check of a command): ok false when a script turned busy while it
// waited for the lock.
func (s *Store) EvictableServing(policy EvictPolicy) (evictable, ok bool) {
	if !s.lockServing(false, false) {
		return false, false
	}
	defer s.mu.RUnlock()
	return s.evictableLocked(policy), true
}

// SetLimitsServing is SetLimits for a connection's goroutine (CONFIG
// SET): ok false, nothing set, when a script turned busy while it waited
// for the lock.
func (s *Store) SetLimitsServing(l Limits) bool {
	if !s.lockServing(true, false) {
		return false
	}
	defer s.unlockRaw(true)
	s.setLimitsLocked(l)
	return true
}

// SnapshotServing is Snapshot for a connection's goroutine (KVS.BACKUP):
// nil when a script turned busy while it waited for the lock.
func (s *Store) SnapshotServing() *Snapshot {
	if !s.lockServing(true, false) {
		return nil
	}
	defer s.unlockRaw(true)
	return s.snapshotLocked()
}

// WatchKeyServing is WatchKey for a connection's goroutine: ok false when
// a script turned busy while it waited for the lock.
func (s *Store) WatchKeyServing(now int64, key []byte) (KeyVersion, bool) {
	if !s.lockServing(false, false) {
		return KeyVersion{}, false
	}
	defer s.mu.RUnlock()
	return s.watchKeyLocked(now, key), true
}
