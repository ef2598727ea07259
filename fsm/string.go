package fsm

import "strconv"

// Strings: SET and its relatives, APPEND, SETRANGE, INCR and friends, and
// their reads. The value of a string item is item.val.

func init() {
	registerOp(OpSet, opSpec{name: "SET", write: true, args: 2, flags: FlagNX | FlagXX | FlagGet | FlagKeepTTL,
		apply: (*Store).setLocked})
	registerOp(OpSetNX, opSpec{name: "SETNX", write: true, args: 2, apply: applySetNX})
	registerOp(OpGetSet, opSpec{name: "GETSET", write: true, args: 2, apply: applyGetSet})
	registerOp(OpGetDel, opSpec{name: "GETDEL", write: true, args: 1, apply: applyGetDel})
	registerOp(OpGetEx, opSpec{name: "GETEX", write: true, args: 1, flags: FlagExpire | FlagPersist,
		apply: (*Store).getExLocked})
	registerOp(OpMSet, opSpec{name: "MSET", write: true, args: argsAtLeast(2), step: 2, apply: applyMSet,
		keys: keysEvery(0, 2)})
	registerOp(OpMSetNX, opSpec{name: "MSETNX", write: true, args: argsAtLeast(2), step: 2, apply: applyMSetNX,
		keys: keysEvery(0, 2)})
	registerOp(OpAppend, opSpec{name: "APPEND", write: true, args: 2,
		apply: func(s *Store, now int64, c *Command) Reply { return s.appendLocked(now, c.Args[0], c.Args[1]) }})
	registerOp(OpSetRange, opSpec{name: "SETRANGE", write: true, args: 2, check: nonNegativeInt,
		apply: func(s *Store, now int64, c *Command) Reply { return s.setRangeLocked(now, c.Args[0], c.Int, c.Args[1]) }})
	registerOp(OpIncrBy, opSpec{name: "INCRBY", write: true, args: 1,
		apply: func(s *Store, now int64, c *Command) Reply { return s.incrByLocked(now, c.Args[0], c.Int) }})
	// Args[1], the increment as the client wrote it, is optional.
	registerOp(OpIncrByFloat, opSpec{name: "INCRBYFLOAT", write: true, args: argsAtLeast(1), check: atMostArgs(2),
		apply: (*Store).incrByFloatLocked})

	registerOp(OpGet, opSpec{name: "GET", args: 1, read: readGet})
	registerOp(OpMGet, opSpec{name: "MGET", args: argsAtLeast(1), read: readMGet, keys: keysAll})
	registerOp(OpStrLen, opSpec{name: "STRLEN", args: 1, read: readStrLen})
	registerOp(OpGetRange, opSpec{name: "GETRANGE", args: 1, read: readGetRange})
}

// nonNegativeInt is opSpec.check for ops whose Int must not be negative.
func nonNegativeInt(c *Command) error {
	if c.Int < 0 {
		return errorString("negative Int")
	}
	return nil
}

// atMostArgs returns an opSpec.check capping the argument count.
func atMostArgs(n int) func(c *Command) error {
	return func(c *Command) error {
		if len(c.Args) > n {
			return errorString("want at most " + strconv.Itoa(n))
		}
		return nil
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func applySetNX(s *Store, now int64, c *Command) Reply {
	a := c.Args
	if _, ok := s.liveLocked(a[0], now); ok {
		return replyZero
	}
	s.putLocked(newItem(a[0], a[1], 0))
	s.notifyLocked(NotifyString, "set", a[0])
	return replyOne
}

func applyGetSet(s *Store, now int64, c *Command) Reply {
	a := c.Args
	old, ok := s.liveLocked(a[0], now)
	if ok && old.kind != kindString {
		return replyWrongType
	}
	s.putLocked(newItem(a[0], a[1], 0))
	s.notifyLocked(NotifyString, "set", a[0])
	if !ok {
		return replyNil
	}
	return valueReply(old.val)
}

func applyGetDel(s *Store, now int64, c *Command) Reply {
	a := c.Args
	old, ok := s.liveLocked(a[0], now)
	if !ok {
		return replyNil
	}
	if old.kind != kindString {
		return replyWrongType
	}
	s.deleteLocked(a[0])
	s.notifyLocked(NotifyGeneric, "del", a[0])
	return valueReply(old.val)
}

func applyMSet(s *Store, now int64, c *Command) Reply {
	a := c.Args
	for i := 0; i < len(a); i += 2 {
		s.putLocked(newItem(a[i], a[i+1], 0))
		s.notifyLocked(NotifyString, "set", a[i])
	}
	return replyOK
}

func applyMSetNX(s *Store, now int64, c *Command) Reply {
	a := c.Args
	for i := 0; i < len(a); i += 2 {
		if _, ok := s.liveLocked(a[i], now); ok {
			return replyZero
		}
	}
	for i := 0; i < len(a); i += 2 {
		s.putLocked(newItem(a[i], a[i+1], 0))
		s.notifyLocked(NotifyString, "set", a[i])
	}
	return replyOne
}

func readGet(s *Store, now int64, c *Command) Reply {
	it, ok := s.liveLocked(c.Args[0], now)
	if !ok {
		return replyNil
	}
	if it.kind != kindString {
		return replyWrongType
	}
	return valueReply(it.val)
}

func readMGet(s *Store, now int64, c *Command) Reply {
	out := make([]Reply, len(c.Args))
	for i, k := range c.Args {
		if it, ok := s.liveLocked(k, now); ok && it.kind == kindString {
			out[i] = valueReply(it.val)
		}
	}
	return Reply{Kind: ReplyArray, Array: out}
}

func readStrLen(s *Store, now int64, c *Command) Reply {
	it, ok := s.liveLocked(c.Args[0], now)
	if ok && it.kind != kindString {
		return replyWrongType
	}
	return IntReply(int64(len(it.val)))
}

func readGetRange(s *Store, now int64, c *Command) Reply {
	it, ok := s.liveLocked(c.Args[0], now)
	if ok && it.kind != kindString {
		return replyWrongType
	}
	return getRange(it.val, c.Int, c.Int2)
}

func (s *Store) setLocked(now int64, c *Command) Reply {
	key, val, f := c.Args[0], c.Args[1], c.Flags
	if f&(FlagNX|FlagXX|FlagGet|FlagKeepTTL) == 0 {
		// The hot path: one tree descent, one allocation. A deadline
		// already past (PXAT in the past) is stored as Redis stores it:
		// the key is expired at once, and expiry deletes it, counts it
		// and announces "expired", as any other.
		s.putLocked(newItem(key, val, c.Int))
		s.notifySetLocked(key, c.Int)
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
	s.putLocked(newItem(key, val, exp))
	s.notifySetLocked(key, c.Int)
	return reply
}

// notifySetLocked announces a SET, and its expiry if it had one.
func (s *Store) notifySetLocked(key []byte, exp int64) {
	s.notifyLocked(NotifyString, "set", key)
	if exp != 0 {
		s.notifyLocked(NotifyGeneric, "expire", key)
	}
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
		s.notifyLocked(NotifyGeneric, "del", key)
	case c.Flags&FlagExpire != 0:
		old.exp = c.Int
		s.putLocked(old)
		s.notifyLocked(NotifyGeneric, "expire", key)
	case c.Flags&FlagPersist != 0 && old.exp != 0:
		old.exp = 0
		s.putLocked(old)
		s.notifyLocked(NotifyGeneric, "persist", key)
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
		s.notifyLocked(NotifyString, "append", key)
		return IntReply(int64(len(suffix)))
	}
	if old.kind != kindString {
		return ErrorReply(ErrWrongType)
	}
	if int64(len(old.val))+int64(len(suffix)) > MaxStringLen {
		return ErrorReply(ErrStringTooLong)
	}
	old.val = append(old.val, suffix...)
	old.enc = encRaw
	s.putLocked(old)
	s.notifyLocked(NotifyString, "append", key)
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
	it := newItemHash(key, buf, exp, old.hash)
	it.enc = encRaw
	s.putLocked(it)
	s.notifyLocked(NotifyString, "setrange", key)
	return IntReply(int64(n))
}

// incrByLocked is INCR, DECR, INCRBY and DECRBY. A key that exists is
// changed in place: one descent of the tree, and the key's bytes stay
// where they are (only the number is a new allocation), as Redis changes
// the integer of its object.
func (s *Store) incrByLocked(now int64, key []byte, delta int64) Reply {
	k := unsafeString(key)
	h := keyHash(k)
	p := s.keys.findForWrite(h, k)
	if p != nil && p.expired(now) {
		p = nil // replaced below, as if it were not there
	}
	var cur int64
	if p != nil {
		if p.kind != kindString {
			return ErrorReply(ErrWrongType)
		}
		var valid bool
		if cur, valid = parseInt(p.val); !valid {
			return ErrorReply(ErrNotInteger)
		}
	}
	if (delta > 0 && cur > maxInt64-delta) || (delta < 0 && cur < minInt64-delta) {
		return ErrorReply(ErrOverflow)
	}
	cur += delta
	var buf [20]byte
	digits := strconv.AppendInt(buf[:0], cur, 10)
	if p != nil {
		before := p.size()
		p.val, p.enc = append(make([]byte, 0, len(digits)), digits...), encByContent
		s.keys.written(p)
		s.bytes += p.size() - before
	} else {
		s.putLocked(newItemHash(key, digits, 0, h))
	}
	s.notifyLocked(NotifyString, "incrby", key)
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

// getRange is GETRANGE's index arithmetic, as in Redis 7.0's getrangeCommand:
// negative indexes count from the end, both are clamped, and an empty or
// inverted range (or a missing key) gives an empty string, never nil.
func getRange(v []byte, start, end int64) Reply {
	n := int64(len(v))
	if start < 0 && end < 0 && start > end {
		return replyEmpty
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	if end >= n {
		end = n - 1
	}
	if start > end || n == 0 {
		return replyEmpty
	}
	return valueReply(v[start : end+1])
}
