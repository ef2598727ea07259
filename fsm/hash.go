package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"unsafe"

	"github.com/tidwall/btree"
)

// Hashes: HSET and its relatives, HINCRBY, HINCRBYFLOAT, HDEL, and the
// reads. A hash holds its fields in (memberHash(field), field) order in
// both of its forms, so every replica iterates it the same way whatever
// form each chose, and HSCAN's cursor is the hash of the next field.
//
// Packed form (Redis's listpack), in item.val, while the hash has at most
// Limits.HashMaxListpackEntries fields and no field or value longer than
// Limits.HashMaxListpackValue bytes:
//
//	uvarint count, then count times: uvarint len, field, uvarint len, value
//
// The buffer is immutable: a write builds a new one. A hash that outgrows
// the limits converts to the large form, a copy-on-write B-tree of
// hentry, and never converts back (as in Redis).

const (
	// OpHSet (HSET, HMSET): Args = key, f1, v1, f2, v2, ... FlagHashOK
	// (HMSET) replies +OK, else :number of new fields.
	OpHSet Op = opBaseHash + iota
	// OpHSetNX: Args = key, field, value. Reply :1 set, :0 field exists.
	OpHSetNX
	// OpHDel: Args = key, fields... Reply :number removed. The key goes
	// with its last field.
	OpHDel
	// OpHIncrBy: Args = key, field; Int = increment. Reply :new value.
	OpHIncrBy
	// OpHIncrByFloat: Args = key, field and, optionally, the increment as
	// the client wrote it, which Apply parses in long double precision
	// as Redis does (Float is used only without it). The server rejects
	// an infinite increment. Reply bulk new value.
	OpHIncrByFloat

	// OpHGet: Args = key, field. Reply bulk or nil.
	OpHGet
	// OpHMGet: Args = key, fields... Reply array of bulk or nil.
	OpHMGet
	// OpHGetAll: Args = key. Reply map of field to value.
	OpHGetAll
	// OpHKeys, OpHVals: Args = key. Reply array.
	OpHKeys
	OpHVals
	// OpHLen: Args = key. Reply :fields.
	OpHLen
	// OpHStrLen: Args = key, field. Reply :length of the value, 0 if none.
	OpHStrLen
	// OpHExists: Args = key, field. Reply :1 or :0.
	OpHExists
	// OpHRandField: Args = key. Without FlagHashCount: one random field
	// (bulk, or nil for no key). With it: Int = count (Redis's rules:
	// negative allows repeats; the server bounds it), and
	// FlagHashWithValues returns field-value pairs.
	OpHRandField
	// OpHScan: Args = key, match pattern (with FlagHScanMatch; else all,
	// since an empty pattern matches only the empty field); Int = cursor as
	// the bits of a uint64 (negative: at or past 2^63, after every kvs
	// cursor), Int2 = count. FlagHScanSyntax and FlagHScanNotInteger
	// carry an option error the server found, which Redis reports only
	// for a key that holds a hash. Reply [cursor, [f1, v1, ...]].
	OpHScan
)

// Flags of the hash ops.
const (
	FlagHashOK          = FlagNX // OpHSet: HMSET's +OK reply
	FlagHashCount       = FlagNX // OpHRandField: a count was given
	FlagHashWithValues  = FlagXX // OpHRandField: WITHVALUES
	FlagHScanSyntax     = FlagNX // OpHScan: answer ERR syntax error
	FlagHScanNotInteger = FlagXX // OpHScan: answer ERR value is not an integer
	FlagHScanMatch      = FlagGT // OpHScan: Args[1] is a pattern even when empty
)

// MaxHRandFieldRepeats bounds a negative HRANDFIELD count (picks with
// repeats) on an existing hash, whose reply is built in memory: Redis
// streams such a reply and would send a count of -2^62 for ever; kvs
// answers Redis's "value is out of range" instead.
const MaxHRandFieldRepeats = 1 << 22

const errOutOfRange = "ERR value is out of range"

// Error texts only hashes use.
const (
	ErrHashNotInteger = "ERR hash value is not an integer"
	ErrHashNotFloat   = "ERR hash value is not a float"
)

func init() {
	registerOp(OpHSet, opSpec{name: "HSET", write: true, args: argsAtLeast(3), first: 1, step: 2, flags: FlagHashOK,
		apply: applyHSet})
	registerOp(OpHSetNX, opSpec{name: "HSETNX", write: true, args: 3, apply: applyHSetNX})
	registerOp(OpHDel, opSpec{name: "HDEL", write: true, args: argsAtLeast(2), apply: applyHDel})
	registerOp(OpHIncrBy, opSpec{name: "HINCRBY", write: true, args: 2, apply: applyHIncrBy})
	registerOp(OpHIncrByFloat, opSpec{name: "HINCRBYFLOAT", write: true, args: argsAtLeast(2), check: atMostArgs(3),
		apply: applyHIncrByFloat})

	registerOp(OpHGet, opSpec{name: "HGET", args: 2, read: readHGet})
	registerOp(OpHMGet, opSpec{name: "HMGET", args: argsAtLeast(2), read: readHMGet})
	registerOp(OpHGetAll, opSpec{name: "HGETALL", args: 1, read: readHGetAll})
	registerOp(OpHKeys, opSpec{name: "HKEYS", args: 1, read: readHKeys})
	registerOp(OpHVals, opSpec{name: "HVALS", args: 1, read: readHVals})
	registerOp(OpHLen, opSpec{name: "HLEN", args: 1, read: readHLen})
	registerOp(OpHStrLen, opSpec{name: "HSTRLEN", args: 2, read: readHStrLen})
	registerOp(OpHExists, opSpec{name: "HEXISTS", args: 2, read: readHExists})
	registerOp(OpHRandField, opSpec{name: "HRANDFIELD", args: 1, flags: FlagHashCount | FlagHashWithValues,
		read: readHRandField})
	registerOp(OpHScan, opSpec{name: "HSCAN", args: 2, flags: FlagHScanSyntax | FlagHScanNotInteger | FlagHScanMatch,
		read: readHScan})

	registerKind(kindHash, kindSpec{
		name: "hash",
		encoding: func(it *item) string {
			if it.obj != nil {
				return "hashtable"
			}
			return "listpack"
		},
		write: writeHash,
		read:  readHash,
	})
}

// hentry is one field of a hash's large form: kv is the field's length
// (uvarint), the field and the value, in one allocation. hash is
// memberHash(field), whose lowest bit is always set; a search pivot clears
// it and holds the bare field in kv, so lookups build no entry.
type hentry struct {
	hash uint64
	kv   string
}

func (e hentry) field() string {
	if e.hash&1 == 0 {
		return e.kv // a pivot
	}
	n, w := binary.Uvarint(unsafe.Slice(unsafe.StringData(e.kv), len(e.kv)))
	return e.kv[w : w+int(n)]
}

// split returns the field and the value as byte views of kv, which is
// never modified: replies may alias them.
func (e hentry) split() (f, v []byte) {
	b := unsafe.Slice(unsafe.StringData(e.kv), len(e.kv))
	n, w := binary.Uvarint(b)
	end := w + int(n)
	return b[w:end:end], b[end:len(b):len(b)]
}

func hentryLess(a, b hentry) bool {
	if ha, hb := a.hash|1, b.hash|1; ha != hb {
		return ha < hb
	}
	return a.field() < b.field()
}

func newHentry(hash uint64, f, v []byte) hentry {
	buf := make([]byte, 0, binary.MaxVarintLen32+len(f)+len(v))
	buf = binary.AppendUvarint(buf, uint64(len(f)))
	buf = append(buf, f...)
	buf = append(buf, v...)
	return hentry{hash: hash, kv: unsafe.String(unsafe.SliceData(buf), len(buf))}
}

func hashPivot(f []byte) hentry {
	return hentry{hash: memberHash(f) &^ 1, kv: unsafeString(f)}
}

// hashObj is a hash's large form.
type hashObj struct {
	tree  *btree.BTreeG[hentry]
	bytes int64 // hashObjBytes plus hentryBytes of every entry
	gen   uint64
}

const (
	hashObjBytes    = int64(unsafe.Sizeof(hashObj{})) + 64
	hentrySlotBytes = int64(unsafe.Sizeof(hentry{})) * 3 / 2
)

func hentryBytes(e hentry) int64 { return hentrySlotBytes + int64(roundAlloc(len(e.kv))) }

func newHashObj() *hashObj {
	return &hashObj{tree: btree.NewBTreeGOptions(hentryLess, treeOptions), bytes: hashObjBytes}
}

func (h *hashObj) clone() object   { return &hashObj{tree: h.tree.Copy(), bytes: h.bytes} }
func (h *hashObj) size() int64     { return h.bytes }
func (h *hashObj) cowGen() *uint64 { return &h.gen }
func (h *hashObj) freeEffort() int { return h.tree.Len() }
func (h *hashObj) get(f []byte) ([]byte, bool) {
	e, ok := h.tree.Get(hashPivot(f))
	if !ok {
		return nil, false
	}
	_, v := e.split()
	return v, true
}

// set adds or replaces f's value and reports whether f is new.
func (h *hashObj) set(hash uint64, f, v []byte) bool {
	e := newHentry(hash, f, v)
	prev, replaced := h.tree.Set(e)
	h.bytes += hentryBytes(e)
	if replaced {
		h.bytes -= hentryBytes(prev)
	}
	return !replaced
}

func (h *hashObj) del(f []byte) bool {
	prev, ok := h.tree.Delete(hashPivot(f))
	if ok {
		h.bytes -= hentryBytes(prev)
	}
	return ok
}

// hpair is one field of a packed hash, decoded; f and v alias the buffer.
type hpair struct {
	hash uint64
	f, v []byte
}

// packedLen is the field count of a packed hash.
func packedLen(b []byte) int {
	n, _ := binary.Uvarint(b)
	return int(n)
}

// packedEach calls fn for each field of a packed hash, in order, until fn
// returns false. The slices alias b, capacity clipped.
func packedEach(b []byte, fn func(f, v []byte) bool) {
	n, off := binary.Uvarint(b)
	for ; n > 0; n-- {
		l, w := binary.Uvarint(b[off:])
		off += w
		f := b[off : off+int(l) : off+int(l)]
		off += int(l)
		l, w = binary.Uvarint(b[off:])
		off += w
		v := b[off : off+int(l) : off+int(l)]
		off += int(l)
		if !fn(f, v) {
			return
		}
	}
}

func packedGet(b []byte, f []byte) ([]byte, bool) {
	var val []byte
	found := false
	packedEach(b, func(pf, pv []byte) bool {
		if string(pf) == string(f) {
			val, found = pv, true
			return false
		}
		return true
	})
	return val, found
}

// packedDecode returns the fields of a packed hash with their hashes.
func packedDecode(b []byte, extra int) []hpair {
	out := make([]hpair, 0, packedLen(b)+extra)
	packedEach(b, func(f, v []byte) bool {
		out = append(out, hpair{memberHash(f), f, v})
		return true
	})
	return out
}

func packedEntryLen(f, v []byte) int {
	return uvarintLen(uint64(len(f))) + len(f) + uvarintLen(uint64(len(v))) + len(v)
}

func appendPackedEntry(buf, f, v []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(f)))
	buf = append(buf, f...)
	buf = binary.AppendUvarint(buf, uint64(len(v)))
	return append(buf, v...)
}

// packedEncode builds a new packed buffer holding ps, which are in order,
// in one allocation of the exact size (cap counts in item.size).
func packedEncode(ps []hpair) []byte {
	n := uvarintLen(uint64(len(ps)))
	for _, p := range ps {
		n += packedEntryLen(p.f, p.v)
	}
	buf := make([]byte, 0, n)
	buf = binary.AppendUvarint(buf, uint64(len(ps)))
	for _, p := range ps {
		buf = appendPackedEntry(buf, p.f, p.v)
	}
	return buf
}

// packedFind locates field f (of hash h) in a packed buffer: the byte
// range of its entry when found, else the empty range where it goes.
func packedFind(b []byte, h uint64, f []byte) (start, end int, found bool) {
	n, off := binary.Uvarint(b)
	for ; n > 0; n-- {
		es := off
		l, w := binary.Uvarint(b[off:])
		off += w
		ef := b[off : off+int(l)]
		off += int(l)
		l, w = binary.Uvarint(b[off:])
		off += w + int(l)
		eh := memberHash(ef)
		if eh == h && string(ef) == string(f) {
			return es, off, true
		}
		if hpairLess(h, f, hpair{eh, ef, nil}) {
			return es, es, false
		}
	}
	return len(b), len(b), false
}

// packedSplice returns a new buffer: b with the bytes from start to end
// replaced by the entry f, v, and count fields in all.
func packedSplice(b []byte, start, end, count int, f, v []byte) []byte {
	_, hdr := binary.Uvarint(b)
	n := uvarintLen(uint64(count)) + start - hdr + packedEntryLen(f, v) + len(b) - end
	buf := make([]byte, 0, n)
	buf = binary.AppendUvarint(buf, uint64(count))
	buf = append(buf, b[hdr:start]...)
	buf = appendPackedEntry(buf, f, v)
	return append(buf, b[end:]...)
}

func hpairLess(h uint64, f []byte, p hpair) bool {
	return h < p.hash || (h == p.hash && string(f) < string(p.f))
}

// hpairSearch returns where (h, f) is or goes in ps.
func hpairSearch(ps []hpair, h uint64, f []byte) (int, bool) {
	lo, hi := 0, len(ps)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if hpairLess(ps[m].hash, ps[m].f, hpair{h, f, nil}) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(ps) && ps[lo].hash == h && string(ps[lo].f) == string(f)
}

// hashLen is the field count of a hash item.
func hashLen(it *item) int {
	if it.obj != nil {
		return it.obj.(*hashObj).tree.Len()
	}
	return packedLen(it.val)
}

// hashField returns the value of field in the hash it (SORT's BY and GET
// key->field use it); false when it holds no such field or is not a hash.
// The value aliases the store and must not be modified.
func hashField(it *item, field []byte) ([]byte, bool) {
	if it.kind != kindHash {
		return nil, false
	}
	if it.obj != nil {
		return it.obj.(*hashObj).get(field)
	}
	return packedGet(it.val, field)
}

// hashEach calls fn for each field of the hash it, in order, until fn
// returns false.
func hashEach(it *item, fn func(f, v []byte) bool) {
	if it.obj == nil {
		packedEach(it.val, fn)
		return
	}
	it.obj.(*hashObj).tree.Scan(func(e hentry) bool { return fn(e.split()) })
}

// fitsPacked reports whether a field or value of n bytes may stay packed.
func (s *Store) fitsPacked(n int) bool { return int64(n) <= s.limits.HashMaxListpackValue }

// hashSetLocked sets the field-value pairs in the hash at key (it, when
// exists; created otherwise), converting it to the large form when the
// limits say so, and returns the number of new fields. It keeps the TTL.
func (s *Store) hashSetLocked(key []byte, it item, exists bool, pairs [][]byte) int64 {
	var added int64
	if exists && it.obj != nil {
		before := s.editLocked(&it)
		h := it.obj.(*hashObj)
		for i := 0; i < len(pairs); i += 2 {
			if h.set(memberHash(pairs[i]), pairs[i], pairs[i+1]) {
				added++
			}
		}
		s.endEditLocked(it, before)
		return added
	}
	if len(pairs) == 2 && s.fitsPacked(len(pairs[0])) && s.fitsPacked(len(pairs[1])) {
		// One field, the common case: splice it into a copy of the
		// buffer, unless it is new and one too many.
		f, v := pairs[0], pairs[1]
		start, end, found := packedFind(it.val, memberHash(f), f)
		count := packedLen(it.val)
		if !found {
			count++
		}
		if int64(count) <= s.limits.HashMaxListpackEntries {
			s.putHashLocked(key, it, exists, packedSplice(it.val, start, end, count, f, v), nil)
			return boolInt(!found)
		}
	}
	large := false
	for _, a := range pairs {
		if !s.fitsPacked(len(a)) {
			large = true
			break
		}
	}
	var ps []hpair
	if exists {
		ps = packedDecode(it.val, len(pairs)/2)
	} else {
		ps = make([]hpair, 0, len(pairs)/2)
	}
	for i := 0; i < len(pairs); i += 2 {
		f, v := pairs[i], pairs[i+1]
		h := memberHash(f)
		at, found := hpairSearch(ps, h, f)
		if found {
			ps[at].v = v
			continue
		}
		ps = append(ps, hpair{})
		copy(ps[at+1:], ps[at:])
		ps[at] = hpair{h, f, v}
		added++
	}
	var val []byte
	var obj object
	if large || int64(len(ps)) > s.limits.HashMaxListpackEntries {
		h := newHashObj()
		for _, p := range ps {
			h.set(p.hash, p.f, p.v)
		}
		obj = h
	} else {
		val = packedEncode(ps)
	}
	s.putHashLocked(key, it, exists, val, obj)
	return added
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// putHashLocked stores a hash's new packed buffer or new large form.
func (s *Store) putHashLocked(key []byte, it item, exists bool, val []byte, obj object) {
	if !exists {
		s.putLocked(s.newCollection(key, kindHash, val, obj, 0))
		return
	}
	if obj != nil {
		*obj.cowGen() = s.keys.gen
	}
	it.val, it.obj = val, obj
	s.putLocked(it)
}

func applyHSet(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindHash)
	if wrong {
		return replyWrongType
	}
	added := s.hashSetLocked(c.Args[0], it, ok, c.Args[1:])
	if c.Flags&FlagHashOK != 0 {
		return replyOK
	}
	return IntReply(added)
}

func applyHSetNX(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindHash)
	if wrong {
		return replyWrongType
	}
	if ok {
		if _, found := hashField(&it, c.Args[1]); found {
			return replyZero
		}
	}
	s.hashSetLocked(c.Args[0], it, ok, c.Args[1:3])
	return replyOne
}

func applyHDel(s *Store, now int64, c *Command) Reply {
	key := c.Args[0]
	it, ok, wrong := s.lookupLocked(now, key, kindHash)
	if wrong {
		return replyWrongType
	}
	if !ok {
		return replyZero
	}
	var n int64
	if it.obj != nil {
		before := s.editLocked(&it)
		h := it.obj.(*hashObj)
		for _, f := range c.Args[1:] {
			if h.del(f) {
				n++
			}
		}
		if n == 0 {
			// No write, as in the packed form: the key's version (and a
			// move's record of it) must not depend on the form.
			return replyZero
		}
		s.endEditLocked(it, before)
		if h.tree.Len() == 0 {
			s.deleteLocked(key)
		}
		return IntReply(n)
	}
	ps := packedDecode(it.val, 0)
	for _, f := range c.Args[1:] {
		if at, found := hpairSearch(ps, memberHash(f), f); found {
			ps = append(ps[:at], ps[at+1:]...)
			n++
		}
	}
	switch {
	case n == 0:
	case len(ps) == 0:
		s.deleteLocked(key)
	default:
		s.putHashLocked(key, it, true, packedEncode(ps), nil)
	}
	return IntReply(n)
}

func applyHIncrBy(s *Store, now int64, c *Command) Reply {
	key, f := c.Args[0], c.Args[1]
	it, ok, wrong := s.lookupLocked(now, key, kindHash)
	if wrong {
		return replyWrongType
	}
	var cur int64
	if ok {
		if v, found := hashField(&it, f); found {
			var valid bool
			if cur, valid = parseInt(v); !valid {
				return ErrorReply(ErrHashNotInteger)
			}
		}
	}
	incr := c.Int
	if (incr < 0 && cur < 0 && incr < math.MinInt64-cur) || (incr > 0 && cur > 0 && incr > math.MaxInt64-cur) {
		return ErrorReply(ErrOverflow)
	}
	cur += incr
	s.hashSetLocked(key, it, ok, [][]byte{f, strconv.AppendInt(nil, cur, 10)})
	return IntReply(cur)
}

func applyHIncrByFloat(s *Store, now int64, c *Command) Reply {
	key, f := c.Args[0], c.Args[1]
	var incr *big.Float
	if len(c.Args) > 2 {
		var valid bool
		if incr, valid = parseLongDouble(c.Args[2]); !valid {
			return ErrorReply(ErrNotFloat)
		}
	} else {
		if math.IsNaN(c.Float) {
			return ErrorReply(ErrNotFloat)
		}
		incr = newLongDouble().SetFloat64(c.Float)
	}
	it, ok, wrong := s.lookupLocked(now, key, kindHash)
	if wrong {
		return replyWrongType
	}
	cur := newLongDouble()
	if ok {
		if v, found := hashField(&it, f); found {
			var valid bool
			if cur, valid = parseLongDouble(v); !valid {
				return ErrorReply(ErrHashNotFloat)
			}
		}
	}
	if cur.IsInf() || incr.IsInf() {
		return ErrorReply(ErrNaNOrInfinity)
	}
	sum := newLongDouble().Add(cur, incr)
	if sum.Sign() != 0 && sum.MantExp(nil) > longDoubleMaxExp {
		return ErrorReply(ErrNaNOrInfinity)
	}
	text := formatLongDouble(sum)
	s.hashSetLocked(key, it, ok, [][]byte{f, text})
	return BulkReply(text)
}

// hashRead is the typed lookup of the reads; reply is set when the
// answer is already known (WRONGTYPE, or empty for a missing key).
func hashRead(s *Store, now int64, key []byte, empty Reply) (it item, reply Reply, done bool) {
	it, ok, wrong := s.lookupLocked(now, key, kindHash)
	switch {
	case wrong:
		return it, replyWrongType, true
	case !ok:
		return it, empty, true
	}
	return it, Reply{}, false
}

func readHGet(s *Store, now int64, c *Command) Reply {
	it, r, done := hashRead(s, now, c.Args[0], replyNil)
	if done {
		return r
	}
	if v, ok := hashField(&it, c.Args[1]); ok {
		return BulkReply(v)
	}
	return replyNil
}

func readHMGet(s *Store, now int64, c *Command) Reply {
	it, ok, wrong := s.lookupLocked(now, c.Args[0], kindHash)
	if wrong {
		return replyWrongType
	}
	out := make([]Reply, len(c.Args)-1)
	if ok {
		for i, f := range c.Args[1:] {
			if v, found := hashField(&it, f); found {
				out[i] = BulkReply(v)
			}
		}
	}
	return Reply{Kind: ReplyArray, Array: out}
}

// hashList returns the hash's fields, values or both, in order.
func hashList(s *Store, now int64, key []byte, kind ReplyKind, fields, values bool) Reply {
	it, r, done := hashRead(s, now, key, Reply{Kind: kind, Array: []Reply{}})
	if done {
		return r
	}
	n := hashLen(&it)
	if fields && values {
		n *= 2
	}
	out := make([]Reply, 0, n)
	hashEach(&it, func(f, v []byte) bool {
		if fields {
			out = append(out, BulkReply(f))
		}
		if values {
			out = append(out, BulkReply(v))
		}
		return true
	})
	return Reply{Kind: kind, Array: out}
}

func readHGetAll(s *Store, now int64, c *Command) Reply {
	return hashList(s, now, c.Args[0], ReplyMap, true, true)
}

func readHKeys(s *Store, now int64, c *Command) Reply {
	return hashList(s, now, c.Args[0], ReplyArray, true, false)
}

func readHVals(s *Store, now int64, c *Command) Reply {
	return hashList(s, now, c.Args[0], ReplyArray, false, true)
}

func readHLen(s *Store, now int64, c *Command) Reply {
	it, r, done := hashRead(s, now, c.Args[0], replyZero)
	if done {
		return r
	}
	return IntReply(int64(hashLen(&it)))
}

func readHStrLen(s *Store, now int64, c *Command) Reply {
	it, r, done := hashRead(s, now, c.Args[0], replyZero)
	if done {
		return r
	}
	v, _ := hashField(&it, c.Args[1])
	return IntReply(int64(len(v)))
}

func readHExists(s *Store, now int64, c *Command) Reply {
	it, r, done := hashRead(s, now, c.Args[0], replyZero)
	if done {
		return r
	}
	_, ok := hashField(&it, c.Args[1])
	return boolReply(ok)
}

func writeHash(w *snapWriter, it *item) {
	if it.obj == nil {
		w.uvarint(hashFormPacked)
		w.bytes(it.val)
		return
	}
	t := it.obj.(*hashObj).tree
	w.uvarint(hashFormLarge)
	w.uvarint(uint64(t.Len()))
	t.Scan(func(e hentry) bool {
		f, v := e.split()
		w.bytes(f)
		w.bytes(v)
		return w.ok()
	})
}

// A hash's snapshot record says which form it had, so a restart keeps
// what OBJECT ENCODING answers (Redis never converts back either).
const (
	hashFormPacked = 0 // then the packed buffer, as bytes
	hashFormLarge  = 1 // then count, then count times field, value
)

// maxHashFields bounds the field count a snapshot may claim (Redis's
// limit is 2^32 - 1).
const maxHashFields = 1<<32 - 1

func readHash(r *snapReader, it *item) {
	switch form := r.uvarint(); {
	case r.err != nil:
	case form == hashFormPacked:
		b := r.bytes([]byte{})
		if r.err == nil {
			if err := validPacked(b); err != "" {
				r.fail(hashCorruptf("packed hash: %s", err))
				return
			}
			it.val = b
		}
	case form == hashFormLarge:
		n := r.count(maxHashFields)
		h := newHashObj()
		var prev hentry
		var scratch []byte
		for i := uint64(0); i < n && r.err == nil; i++ {
			scratch = r.bytes(scratch[:0])
			flen := len(scratch)
			scratch = r.bytes(scratch)
			if r.err != nil {
				return
			}
			f, v := scratch[:flen], scratch[flen:]
			e := newHentry(memberHash(f), f, v)
			if i > 0 && !hentryLess(prev, e) {
				r.fail(hashCorruptf("hash field %q out of order", f))
				return
			}
			h.tree.Load(e)
			h.bytes += hentryBytes(e)
			prev = e
		}
		if r.err == nil {
			it.obj = h
		}
	default:
		r.fail(hashCorruptf("hash form %d", form))
	}
}

// validPacked checks a packed hash read from a snapshot: a count that is
// not zero, fields and values within the buffer, fields in order without
// repeats, nothing after the last value. It returns what is wrong, or "".
func validPacked(b []byte) string {
	n, off := binary.Uvarint(b)
	if off <= 0 || n == 0 {
		return "bad count"
	}
	take := func() ([]byte, bool) {
		l, w := binary.Uvarint(b[off:])
		if w <= 0 || l > uint64(len(b)-off-w) {
			return nil, false
		}
		off += w
		s := b[off : off+int(l)]
		off += int(l)
		return s, true
	}
	var prev hpair
	for i := uint64(0); i < n; i++ {
		f, ok1 := take()
		_, ok2 := take()
		if !ok1 || !ok2 {
			return "entry " + strconv.FormatUint(i, 10) + " runs past the end"
		}
		h := memberHash(f)
		if i > 0 && !hpairLess(prev.hash, prev.f, hpair{h, f, nil}) {
			return "field " + strconv.Quote(string(f)) + " out of order"
		}
		prev = hpair{h, f, nil}
	}
	if off != len(b) {
		return "trailing bytes"
	}
	return ""
}

func hashCorruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}
