package fsm

// The events of the ops that do not announce their own, derived after the
// op from the Command, its reply and the store's state (so the type files
// need no change), following each notifyKeyspaceEvent call of Redis 7.0
// and its condition (src/t_*.c, bitops.c, sort.c, db.c). The ops that
// announce their own events (DEL, RENAME, EXPIRE, SET and the other string
// writes, the expired-key deletion) call notifyLocked as they apply.
var opEvents = map[Op]func(s *Store, c *Command, r *Reply, pre preState){
	OpIncrByFloat: onFirst(NotifyString, "incrbyfloat", nil),
	// SETBIT and BITFIELD announce setbit when they created or grew the
	// string or changed a bit (the reply is SETBIT's old bit).
	OpSetBit: func(s *Store, c *Command, r *Reply, pre preState) {
		if pre.strLen < int(c.Int>>3)+1 || r.Int != c.Int2 {
			s.notifyLocked(NotifyString, "setbit", c.Args[0])
		}
	},
	OpHSet:         onFirst(NotifyHash, "hset", nil),
	OpHSetNX:       onFirst(NotifyHash, "hset", positive),
	OpHDel:         onFirst(NotifyHash, "hdel", positive),
	OpHIncrBy:      onFirst(NotifyHash, "hincrby", nil),
	OpHIncrByFloat: onFirst(NotifyHash, "hincrbyfloat", nil),
	OpLPush:        onFirst(NotifyList, "lpush", nil),
	OpLPushX:       onFirst(NotifyList, "lpush", positive),
	OpRPush:        onFirst(NotifyList, "rpush", nil),
	OpRPushX:       onFirst(NotifyList, "rpush", positive),
	OpLPop:         onFirst(NotifyList, "lpop", notNil),
	OpRPop:         onFirst(NotifyList, "rpop", notNil),
	OpLSet:         onFirst(NotifyList, "lset", nil),
	OpLInsert:      onFirst(NotifyList, "linsert", positive),
	OpLRem:         onFirst(NotifyList, "lrem", positive),
	// LTRIM of a missing key answers OK and announces nothing.
	OpLTrim: func(s *Store, c *Command, r *Reply, pre preState) {
		if pre.live&1 != 0 {
			s.announceLocked(NotifyList, "ltrim", c.Args[0])
		}
	},
	OpSAdd: onFirst(NotifySet, "sadd", positive),
	OpSRem: onFirst(NotifySet, "srem", positive),
	OpSPop: onFirst(NotifySet, "spop", notNil),
	// ZADD announces when it added or updated a member; applyZAdd says
	// when it did neither (unchangedLocked), which its reply cannot.
	OpZAdd: func(s *Store, c *Command, r *Reply, pre preState) {
		// XX on a missing key returns before applyZAdd's loop: 0 or nil.
		if !notNil(r) || r.Kind == ReplyInt && r.Int == 0 && pre.live&1 == 0 {
			return
		}
		name := "zadd"
		if c.Flags&FlagZIncr != 0 {
			name = "zincr"
		}
		s.notifyLocked(NotifyZSet, name, c.Args[0])
	},
	OpZRem: onFirst(NotifyZSet, "zrem", positive),
	OpZPop: func(s *Store, c *Command, r *Reply, pre preState) {
		if notNil(r) {
			s.announceLocked(NotifyZSet, zpopName(c), c.Args[0])
		}
	},
	OpZRemRange: func(s *Store, c *Command, r *Reply, pre preState) {
		if !positive(r) {
			return
		}
		name := "zremrangebyrank"
		switch {
		case c.Flags&FlagZByScore != 0:
			name = "zremrangebyscore"
		case c.Flags&FlagZByLex != 0:
			name = "zremrangebylex"
		}
		s.announceLocked(NotifyZSet, name, c.Args[0])
	},

	// LMOVE (RPOPLPUSH, BLMOVE): the push onto the destination, then the
	// pop from the source (lmoveGenericCommand pushes first).
	OpLMove: func(s *Store, c *Command, r *Reply, pre preState) {
		if r.Kind != ReplyBulk {
			return
		}
		push, pop := "lpush", "lpop"
		if c.Flags&FlagListToRight != 0 {
			push = "rpush"
		}
		if c.Flags&FlagListRight != 0 {
			pop = "rpop"
		}
		s.notifyLocked(NotifyList, push, c.Args[1])
		s.announceLocked(NotifyList, pop, c.Args[0])
	},
	// LMPOP (BLMPOP, BLPOP, BRPOP): the key popped from is the reply's first
	// element.
	OpLMPop: func(s *Store, c *Command, r *Reply, pre preState) {
		if key, ok := poppedKey(r); ok {
			name := "lpop"
			if c.Flags&FlagListRight != 0 {
				name = "rpop"
			}
			s.announceLocked(NotifyList, name, key)
		}
	},
	OpZMPop: func(s *Store, c *Command, r *Reply, pre preState) {
		if key, ok := poppedKey(r); ok {
			s.announceLocked(NotifyZSet, zpopName(c), key)
		}
	},
	// SMOVE: srem (and del) on the source, then sadd on the destination
	// unless it held the member already; moving within one set announces
	// nothing.
	OpSMove: func(s *Store, c *Command, r *Reply, pre preState) {
		if !positive(r) || string(c.Args[0]) == string(c.Args[1]) {
			return
		}
		s.announceLocked(NotifySet, "srem", c.Args[0])
		if !pre.member {
			s.notifyLocked(NotifySet, "sadd", c.Args[1])
		}
	},
	OpSInterStore: onStore(NotifySet, "sinterstore"),
	OpSUnionStore: onStore(NotifySet, "sunionstore"),
	OpSDiffStore:  onStore(NotifySet, "sdiffstore"),
	OpZRangeStore: onStore(NotifyZSet, "zrangestore"),
	OpZSetOpStore: func(s *Store, c *Command, r *Reply, pre preState) {
		name := "zunionstore"
		switch c.Int2 {
		case ZSetInter:
			name = "zinterstore"
		case ZSetDiff:
			name = "zdiffstore"
		}
		onStore(NotifyZSet, name)(s, c, r, pre)
	},
	OpSortStore: func(s *Store, c *Command, r *Reply, pre preState) {
		storeEvents(s, NotifyList, "sortstore", c.Args[1], r, pre)
	},
	// GEOSEARCHSTORE and GEORADIUS's STORE: nothing when a step of the
	// search refused it (WRONGTYPE, a missing centre, a syntax error
	// Redis finds after its lookups).
	OpGeoSearchStore: func(s *Store, c *Command, r *Reply, pre preState) {
		if r.Kind == ReplyError {
			return
		}
		name := "geosearchstore"
		if c.Flags&FlagGeoRadius != 0 {
			name = "georadiusstore"
		}
		onStore(NotifyZSet, name)(s, c, r, pre)
	},
	OpBitOp: onStore(NotifyString, "set"),
	// RESTORE announces restore for the key it added (none when the TTL
	// had passed: then applyRestore announces del for a key REPLACE
	// deleted).
	OpRestore: func(s *Store, c *Command, r *Reply, pre preState) {
		if _, ok := s.getLocked(c.Args[0]); ok {
			s.notifyLocked(NotifyGeneric, "restore", c.Args[0])
		}
	},
	// PFADD announces when it changed a register or created the key;
	// PFMERGE announces pfadd too, whatever it merged.
	OpPFAdd:   onFirst(NotifyString, "pfadd", positive),
	OpPFMerge: onFirst(NotifyString, "pfadd", nil),
	OpCopy: func(s *Store, c *Command, r *Reply, pre preState) {
		if positive(r) {
			s.notifyLocked(NotifyGeneric, "copy_to", c.Args[1])
		}
	},
	// BITFIELD announces setbit when one of its writes counted a change
	// (bitops.c: a write that changed its field's value, or any write to
	// a string it created or grew), even if a later write put the bytes
	// back as they were.
	OpBitField: func(s *Store, c *Command, r *Reply, pre preState) {
		if bitFieldWrote(c, r) && s.dirty > pre.dirty {
			s.notifyLocked(NotifyString, "setbit", c.Args[0])
		}
	},
}

// bitFieldWrote reports whether a write subcommand of BITFIELD ran: its
// element of the reply is a number (nil: OVERFLOW FAIL refused it).
func bitFieldWrote(c *Command, r *Reply) bool {
	if r.Kind != ReplyArray {
		return false
	}
	for i, a := range c.Args[1:] {
		if op, _ := decodeBitFieldOp(a); op.Write && i < len(r.Array) && r.Array[i].Kind == ReplyInt {
			return true
		}
	}
	return false
}

// onFirst announces name on the first key when when accepts the reply (nil:
// any reply), and del when the op left the key empty.
func onFirst(class NotifyClass, name string, when func(r *Reply) bool) func(*Store, *Command, *Reply, preState) {
	return func(s *Store, c *Command, r *Reply, pre preState) {
		if when == nil || when(r) {
			s.announceLocked(class, name, c.Args[0])
		}
	}
}

// onStore is the events of a STORE whose destination is Args[0].
func onStore(class NotifyClass, name string) func(*Store, *Command, *Reply, preState) {
	return func(s *Store, c *Command, r *Reply, pre preState) {
		storeEvents(s, class, name, c.Args[0], r, pre)
	}
}

// storeEvents: a STORE announces name when it stored something, and del
// when it stored nothing over an existing destination, which it deleted.
// pre.live bit 0 is the destination (targets).
func storeEvents(s *Store, class NotifyClass, name string, dst []byte, r *Reply, pre preState) {
	switch {
	case positive(r):
		s.notifyLocked(class, name, dst)
	case pre.live&1 != 0:
		s.notifyLocked(NotifyGeneric, "del", dst)
	}
}

// announceLocked announces event on key, then del when key is gone: the op
// emptied the collection and Redis deleted it.
func (s *Store) announceLocked(class NotifyClass, event string, key []byte) {
	s.notifyLocked(class, event, key)
	if _, exists := s.getLocked(key); !exists {
		s.notifyLocked(NotifyGeneric, "del", key)
	}
}

func zpopName(c *Command) string {
	if c.Flags&FlagZMax != 0 {
		return "zpopmax"
	}
	return "zpopmin"
}

// poppedKey is the key an LMPOP or ZMPOP reply names first.
func poppedKey(r *Reply) ([]byte, bool) {
	if r.Kind != ReplyArray || len(r.Array) == 0 || r.Array[0].Kind != ReplyBulk {
		return nil, false
	}
	return r.Array[0].Bulk, true
}

func positive(r *Reply) bool { return r.Kind == ReplyInt && r.Int > 0 }

// notNil reports whether a pop's reply holds something.
func notNil(r *Reply) bool {
	switch r.Kind {
	case ReplyNil, ReplyNilArray:
		return false
	case ReplyArray, ReplySet, ReplyMap, ReplyPairs, ReplyKeyed:
		return len(r.Array) > 0
	}
	return true
}

// setHoldsLocked reports whether key is a live set holding m.
func (s *Store) setHoldsLocked(now int64, key, m []byte) bool {
	it, ok, _ := s.lookupSet(now, key)
	return ok && viewOf(&it).contains(memberHash(m), m)
}
