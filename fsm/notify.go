package fsm

// Keyspace notifications. A write that Redis announces with
// notifyKeyspaceEvent calls s.notifyLocked(class, event, key) with Redis's
// class and event name (src/t_*.c); once the entry is applied and the lock
// released, the hook set by SetNotifyHook receives the events of the
// entry, in order. The classes a hook wants are set with SetNotifyClasses;
// while they are 0 (the default: notify-keyspace-events is empty, or no
// client is subscribed) notifyLocked returns at once, so the write path
// pays one load. Events come from apply, so every replica emits them for
// its own subscribers, and a replayed entry emits them again (no one is
// subscribed while a node replays its log at startup).

import "sync/atomic"

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

// Event is one keyspace notification: the event's name (Redis's) and key.
type Event struct {
	Class NotifyClass
	Name  string
	Key   string
}

// notifier is the Store's notification state.
type notifier struct {
	classes atomic.Uint32 // the classes wanted; 0: none
	hook    func([]Event) // guarded by Store.mu
	events  []Event       // the current Apply's, guarded by Store.mu
}

// SetNotifyHook sets the function that receives each applied batch's
// events; nil removes it. It runs after the batch, outside the store's
// lock, and must not block.
func (s *Store) SetNotifyHook(fn func([]Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify.hook = fn
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
	s.notify.events = append(s.notify.events, Event{Class: class, Name: event, Key: string(key)})
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

// The events of the ops whose effect is on their first key (the hash,
// list, set and sorted-set writes, INCRBYFLOAT, SETBIT), applied after
// the op by applyLocked from this table, so the type files need no change:
// the event when the reply says the op changed something, then "del" when
// it left the key empty and Redis deleted it. The ops that name several
// keys or whose event depends on more than the reply (DEL, RENAME, EXPIRE,
// SET, the expired-key deletion, ...) call notifyLocked themselves.
type opEvent struct {
	class NotifyClass
	name  func(c *Command) string
	when  func(r *Reply) bool // nil: any reply but an error
}

func named(s string) func(*Command) string { return func(*Command) string { return s } }

func positive(r *Reply) bool { return r.Kind == ReplyInt && r.Int > 0 }

func notNil(r *Reply) bool {
	switch r.Kind {
	case ReplyNil:
		return false
	case ReplyArray:
		return len(r.Array) > 0
	}
	return true
}

var opEvents = map[Op]opEvent{
	OpIncrByFloat:  {NotifyString, named("incrbyfloat"), nil},
	OpSetBit:       {NotifyString, named("setbit"), nil},
	OpHSet:         {NotifyHash, named("hset"), nil},
	OpHSetNX:       {NotifyHash, named("hset"), positive},
	OpHDel:         {NotifyHash, named("hdel"), positive},
	OpHIncrBy:      {NotifyHash, named("hincrby"), nil},
	OpHIncrByFloat: {NotifyHash, named("hincrbyfloat"), nil},
	OpLPush:        {NotifyList, named("lpush"), nil},
	OpLPushX:       {NotifyList, named("lpush"), positive},
	OpRPush:        {NotifyList, named("rpush"), nil},
	OpRPushX:       {NotifyList, named("rpush"), positive},
	OpLPop:         {NotifyList, named("lpop"), notNil},
	OpRPop:         {NotifyList, named("rpop"), notNil},
	OpLSet:         {NotifyList, named("lset"), nil},
	OpLInsert:      {NotifyList, named("linsert"), positive},
	OpLRem:         {NotifyList, named("lrem"), positive},
	OpLTrim:        {NotifyList, named("ltrim"), nil},
	OpSAdd:         {NotifySet, named("sadd"), positive},
	OpSRem:         {NotifySet, named("srem"), positive},
	OpSPop:         {NotifySet, named("spop"), notNil},
	OpZAdd: {NotifyZSet, func(c *Command) string {
		if c.Flags&FlagZIncr != 0 {
			return "zincr"
		}
		return "zadd"
	}, notNil},
	OpZRem: {NotifyZSet, named("zrem"), positive},
	OpZPop: {NotifyZSet, func(c *Command) string {
		if c.Flags&FlagZMax != 0 {
			return "zpopmax"
		}
		return "zpopmin"
	}, notNil},
	OpZRemRange: {NotifyZSet, func(c *Command) string {
		switch {
		case c.Flags&FlagZByScore != 0:
			return "zremrangebyscore"
		case c.Flags&FlagZByLex != 0:
			return "zremrangebylex"
		}
		return "zremrangebyrank"
	}, positive},
}

// notifyOpLocked emits the table's events for c, which returned r.
//
// r comes by value: a pointer to apply's reply would make every reply
// escape to the heap, notifications on or off.
func (s *Store) notifyOpLocked(c *Command, r Reply) {
	ev, ok := opEvents[c.Op]
	if !ok || r.Kind == ReplyError || ev.when != nil && !ev.when(&r) {
		return
	}
	key := c.Args[0]
	s.notifyLocked(ev.class, ev.name(c), key)
	if _, exists := s.getLocked(key); !exists {
		s.notifyLocked(NotifyGeneric, "del", key)
	}
}
