package fsm

// Keyspace notifications. A write that Redis announces with
// notifyKeyspaceEvent calls s.notifyLocked(class, event, key) with Redis's
// class and event name (src/t_*.c), or has its events derived after it ran
// from the table in notify_ops.go; "new", "keymiss" and the "expired" of a
// key a write finds expired are derived for every op here. A read's
// keymiss events go to the hook as the read answers, on its own node.
// Once the entry is applied and the lock
// released, the hook set by SetNotifyHook receives the events of the
// entry, in order. The classes a hook wants are set with SetNotifyClasses;
// while they are 0 (the default: notify-keyspace-events is empty, or no
// client is subscribed) notifyLocked returns at once, so the write path
// pays one load. Events come from apply, so every replica emits them for
// its own subscribers. A replayed entry emits none: durable mode replays
// its log before a hook is set, and a cluster node tells the store up to
// which index its log held entries it applied before it restarted
// (SetReplayedThrough), since it replays them while clients may already
// be subscribed. The messages scripts publish travel the same way
// (publish.go).

import (
	"slices"
	"sync/atomic"
)

// NotifyClass is a notify-keyspace-events class; the bits are Redis's.
type NotifyClass uint32

const (
	NotifyKeyspace NotifyClass = 1 << 0  // K
	NotifyKeyevent NotifyClass = 1 << 1  // E
	NotifyGeneric  NotifyClass = 1 << 2  // g
	NotifyString   NotifyClass = 1 << 3  // $
	NotifyList     NotifyClass = 1 << 4  // l
	NotifySet      NotifyClass = 1 << 5  // s
	NotifyHash     NotifyClass = 1 << 6  // h
	NotifyZSet     NotifyClass = 1 << 7  // z
	NotifyExpired  NotifyClass = 1 << 8  // x
	NotifyEvicted  NotifyClass = 1 << 9  // e
	NotifyStream   NotifyClass = 1 << 10 // t
	NotifyKeyMiss  NotifyClass = 1 << 11 // m
	NotifyModule   NotifyClass = 1 << 12 // d
	NotifyNew      NotifyClass = 1 << 13 // n
	// NotifyAll is A: every class but key-miss and new-key events.
	NotifyAll = NotifyGeneric | NotifyString | NotifyList | NotifySet | NotifyHash |
		NotifyZSet | NotifyExpired | NotifyEvicted | NotifyStream | NotifyModule
)

// Event is one keyspace notification: the event's name (Redis's) and key;
// or, of class EventMessage or EventShardMessage, a message a script
// published (publish.go).
type Event struct {
	Class NotifyClass
	Name  string
	Key   string
	DB    int // the database of the key (__keyspace@<db>__)
}

// notifier is the Store's notification state.
type notifier struct {
	classes atomic.Uint32 // the classes wanted; 0: none
	hook    func([]Event) // guarded by Store.mu
	events  []Event       // the current Apply's, guarded by Store.mu
	// unchanged is set by an op that ran without changing its key where
	// its reply cannot say so (ZADD updating nothing); guarded by Store.mu.
	unchanged bool
	// replayed is the last index of the entries that are replays, whose
	// events are dropped (SetReplayedThrough); guarded by Store.mu.
	replayed uint64
}

// SetNotifyHook sets the function that receives each applied batch's
// events; nil removes it. It runs after the batch, outside the store's
// lock, and must not block.
func (s *Store) SetNotifyHook(fn func([]Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify.hook = fn
}

// SetReplayedThrough says that the entries up to index were applied
// before, by this node before it restarted: applying them again announces
// nothing, so that no subscriber hears of a write, or gets a message a
// script published, twice, or long after the fact. Call it before the
// first of them is applied.
func (s *Store) SetReplayedThrough(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify.replayed = index
}

// SetNotifyClasses sets the classes events are collected for: the
// configured notify-keyspace-events classes while anyone listens, 0
// otherwise. A class is wanted only together with K or E.
func (s *Store) SetNotifyClasses(c NotifyClass) {
	if c&(NotifyKeyspace|NotifyKeyevent) == 0 {
		c = 0
	}
	s.notify.classes.Store(uint32(c))
}

// notifyLocked records event of class for key, if that class is wanted.
func (s *Store) notifyLocked(class NotifyClass, event string, key []byte) {
	if NotifyClass(s.notify.classes.Load())&class == 0 || s.notify.hook == nil {
		return
	}
	s.notify.events = append(s.notify.events, Event{Class: class, Name: event, Key: string(key), DB: int(s.cur)})
}

// takeEventsLocked returns the events recorded since the last call and the
// hook to give them to.
func (s *Store) takeEventsLocked() ([]Event, func([]Event)) {
	if len(s.notify.events) == 0 {
		return nil, nil
	}
	ev := s.notify.events
	s.notify.events = nil
	return ev, s.notify.hook
}

// wantLocked reports whether events of class are collected.
func (s *Store) wantLocked(class NotifyClass) bool {
	return NotifyClass(s.notify.classes.Load())&class != 0 && s.notify.hook != nil
}

// notifyChangedLocked tells the notification of the op being applied
// whether it changed its key, where its reply cannot say (ZADD updating
// nothing): Redis announces only a change.
func (s *Store) notifyChangedLocked(changed bool) { s.notify.unchanged = !changed }

// The order of one op's events follows Redis's: first the lookups' events
// (each key found expired by a write, then each key a read lookup missed),
// then the op's own events, with "new" just before the first event of the
// key it created (dbAdd announces it as the key is added, before the
// command announces what it did).

// preState is what an op's events depend on from before it ran.
type preState struct {
	n1     int    // len(events) once the lookups' events are in
	live   uint64 // bit i: the op's i-th target (targets) was live
	member bool   // SMOVE: the destination held the member already
	// SETBIT, BITFIELD: the string's length (-1: no string) and, for
	// BITFIELD, the store's dirty counter, which it raises by the
	// changes it counts as Redis does.
	strLen int
	dirty  int64
}

// keyRange names some of a command's Args: Args[first], Args[first+step],
// ... before Args[end] (step 0: Args[first] alone). first < 0: none.
type keyRange struct{ first, step, end int }

func (k keyRange) each(c *Command, fn func(i int, key []byte)) {
	if k.first < 0 || k.first >= len(c.Args) {
		return
	}
	if k.step == 0 {
		fn(0, c.Args[k.first])
		return
	}
	end := min(k.end, len(c.Args))
	for i, n := k.first, 0; i < end; i, n = i+k.step, n+1 {
		fn(n, c.Args[i])
	}
}

// repeated reports whether the n-th key of k is also an earlier one
// (MSET k 1 k 2 adds k once).
func (k keyRange) repeated(c *Command, n int) bool {
	if k.step == 0 {
		return false
	}
	key := c.Args[k.first+n*k.step]
	for i := k.first; i < k.first+n*k.step; i += k.step {
		if string(c.Args[i]) == string(key) {
			return true
		}
	}
	return false
}

var noKeys = keyRange{first: -1}

func argsFrom(first, step int) func(c *Command) keyRange {
	return func(c *Command) keyRange { return keyRange{first, step, len(c.Args)} }
}

// targets are the keys a write may create, for "new" (the destination of
// a move or a copy, the keys MSET sets, else the first key).
func targets(c *Command) keyRange {
	switch c.Op {
	case OpMSet, OpMSetNX:
		return keyRange{0, 2, len(c.Args)}
	case OpLMove, OpSMove, OpCopy, OpRename, OpRenameNX, OpSortStore:
		return keyRange{1, 0, 0}
	case OpDel, OpDelExpired, OpEvict, OpMetaSet, OpFlushAll, OpMoveDB, OpSwapDB, OpCopyDB:
		return noKeys // (the ops across databases announce their own)
	case OpGeoSearchStore:
		return keyRange{0, 0, 0}
	}
	if c.Op >= opBaseScript && c.Op < opBaseHLL || len(c.Args) == 0 {
		// Transactions and scripts announce through the commands they
		// run; the admin ops have no keys.
		return noKeys
	}
	return keyRange{0, 0, 0}
}

// readLookups are the keys Redis looks up for reading (lookupKeyRead,
// which announces a keymiss), of a write or of a read; ok is false for
// the ops whose first key is not one (most writes look theirs up for
// writing, which announces nothing).
func readLookups(c *Command) (k keyRange, ok bool) {
	if f, found := missKeys[c.Op]; found {
		return f(c), true
	}
	if c.Op.IsWrite() || c.Op >= opBaseScript || len(c.Args) == 0 {
		return noKeys, false
	}
	return keyRange{0, 0, 0}, true
}

// zsetOpKeys are the sources of ZUNION, ZINTER, ZDIFF and their STOREs
// (after the destination, from first): one weight per key follows them
// with FlagZWeights.
func zsetOpKeys(first int) func(c *Command) keyRange {
	return func(c *Command) keyRange {
		n := len(c.Args) - first
		if c.Flags&FlagZWeights != 0 {
			n /= 2
		}
		return keyRange{first, 1, first + n}
	}
}

var missKeys = map[Op]func(c *Command) keyRange{
	OpSet: func(c *Command) keyRange {
		if c.Flags&FlagGet != 0 {
			return keyRange{0, 0, 0}
		}
		return noKeys
	},
	OpGetSet:      argsFrom(0, 0),
	OpGetDel:      argsFrom(0, 0),
	OpGetEx:       argsFrom(0, 0),
	OpCopy:        argsFrom(0, 0),
	OpCopyDB:      argsFrom(0, 0),
	OpSortStore:   argsFrom(0, 0),
	OpZRangeStore: argsFrom(1, 0),
	OpSInterStore: argsFrom(1, 1),
	OpSUnionStore: argsFrom(1, 1),
	OpSDiffStore:  argsFrom(1, 1),
	OpBitOp:       argsFrom(1, 1),
	OpZSetOpStore: zsetOpKeys(1),
	// The geo ops are numbered past the scripts' range, which readLookups
	// passes over: their source keys are named here.
	OpGeoSearchStore: argsFrom(1, 0),
	OpGeoPos:         argsFrom(0, 0),
	OpGeoDist:        argsFrom(0, 0),
	OpGeoHash:        argsFrom(0, 0),
	OpGeoSearch:      argsFrom(0, 0),

	OpMGet:       argsFrom(0, 1),
	OpExists:     argsFrom(0, 1),
	OpSInter:     argsFrom(0, 1),
	OpSUnion:     argsFrom(0, 1),
	OpSDiff:      argsFrom(0, 1),
	OpSInterCard: argsFrom(0, 1),
	OpLCS:        func(c *Command) keyRange { return keyRange{0, 1, 2} },
	OpZSetOp:     zsetOpKeys(0),
	// PFCOUNT and PFMERGE look up every key for reading, PFMERGE's
	// destination first.
	OpPFCount:      argsFrom(0, 0),
	OpPFCountUnion: argsFrom(0, 1),
	OpPFMerge:      argsFrom(0, 1),
	OpKeys:         func(*Command) keyRange { return noKeys },
	// RESTORE refused looks its key up for writing, which misses quietly.
	OpRestoreRefused:  func(*Command) keyRange { return noKeys },
	OpScan:            func(*Command) keyRange { return noKeys },
	OpRandomKey:       func(*Command) keyRange { return noKeys },
	OpDBSize:          func(*Command) keyRange { return noKeys },
	OpMemoryUsage:     func(*Command) keyRange { return noKeys },
	OpObject:          func(*Command) keyRange { return noKeys },
	OpCountKeysInSlot: func(*Command) keyRange { return noKeys },
	OpGetKeysInSlot:   func(*Command) keyRange { return noKeys },
	// The sorted-set commands' keys looked up before a syntax error
	// (server/cmd_zset.go), as Redis looks them up before it parses.
	OpZCheck: argsFrom(1, 1),
	// The stream commands that look their key up for reading; XREAD's
	// and XREADGROUP's keys follow STREAMS.
	OpXLen:         argsFrom(0, 0),
	OpXRange:       argsFrom(0, 0),
	OpXRevRange:    argsFrom(0, 0),
	OpXPending:     argsFrom(0, 0),
	OpXInfo:        argsFrom(0, 0),
	OpXAck:         argsFrom(0, 0),
	OpXClaim:       argsFrom(0, 0),
	OpXAutoClaim:   argsFrom(0, 0),
	OpXRead:        xreadMissKeys,
	OpXReadBlocked: xreadMissKeys,
	OpXReadGroup:   xreadMissKeys,
}

func xreadMissKeys(c *Command) keyRange {
	a, e := parseXRead(c.Args, c.Op == OpXReadGroup)
	if e != "" {
		return noKeys
	}
	return keyRange{a.streams, 1, a.streams + a.nstreams}
}

// missStops reports whether the lookups of c stop at it, a key of the
// wrong type: Redis answers WRONGTYPE there and looks no further.
func missStops(c *Command, it *item) bool {
	switch c.Op {
	case OpSInterStore, OpSUnionStore, OpSDiffStore, OpSInter, OpSUnion, OpSDiff, OpSInterCard:
		return it.kind != kindSet
	case OpBitOp:
		return it.kind != kindString
	case OpZSetOp, OpZSetOpStore:
		return it.kind != kindZSet && it.kind != kindSet
	case OpZCheck:
		return it.kind != kindZSet && (it.kind != kindSet || c.Int != ZCheckSetOp)
	case OpPFCountUnion, OpPFMerge:
		return !hllMergeable(it)
	}
	return false
}

// missesLocked calls fn with each key c looks up for reading and finds
// missing, in order.
func (s *Store) missesLocked(now int64, c *Command, fn func(key []byte)) {
	if c.Op == OpXRead || c.Op == OpXReadBlocked || c.Op == OpXReadGroup {
		s.xreadMissesLocked(now, c, fn)
		return
	}
	k, ok := readLookups(c)
	if !ok {
		return
	}
	done := false
	k.each(c, func(_ int, key []byte) {
		if done {
			return
		}
		if it, live := s.liveLocked(key, now); !live {
			fn(key)
		} else if missStops(c, &it) {
			done = true
		}
	})
	if !done && (c.Op == OpSort || c.Op == OpSortStore) {
		s.sortMissesLocked(now, c, fn)
	}
}

// notifyBeforeLocked records what c's events depend on and announces the
// lookups' events: c's keys found expired were deleted by expireMetLocked
// just before, and a read lookup of a missing key is a keymiss.
func (s *Store) notifyBeforeLocked(now int64, c *Command) preState {
	var pre preState
	s.notify.unchanged = false
	targets(c).each(c, func(i int, key []byte) {
		if _, live := s.liveLocked(key, now); live && i < 64 {
			pre.live |= 1 << i
		}
	})
	switch c.Op {
	case OpSMove:
		pre.member = s.setHoldsLocked(now, c.Args[1], c.Args[2])
	case OpSetBit, OpBitField:
		pre.strLen = -1
		if it, ok := s.liveLocked(c.Args[0], now); ok && it.kind == kindString {
			pre.strLen = len(it.val)
		}
		pre.dirty = s.dirty
	}
	if s.wantLocked(NotifyKeyMiss) {
		s.missesLocked(now, c, func(key []byte) { s.notifyLocked(NotifyKeyMiss, "keymiss", key) })
	}
	pre.n1 = len(s.notify.events)
	return pre
}

// notifyAfterLocked announces c's own events (from the table, for the ops
// that do not announce their own) and the keys it created.
func (s *Store) notifyAfterLocked(now int64, c *Command, r Reply, pre preState) {
	if r.Kind == ReplyError {
		return
	}
	if f := opEvents[c.Op]; f != nil && !s.notify.unchanged {
		f(s, c, &r, pre)
	}
	if !s.wantLocked(NotifyNew) {
		return
	}
	tk := targets(c)
	tk.each(c, func(i int, key []byte) {
		if i < 64 && pre.live&(1<<i) != 0 && !alwaysNew(c, &r) || tk.repeated(c, i) {
			return
		}
		// Present, not live: a SET with a deadline already past adds
		// its key, expired, as Redis's dbAdd does.
		if ks := unsafeString(key); s.keys.peek(keyHash(ks), ks) == nil {
			return
		}
		s.insertNewLocked(pre.n1, c, key)
	})
}

// alwaysNew reports whether c, which returned r, added its target afresh
// even over an existing key: RENAME, COPY and RESTORE delete the
// destination and add it again (dbDelete, dbAdd).
func alwaysNew(c *Command, r *Reply) bool {
	switch c.Op {
	case OpRename, OpRenameNX, OpCopy:
		return string(c.Args[0]) != string(c.Args[1]) && (r.Kind == ReplyStatus || r.Kind == ReplyInt && r.Int == 1)
	case OpRestore:
		// dbDelete then dbAdd, as COPY's REPLACE.
		return r.Kind == ReplyStatus
	}
	return false
}

// insertNewLocked inserts the "new" event of key before the first of the
// op's events (from n1) that names it; RENAME's before all of them.
func (s *Store) insertNewLocked(n1 int, c *Command, key []byte) {
	ev := Event{Class: NotifyNew, Name: "new", Key: string(key), DB: int(s.cur)}
	at := len(s.notify.events)
	if c.Op == OpRename || c.Op == OpRenameNX {
		at = n1
	} else {
		for i := n1; i < len(s.notify.events); i++ {
			if s.notify.events[i].Key == ev.Key {
				at = i
				break
			}
		}
	}
	s.notify.events = slices.Insert(s.notify.events, at, ev)
}

// expireMetLocked is Redis's lazy expiry (expireIfNeeded) for writes:
// each key of c that is expired at the entry's now is deleted, and
// announced "expired", before c runs. It runs in apply, on every replica
// alike, whether or not anyone listens, so the store stays the same on
// all of them. Reads only hide expired keys and report them (a read never
// writes, and a follower may not delete; expire.go): the node that may
// write proposes their deletion, which announces them.
func (s *Store) expireMetLocked(now int64, c *Command) {
	if s.keys.nextDue() > now || c.Op == OpDelExpired || c.Op == OpRestore && c.Flags&FlagReplace != 0 {
		// RESTORE REPLACE deletes its key without looking it up
		// (applyRestore).
		return
	}
	keys, _ := c.Keys()
	for _, k := range keys {
		if it, ok := s.getLocked(k); ok && it.expired(now) {
			s.deleteLocked(k)
			s.notifyLocked(NotifyExpired, "expired", k)
		}
	}
}
