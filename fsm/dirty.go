package fsm

// Redis's dirty counter: the changes made to the data since the store was
// made, which INFO persistence reports as rdb_changes_since_last_save
// (less the count at the last save). Redis adds to it where each command
// changes something (server.dirty++ and += n in src/t_*.c, db.c,
// bitops.c, sort.c), and only then: a write that changes nothing (SETBIT
// of the bit already there, DEL of a missing key) counts nothing.
//
// kvs counts as applyLocked applies: by default the keys the op stored or
// deleted (keyspace.writes, the lazy expiry before the op left out);
// dirtyRules has the ops Redis counts otherwise, from the command and its
// reply; the few whose count neither tells (SETBIT, BITFIELD, LTRIM,
// ZADD, FLUSHALL) report their own with reportDirtyLocked. Scripts and
// transactions count through the commands they run. Expiry and eviction
// count nothing, as in Redis. The counter is per node, like Redis's, and
// no reply depends on it.

// dirtyRules are the ops whose count is not the keys they wrote.
var dirtyRules = map[Op]func(c *Command, r Reply, written int64) int64{
	// The elements added or removed.
	OpSAdd:      replyCount,
	OpSRem:      replyCount,
	OpHDel:      replyCount,
	OpZRem:      replyCount,
	OpLRem:      replyCount,
	OpZRemRange: replyCount,
	OpXDel:      replyCount,
	OpXTrim:     replyCount,
	// HSET counts every pair, new or not; LPUSH every element pushed.
	OpHSet:   ifWritten(func(c *Command) int64 { return int64(len(c.Args)-1) / 2 }),
	OpLPush:  ifWritten(func(c *Command) int64 { return int64(len(c.Args) - 1) }),
	OpRPush:  ifWritten(func(c *Command) int64 { return int64(len(c.Args) - 1) }),
	OpLPushX: ifWritten(func(c *Command) int64 { return int64(len(c.Args) - 1) }),
	OpRPushX: ifWritten(func(c *Command) int64 { return int64(len(c.Args) - 1) }),
	// A pop counts each element popped.
	OpLPop: poppedCount,
	OpRPop: poppedCount,
	OpSPop: poppedCount,
	OpZPop: func(c *Command, r Reply, _ int64) int64 {
		switch {
		case r.Kind == ReplyError:
			return 0
		case c.Flags&FlagZCount != 0:
			return int64(len(r.Array))
		case len(r.Array) == 2:
			return 1
		}
		return 0
	},
	OpLMPop: func(c *Command, r Reply, _ int64) int64 { return mpopCount(c.Flags&FlagListBPop != 0, &r) },
	OpZMPop: func(c *Command, r Reply, _ int64) int64 { return mpopCount(c.Flags&FlagZBPop != 0, &r) },
	// One change for the move, however many keys it wrote.
	OpRename:   atMostOne,
	OpRenameNX: atMostOne,
	OpLMove:    atMostOne,
	// RESTORE counts one: for the key it added, or for the one REPLACE
	// deleted when the TTL had passed.
	OpRestore: atMostOne,
	// SORT ... STORE counts the elements stored, or the destination it
	// deleted.
	OpSortStore: func(c *Command, r Reply, written int64) int64 {
		if r.Kind == ReplyInt && r.Int > 0 {
			return r.Int
		}
		return written
	},
	// So do GEOSEARCHSTORE and GEORADIUS's STORE.
	OpGeoSearchStore: func(c *Command, r Reply, written int64) int64 {
		if r.Kind == ReplyInt && r.Int > 0 {
			return r.Int
		}
		return written
	},
	// Libraries are data to Redis (they are saved); the script cache,
	// users, the cluster's metadata and what expiry and eviction delete
	// are not counted.
	OpFunctionLoad:    ifOK,
	OpFunctionDelete:  ifOK,
	OpFunctionFlush:   ifOK,
	OpFunctionRestore: ifOK,
	OpScriptLoad:      none,
	OpScriptFlush:     none,
	OpACLSet:          none,
	OpMetaSet:         none,
	OpDelExpired:      none,
	OpEvict:           none,
}

// dirtyRuleOf is dirtyRules by op number: every write looks its op up.
var dirtyRuleOf = func() (t [opLimit]func(c *Command, r Reply, written int64) int64) {
	for op, rule := range dirtyRules {
		t[op] = rule
	}
	return t
}()

// dirtyOf is the change c made, by its rule or the keys it wrote.
func dirtyOf(c *Command, r Reply, written int64) int64 {
	if c.Op < opLimit {
		if rule := dirtyRuleOf[c.Op]; rule != nil {
			return rule(c, r, written)
		}
	}
	return written
}

// reportDirtyLocked is how an op counts its own changes.
func (s *Store) reportDirtyLocked(n int64) {
	s.dirty += n
	s.dirtyReported = true
}

// Dirty returns the changes applied since the store was made, as Redis's
// dirty counter counts them (see the top of this file), as of the last
// apply: without the lock, which a busy script may hold (INFO asks).
func (s *Store) Dirty() int64 { return s.dirtyPub.Load() }

func replyCount(_ *Command, r Reply, _ int64) int64 {
	if r.Kind == ReplyInt && r.Int > 0 {
		return r.Int
	}
	return 0
}

func ifWritten(n func(c *Command) int64) func(*Command, Reply, int64) int64 {
	return func(c *Command, _ Reply, written int64) int64 {
		if written == 0 {
			return 0
		}
		return n(c)
	}
}

func atMostOne(_ *Command, _ Reply, written int64) int64 { return min(written, 1) }

func ifOK(_ *Command, r Reply, _ int64) int64 {
	if r.Kind == ReplyError {
		return 0
	}
	return 1
}

func none(*Command, Reply, int64) int64 { return 0 }

// poppedCount is the elements a pop's reply holds: one bulk, or a count's
// array.
func poppedCount(_ *Command, r Reply, _ int64) int64 { return replyElems(&r) }

// mpopCount is the elements an LMPOP or ZMPOP (or a blocking pop's
// non-blocking form) popped: [key, elements], or one with the blocking
// shape.
func mpopCount(blockingShape bool, r *Reply) int64 {
	switch {
	case r.Kind != ReplyArray || len(r.Array) < 2:
		return 0
	case blockingShape:
		return 1
	}
	return replyElems(&r.Array[1])
}

// replyElems is how many elements a reply holds.
func replyElems(r *Reply) int64 {
	switch r.Kind {
	case ReplyBulk:
		return 1
	case ReplyArray, ReplySet, ReplyPairs, ReplyKeyed:
		return int64(len(r.Array))
	case ReplyBulks:
		return r.Int
	}
	return 0
}
