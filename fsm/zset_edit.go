package fsm

import (
	"slices"
	"strings"
)

// zedit is a write to one sorted set, in either form: it finds the
// members, changes them, and on commit stores the result the way the
// store's bookkeeping needs (a new packed buffer, the large form edited in
// place after editLocked, a conversion, or the key's deletion when the set
// is left empty).
type zedit struct {
	s      *Store
	key    []byte
	it     item
	exists bool

	// The large form, and whether editLocked has been called for it.
	obj     *zsetObj
	editing bool
	before  int64

	// The packed form, decoded once it is needed (decoded): members alias
	// the old buffer or the command's arguments until commit copies them.
	// Before that, reads go to the buffer, so a write that changes
	// nothing allocates nothing.
	ents      []zent
	decoded   bool
	converted bool // the packed form outgrew the limits: obj is new
	dirty     bool
}

// openZSetLocked starts a write to key; wrong reports a key of another
// type. The zedit is returned by value so that it can live on the
// caller's stack.
func (s *Store) openZSetLocked(now int64, key []byte) (e zedit, wrong bool) {
	it, ok, wrong := s.lookupLocked(now, key, kindZSet)
	if wrong {
		return zedit{}, true
	}
	e = zedit{s: s, key: key, it: it, exists: ok, decoded: !ok}
	if ok && it.obj != nil {
		e.obj = it.obj.(*zsetObj)
	}
	return e, false
}

// decode decodes a packed set, if it has not been.
func (e *zedit) decode() {
	if !e.decoded {
		e.decoded = true
		if e.obj == nil {
			e.ents = decodePacked(e.it.val, nil)
		}
	}
}

func (e *zedit) card() int {
	switch {
	case e.obj != nil:
		return e.obj.card()
	case !e.decoded:
		return packedCard(e.it.val)
	}
	return len(e.ents)
}

func (e *zedit) view() zview {
	if e.obj != nil {
		return zview{obj: e.obj}
	}
	e.decode()
	return zview{ents: e.ents}
}

func (e *zedit) score(m []byte) (float64, bool) {
	if e.obj == nil && !e.decoded {
		return packedScore(e.it.val, m)
	}
	return e.view().score(unsafeString(m))
}

// touch makes the set writable: the packed form decoded, the large form
// cloned if a snapshot shares it.
func (e *zedit) touch() {
	e.decode()
	e.dirty = true
	if e.obj != nil && !e.editing && !e.converted {
		e.before = e.s.editLocked(&e.it)
		e.obj = e.it.obj.(*zsetObj)
		e.editing = true
	}
}

func (e *zedit) packedIndex(x zent) (int, bool) {
	return slices.BinarySearchFunc(e.ents, x, zentCompare)
}

// add inserts m, which is not a member.
func (e *zedit) add(m []byte, score float64) {
	e.touch()
	if e.obj != nil {
		e.obj.insert(unsafeString(m), score)
		return
	}
	// As zsetAdd: a packed set that the member would take past the
	// limits converts first, and the member goes into the large form.
	l := &e.s.limits
	if int64(len(e.ents)+1) > l.ZSetMaxListpackEntries || int64(len(m)) > l.ZSetMaxListpackValue {
		e.obj, e.ents, e.converted = buildZSetObj(e.ents), nil, true
		e.obj.insert(unsafeString(m), score)
		return
	}
	x := zent{packedScore0(score), unsafeString(m)}
	i, _ := e.packedIndex(x)
	e.ents = slices.Insert(e.ents, i, x)
}

// packedScore0 is a score as the packed form keeps it: Redis's listpack
// stores -0 as 0 (the large form keeps the sign).
func packedScore0(f float64) float64 {
	if f == 0 {
		return 0
	}
	return f
}

// update moves member m from score old to score.
func (e *zedit) update(m []byte, old, score float64) {
	e.touch()
	if e.obj != nil {
		e.obj.setScore(unsafeString(m), old, score)
		return
	}
	i, _ := e.packedIndex(zent{old, unsafeString(m)})
	x := e.ents[i]
	e.ents = slices.Delete(e.ents, i, i+1)
	x.score = packedScore0(score)
	j, _ := e.packedIndex(x)
	e.ents = slices.Insert(e.ents, j, x)
}

func (e *zedit) remove(m []byte, score float64) {
	e.touch()
	if e.obj != nil {
		e.obj.remove(unsafeString(m), score)
		return
	}
	if i, ok := e.packedIndex(zent{score, unsafeString(m)}); ok {
		e.ents = slices.Delete(e.ents, i, i+1)
	}
}

// removeRange removes the members of ranks [from, to).
func (e *zedit) removeRange(from, to int) {
	if from >= to {
		return
	}
	e.touch()
	if e.obj == nil {
		e.ents = slices.Delete(e.ents, from, to)
		return
	}
	for range to - from {
		e.obj.removeAt(from)
	}
}

// commit stores the set after the changes, converting a packed set that
// outgrew the limits, or deletes the key when the set is empty.
func (e *zedit) commit() {
	if !e.dirty {
		return
	}
	s := e.s
	var exp int64
	if e.exists {
		exp = e.it.exp
	}
	switch {
	case e.converted:
		s.putLocked(s.newCollection(e.key, kindZSet, nil, e.obj, exp))
		return
	case e.obj != nil:
		s.endEditLocked(e.it, e.before)
		if e.obj.card() == 0 {
			s.deleteLocked(e.key)
		}
		return
	}
	if len(e.ents) == 0 {
		if e.exists {
			s.deleteLocked(e.key)
		}
		return
	}
	s.putLocked(s.newCollection(e.key, kindZSet, encodePacked(e.ents), nil, exp))
}

// storeZSetLocked replaces key with a sorted set of ents (in order; no
// TTL), as ZUNIONSTORE and ZRANGESTORE do: packed when it fits the
// limits, and an empty result deletes the key. The members are copied.
// Only a key that did not exist is signalled ready: Redis 7.0 signals
// the keys it adds, not those it overwrites, so clients blocked on a key
// that held another type stay blocked.
func (s *Store) storeZSetLocked(now int64, key []byte, ents []zent) {
	_, existed := s.liveLocked(key, now)
	if len(ents) == 0 {
		s.deleteLocked(key)
		return
	}
	longest := 0
	for _, x := range ents {
		longest = max(longest, len(x.member))
	}
	var val []byte
	var obj object
	if fitsPacked(&s.limits, len(ents), longest) {
		val = encodePacked(ents)
	} else {
		obj = buildZSetObj(ents)
	}
	s.putLocked(s.newCollection(key, kindZSet, val, obj, 0))
	if !existed {
		s.signalReadyLocked(key)
	}
}

// cloneMembers gives ents members of their own, for results that outlive
// the buffers they alias.
func cloneMembers(ents []zent) {
	for i := range ents {
		ents[i].member = strings.Clone(ents[i].member)
	}
}
