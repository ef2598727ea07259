package fsm

import (
	"bytes"
	"math"
	"slices"
)

// SORT and SORT_RO: sort the elements of a list, set or sorted set,
// numerically or (ALPHA) by their bytes, by themselves or by weights looked
// up through a BY pattern, and return them, or values looked up through GET
// patterns, or store the result as a list (STORE). As Redis's sort.c,
// except that ties the comparison leaves open keep the collection's own
// order (a stable sort), so that a STORE gives the same list on every
// replica.

const (
	OpSort      Op = opBaseSort + iota // read: SORT without STORE, SORT_RO
	OpSortStore                        // write: SORT ... STORE
)

// Flags of OpSort and OpSortStore.
const (
	FlagSortDesc  Flags = 1 << 0
	FlagSortAlpha Flags = 1 << 1
	FlagSortBy    Flags = 1 << 2 // a BY pattern is given
	// FlagSortNoSort: some BY pattern had no '*' (Redis then does not
	// sort, even when a later BY has one).
	FlagSortNoSort Flags = 1 << 3
	// FlagSortScript: a script called SORT, which then sorts a set even
	// by a constant, as it does with STORE.
	FlagSortScript Flags = 1 << 4
)

// ErrSortScore is SORT's error for an element (or weight) that is not a
// number when sorting numerically.
const ErrSortScore = "ERR One or more scores can't be converted into double"

func init() {
	const flags = FlagSortDesc | FlagSortAlpha | FlagSortBy | FlagSortNoSort | FlagSortScript
	// OpSort: Args[0]=key, Args[1]=BY pattern ("" without FlagSortBy),
	// Args[2:]=GET patterns; Int=LIMIT offset, Int2=LIMIT count (-1: all).
	// Reply: array of bulk (nil for a GET finding nothing).
	registerOp(OpSort, opSpec{name: "SORT", args: argsAtLeast(2), flags: flags,
		read: func(s *Store, now int64, c *Command) Reply {
			return s.sortLocked(now, c.Args[0], c.Args[1], c.Args[2:], c, false)
		}})
	// OpSortStore: Args[0]=key, Args[1]=destination, Args[2]=BY pattern,
	// Args[3:]=GET patterns; the rest as OpSort. The result replaces the
	// destination as a list (deleting it when empty). Reply :length.
	registerOp(OpSortStore, opSpec{name: "SORT STORE", write: true, args: argsAtLeast(3), flags: flags,
		keys: keysFirst(2),
		apply: func(s *Store, now int64, c *Command) Reply {
			return s.sortStoreLocked(now, c)
		}})
}

type sortElem struct {
	elem   []byte
	score  float64
	cmp    []byte // ALPHA BY: the weight, nil when missing
	hasCmp bool
}

// sortLocked computes the sorted output: for a read the reply, for STORE
// (store set) the list elements in out.
func (s *Store) sortLocked(now int64, key, by []byte, gets [][]byte, c *Command, store bool) Reply {
	out, errReply, ok := s.sortElems(now, key, by, gets, c, store, nil)
	if !ok {
		return errReply
	}
	arr := make([]Reply, len(out))
	for i, v := range out {
		if v == nil {
			arr[i] = replyNil
		} else {
			arr[i] = BulkReply(v)
		}
	}
	return Reply{Kind: ReplyArray, Array: arr}
}

// sortElems returns the output values (nil for a GET finding nothing).
// miss, when not nil, hears of every key a BY or GET pattern looks up and
// does not find, in the order Redis looks them up (the keymiss events).
func (s *Store) sortElems(now int64, key, by []byte, gets [][]byte, c *Command, store bool, miss func([]byte)) ([][]byte, Reply, bool) {
	it, ok := s.liveLocked(key, now)
	var elems [][]byte
	if ok {
		spec := &kindTable[it.kind]
		if spec.elements == nil {
			return nil, replyWrongType, false
		}
		spec.elements(&it, func(e []byte) bool {
			if e == nil {
				e = []byte{} // nil marks a GET that found nothing
			}
			elems = append(elems, e)
			return true
		})
	}
	desc := c.Flags&FlagSortDesc != 0
	alpha := c.Flags&FlagSortAlpha != 0
	hasBy := c.Flags&FlagSortBy != 0
	dontsort := c.Flags&FlagSortNoSort != 0 || (hasBy && bytes.IndexByte(by, '*') < 0)
	if dontsort && ok && it.kind == kindSet && (store || c.Flags&FlagSortScript != 0) {
		// Redis sorts a set anyway when storing or inside a script, so
		// that what is stored or replicated does not depend on the set's
		// internal order.
		dontsort, alpha, hasBy = false, true, false
	}
	n := int64(len(elems))
	start := min(max(c.Int, 0), n)
	count := min(max(c.Int2, -1), n)
	end := start + count - 1
	if count < 0 {
		end = n - 1
	}
	if start >= n {
		start, end = n-1, n-2
	}
	end = min(end, n-1)

	vec := make([]sortElem, len(elems))
	for i, e := range elems {
		vec[i].elem = e
	}
	if dontsort {
		if desc && ok && (it.kind == kindList || it.kind == kindZSet) {
			slices.Reverse(vec)
		}
	} else {
		convErr := false
		for i := range vec {
			w := vec[i].elem
			if hasBy {
				var found bool
				if w, found = s.lookupByPattern(now, by, vec[i].elem, miss); !found {
					continue
				}
			}
			if alpha {
				if hasBy {
					vec[i].cmp, vec[i].hasCmp = w, true
				}
				continue
			}
			f, valid := sortScore(w)
			if !valid {
				convErr = true
			}
			vec[i].score = f
		}
		if convErr {
			return nil, ErrorReply(ErrSortScore), false
		}
		cmp := func(a, b sortElem) int {
			var r int
			switch {
			case !alpha:
				switch {
				case a.score > b.score:
					r = 1
				case a.score < b.score:
					r = -1
				default:
					r = bytes.Compare(a.elem, b.elem)
				}
			case hasBy:
				switch {
				case !a.hasCmp && !b.hasCmp:
					r = 0
				case !a.hasCmp:
					r = -1
				case !b.hasCmp:
					r = 1
				default:
					r = bytes.Compare(a.cmp, b.cmp)
				}
			default:
				r = bytes.Compare(a.elem, b.elem)
			}
			if desc {
				r = -r
			}
			return r
		}
		slices.SortStableFunc(vec, cmp)
	}
	var out [][]byte
	for j := start; j <= end; j++ {
		if len(gets) == 0 {
			out = append(out, vec[j].elem)
			continue
		}
		for _, g := range gets {
			v, found := s.lookupByPattern(now, g, vec[j].elem, miss)
			switch {
			case found && v == nil:
				out = append(out, []byte{})
			case found:
				out = append(out, v)
			case store:
				out = append(out, []byte{})
			default:
				out = append(out, nil)
			}
		}
	}
	return out, Reply{}, true
}

// lookupByPattern is Redis's lookupKeyByPattern: "#" is the element
// itself; otherwise the first '*' is replaced by the element, and a
// "->field" after it names a hash field; the key must hold a string (or a
// hash, with a field). found is false when there is no such value; miss,
// when not nil, is told of a key looked up and missing.
func (s *Store) lookupByPattern(now int64, pattern, elem []byte, miss func([]byte)) ([]byte, bool) {
	if len(pattern) == 1 && pattern[0] == '#' {
		return elem, true
	}
	star := bytes.IndexByte(pattern, '*')
	if star < 0 {
		return nil, false
	}
	keyPat, field := pattern, []byte(nil)
	if f := bytes.Index(pattern[star+1:], []byte("->")); f >= 0 && star+1+f+2 < len(pattern) {
		keyPat, field = pattern[:star+1+f], pattern[star+1+f+2:]
	}
	key := make([]byte, 0, len(keyPat)-1+len(elem))
	key = append(append(append(key, keyPat[:star]...), elem...), keyPat[star+1:]...)
	it, ok := s.liveLocked(key, now)
	if ok && s.hiddenLocked(it.hash) {
		ok = false // another group's key (slots.go)
	}
	if !ok {
		if miss != nil {
			miss(key)
		}
		return nil, false
	}
	if field != nil {
		if it.kind != kindHash {
			return nil, false
		}
		return hashField(&it, field)
	}
	if it.kind != kindString {
		return nil, false
	}
	return it.val, true
}

func (s *Store) sortStoreLocked(now int64, c *Command) Reply {
	key, dst, by := c.Args[0], c.Args[1], c.Args[2]
	_, existed := s.liveLocked(dst, now)
	s.unpackZSetLocked(now, key)
	out, errReply, ok := s.sortElems(now, key, by, c.Args[3:], c, true, nil)
	if !ok {
		return errReply
	}
	if len(out) == 0 {
		s.deleteLocked(dst)
		return replyZero
	}
	s.deleteLocked(dst)
	s.putListLocked(dst, out, 0)
	if !existed {
		// As storeZSetLocked: Redis signals a key it adds, not one it
		// overwrites.
		s.signalReadyLocked(dst)
	}
	return IntReply(int64(len(out)))
}

// unpackZSetLocked gives a packed sorted set at key its large form, as
// Redis's sort.c converts the sorted set it sorts to a skiplist (so OBJECT
// ENCODING says so afterwards, whatever the set's size). The members and
// scores stay as they were, so it is not a write: the item's version is
// not stamped, and a WATCH of the key still holds, as in Redis. Only SORT
// ... STORE converts: it is applied from the log, so every replica and
// every replay converts alike; SORT without STORE and SORT_RO are reads,
// which leave the store as it is.
func (s *Store) unpackZSetLocked(now int64, key []byte) {
	it, ok := s.liveLocked(key, now)
	if !ok || it.kind != kindZSet || it.obj != nil {
		return
	}
	p := s.keys.findForWrite(it.hash, it.key)
	before := p.size()
	z := buildZSetObj(decodePacked(p.val, nil))
	*z.cowGen() = s.keys.gen
	p.val, p.obj = nil, z
	s.bytes += p.size() - before
}

// sortScore parses an element or weight as SORT's strtod check does: the
// whole string must be a number (no NaN, no ERANGE) after leading white
// space, which strtod skips; an empty string is 0, since strtod then
// leaves nothing unconsumed.
func sortScore(b []byte) (float64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	i := 0
	for i < len(b) && isCSpace(b[i]) {
		i++
	}
	if i == len(b) {
		return 0, false
	}
	f, ok := parseStrtod(b[i:])
	if !ok || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// sortMissesLocked tells fn of the keys SORT's BY and GET patterns look up
// and do not find, in Redis's order (lookupKeyByPattern's keymiss events):
// it sorts again, which costs only while keymiss events are wanted.
func (s *Store) sortMissesLocked(now int64, c *Command, fn func(key []byte)) {
	switch c.Op {
	case OpSort:
		s.sortElems(now, c.Args[0], c.Args[1], c.Args[2:], c, false, fn)
	case OpSortStore:
		s.sortElems(now, c.Args[0], c.Args[2], c.Args[3:], c, true, fn)
	}
}
