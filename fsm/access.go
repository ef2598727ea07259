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
// 1/((counter-5)*lfu-log-factor+1) and decremented by one for every
// lfu-decay-time minutes idle (none when it is 0), as Redis's updateLFU
// and LFUDecrAndReturn do (defaults 10 and 1; SetLFUParams).

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
	lfuP  *lfuParams   // the store's
	unit  int64        // a recency record's unit, in ms; set under the store's write lock
	now   atomic.Int64 // the latest clock reading, Unix ms
	slots []atomic.Uint32
}

func newAccessTable(t AccessTracking, p *lfuParams) *accessTable {
	return &accessTable{lfu: t == TrackLFU, lfuP: p, unit: recencyUnit(t), slots: make([]atomic.Uint32, accessSlots)}
}

// lfuParams are lfu-log-factor and lfu-decay-time.
type lfuParams struct {
	logFactor atomic.Int64
	decayTime atomic.Int64 // minutes; 0: counters never decay
}

func newLFUParams() *lfuParams {
	p := &lfuParams{}
	p.logFactor.Store(10)
	p.decayTime.Store(1)
	return p
}

// SetLFUParams sets lfu-log-factor and lfu-decay-time (minutes), which
// the LFU policies' access records follow from the next access on.
func (s *Store) SetLFUParams(logFactor, decayTime int64) {
	s.lfu.logFactor.Store(logFactor)
	s.lfu.decayTime.Store(decayTime)
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
	c := lfuDecayed(old, mins, a.lfuP.decayTime.Load())
	if c < 255 {
		base := float64(max(int(c)-lfuInit, 0))
		if rand.Float64() < 1/(base*float64(a.lfuP.logFactor.Load())+1) {
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

const lfuInit = 5

// lfuDecayed is a record's counter after its idle minutes' decay: one
// less for each decay minutes (LFUDecrAndReturn; the minutes wrap at 2^16
// as Redis's do).
func lfuDecayed(v, mins uint32, decay int64) uint8 {
	c := v & 0xff
	if v == 0 || decay <= 0 {
		return uint8(c)
	}
	ldt := v >> 8
	idle := mins - ldt
	if mins < ldt {
		idle = 65535 - ldt + mins // LFUTimeElapsed's wrap
	}
	periods := int64(idle) / decay
	if periods >= int64(c) {
		return 0
	}
	return uint8(int64(c) - periods)
}

// evictScore is how much the key whose hash is h deserves eviction: its
// idle milliseconds (LRU), or 255 less its decayed counter (LFU).
func (a *accessTable) evictScore(h uint64) int64 {
	v := a.slot(h).Load()
	if !a.lfu {
		return int64(uint32(a.now.Load()/a.unit)-v) * a.unit
	}
	return 255 - int64(lfuDecayed(v, uint32(a.now.Load()/60000)&0xffff, a.lfuP.decayTime.Load()))
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
		s.setAccessTableLocked(nil)
		return
	case cur == nil || cur.lfu != (t == TrackLFU):
		cur = newAccessTable(t, s.lfu)
		s.setAccessTableLocked(cur)
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

// setAccessTableLocked makes a the access records of every database.
func (s *Store) setAccessTableLocked(a *accessTable) {
	s.keys.acc = a
	s.otherDBsLocked(func(_ uint16, d dbKeys) { d.keys.acc = a })
}

// tickLocked gives the records the clock reading of a read or an apply.
func (s *Store) tickLocked(now int64) {
	if a := s.keys.acc; a != nil {
		a.tick(now)
	}
}
