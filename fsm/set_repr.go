package fsm

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/tidwall/btree"
)

// A set's two forms. Both hold the members in the same order, (memberHash,
// member) ascending, so iteration, SSCAN cursors and SPOP's seeded picks
// are the same on every replica whichever form each chose.
//
// The packed form, in item.val, is one immutable buffer:
//
//	packed = flags:byte n:uint32 end:uint32*n data
//
// where member i is data[end[i-1]:end[i]] (end[-1] = 0), integers
// little-endian. Flag setIntset says the set is Redis's intset: created
// with integers only and none but integers added since; it is what OBJECT
// ENCODING reports, and it is sticky as Redis's encoding is: removing the
// last non-integer member does not make a set an intset again. A set is
// packed while it has at most set-max-intset-entries members and is an
// intset, or at most set-max-listpack-entries members none longer than
// set-max-listpack-value bytes (Redis 7.0 has no listpack sets: such a
// set reports "hashtable", as it does in Redis 7.0).
//
// The large form, in item.obj, is a *setObj: a B-tree of members with
// their hashes, cloned in O(1) for copy-on-write. A set never goes back
// from the large form to the packed one except when a command builds it
// anew (the STORE commands, SPOP taking most of a set), as in Redis.

const (
	setIntset byte = 1 << iota // the set is an intset (see above)
)

const setPackedHeader = 5

// setPackedLen returns the member count of a packed set.
func setPackedLen(p []byte) int { return int(binary.LittleEndian.Uint32(p[1:])) }

// packedAt returns member i of a packed set; the bytes alias p.
func packedAt(p []byte, i int) []byte {
	n := setPackedLen(p)
	data := setPackedHeader + 4*n
	start := 0
	if i > 0 {
		start = int(binary.LittleEndian.Uint32(p[setPackedHeader+4*(i-1):]))
	}
	end := int(binary.LittleEndian.Uint32(p[setPackedHeader+4*i:]))
	return p[data+start : data+end : data+end]
}

// setPackedFind returns the index of the first member of p not before (h, m)
// and whether it is m.
func setPackedFind(p []byte, h uint64, m []byte) (int, bool) {
	lo, hi := 0, setPackedLen(p)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		e := packedAt(p, mid)
		if memberLess(memberHash(e), e, h, m) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < setPackedLen(p) {
		e := packedAt(p, lo)
		return lo, string(e) == string(m)
	}
	return lo, false
}

// memberLess orders set members (and hash fields): by hash, then bytes.
func memberLess(ha uint64, a []byte, hb uint64, b []byte) bool {
	if ha != hb {
		return ha < hb
	}
	return string(a) < string(b)
}

// buildPacked packs members, which must be in member order without
// duplicates, into a new buffer.
func buildPacked(flags byte, n int, dataLen int, each func(fn func(m []byte))) []byte {
	p := make([]byte, setPackedHeader+4*n, setPackedHeader+4*n+dataLen)
	p[0] = flags
	binary.LittleEndian.PutUint32(p[1:], uint32(n))
	i := 0
	each(func(m []byte) {
		p = append(p, m...)
		binary.LittleEndian.PutUint32(p[setPackedHeader+4*i:], uint32(len(p)-setPackedHeader-4*n))
		i++
	})
	return p
}

// setMember is one member of a large set.
type setMember struct {
	hash uint64
	m    string
}

func setMemberLess(a, b setMember) bool {
	if a.hash != b.hash {
		return a.hash < b.hash
	}
	return a.m < b.m
}

// setObj is a set's large form.
type setObj struct {
	tree  *btree.BTreeG[setMember]
	bytes int64 // size(), kept up to date
	gen   uint64
}

// setMemberBytes is what a member costs besides its bytes: its slot in the
// tree, with the slack of half-full nodes.
const (
	setMemberBytes = int64(unsafe.Sizeof(setMember{})) * 3 / 2
	setObjBytes    = int64(unsafe.Sizeof(setObj{})) + 64
)

func newSetObj() *setObj {
	return &setObj{tree: btree.NewBTreeGOptions(setMemberLess, treeOptions), bytes: setObjBytes}
}

func (o *setObj) clone() object   { return &setObj{tree: o.tree.Copy(), bytes: o.bytes, gen: o.gen} }
func (o *setObj) size() int64     { return o.bytes }
func (o *setObj) cowGen() *uint64 { return &o.gen }
func (o *setObj) freeEffort() int { return o.tree.Len() }

func memberCost(m string) int64 { return setMemberBytes + int64(roundAlloc(len(m))) }

// add inserts m (copied) and reports whether it was new.
func (o *setObj) add(h uint64, m []byte) bool {
	// The hint makes the insert reuse the lookup's path down the tree.
	var hint btree.PathHint
	if _, ok := o.tree.GetHint(setMember{h, unsafeString(m)}, &hint); ok {
		return false
	}
	sm := setMember{h, string(m)}
	o.tree.SetHint(sm, &hint)
	o.bytes += memberCost(sm.m)
	return true
}

// remove deletes m and reports whether it was there.
func (o *setObj) remove(h uint64, m []byte) bool {
	prev, ok := o.tree.Delete(setMember{h, unsafeString(m)})
	if ok {
		o.bytes -= memberCost(prev.m)
	}
	return ok
}

func (o *setObj) removeAt(i int) setMember {
	prev, _ := o.tree.DeleteAt(i)
	o.bytes -= memberCost(prev.m)
	return prev
}

// stringBytes views an immutable string as bytes, for replies, which
// never modify what they point at.
func stringBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))[:len(s):len(s)]
}

// A set, whichever its form, as the commands read it. The zero value is
// the empty set (a missing key).
type setView struct {
	p []byte  // packed, or nil
	o *setObj // large, or nil
}

func viewOf(it *item) setView { return setView{p: it.val, o: asSetObj(it.obj)} }

func asSetObj(o object) *setObj {
	if o == nil {
		return nil
	}
	return o.(*setObj)
}

func (v setView) len() int {
	switch {
	case v.o != nil:
		return v.o.tree.Len()
	case v.p != nil:
		return setPackedLen(v.p)
	}
	return 0
}

func (v setView) contains(h uint64, m []byte) bool {
	switch {
	case v.o != nil:
		_, ok := v.o.tree.Get(setMember{h, unsafeString(m)})
		return ok
	case v.p != nil:
		_, ok := setPackedFind(v.p, h, m)
		return ok
	}
	return false
}

// at returns the member of rank i.
func (v setView) at(i int) []byte {
	if v.o != nil {
		sm, _ := v.o.tree.GetAt(i)
		return stringBytes(sm.m)
	}
	return packedAt(v.p, i)
}

// each calls fn with each member and its hash, in member order, until fn
// returns false. The bytes alias the store.
func (v setView) each(fn func(h uint64, m []byte) bool) {
	switch {
	case v.o != nil:
		v.o.tree.Scan(func(sm setMember) bool { return fn(sm.hash, stringBytes(sm.m)) })
	case v.p != nil:
		for i, n := 0, setPackedLen(v.p); i < n; i++ {
			m := packedAt(v.p, i)
			if !fn(memberHash(m), m) {
				return
			}
		}
	}
}

// isIntset reports whether the set is packed as Redis's intset.
func (v setView) isIntset() bool { return v.o == nil && v.p != nil && v.p[0]&setIntset != 0 }

// setBuilder collects members arriving in member order without
// duplicates (a merge's output) and makes a set of them in the form
// Redis's rules and the limits choose.
type setBuilder struct {
	lim     *Limits
	members [][]byte // while it may still be packed
	data    int      // their total length
	ints    bool     // every member is an integer
	long    bool     // some member is longer than set-max-listpack-value
	obj     *setObj  // once too large to pack
}

func newSetBuilder(lim *Limits) *setBuilder { return &setBuilder{lim: lim, ints: true} }

func (b *setBuilder) add(h uint64, m []byte) {
	if b.obj != nil {
		b.obj.add(h, m)
		return
	}
	b.members = append(b.members, m)
	b.data += len(m)
	if b.ints {
		_, b.ints = parseInt(m)
	}
	if int64(len(m)) > b.lim.SetMaxListpackValue {
		b.long = true
	}
	if !b.fits(len(b.members)) {
		b.obj = newSetObj()
		for _, e := range b.members {
			b.obj.add(memberHash(e), e)
		}
		b.members = nil
	}
}

// fits reports whether n members like those added so far may be packed.
func (b *setBuilder) fits(n int) bool {
	return b.ints && int64(n) <= b.lim.SetMaxIntsetEntries ||
		!b.long && int64(n) <= b.lim.SetMaxListpackEntries
}

func (b *setBuilder) len() int {
	if b.obj != nil {
		return b.obj.tree.Len()
	}
	return len(b.members)
}

// finish returns the set's packed or large form; nil, nil when empty.
func (b *setBuilder) finish() ([]byte, *setObj) {
	if b.obj != nil {
		return nil, b.obj
	}
	if len(b.members) == 0 {
		return nil, nil
	}
	var flags byte
	if b.ints && int64(len(b.members)) <= b.lim.SetMaxIntsetEntries {
		flags = setIntset
	}
	return buildPacked(flags, len(b.members), b.data, func(fn func([]byte)) {
		for _, m := range b.members {
			fn(m)
		}
	}), nil
}

func init() {
	registerKind(kindSet, kindSpec{
		name: "set",
		encoding: func(it *item) string {
			if viewOf(it).isIntset() {
				return "intset"
			}
			return "hashtable"
		},
		write:    writeSet,
		read:     readSet,
		elements: func(it *item, fn func([]byte) bool) { viewOf(it).each(func(_ uint64, m []byte) bool { return fn(m) }) },
	})
}

// A set in a snapshot:
//
//	value = form:byte count:uvarint (len:uvarint member)*count
//
// form is setFormIntset or setFormPacked for the packed form (with and
// without the intset flag) and setFormLarge for the large one; members
// are in member order, strictly ascending, and an intset's are integers.
const (
	setFormIntset = 0
	setFormPacked = 1
	setFormLarge  = 2
)

// setMaxSnapshotCount bounds the member count a snapshot may claim.
const setMaxSnapshotCount = 1 << 32

func writeSet(w *snapWriter, it *item) {
	v := viewOf(it)
	switch {
	case v.o != nil:
		w.buf = append(w.buf, setFormLarge)
	case v.isIntset():
		w.buf = append(w.buf, setFormIntset)
	default:
		w.buf = append(w.buf, setFormPacked)
	}
	w.uvarint(uint64(v.len()))
	v.each(func(_ uint64, m []byte) bool {
		w.bytes(m)
		return w.ok()
	})
}

func readSet(r *snapReader, it *item) {
	form := r.byte()
	if r.err == nil && form > setFormLarge {
		r.fail(fmt.Errorf("%w: set of unknown form %d", ErrCorrupt, form))
		return
	}
	n := r.count(setMaxSnapshotCount)
	var members [][]byte
	var obj *setObj
	if form == setFormLarge {
		obj = newSetObj()
	}
	var prevHash uint64
	var prev []byte
	data := 0
	for i := uint64(0); i < n && r.err == nil; i++ {
		m := r.bytes([]byte{})
		if r.err != nil {
			return
		}
		h := memberHash(m)
		if i > 0 && !memberLess(prevHash, prev, h, m) {
			r.fail(fmt.Errorf("%w: set member %d of %d out of order", ErrCorrupt, i, n))
			return
		}
		if _, isInt := parseInt(m); form == setFormIntset && !isInt {
			r.fail(fmt.Errorf("%w: intset member %d of %d is not an integer", ErrCorrupt, i, n))
			return
		}
		if obj != nil {
			sm := setMember{h, string(m)}
			obj.tree.Load(sm)
			obj.bytes += memberCost(sm.m)
		} else {
			members = append(members, m)
			data += len(m)
		}
		prevHash, prev = h, m
	}
	if r.err != nil {
		return
	}
	if obj != nil {
		it.obj = obj
		return
	}
	if uint64(data) > 1<<32-1 {
		r.fail(fmt.Errorf("%w: packed set of %d bytes", ErrCorrupt, data))
		return
	}
	var flags byte
	if form == setFormIntset {
		flags = setIntset
	}
	it.val = buildPacked(flags, len(members), data, func(fn func([]byte)) {
		for _, m := range members {
			fn(m)
		}
	})
}
