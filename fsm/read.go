package fsm

import (
	"bytes"
	"fmt"
)

// Read answers a read command at now under the shared lock. Keys whose
// deadline is not after now are absent to every read, whether or not their
// deletion has been applied yet; those its lookups met go to the expired
// hook (expire.go) before Read returns. Bulk replies alias the store's
// memory (which is never modified in place) and stay valid after Read
// returns.
//
// Read panics on a command that fails Validate or is a write: the server
// built it, so that is a bug.
func (s *Store) Read(now int64, c Command) Reply {
	if c.Op == OpGet && len(c.Args) == 1 && c.Flags == 0 && c.DB == 0 {
		return s.get(now, c.Args[0])
	}
	cp := new(Command)
	*cp = c
	return s.ReadRef(now, cp)
}

// ReadRef is Read of *c, for callers whose command already lives on the
// heap (a batch, a connection's state): the op table's read functions take
// a pointer, which escapes, so Read by value allocates a copy.
func (s *Store) ReadRef(now int64, c *Command) Reply {
	if c.DB != 0 {
		r, _ := s.readInDB(now, c, nil, false)
		return r
	}
	if c.Op == OpGet && len(c.Args) == 1 && c.Flags == 0 {
		return s.get(now, c.Args[0])
	}
	sp := s.checkRead(c)
	scripts := isScriptOp(c.Op)
	s.lockWaiting(false, scripts)
	r := s.readHeld(now, c, sp, scripts, nil)
	if scripts && isRetryExclusive(&r) {
		r, _ = s.readInDB(now, c, nil, false)
	}
	return r
}

// checkRead returns the spec of the read c, panicking if c is no valid
// read: the server built it, so that is a bug.
func (s *Store) checkRead(c *Command) *opSpec {
	if err := c.Validate(); err != nil {
		panic(err)
	}
	sp := c.Op.spec()
	if sp.write {
		panic(fmt.Sprintf("fsm: Read of %v, which is not a read", c.Op))
	}
	return sp
}

// readHeld answers the read c (op row sp) with the shared lock taken,
// which it releases (scripts: as lockWaiting or lockServing was told). A
// script c runs calls whileBusy once busy (nil: nothing to serve).
func (s *Store) readHeld(now int64, c *Command, sp *opSpec, scripts bool, whileBusy func()) Reply {
	if s.slots != nil {
		if r, refused := s.refusedLocked(c); refused {
			s.unlockRead(scripts)
			return r
		}
	}
	s.tickLocked(now)
	var r Reply
	var met [][]byte
	switch collect := s.collectsLocked(now); {
	case collect && sp.readMet != nil:
		m := new([][]byte) // allocated only while a key is due
		r = s.readOp(now, c, sp, m, whileBusy)
		met = *m
	case collect:
		r = s.readOp(now, c, sp, nil, whileBusy)
		met = s.expiredLookupsLocked(now, c, nil)
	default:
		r = s.readOp(now, c, sp, nil, whileBusy)
	}
	var expired func([][]byte)
	if len(met) > 0 {
		expired = s.expired.hook
		if s.cur != 0 {
			// The hook names another database's keys by DBKey.
			for i := range met {
				met[i] = []byte(DBKey(s.cur, string(met[i])))
			}
		}
	}
	misses, hook := s.readMissesLocked(now, c)
	s.unlockRead(scripts)
	// Redis announces a key's expiry before the miss its lookup then is.
	if expired != nil {
		expired(met)
	}
	if hook != nil {
		hook(misses)
	}
	return r
}

// readOp runs the read c: a script with whileBusy to serve once busy,
// the expired keys it meets appended to *met (nil: not collected).
func (s *Store) readOp(now int64, c *Command, sp *opSpec, met *[][]byte, whileBusy func()) Reply {
	switch {
	case whileBusy != nil && c.Op == OpEvalRO:
		return s.eval(now, c, true, met, whileBusy)
	case whileBusy != nil && c.Op == OpFCallRO:
		return s.runFunction(now, c, true, met, whileBusy)
	case met != nil:
		return sp.readMet(s, now, c, met)
	}
	return sp.read(s, now, c)
}

// readMissesLocked returns the keymiss events of the read c, with the hook
// to give them to, when they are wanted: a read's events are its node's,
// announced as it answers, since reads are not in the log.
func (s *Store) readMissesLocked(now int64, c *Command) ([]Event, func([]Event)) {
	if !s.wantLocked(NotifyKeyMiss) {
		return nil, nil
	}
	var ev []Event
	s.missesLocked(now, c, func(key []byte) {
		ev = append(ev, Event{Class: NotifyKeyMiss, Name: "keymiss", Key: string(key), DB: int(s.cur)})
	})
	if len(ev) == 0 {
		return nil, nil
	}
	return ev, s.notify.hook
}

// readInsideLocked answers a read that runs inside a transaction or a
// script, with its keymiss events. Under the exclusive lock (EXEC, a
// script that may write) they join the entry's events, in order with its
// writes'; under the shared lock (a read-only script) the entry's list
// cannot be appended to, and they go to the hook at once, as a read's do
// (the hook only publishes). The expired keys it meets are appended to
// *met (expire.go), unless met is nil.
func (s *Store) readInsideLocked(now int64, c *Command, exclusive bool, met *[][]byte) Reply {
	if s.slots != nil {
		if r, refused := s.refusedLocked(c); refused {
			return r
		}
	}
	sp := c.Op.spec()
	var r Reply
	if met != nil && s.expired.hook != nil {
		r = s.readMetLocked(now, c, sp, met)
	} else {
		r = sp.read(s, now, c)
	}
	if !s.wantLocked(NotifyKeyMiss) {
		return r
	}
	if exclusive {
		s.missesLocked(now, c, func(key []byte) { s.notifyLocked(NotifyKeyMiss, "keymiss", key) })
	} else if ev, hook := s.readMissesLocked(now, c); hook != nil {
		hook(ev)
	}
	return r
}

// get is GET, the most frequent command, without Read's general checks and
// deferred unlock.
func (s *Store) get(now int64, key []byte) Reply {
	s.mu.RLock()
	return s.getHeld(now, key)
}

// getHeld is get with the shared lock taken, which it releases.
func (s *Store) getHeld(now int64, key []byte) Reply {
	if s.slots != nil {
		if r, refused := s.keyRefusedLocked(key, false); refused {
			s.mu.RUnlock()
			return r
		}
	}
	s.tickLocked(now)
	it, found := s.getLocked(key)
	ok := found && !it.expired(now)
	var hook func([]Event)
	var expired func([][]byte)
	if !ok {
		if found {
			expired = s.expired.hook
		}
		if s.wantLocked(NotifyKeyMiss) {
			hook = s.notify.hook
		}
	}
	s.mu.RUnlock()
	switch {
	case !ok:
		if expired != nil {
			expired([][]byte{bytes.Clone(key)})
		}
		if hook != nil {
			hook([]Event{{Class: NotifyKeyMiss, Name: "keymiss", Key: string(key)}})
		}
		return replyNil
	case it.kind != kindString:
		return replyWrongType
	}
	return valueReply(it.val)
}
