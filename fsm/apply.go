package fsm

import (
	"fmt"
	"strconv"
)

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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyEntryLocked(dst, index, now, cmds)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range entries {
		start := len(all)
		all = s.applyEntryLocked(all, e.Index, e.Now, e.Cmds)
		out[i] = all[start:len(all):len(all)]
	}
	return out
}

func (s *Store) applyEntryLocked(dst []Reply, index uint64, now int64, cmds []Command) []Reply {
	if index != 0 {
		if index <= s.applied {
			panic(fmt.Sprintf("fsm: entry %d applied after entry %d", index, s.applied))
		}
		s.applied = index
	}
	for i := range cmds {
		dst = append(dst, s.applyLocked(now, &cmds[i]))
	}
	return dst
}

func (s *Store) applyLocked(now int64, c *Command) Reply {
	if err := c.Validate(); err != nil {
		panic(err)
	}
	a := c.Args
	switch c.Op {
	case OpSet:
		return s.setLocked(now, c)
	case OpSetNX:
		if _, ok := s.liveLocked(a[0], now); ok {
			return replyZero
		}
		s.putLocked(newItem(a[0], a[1], 0))
		return replyOne
	case OpGetSet:
		old, ok := s.liveLocked(a[0], now)
		if ok && old.kind != kindString {
			return ErrorReply(ErrWrongType)
		}
		s.putLocked(newItem(a[0], a[1], 0))
		if !ok {
			return replyNil
		}
		return valueReply(old.val)
	case OpGetDel:
		old, ok := s.liveLocked(a[0], now)
		if !ok {
			return replyNil
		}
		if old.kind != kindString {
			return ErrorReply(ErrWrongType)
		}
		s.deleteLocked(a[0])
		return valueReply(old.val)
	case OpGetEx:
		return s.getExLocked(now, c)
	case OpMSet:
		for i := 0; i < len(a); i += 2 {
			s.putLocked(newItem(a[i], a[i+1], 0))
		}
		return replyOK
	case OpMSetNX:
		for i := 0; i < len(a); i += 2 {
			if _, ok := s.liveLocked(a[i], now); ok {
				return replyZero
			}
		}
		for i := 0; i < len(a); i += 2 {
			s.putLocked(newItem(a[i], a[i+1], 0))
		}
		return replyOne
	case OpAppend:
		return s.appendLocked(now, a[0], a[1])
	case OpSetRange:
		return s.setRangeLocked(now, a[0], c.Int, a[1])
	case OpIncrBy:
		return s.incrByLocked(now, a[0], c.Int)
	case OpIncrByFloat:
		return s.incrByFloatLocked(now, c)
	case OpDel:
		var n int64
		for _, k := range a {
			if old, ok := s.deleteLocked(k); ok && !old.expired(now) {
				n++
			}
		}
		return IntReply(n)
	case OpRename, OpRenameNX:
		return s.renameLocked(now, a[0], a[1], c.Op == OpRenameNX)
	case OpExpireAt:
		return s.expireLocked(now, a[0], c.Int, c.Flags)
	case OpPersist:
		old, ok := s.liveLocked(a[0], now)
		if !ok || old.exp == 0 {
			return replyZero
		}
		old.exp = 0
		s.putLocked(old)
		return replyOne
	case OpFlushAll:
		// Cluster metadata is not data: it survives FLUSHALL.
		s.keys, s.expires, s.bytes = newKeys(), newExpires(), 0
		return replyOK
	case OpDelExpired:
		var n int64
		for _, k := range a {
			if old, ok := s.getLocked(k); ok && old.expired(now) {
				s.deleteLocked(k)
				n++
			}
		}
		return IntReply(n)
	case OpMetaSet:
		s.setMetaLocked(string(a[0]), string(a[1]))
		return replyOK
	}
	panic(fmt.Sprintf("fsm: %v is not a write", c.Op))
}

func (s *Store) setLocked(now int64, c *Command) Reply {
	key, val, f := c.Args[0], c.Args[1], c.Flags
	if f&(FlagNX|FlagXX|FlagGet|FlagKeepTTL) == 0 {
		// The hot path: one tree descent, one allocation.
		if c.Int != 0 && c.Int <= now {
			s.deleteLocked(key)
		} else {
			s.putLocked(newItem(key, val, c.Int))
		}
		return replyOK
	}
	old, exists := s.liveLocked(key, now)
	if f&FlagGet != 0 && exists && old.kind != kindString {
		return ErrorReply(ErrWrongType)
	}
	reply := replyOK
	if f&FlagGet != 0 {
		reply = replyNil
		if exists {
			reply = valueReply(old.val)
		}
	}
	if (f&FlagNX != 0 && exists) || (f&FlagXX != 0 && !exists) {
		if f&FlagGet != 0 {
			return reply
		}
		return replyNil
	}
	exp := c.Int
	if exp == 0 && f&FlagKeepTTL != 0 && exists {
		exp = old.exp
	}
	if exp != 0 && exp <= now {
		// A deadline already past (PXAT in the past): Redis sets and
		// at once expires the key.
		s.deleteLocked(key)
	} else {
		s.putLocked(newItem(key, val, exp))
	}
	return reply
}

func (s *Store) getExLocked(now int64, c *Command) Reply {
	key := c.Args[0]
	old, ok := s.liveLocked(key, now)
	if !ok {
		return replyNil
	}
	if old.kind != kindString {
		return ErrorReply(ErrWrongType)
	}
	switch {
	case c.Flags&FlagExpire != 0 && c.Int <= now:
		s.deleteLocked(key)
	case c.Flags&FlagExpire != 0:
		old.exp = c.Int
		s.putLocked(old)
	case c.Flags&FlagPersist != 0 && old.exp != 0:
		old.exp = 0
		s.putLocked(old)
	}
	return valueReply(old.val)
}

// appendLocked grows the string in its spare capacity when it can: bytes past
// len(val) are invisible to every alias and snapshot (see item), and growing
// by append's doubling keeps repeated APPENDs linear, as in Redis.
func (s *Store) appendLocked(now int64, key, suffix []byte) Reply {
	old, ok := s.liveLocked(key, now)
	if !ok {
		s.putLocked(newItem(key, suffix, 0))
		return IntReply(int64(len(suffix)))
	}
	if old.kind != kindString {
		return ErrorReply(ErrWrongType)
	}
	if int64(len(old.val))+int64(len(suffix)) > MaxStringLen {
		return ErrorReply(ErrStringTooLong)
	}
	old.val = append(old.val, suffix...)
	s.putLocked(old)
	return IntReply(int64(len(old.val)))
}

func (s *Store) setRangeLocked(now int64, key []byte, offset int64, val []byte) Reply {
	old, ok := s.liveLocked(key, now)
	if ok && old.kind != kindString {
		return ErrorReply(ErrWrongType)
	}
	if len(val) == 0 {
		// Nothing to write: Redis neither creates the key nor checks
		// the offset.
		return IntReply(int64(len(old.val)))
	}
	if offset > MaxStringLen-int64(len(val)) {
		return ErrorReply(ErrStringTooLong)
	}
	n := max(len(old.val), int(offset)+len(val))
	buf := make([]byte, n)
	copy(buf, old.val)
	copy(buf[offset:], val)
	exp := int64(0)
	if ok {
		exp = old.exp
	}
	s.putLocked(newItem(key, buf, exp))
	return IntReply(int64(n))
}

func (s *Store) incrByLocked(now int64, key []byte, delta int64) Reply {
	old, ok := s.liveLocked(key, now)
	var cur int64
	if ok {
		if old.kind != kindString {
			return ErrorReply(ErrWrongType)
		}
		var valid bool
		if cur, valid = parseInt(old.val); !valid {
			return ErrorReply(ErrNotInteger)
		}
	}
	if (delta > 0 && cur > maxInt64-delta) || (delta < 0 && cur < minInt64-delta) {
		return ErrorReply(ErrOverflow)
	}
	cur += delta
	var buf [20]byte
	s.putLocked(newItem(key, strconv.AppendInt(buf[:0], cur, 10), old.exp))
	return IntReply(cur)
}

const (
	maxInt64 = 1<<63 - 1
	minInt64 = -1 << 63
)

// parseInt parses a string as Redis's string2ll does: optional '-', no '+',
// no spaces, no leading zeros, no "-0", within int64.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (1<<64-1)/10 {
			return 0, false
		}
		u *= 10
		if u > 1<<64-1-uint64(c-'0') {
			return 0, false
		}
		u += uint64(c - '0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}

func (s *Store) renameLocked(now int64, src, dst []byte, nx bool) Reply {
	old, ok := s.liveLocked(src, now)
	if !ok {
		return ErrorReply(ErrNoSuchKey)
	}
	if string(src) == string(dst) {
		if nx {
			return replyZero
		}
		return replyOK
	}
	if nx {
		if _, exists := s.liveLocked(dst, now); exists {
			return replyZero
		}
	}
	s.deleteLocked(src)
	moved := newItem(dst, old.val, old.exp)
	moved.kind = old.kind
	s.putLocked(moved)
	if nx {
		return replyOne
	}
	return replyOK
}

// expireLocked follows Redis's expireGenericCommand: the NX/XX/GT/LT
// conditions first (a key without TTL counts as an infinite one), then a
// deadline not after now deletes the key.
func (s *Store) expireLocked(now int64, key []byte, at int64, f Flags) Reply {
	old, ok := s.liveLocked(key, now)
	if !ok {
		return replyZero
	}
	cur := old.exp
	switch {
	case f&FlagNX != 0 && cur != 0,
		f&FlagXX != 0 && cur == 0,
		f&FlagGT != 0 && (cur == 0 || at <= cur),
		f&FlagLT != 0 && cur != 0 && at >= cur:
		return replyZero
	}
	if at <= now {
		s.deleteLocked(key)
		return replyOne
	}
	old.exp = at
	s.putLocked(old)
	return replyOne
}
