package fsm

// DUMP and RESTORE of keys, in Redis 7.0's payload format (dump.go,
// dump_value.go, listpack.go), so a value moves between kvs and
// redis-server either way. DUMP is a read. RESTORE is one write carrying
// the payload: the server checks its footer and decodes it before
// proposing, so that no payload Redis refuses reaches the log, and apply
// decodes it again (deterministically: the bytes alone decide the value)
// and gives it the form Redis would, under the store's limits.

const (
	// OpRestore: Args[0]=key, Args[1]=the payload (checked by the server:
	// VerifyDumpPayload and CheckDumpPayload); Int=the key's deadline,
	// Unix ms (0: none); FlagReplace replaces an existing key;
	// FlagRestoreIdle or FlagRestoreFreq (not both) set the key's access
	// record to Int2 (IDLETIME seconds, FREQ 0..255) under the tracking
	// that keeps it. Reply +OK, BUSYKEY when the key exists without
	// FlagReplace. A deadline already past at apply adds no key (and
	// deletes the one REPLACE replaces), as Redis's RESTORE does.
	OpRestore Op = opBaseKeys + 10 + iota
	// OpDump: Args[0]=key. Reply the payload, or nil for no key.
	OpDump
	// OpRestoreRefused: Args[0]=key; Int=the refusal (RestoreBadTTL ...).
	// A read: RESTORE whose TTL or payload the server refused answers
	// BUSYKEY when the key exists, as Redis checks the key first, else
	// the refusal.
	OpRestoreRefused
)

// RESTORE's flags.
const (
	FlagRestoreIdle = FlagXX
	FlagRestoreFreq = FlagGT
)

// The refusals OpRestoreRefused answers with, in Int.
const (
	RestoreNotInteger = iota
	RestoreNegativeTTL
	RestoreBadChecksum
	RestoreBadData
)

// Redis's RESTORE errors.
const (
	ErrBusyKey         = "BUSYKEY Target key name already exists."
	ErrRestoreTTL      = "ERR Invalid TTL value, must be >= 0"
	ErrRestoreChecksum = "ERR DUMP payload version or checksum are wrong"
	ErrRestoreBadData  = errBadDump
	errRestoreInteger  = "ERR value is not an integer or out of range"
)

var restoreRefusals = [...]string{
	RestoreNotInteger:  errRestoreInteger,
	RestoreNegativeTTL: ErrRestoreTTL,
	RestoreBadChecksum: ErrRestoreChecksum,
	RestoreBadData:     ErrRestoreBadData,
}

func init() {
	registerOp(OpRestore, opSpec{name: "RESTORE", write: true, args: 2, level: 3,
		flags: FlagReplace | FlagRestoreIdle | FlagRestoreFreq, apply: applyRestore,
		check: func(c *Command) error {
			switch {
			case c.Int < 0:
				return errorString("negative deadline")
			case c.Flags&FlagRestoreIdle != 0 && c.Flags&FlagRestoreFreq != 0:
				return errorString("both IDLETIME and FREQ")
			case c.Flags&FlagRestoreFreq != 0 && (c.Int2 < 0 || c.Int2 > 255),
				c.Flags&FlagRestoreIdle != 0 && c.Int2 < 0:
				return errorString("access record out of range")
			}
			return nil
		}})
	registerOp(OpDump, opSpec{name: "DUMP", args: 1, read: readDump, level: 3})
	registerOp(OpRestoreRefused, opSpec{name: "RESTORE", args: 1, read: readRestoreRefused, level: 3,
		check: func(c *Command) error {
			if c.Int < 0 || c.Int >= int64(len(restoreRefusals)) {
				return errorString("unknown RESTORE refusal")
			}
			return nil
		}})
}

// CheckDumpPayload reports whether RESTORE can read p, whose footer
// VerifyDumpPayload accepted: the value it holds is one kvs keeps and
// passes Redis's deep validation.
func CheckDumpPayload(p []byte) bool {
	_, ok := decodeDumpPayload(p)
	return ok
}

func readDump(s *Store, now int64, c *Command) Reply {
	it, ok := s.liveLocked(c.Args[0], now)
	if !ok {
		return replyNil
	}
	return BulkReply(dumpPayload(&it, &s.limits))
}

func readRestoreRefused(s *Store, now int64, c *Command) Reply {
	if _, ok := s.liveLocked(c.Args[0], now); ok {
		return ErrorReply(ErrBusyKey)
	}
	return ErrorReply(restoreRefusals[c.Int])
}

func applyRestore(s *Store, now int64, c *Command) Reply {
	key := c.Args[0]
	replace := c.Flags&FlagReplace != 0
	// Without REPLACE Redis looks the key up for writing, which expired
	// it (expireMetLocked); with REPLACE it deletes whatever is there,
	// expired or not, and says so only if the key is not added again.
	it, present := s.getLocked(key)
	if present && !it.expired(now) && !replace {
		return ErrorReply(ErrBusyKey)
	}
	v, ok := decodeDumpPayload(c.Args[1])
	if !ok {
		// The server checked the payload; a log written by one that did
		// not is refused the same way on every replica.
		return ErrorReply(ErrRestoreBadData)
	}
	if present {
		s.deleteLocked(key)
	}
	if c.Int != 0 && c.Int <= now {
		if present {
			s.notifyLocked(NotifyGeneric, "del", key)
		}
		return replyOK
	}
	s.restoreValueLocked(key, &v, c.Int)
	s.setAccessLocked(key, c)
	if v.kind == kindList || v.kind == kindZSet || v.kind == kindStream {
		s.signalReadyLocked(key)
	}
	return replyOK
}

// restoreValueLocked stores v at key with deadline exp, in the form
// Redis's rdbLoadObject gives it under the store's limits.
func (s *Store) restoreValueLocked(key []byte, v *dumpValue, exp int64) {
	lim := &s.limits
	switch v.kind {
	case kindString:
		s.putLocked(newItem(key, v.str, exp))
	case kindStream:
		s.putLocked(s.newCollection(key, kindStream, nil, v.st, exp))
	case kindList:
		s.putListLocked(key, v.elems, exp)
	case kindSet:
		b := newSetBuilder(lim)
		for _, m := range v.set {
			b.add(m.hash, m.b)
		}
		val, obj := b.finish()
		var o object
		if obj != nil {
			o = obj
		}
		s.putLocked(s.newCollection(key, kindSet, val, o, exp))
	case kindZSet:
		longest := 0
		for _, e := range v.ents {
			longest = max(longest, len(e.member))
		}
		if int64(len(v.ents)) <= lim.ZSetMaxListpackEntries && (v.flat || int64(longest) <= lim.ZSetMaxListpackValue) {
			s.putLocked(s.newCollection(key, kindZSet, encodePacked(v.ents), nil, exp))
		} else {
			s.putLocked(s.newCollection(key, kindZSet, nil, buildZSetObj(v.ents), exp))
		}
	case kindHash:
		packed := int64(len(v.pairs)) <= lim.HashMaxListpackEntries
		for i := 0; packed && !v.flat && i < len(v.pairs); i++ {
			packed = int64(len(v.pairs[i].f)) <= lim.HashMaxListpackValue && int64(len(v.pairs[i].v)) <= lim.HashMaxListpackValue
		}
		if packed {
			s.putLocked(s.newCollection(key, kindHash, packedEncode(v.pairs), nil, exp))
			return
		}
		h := newHashObj()
		for _, p := range v.pairs {
			h.set(p.hash, p.f, p.v)
		}
		s.putLocked(s.newCollection(key, kindHash, nil, h, exp))
	}
}

// setAccessLocked is objectSetLRUOrLFU: FREQ sets an LFU record, IDLETIME
// a recency record, each only under the tracking that keeps it.
func (s *Store) setAccessLocked(key []byte, c *Command) {
	a := s.keys.acc
	if a == nil {
		return
	}
	h := keyHash(unsafeString(key))
	switch {
	case a.lfu && c.Flags&FlagRestoreFreq != 0:
		a.slot(h).Store((uint32(a.now.Load()/60000)&0xffff)<<8 | uint32(c.Int2))
	case !a.lfu && c.Flags&FlagRestoreIdle != 0:
		idle := uint32(min(c.Int2, 1<<31) * 1000 / a.unit)
		a.slot(h).Store(uint32(a.now.Load()/a.unit) - idle)
	}
}
