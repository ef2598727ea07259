package fsm

import (
	"math/rand/v2"
	"strconv"
)

// Commands on keys of any type (DEL, RENAME, EXPIRE and friends, TYPE,
// SCAN, ...) and on the whole keyspace (FLUSHALL, DBSIZE), and the
// replicated cluster metadata.

func init() {
	registerOp(OpDel, opSpec{name: "DEL", write: true, args: argsAtLeast(1), flags: FlagLazy, apply: applyDel, keys: keysAll})
	registerOp(OpRename, opSpec{name: "RENAME", write: true, args: 2, keys: keysFirst(2),
		apply: func(s *Store, now int64, c *Command) Reply { return s.renameLocked(now, c.Args[0], c.Args[1], false) }})
	registerOp(OpRenameNX, opSpec{name: "RENAMENX", write: true, args: 2, keys: keysFirst(2),
		apply: func(s *Store, now int64, c *Command) Reply { return s.renameLocked(now, c.Args[0], c.Args[1], true) }})
	registerOp(OpExpireAt, opSpec{name: "EXPIREAT", write: true, args: 1, flags: FlagNX | FlagXX | FlagGT | FlagLT,
		apply: func(s *Store, now int64, c *Command) Reply { return s.expireLocked(now, c.Args[0], c.Int, c.Flags) }})
	registerOp(OpPersist, opSpec{name: "PERSIST", write: true, args: 1, apply: applyPersist})
	registerOp(OpFlushAll, opSpec{name: "FLUSHALL", write: true, args: 0, flags: FlagLazy | FlagFlushDB, apply: applyFlushAll})
	registerOp(OpDelExpired, opSpec{name: "DELEXPIRED", write: true, args: argsAny, apply: applyDelExpired, keys: keysAll,
		slotSkips: true})
	registerOp(OpMetaSet, opSpec{name: "METASET", write: true, args: 2, apply: applyMetaSet, keys: keysNone,
		check: func(c *Command) error {
			if len(c.Args[0]) == 0 {
				return errorString("empty name")
			}
			return nil
		}})

	registerOp(OpExists, opSpec{name: "EXISTS", args: argsAtLeast(1), flags: FlagTouch, read: readExists, keys: keysAll})
	registerOp(OpType, opSpec{name: "TYPE", args: 1, read: readType})
	registerOp(OpKeys, opSpec{name: "KEYS", args: 1, keys: keysNone,
		read: func(s *Store, now int64, c *Command) Reply { return s.keysLocked(now, string(c.Args[0])) }})
	registerOp(OpScan, opSpec{name: "SCAN", args: argsAny, flags: FlagScanMatch, check: scanCheck, keys: keysNone,
		read:    func(s *Store, now int64, c *Command) Reply { return s.scanLocked(now, *c, nil) },
		readMet: func(s *Store, now int64, c *Command, met *[][]byte) Reply { return s.scanLocked(now, *c, met) }})
	registerOp(OpRandomKey, opSpec{name: "RANDOMKEY", args: 0, keys: keysNone,
		read:    func(s *Store, now int64, c *Command) Reply { return s.randomKeyLocked(now, nil) },
		readMet: func(s *Store, now int64, c *Command, met *[][]byte) Reply { return s.randomKeyLocked(now, met) }})
	for _, op := range []Op{OpTTL, OpPTTL, OpExpireTime, OpPExpireTime} {
		registerOp(op, opSpec{name: map[Op]string{OpTTL: "TTL", OpPTTL: "PTTL", OpExpireTime: "EXPIRETIME",
			OpPExpireTime: "PEXPIRETIME"}[op], args: 1,
			read: func(s *Store, now int64, c *Command) Reply { return ttlReply(c.Op, now, s, c.Args[0]) }})
	}
	registerOp(OpDBSize, opSpec{name: "DBSIZE", args: 0, keys: keysNone,
		read: func(s *Store, now int64, c *Command) Reply {
			return IntReply(int64(s.keys.Len() - s.hiddenLenLocked() - s.countExpiredLocked(now)))
		}})
	registerOp(OpMemoryUsage, opSpec{name: "MEMORY USAGE", args: 1, flags: FlagMemoryLogical, read: readMemoryUsage,
		check: func(c *Command) error {
			if c.Int < 0 {
				return errorString("negative sample count")
			}
			return nil
		}})
}

func scanCheck(c *Command) error {
	if len(c.Args) > 2 {
		return errorString("want at most 2")
	}
	if c.Int < 0 {
		return errorString("negative cursor")
	}
	return nil
}

// FlagLazy, on OpDel and OpFlushAll: UNLINK, FLUSHALL ASYNC, FLUSHDB
// ASYNC, which Redis frees in the background (LazyFreed).
const FlagLazy Flags = 1

// lazyFreeThreshold is Redis's LAZYFREE_THRESHOLD: a value that takes more
// allocations than this to free is freed in the background.
const lazyFreeThreshold = 64

func applyDel(s *Store, now int64, c *Command) Reply {
	var n int64
	for _, k := range c.Args {
		old, ok := s.deleteLocked(k)
		if ok && c.Flags&FlagLazy != 0 && old.obj != nil && old.obj.freeEffort() > lazyFreeThreshold {
			s.lazyFreed.Add(1)
		}
		if ok && !old.expired(now) {
			n++
			s.notifyLocked(NotifyGeneric, "del", k)
		}
	}
	return IntReply(n)
}

func applyPersist(s *Store, now int64, c *Command) Reply {
	old, ok := s.liveLocked(c.Args[0], now)
	if !ok || old.exp == 0 {
		return replyZero
	}
	old.exp = 0
	s.putLocked(old)
	s.notifyLocked(NotifyGeneric, "persist", c.Args[0])
	return replyOne
}

// FlagFlushDB, on OpFlushAll: FLUSHDB, which empties the command's
// database only; without it OpFlushAll empties every database (FLUSHALL,
// and what FLUSHDB was when kvs had one database). It needs level 4.
const FlagFlushDB Flags = 2

// FlushedKey is the key the ready hook (SetReadyHook) receives after
// FLUSHALL: every key a client waits on may have changed.
const FlushedKey = "\x00kvs-flushall"

func applyFlushAll(s *Store, now int64, c *Command) Reply {
	keys := int64(s.keys.Len() - s.hiddenLenLocked())
	if c.Flags&FlagFlushDB == 0 {
		s.otherDBsLocked(func(db uint16, d dbKeys) {
			if d.keys.Len() == 0 {
				return
			}
			keys += int64(d.keys.Len())
			s.setDBLocked(db, dbKeys{keys: d.keys.emptied()})
		})
	}
	if c.Flags&FlagLazy != 0 {
		s.lazyFreed.Add(keys)
	}
	s.reportDirtyLocked(keys)
	// Cluster metadata is not data: it survives FLUSHALL.
	old := s.keys
	s.keys, s.bytes = s.keys.emptied(), 0
	s.flushedLocked()
	s.afterFlushLocked(old)
	// Clients blocked in XREADGROUP are answered that their stream is
	// gone: the hook hears of every key it may wait on.
	s.signalReadyLocked([]byte(FlushedKey))
	return replyOK
}

// LazyFreed counts the objects Redis would have freed in the background
// since the store was made: each value UNLINK deleted that takes more than
// 64 allocations to free, and each key FLUSHALL or FLUSHDB ASYNC deleted
// (what Redis's lazyfreed_objects counts once its thread has freed them).
// The server has their memory collected (server/lazyfree.go).
func (s *Store) LazyFreed() int64 { return s.lazyFreed.Load() }

func applyDelExpired(s *Store, now int64, c *Command) Reply {
	var n int64
	for _, k := range c.Args {
		if !s.slotWritableLocked(k) {
			continue
		}
		if old, ok := s.getLocked(k); ok && old.expired(now) {
			s.deleteLocked(k)
			n++
			s.notifyLocked(NotifyExpired, "expired", k)
		}
	}
	return IntReply(n)
}

func applyMetaSet(s *Store, now int64, c *Command) Reply {
	s.setMetaLocked(string(c.Args[0]), string(c.Args[1]))
	return replyOK
}

// FlagTouch, on OpExists: TOUCH, which is an access of each key it finds
// (EXISTS is not).
const FlagTouch Flags = 1

func readExists(s *Store, now int64, c *Command) Reply {
	var n int64
	for _, k := range c.Args {
		var ok bool
		if c.Flags&FlagTouch != 0 {
			_, ok = s.liveLocked(k, now)
		} else {
			_, ok = s.peekLocked(k, now)
		}
		if ok {
			n++
		}
	}
	return IntReply(n)
}

func readType(s *Store, now int64, c *Command) Reply {
	it, ok := s.peekLocked(c.Args[0], now)
	if !ok {
		return Reply{Kind: ReplyStatus, Str: "none"}
	}
	return Reply{Kind: ReplyStatus, Str: it.kind.typeName()}
}

// FlagMemoryLogical, on OpMemoryUsage: answer logicalSize.
const FlagMemoryLogical Flags = 1

func readMemoryUsage(s *Store, now int64, c *Command) Reply {
	it, ok := s.peekLocked(c.Args[0], now)
	if !ok {
		return replyNil
	}
	if c.Flags&FlagMemoryLogical != 0 {
		return IntReply(it.logicalSize(int(c.Int)))
	}
	return IntReply(it.size())
}

// Per-element costs of logicalSize, roughly what the large forms hold
// per element beside its bytes.
const (
	logicalObjBytes    = 64
	logicalElemBytes   = 16
	logicalZSetEntries = 24
)

// logicalSize estimates the bytes of it from its key and value alone, as
// Redis's MEMORY USAGE does with SAMPLES: the elements of a collection
// are sampled (the first samples of them, in the order every form keeps
// them in, or all for 0) and their average cost counted for each. It
// does not depend on how the value is held (packed or large, the spare
// capacity of its buffers), which differs between replicas and after a
// restore, so a script's MEMORY USAGE is the same on every replica.
func (it *item) logicalSize(samples int) int64 {
	n := itemSlotBytes + int64(roundAlloc(len(it.key)))
	if it.kind == kindString {
		return n + int64(roundAlloc(len(it.val)))
	}
	var sum, seen, total int64
	add := func(cost int) bool {
		sum += int64(cost)
		seen++
		return samples == 0 || seen < int64(samples)
	}
	switch it.kind {
	case kindHash:
		total = int64(hashLen(it))
		hashEach(it, func(f, v []byte) bool {
			return add(2*logicalElemBytes + roundAlloc(len(f)) + roundAlloc(len(v)))
		})
	case kindList:
		total = listLen(it)
		listElements(it, func(e []byte) bool { return add(logicalElemBytes + roundAlloc(len(e))) })
	case kindSet:
		v := viewOf(it)
		total = int64(v.len())
		v.each(func(_ uint64, m []byte) bool { return add(logicalElemBytes + roundAlloc(len(m))) })
	case kindZSet:
		v := zsetView(it)
		total = int64(v.card())
		v.each(0, false, func(e zent) bool {
			return add(logicalElemBytes + logicalZSetEntries + roundAlloc(len(e.member)))
		})
	}
	if seen > 0 {
		n += sum * total / seen
	}
	return n + logicalObjBytes
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
	// The value moves as it is: a collection's packed bytes and large
	// form are shared by nothing but the item (and snapshots, which never
	// write them), so only the key is new.
	moved := newItem(dst, nil, old.exp)
	moved.val, moved.obj, moved.kind, moved.enc = old.val, old.obj, old.kind, old.enc
	s.putLocked(moved)
	// A list or sorted set arriving under a name may serve clients blocked
	// on it, as Redis signals every key it adds.
	s.signalReadyLocked(dst)
	s.notifyLocked(NotifyGeneric, "rename_from", src)
	s.notifyLocked(NotifyGeneric, "rename_to", dst)
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
		s.notifyLocked(NotifyGeneric, "del", key)
		return replyOne
	}
	old.exp = at
	s.putLocked(old)
	s.notifyLocked(NotifyGeneric, "expire", key)
	return replyOne
}

func ttlReply(op Op, now int64, s *Store, key []byte) Reply {
	it, ok := s.peekLocked(key, now)
	switch {
	case !ok:
		return IntReply(-2)
	case it.exp == 0:
		return IntReply(-1)
	}
	// As Redis's ttlGenericCommand: seconds are rounded to the nearest,
	// for the absolute forms too.
	ms := max(it.exp-now, 0)
	if op == OpExpireTime || op == OpPExpireTime {
		ms = it.exp
	}
	if op == OpTTL || op == OpExpireTime {
		// (ms+500)/1000 without overflowing near the largest deadline.
		return IntReply(ms/1000 + (ms%1000+500)/1000)
	}
	return IntReply(ms)
}

func (s *Store) keysLocked(now int64, pattern string) Reply {
	out := []Reply{}
	if globIsLiteral(pattern) {
		if _, ok := s.peekLocked([]byte(pattern), now); ok && (s.slots == nil || s.slots.visible(KeySlot(pattern))) {
			out = append(out, BulkReply([]byte(pattern)))
		}
		return Reply{Kind: ReplyArray, Array: out}
	}
	all := pattern == "*"
	s.ascendVisibleLocked(item{}, func(it item) bool {
		if !it.expired(now) && (all || matchGlob(pattern, it.key)) {
			out = append(out, BulkReply([]byte(it.key)))
		}
		return true
	})
	return Reply{Kind: ReplyArray, Array: out}
}

// scanLocked visits about Int2 keys from the cursor Int on, in hash order.
// The next cursor is the hash of the first key not visited, so a key that
// exists for the whole iteration is returned at least once however the
// keyspace changes between calls. A batch never ends inside a run of equal
// hashes, so even colliding keys cannot make the cursor stand still. The
// expired keys it visits that match its pattern, which Redis's SCAN
// deletes, are appended to *met unless it is nil.
func (s *Store) scanLocked(now int64, c Command, met *[][]byte) Reply {
	count := c.Int2
	if count <= 0 {
		count = 10
	}
	var pattern, typ string
	if len(c.Args) > 0 {
		pattern = string(c.Args[0])
	}
	if len(c.Args) > 1 {
		typ = string(c.Args[1])
	}
	usePattern := (pattern != "" || c.Flags&FlagScanMatch != 0) && pattern != "*"
	var out []Reply
	var visited int64
	var last, next uint64
	s.ascendVisibleLocked(item{hash: uint64(c.Int)}, func(it item) bool {
		if visited >= count && it.hash != last {
			next = it.hash
			return false
		}
		visited++
		last = it.hash
		if usePattern && !matchGlob(pattern, it.key) {
			return true
		}
		if it.expired(now) {
			if met != nil {
				*met = append(*met, []byte(it.key))
			}
			return true
		}
		if typ != "" && it.kind.typeName() != typ {
			return true
		}
		out = append(out, BulkReply([]byte(it.key)))
		return true
	})
	if out == nil {
		out = []Reply{}
	}
	cursor := strconv.AppendUint(nil, next, 10)
	return Reply{Kind: ReplyArray, Array: []Reply{BulkReply(cursor), {Kind: ReplyArray, Array: out}}}
}

// randomKeyLocked picks a key uniformly by rank (the tree keeps subtree
// counts). Expired keys are skipped; if the sample keeps hitting them, a walk
// from a random point finds a live one or proves there is none. The
// expired keys sampled, which Redis's RANDOMKEY deletes, are appended to
// *met unless it is nil.
func (s *Store) randomKeyLocked(now int64, met *[][]byte) Reply {
	n := s.keys.Len()
	if n == 0 || n == s.hiddenLenLocked() {
		return replyNil
	}
	for range 100 {
		it, _ := s.keys.GetAt(rand.IntN(n))
		if s.hiddenLocked(it.hash) {
			continue
		}
		if !it.expired(now) {
			return BulkReply([]byte(it.key))
		}
		if met != nil {
			*met = append(*met, []byte(it.key))
		}
	}
	var found *item
	visit := func(it item) bool {
		if !it.expired(now) {
			found = &it
			return false
		}
		return true
	}
	start, _ := s.keys.GetAt(rand.IntN(n))
	s.ascendVisibleLocked(start, visit)
	if found == nil {
		s.ascendVisibleLocked(item{}, visit)
	}
	if found == nil {
		return replyNil
	}
	return BulkReply([]byte(found.key))
}
