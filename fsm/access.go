package fsm

import (
	"math/rand/v2"
	"sync/atomic"
)

// Key access records, for OBJECT IDLETIME and FREQ and the LRU and LFU
// eviction policies. Redis keeps 24 bits in every object; kvs keeps its
// items immutable under readers (a read holds the store's lock shared and
// copies items), so the records live beside the tree instead: a table of
// accessSlots atomic words indexed by a mix of the key's hash, written by
// every lookup that is an access of the key (keyspace.find, findForWrite
// and set; not peek, Redis's LOOKUP_NOTOUCH) while tracking is on, and
// nil, costing one nil check per lookup, while it is off: a server always
// tracks (recency, or frequency under an LFU policy), a bare Store does
// not. Keys that share a slot share a record,
// which makes a cold key look as used as a hot one it collides with: with
// 2^20 slots that is rare until the keyspace has about that many keys, and
// then it errs on the side of keeping keys. The records are per node and
// never replicated: only the node that decides evictions reads them.
//
// LRU: a slot holds the last access's time, from the clock readings Read
// and Apply are given (mod 2^32, as idle times are taken): in
// milliseconds under an LRU policy, whose evictions order keys by it; in
// seconds otherwise, Redis's LRU clock's resolution, enough for OBJECT
// IDLETIME, so that a key read constantly rewrites its slot once a second
// rather than at every read, which keeps the table's cache lines clean on
// a busy node. LFU: Redis's encoding, the minutes of the
// last decrement in the high 16 bits and a logarithmic counter in the low
// 8: 5 for a new key (LFU_INIT_VAL), incremented with probability
// 1/((counter-5)*10+1) (lfu-log-factor 10) and decremented once per minute
// idle (lfu-decay-time 1).

const accessSlots = 1 << 20

// AccessTracking is the key access records a store keeps
// (SetAccessTracking).
type AccessTracking uint8

const (
	TrackNone AccessTracking = iota
	TrackIdle                // recency in seconds: OBJECT IDLETIME
	TrackLRU                 // recency in milliseconds: LRU eviction
	TrackLFU                 // frequency: LFU eviction
)

// accessTable is the records of one tracking mode.
type accessTable struct {
	lfu   bool
	unit  int64        // a recency record's unit, in ms; set under the store's write lock
	now   atomic.Int64 // the latest clock reading, Unix ms
	slots []atomic.Uint32
}

func newAccessTable(t AccessTracking) *accessTable {
	return &accessTable{lfu: t == TrackLFU, unit: recencyUnit(t), slots: make([]atomic.Uint32, accessSlots)}
}

// recencyUnit is a recency record's unit under t, in milliseconds.
func recencyUnit(t AccessTracking) int64 {
	if t == TrackIdle {
		return 1000
	}
	return 1
}

// slot is h's record; h's low bits are the key's, mixed so that keys of
// one slot of the keyspace spread.
func (a *accessTable) slot(h uint64) *atomic.Uint32 {
	return &a.slots[(h*0x9e3779b97f4a7c15)>>(64-20)]
}

// tick advances the clock to now (it never goes back).
func (a *accessTable) tick(now int64) {
	if now > a.now.Load() {
		a.now.Store(now)
	}
}

// touch records an access of the key whose hash is h.
func (a *accessTable) touch(h uint64) {
	p := a.slot(h)
	if !a.lfu {
		if t := uint32(a.now.Load() / a.unit); p.Load() != t {
			p.Store(t)
		}
		return
	}
	old := p.Load()
	mins := uint32(a.now.Load()/60000) & 0xffff
	c := lfuDecayed(old, mins)
	if c < 255 {
		base := float64(max(int(c)-lfuInit, 0))
		if rand.Float64() < 1/(base*lfuLogFactor+1) {
			c++
		}
	}
	if v := mins<<8 | uint32(c); v != old {
		p.Store(v)
	}
}

// created records a key that a write has just added.
func (a *accessTable) created(h uint64) {
	if !a.lfu {
		a.slot(h).Store(uint32(a.now.Load() / a.unit))
		return
	}
	a.slot(h).Store((uint32(a.now.Load()/60000)&0xffff)<<8 | lfuInit)
}

const (
	lfuInit      = 5
	lfuLogFactor = 10
)

// lfuDecayed is a record's counter after its idle minutes' decay.
func lfuDecayed(v, mins uint32) uint8 {
	c := v & 0xff
	idle := (mins - v>>8) & 0xffff
	if v == 0 {
		return 0
	}
	if idle >= c {
		return 0
	}
	return uint8(c - idle)
}

// evictScore is how much the key whose hash is h deserves eviction: its
// idle milliseconds (LRU), or 255 less its decayed counter (LFU).
func (a *accessTable) evictScore(h uint64) int64 {
	v := a.slot(h).Load()
	if !a.lfu {
		return int64(uint32(a.now.Load()/a.unit)-v) * a.unit
	}
	return 255 - int64(lfuDecayed(v, uint32(a.now.Load()/60000)&0xffff))
}

// SetAccessTracking sets which records the store keeps. New recency
// records, or records in another unit, start every key's idle time over
// at now (Unix ms), as Redis's keys are fresh once loaded; new frequency
// records start every key at a count of 0.
func (s *Store) SetAccessTracking(t AccessTracking, now int64) {
	s.mu.Lock() // no lookup records an access meanwhile
	defer s.mu.Unlock()
	cur := s.keys.acc
	switch {
	case t == TrackNone:
		s.keys.acc = nil
		return
	case cur == nil || cur.lfu != (t == TrackLFU):
		cur = newAccessTable(t)
		s.keys.acc = cur
		if cur.lfu {
			return
		}
	case cur.unit == recencyUnit(t):
		return
	}
	cur.unit = recencyUnit(t)
	cur.tick(now)
	fresh := uint32(cur.now.Load() / cur.unit)
	for i := range cur.slots {
		cur.slots[i].Store(fresh)
	}
}

// tickLocked gives the records the clock reading of a read or an apply.
func (s *Store) tickLocked(now int64) {
	if a := s.keys.acc; a != nil {
		a.tick(now)
	}
}
