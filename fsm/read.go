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
	if err := c.Validate(); err != nil {
		panic(err)
	}
	sp := c.Op.spec()
	if sp.write {
		panic(fmt.Sprintf("fsm: Read of %v, which is not a read", c.Op))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return sp.read(s, now, c)
}

// get is GET, the most frequent command, without Read's general checks and
// deferred unlock.
func (s *Store) get(now int64, key []byte) Reply {
	s.mu.RLock()
	it, ok := s.liveLocked(key, now)
	s.mu.RUnlock()
	switch {
	case !ok:
		return replyNil
	case it.kind != kindString:
		return replyWrongType
	}
	return valueReply(it.val)
}
