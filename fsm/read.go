package fsm

import "fmt"

// Read answers a read command at now under the shared lock. Keys whose
// deadline is not after now are absent to every read, whether or not their
// deletion has been applied yet. Bulk replies alias the store's memory
// (which is never modified in place) and stay valid after Read returns.
//
// Read panics on a command that fails Validate or is a write: the server
// built it, so that is a bug.
func (s *Store) Read(now int64, c Command) Reply {
	if c.Op == OpGet && len(c.Args) == 1 && c.Flags == 0 {
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
	if c.Op == OpGet && len(c.Args) == 1 && c.Flags == 0 {
		return s.get(now, c.Args[0])
	}
	sp := s.checkRead(c)
	scripts := isScriptOp(c.Op)
	s.lockWaiting(false, scripts)
	s.tickLocked(now)
	r := sp.read(s, now, c)
	misses, hook := s.readMissesLocked(now, c)
	s.unlock(false, scripts)
	if hook != nil {
		hook(misses)
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

// readMissesLocked returns the keymiss events of the read c, with the hook
// to give them to, when they are wanted: a read's events are its node's,
// announced as it answers, since reads are not in the log.
func (s *Store) readMissesLocked(now int64, c *Command) ([]Event, func([]Event)) {
	if !s.wantLocked(NotifyKeyMiss) {
		return nil, nil
	}
	var ev []Event
	s.missesLocked(now, c, func(key []byte) {
		ev = append(ev, Event{Class: NotifyKeyMiss, Name: "keymiss", Key: string(key)})
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
// (the hook only publishes).
func (s *Store) readInsideLocked(now int64, c *Command, exclusive bool) Reply {
	r := c.Op.spec().read(s, now, c)
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
	s.tickLocked(now)
	it, ok := s.liveLocked(key, now)
	var hook func([]Event)
	if !ok && s.wantLocked(NotifyKeyMiss) {
		hook = s.notify.hook
	}
	s.mu.RUnlock()
	switch {
	case !ok:
		if hook != nil {
			hook([]Event{{Class: NotifyKeyMiss, Name: "keymiss", Key: string(key)}})
		}
		return replyNil
	case it.kind != kindString:
		return replyWrongType
	}
	return valueReply(it.val)
}
