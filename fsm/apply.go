package fsm

import "fmt"

// Apply applies one log entry, a batch of write commands, under one write
// lock and returns one reply per command. index is the entry's position in
// the log (0 in memory mode, where there is no log); a non-zero index becomes
// AppliedIndex and must be greater than the previous one, since applying an
// entry twice would corrupt the store. now is the proposer's clock reading in
// Unix ms and the only clock apply uses.
//
// Apply copies what it keeps from cmds, so Args may alias a buffer the caller
// reuses. It panics on a command that fails Validate or on an index that goes
// backwards: a committed entry the store cannot apply is a bug.
func (s *Store) Apply(index uint64, now int64, cmds []Command) []Reply {
	return s.ApplyTo(make([]Reply, 0, len(cmds)), index, now, cmds)
}

// ApplyTo is Apply appending the replies to dst, for a caller that reuses
// its reply buffer.
func (s *Store) ApplyTo(dst []Reply, index uint64, now int64, cmds []Command) []Reply {
	scripts := runsScripts(cmds)
	s.lockWaiting(true, scripts)
	dst = s.applyEntryLocked(dst, index, now, cmds)
	s.finishApply(scripts)
	return dst
}

// finishApply releases the lock an apply took (scripts: the apply may
// have run scripts, see lockWaiting) and then hands out what it
// signalled: keyspace events, keys ready for blocked clients, and the
// expired keys its lookups met.
func (s *Store) finishApply(scripts bool) {
	s.bytesPub.Store(s.totalBytesLocked())
	s.dirtyPub.Store(s.dirty)
	ready, hook := s.takeReadyLocked()
	events, notify := s.takeEventsLocked()
	met, expired := s.takeExpiredLocked()
	metaChanged := s.takeMetaChangedLocked()
	mods, modHook := s.takeModifiedLocked()
	s.unlock(true, scripts)
	if modHook != nil {
		mods.give(modHook)
	}
	if notify != nil {
		notify(events)
	}
	if hook != nil {
		hook(ready)
	}
	if expired != nil {
		expired(met)
	}
	if metaChanged != nil {
		metaChanged()
	}
}

// Entry is one decoded log entry: its position, the proposer's clock and
// its commands.
type Entry struct {
	Index uint64
	Now   int64
	Cmds  []Command
}

// ApplyBatch applies several entries in order under one write lock (the
// wal's group commit, raft's BatchingFSM) and returns each entry's replies.
// All replies share one allocation.
func (s *Store) ApplyBatch(entries []Entry) [][]Reply {
	n := 0
	for _, e := range entries {
		n += len(e.Cmds)
	}
	all := make([]Reply, 0, n)
	out := make([][]Reply, len(entries))
	scripts := false
	for _, e := range entries {
		scripts = scripts || runsScripts(e.Cmds)
	}
	s.lockWaiting(true, scripts)
	for i, e := range entries {
		start := len(all)
		all = s.applyEntryLocked(all, e.Index, e.Now, e.Cmds)
		out[i] = all[start:len(all):len(all)]
	}
	s.finishApply(scripts)
	return out
}

func (s *Store) applyEntryLocked(dst []Reply, index uint64, now int64, cmds []Command) []Reply {
	s.tickLocked(now)
	if index != 0 {
		if index <= s.applied {
			panic(fmt.Sprintf("fsm: entry %d applied after entry %d", index, s.applied))
		}
		s.applied = index
	}
	s.entry = index
	events := len(s.notify.events)
	s.beginCallsLocked()
	for i := range cmds {
		dst = append(dst, s.applyLocked(now, &cmds[i]))
	}
	s.endCallsLocked()
	if index != 0 && index <= s.notify.replayed {
		clear(s.notify.events[events:])
		s.notify.events = s.notify.events[:events]
	}
	return dst
}

func (s *Store) applyLocked(now int64, c *Command) Reply {
	if c.DB != s.cur {
		return s.applyInDBLocked(now, c)
	}
	sp := c.Op.spec()
	if err := c.validate(sp == nil || !sp.checksItself); err != nil {
		panic(err)
	}
	if !sp.write {
		panic(fmt.Sprintf("fsm: %v is not a write", c.Op))
	}
	if s.slots != nil {
		if r, refused := s.refusedLocked(c); refused {
			return r
		}
	}
	if sp.composite {
		return sp.apply(s, now, c)
	}
	s.keys.vers.begin(now) // the version of every item this command writes
	s.expireMetLocked(now, c)
	s.mods.expiry = c.Op == OpDelExpired || c.Op == OpEvict
	written, reported := s.keys.writes, s.dirtyReported
	s.dirtyReported = false
	var r Reply
	if s.notify.classes.Load() == 0 {
		r = sp.apply(s, now, c)
	} else {
		pre := s.notifyBeforeLocked(now, c)
		r = sp.apply(s, now, c)
		s.notifyAfterLocked(now, c, r, pre)
	}
	if !s.dirtyReported {
		s.dirty += dirtyOf(c, r, s.keys.writes-written)
	}
	s.dirtyReported = reported
	s.mods.expiry = false
	return r
}
