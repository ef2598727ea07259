package fsm

// Commands on keys of any type added with the data types: COPY, OBJECT,
// and the slot queries CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT, which
// the slot-ordered keyspace answers with a range of the tree.

const (
	// OpCopy: Args[0]=source, Args[1]=destination (not the same key,
	// checked by the server); FlagReplace overwrites an existing
	// destination. The copy keeps the TTL. Reply :1 copied, :0 not.
	OpCopy Op = opBaseBits + 50 + iota
	// OpObject: Args[0]=key, Int=ObjectEncoding..ObjectDigest; Int2
	// ObjectEvenExpired or 0.
	// Reply nil for a missing key, else the answer (FREQ and IDLETIME
	// from the key access records of an LFU or LRU policy, access.go).
	OpObject
	// OpCountKeysInSlot: Int=slot (0..16383). Reply :keys not expired.
	OpCountKeysInSlot
	// OpGetKeysInSlot: Int=slot (0..16383), Int2=count (>= 0). Reply an
	// array of up to count keys of the slot, in keyspace order.
	OpGetKeysInSlot
	// OpSlotSizes: Int=first slot, Int2=last slot (0 <= first <= last <
	// 16384). Reply a flat array of integers, slot, keys, bytes, for each
	// slot of the range served here that holds live keys, ascending: the
	// keys not expired and the memory they hold (MEMORY USAGE's estimate,
	// summed). What a rebalance weighs the groups by.
	OpSlotSizes
)

// FlagReplace is COPY's REPLACE.
const FlagReplace Flags = 1

// OBJECT subcommands, in OpObject's Int.
const (
	ObjectEncoding = iota
	ObjectFreq
	ObjectIdleTime
	ObjectRefCount
)

// ObjectEvenExpired, in OpObject's Int2, answers for a key that has
// expired and is not yet deleted too (DEBUG OBJECT).
const ObjectEvenExpired = 1

// ErrLFUIdle is OBJECT IDLETIME's answer under an LFU maxmemory-policy.
const ErrLFUIdle = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."

// ErrNoLFU is OBJECT FREQ's answer while maxmemory-policy is not an LFU
// one.
const ErrNoLFU = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."

// sharedRefCount is what Redis reports as the reference count of its
// shared integers (0 to 9999), which its "int" strings use when
// maxmemory is 0.
const sharedRefCount = 2147483647

func init() {
	registerOp(OpCopy, opSpec{name: "COPY", write: true, args: 2, flags: FlagReplace, keys: keysFirst(2),
		apply: applyCopy})
	registerOp(OpObject, opSpec{name: "OBJECT", args: 1, read: readObject,
		check: func(c *Command) error {
			if c.Int < ObjectEncoding || c.Int > ObjectDigest {
				return errorString("unknown OBJECT subcommand")
			}
			return nil
		}})
	registerOp(OpCountKeysInSlot, opSpec{name: "CLUSTER COUNTKEYSINSLOT", args: 0, check: slotCheck, keys: keysNone,
		read: func(s *Store, now int64, c *Command) Reply { return IntReply(s.countKeysInSlotLocked(now, int(c.Int))) }})
	registerOp(OpGetKeysInSlot, opSpec{name: "CLUSTER GETKEYSINSLOT", args: 0, check: slotCheck, keys: keysNone,
		read: readGetKeysInSlot})
	registerOp(OpSlotSizes, opSpec{name: "KVS.SLOTS SIZES", args: 0, keys: keysNone, read: readSlotSizes,
		check: func(c *Command) error {
			if c.Int < 0 || c.Int2 < c.Int || c.Int2 >= ClusterSlots {
				return errorString("slot out of range")
			}
			return nil
		}})
}

func slotCheck(c *Command) error {
	if c.Int < 0 || c.Int >= ClusterSlots || c.Int2 < 0 {
		return errorString("slot or count out of range")
	}
	return nil
}

func applyCopy(s *Store, now int64, c *Command) Reply {
	src, dst := c.Args[0], c.Args[1]
	old, ok := s.liveLocked(src, now)
	if !ok {
		return replyZero
	}
	if _, exists := s.liveLocked(dst, now); exists && c.Flags&FlagReplace == 0 {
		return replyZero
	}
	// Bytes below len are immutable, so the copy shares them; its
	// capacity is clipped so that an APPEND or SETBIT growing either
	// string in place can never write where the other would see it. A
	// large collection is cloned (O(1), copy-on-write).
	cp := s.newCollection(dst, old.kind, old.val[:len(old.val):len(old.val)], nil, old.exp)
	if old.obj != nil {
		cp.obj = old.obj.clone()
		*cp.obj.cowGen() = s.keys.gen
	}
	cp.enc = old.enc
	if old.enc == encByContent {
		// Redis duplicates the value, so an integer it shared is
		// now its own (OBJECT REFCOUNT 1).
		cp.enc = encUnshared
	}
	s.putLocked(cp)
	if old.kind == kindList || old.kind == kindZSet || old.kind == kindStream {
		// A client blocked on the destination may now pop from it.
		s.signalReadyLocked(dst)
	}
	return replyOne
}

func readObject(s *Store, now int64, c *Command) Reply {
	if c.Int == ObjectDigest {
		if r, ok := s.valueDigestLocked(c.Args[0]); ok {
			return r
		}
		return replyNil
	}
	it, ok := s.peekLocked(c.Args[0], now)
	if c.Int2 == ObjectEvenExpired {
		// DEBUG OBJECT: a key logically expired and not yet deleted is
		// still there, as in Redis's dict.
		k := unsafeString(c.Args[0])
		if p := s.keys.peek(keyHash(k), k); p != nil {
			it, ok = *p, true
		}
	}
	if !ok {
		return replyNil
	}
	acc := s.keys.acc
	var score int64
	if acc != nil {
		score = acc.evictScore(it.hash)
	}
	switch c.Int {
	case ObjectEncoding:
		enc := "unknown"
		if f := kindTable[it.kind].encoding; f != nil {
			enc = f(&it)
		}
		return BulkReply([]byte(enc))
	case ObjectFreq:
		if acc == nil || !acc.lfu {
			return ErrorReply(ErrNoLFU)
		}
		return IntReply(255 - score)
	case ObjectIdleTime:
		switch {
		case acc == nil:
			// A store no server tracks accesses for (tests, tools): every
			// key is as fresh as can be.
			return replyZero
		case acc.lfu:
			return ErrorReply(ErrLFUIdle)
		}
		return IntReply(score / 1000)
	}
	if it.kind == kindString && it.enc != encUnshared && stringEncoding(&it) == "int" {
		if v, _ := parseInt(it.val); v >= 0 && v < 10000 {
			return IntReply(sharedRefCount)
		}
	}
	return replyOne
}

// slotBounds returns the keyspace range of slot: its shard, and the
// hashes from lo up to (not including) hi; hi is 0 for the last slot.
func slotBounds(slot int) (lo, hi uint64) {
	lo = slotHash(slot)
	if slot+1 < ClusterSlots {
		hi = slotHash(slot + 1)
	}
	return lo, hi
}

// countKeysInSlotLocked counts the live keys of slot without visiting
// them: two ranks in the slot's shard, less the slot's expired keys.
func (s *Store) countKeysInSlotLocked(now int64, slot int) int64 {
	if s.slots != nil && !s.slots.visible(slot) {
		return 0
	}
	lo, hi := slotBounds(slot)
	shard := shardOf(lo)
	end := s.keys.shardLen(shard)
	if hi != 0 && shardOf(hi) == shard {
		end = s.keys.rankInShard(shard, hi)
	}
	n := end - s.keys.rankInShard(shard, lo)
	s.keys.scanExpired(now, func(it *item) bool {
		if it.hash >= lo && (hi == 0 || it.hash < hi) {
			n--
		}
		return true
	})
	return int64(n)
}

// readSlotSizes walks the keys of the slots Int to Int2 once, in keyspace
// order (slot first), skipping the slots not served here (a move's
// staging, what a move out left to purge).
func readSlotSizes(s *Store, now int64, c *Command) Reply {
	out := []Reply{}
	slot, keys, bytes := -1, int64(0), int64(0)
	flush := func() {
		if keys > 0 {
			out = append(out, IntReply(int64(slot)), IntReply(keys), IntReply(bytes))
		}
		keys, bytes = 0, 0
	}
	lo, hi := slotRangeBounds(SlotRange{Lo: int(c.Int), Hi: int(c.Int2)})
	s.keys.Ascend(item{hash: lo}, func(it item) bool {
		if hi != 0 && it.hash >= hi {
			return false
		}
		if at := int(it.hash >> slotHashShift); at != slot {
			flush()
			slot = at
		}
		if !it.expired(now) && (s.slots == nil || s.slots.visible(slot)) {
			keys++
			bytes += it.size()
		}
		return true
	})
	flush()
	return Reply{Kind: ReplyArray, Array: out}
}

func readGetKeysInSlot(s *Store, now int64, c *Command) Reply {
	lo, hi := slotBounds(int(c.Int))
	out := []Reply{}
	if c.Int2 == 0 || (s.slots != nil && !s.slots.visible(int(c.Int))) {
		return Reply{Kind: ReplyArray, Array: out}
	}
	s.keys.Ascend(item{hash: lo}, func(it item) bool {
		if hi != 0 && it.hash >= hi {
			return false
		}
		if !it.expired(now) {
			out = append(out, BulkReply([]byte(it.key)))
		}
		return int64(len(out)) < c.Int2
	})
	return Reply{Kind: ReplyArray, Array: out}
}
