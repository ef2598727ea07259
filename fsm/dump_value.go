package fsm

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
)

// A key's value as a DUMP payload (dump.go's framing): one RDB type byte
// and the object as Redis 7.0's rdbSaveObject writes it for the encoding
// OBJECT ENCODING reports, then the footer.
//
//	string                  RDB_TYPE_STRING
//	list (quicklist)        RDB_TYPE_LIST_QUICKLIST_2, listpack nodes
//	set intset / hashtable  RDB_TYPE_SET_INTSET / RDB_TYPE_SET
//	zset listpack/skiplist  RDB_TYPE_ZSET_LISTPACK / RDB_TYPE_ZSET_2
//	hash listpack/hashtable RDB_TYPE_HASH_LISTPACK / RDB_TYPE_HASH
//
// The bytes are redis-server's for the same value and encoding, but
// where kvs does not keep what decides them: a hash's or a set's members
// are in kvs's order (Redis's listpack keeps insertion order, its dict its
// own); a list is cut into quicklist nodes as pushing its elements at the
// tail would cut it (Redis's nodes depend on the list's history); an
// intset has the narrowest width its members need (Redis's never
// narrows after a removal). RESTORE of either reads the other's.

// RDB object types (rdb.h).
const (
	rdbTypeString          = 0
	rdbTypeList            = 1
	rdbTypeSet             = 2
	rdbTypeZSet            = 3
	rdbTypeHash            = 4
	rdbTypeZSet2           = 5
	rdbTypeModule          = 6
	rdbTypeModule2         = 7
	rdbTypeHashZipmap      = 9
	rdbTypeListZiplist     = 10
	rdbTypeSetIntset       = 11
	rdbTypeZSetZiplist     = 12
	rdbTypeHashZiplist     = 13
	rdbTypeListQuicklist   = 14
	rdbTypeStreamListpacks = 15
	rdbTypeHashListpack    = 16
	rdbTypeZSetListpack    = 17
	rdbTypeListQuicklist2  = 18
	rdbTypeStreamListpack2 = 19
	// Redis 7.2 (RDB version 11): a set as a listpack of its members, and
	// streams with their consumers' active time. RESTORE reads the first
	// only from a payload of version 11 (what RDB files of Redis 7.2 hand
	// over, package rdb): Redis 7.0 knows no such type.
	rdbTypeSetListpack     = 20
	rdbTypeStreamListpack3 = 21
)

// rdbVersionSetListpack is the first RDB version with rdbTypeSetListpack.
const rdbVersionSetListpack = 11

// Quicklist node containers (QUICKLIST_NODE_CONTAINER_*).
const (
	quicklistPlain  = 1
	quicklistPacked = 2
)

// dumpPayload is DUMP's reply for it under the encoding limits lim (the
// list's node size).
func dumpPayload(it *item, lim *Limits) []byte {
	return appendDumpFooter(appendDumpValue(nil, it, lim))
}

// appendDumpValue appends it as one RDB value: its type byte and the
// object.
func appendDumpValue(b []byte, it *item, lim *Limits) []byte {
	switch it.kind {
	case kindString:
		b = appendRDBString(append(b, rdbTypeString), it.val)
	case kindList:
		b = appendDumpList(append(b, rdbTypeListQuicklist2), it, lim.ListMaxListpackSize)
	case kindSet:
		b = appendDumpSet(b, it)
	case kindZSet:
		b = appendDumpZSet(b, it)
	case kindHash:
		b = appendDumpHash(b, it)
	case kindStream:
		b = appendDumpStream(b, it)
	}
	return b
}

// quicklistOptimization is quicklist.c's optimization_level: the node
// sizes of list-max-listpack-size -1 to -5.
var quicklistOptimization = [...]int{4096, 8192, 16384, 32768, 65536}

// quicklistAllowInsert is _quicklistNodeAllowInsert: whether a node of
// nodeBytes bytes and count entries takes one more of sz bytes.
func quicklistAllowInsert(nodeBytes, count, sz int, fill int64) bool {
	newSz := nodeBytes + sz + 8 // SIZE_ESTIMATE_OVERHEAD
	if fill < 0 {
		if off := -fill - 1; off < int64(len(quicklistOptimization)) && newSz <= quicklistOptimization[off] {
			return true
		}
	}
	if newSz > 8192 { // SIZE_SAFETY_LIMIT
		return false
	}
	return int64(count) < fill
}

// appendDumpList writes the list as quicklistPushTail would cut it into
// listpack nodes, each an RDB string.
func appendDumpList(b []byte, it *item, fill int64) []byte {
	var nodes [][]byte
	cur := newLPBuilder()
	listElements(it, func(e []byte) bool {
		if cur.n > 0 && !quicklistAllowInsert(cur.bytes(), cur.n, len(e), fill) {
			nodes = append(nodes, cur.finish())
			cur = newLPBuilder()
		}
		cur.add(e)
		return true
	})
	if cur.n > 0 {
		nodes = append(nodes, cur.finish())
	}
	b = appendRDBLen(b, uint64(len(nodes)))
	for _, n := range nodes {
		b = appendRDBLen(b, quicklistPacked)
		b = appendRDBString(b, n)
	}
	return b
}

func appendDumpSet(b []byte, it *item) []byte {
	v := viewOf(it)
	if v.isIntset() {
		ints := make([]int64, 0, v.len())
		v.each(func(_ uint64, m []byte) bool {
			n, _ := parseInt(m)
			ints = append(ints, n)
			return true
		})
		slices.Sort(ints)
		return appendRDBString(append(b, rdbTypeSetIntset), appendIntset(nil, ints))
	}
	b = appendRDBLen(append(b, rdbTypeSet), uint64(v.len()))
	v.each(func(_ uint64, m []byte) bool {
		b = appendRDBString(b, m)
		return true
	})
	return b
}

// appendDumpZSet writes a listpack of member, score pairs by score, or
// the skiplist's members from the highest score down, as rdbSaveObject
// walks it, each with its score as a binary double.
func appendDumpZSet(b []byte, it *item) []byte {
	v := zsetView(it)
	if it.obj == nil {
		lp := newLPBuilder()
		v.each(0, false, func(e zent) bool {
			lp.add([]byte(e.member))
			lp.add(listpackScore(e.score))
			return true
		})
		return appendRDBString(append(b, rdbTypeZSetListpack), lp.finish())
	}
	n := v.card()
	b = appendRDBLen(append(b, rdbTypeZSet2), uint64(n))
	v.each(n-1, true, func(e zent) bool {
		b = appendRDBString(b, []byte(e.member))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.score))
		return true
	})
	return b
}

// listpackScore is a score as zzlInsertAt writes it into a listpack (and
// ZSCAN of a listpack answers it): an integer when double2ll allows,
// else d2string's "%.17g".
func listpackScore(f float64) []byte {
	if l, ok := double2ll(f); ok {
		return strconv.AppendInt(nil, l, 10)
	}
	return formatScore(f)
}

// double2ll is util.c's: f as an integer when it is one well inside the
// range of a long long.
func double2ll(f float64) (int64, bool) {
	const lim = float64(math.MaxInt64 / 2)
	if f < -lim || f > lim || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

func appendDumpHash(b []byte, it *item) []byte {
	if it.obj == nil {
		lp := newLPBuilder()
		hashEach(it, func(f, v []byte) bool {
			lp.add(f)
			lp.add(v)
			return true
		})
		return appendRDBString(append(b, rdbTypeHashListpack), lp.finish())
	}
	b = appendRDBLen(append(b, rdbTypeHash), uint64(hashLen(it)))
	hashEach(it, func(f, v []byte) bool {
		b = appendRDBString(b, f)
		b = appendRDBString(b, v)
		return true
	})
	return b
}

// dumpValue is a payload's value, decoded and validated, before it takes
// one of kvs's forms (restoreValueLocked).
type dumpValue struct {
	kind  kind
	str   []byte   // a string
	elems [][]byte // a list's elements, head to tail
	set   []hashed // a set's members, in member order
	pairs []hpair  // a hash's fields, in field order
	ents  []zent   // a sorted set's members, by score
	st    *stream  // a stream
	// flat: the payload held a listpack or ziplist hash or sorted set,
	// which Redis keeps so while it has few enough elements, however long
	// they are (it checks only the count on load).
	flat bool
}

// errBadDump is RESTORE's answer to a payload it cannot read.
const errBadDump = "ERR Bad data format"

// decodeDumpPayload reads the value of a DUMP payload whose footer was
// checked (VerifyDumpPayload), as Redis's rdbLoadObjectType and
// rdbLoadObject do with deep sanitization: the object may reach into the
// footer and bytes after it are ignored, as in Redis. It never panics.
func decodeDumpPayload(p []byte) (v dumpValue, ok bool) {
	r := rdbReader{b: p}
	t, ok := r.read(1)
	if !ok {
		return v, false
	}
	switch t[0] {
	case rdbTypeString:
		v.kind = kindString
		v.str, ok = r.readString()
		return v, ok
	case rdbTypeList, rdbTypeListZiplist, rdbTypeListQuicklist, rdbTypeListQuicklist2:
		v.kind = kindList
		v.elems, ok = readDumpList(&r, t[0])
		return v, ok && len(v.elems) > 0
	case rdbTypeSet, rdbTypeSetIntset:
		v.kind = kindSet
		v.set, ok = readDumpSet(&r, t[0])
		return v, ok
	case rdbTypeSetListpack:
		if len(p) < 10 || binary.LittleEndian.Uint16(p[len(p)-10:]) < rdbVersionSetListpack {
			return v, false
		}
		v.kind = kindSet
		v.set, ok = readDumpSet(&r, t[0])
		return v, ok
	case rdbTypeZSet, rdbTypeZSet2, rdbTypeZSetZiplist, rdbTypeZSetListpack:
		v.kind = kindZSet
		v.flat = t[0] == rdbTypeZSetZiplist || t[0] == rdbTypeZSetListpack
		v.ents, ok = readDumpZSet(&r, t[0])
		return v, ok
	case rdbTypeHash, rdbTypeHashZiplist, rdbTypeHashListpack, rdbTypeHashZipmap:
		v.kind = kindHash
		// A zipmap converts by its longest element too.
		v.flat = t[0] == rdbTypeHashZiplist || t[0] == rdbTypeHashListpack
		v.pairs, ok = readDumpHash(&r, t[0])
		return v, ok
	case rdbTypeStreamListpack2, rdbTypeStreamListpacks:
		v.kind = kindStream
		v.st, ok = readDumpStream(&r, t[0])
		return v, ok
	}
	// Modules: kinds kvs does not keep.
	return v, false
}

// readCount reads a collection's length, refusing 0 (Redis's empty key
// error) and lengths the payload's bytes cannot hold, at least one byte
// each, so that no length allocates more than the payload's size.
func (r *rdbReader) readCount() (int, bool) {
	n, enc, ok := r.readLen()
	if !ok || enc || n == 0 || n > uint64(len(r.b)-r.pos) {
		return 0, false
	}
	return int(n), true
}

// readBlob reads an RDB string holding a flat encoding.
func (r *rdbReader) readBlob() ([]byte, bool) {
	b, ok := r.readString()
	return b, ok && len(b) > 0
}

func readDumpList(r *rdbReader, t byte) ([][]byte, bool) {
	switch t {
	case rdbTypeList:
		n, ok := r.readCount()
		if !ok {
			return nil, false
		}
		out := make([][]byte, 0, n)
		for range n {
			e, ok := r.readString()
			if !ok {
				return nil, false
			}
			out = append(out, e)
		}
		return out, true
	case rdbTypeListZiplist:
		z, ok := r.readBlob()
		if !ok {
			return nil, false
		}
		return ziplistEntries(z)
	}
	nodes, ok := r.readCount()
	if !ok {
		return nil, false
	}
	var out [][]byte
	for range nodes {
		container := uint64(quicklistPacked)
		if t == rdbTypeListQuicklist2 {
			var enc bool
			container, enc, ok = r.readLen()
			if !ok || enc || container != quicklistPacked && container != quicklistPlain {
				return nil, false
			}
		}
		data, ok := r.readBlob()
		if !ok {
			return nil, false
		}
		if container == quicklistPlain {
			out = append(out, data)
			continue
		}
		var es [][]byte
		if t == rdbTypeListQuicklist2 {
			es, ok = lpEntries(data)
		} else {
			es, ok = ziplistEntries(data)
		}
		if !ok {
			return nil, false
		}
		// An empty node is skipped, as Redis skips it.
		out = append(out, es...)
	}
	return out, true
}

func readDumpSet(r *rdbReader, t byte) ([]hashed, bool) {
	var ms [][]byte
	if t == rdbTypeSetIntset {
		is, ok := r.readBlob()
		if !ok {
			return nil, false
		}
		if ms, ok = intsetMembers(is); !ok {
			return nil, false
		}
	} else if t == rdbTypeSetListpack {
		lp, ok := r.readBlob()
		if !ok {
			return nil, false
		}
		// lpValidateIntegrityAndDups; an empty one is an empty key.
		if ms, ok = lpEntries(lp); !ok || len(ms) == 0 {
			return nil, false
		}
	} else {
		n, ok := r.readCount()
		if !ok {
			return nil, false
		}
		ms = make([][]byte, 0, n)
		for range n {
			m, ok := r.readString()
			if !ok {
				return nil, false
			}
			ms = append(ms, m)
		}
	}
	sorted := sortedMembers(ms)
	// A duplicate is refused ("Duplicate set members detected").
	return sorted, len(sorted) == len(ms)
}

func readDumpZSet(r *rdbReader, t byte) ([]zent, bool) {
	var ents []zent
	switch t {
	case rdbTypeZSet, rdbTypeZSet2:
		n, ok := r.readCount()
		if !ok {
			return nil, false
		}
		ents = make([]zent, 0, n)
		for range n {
			m, ok := r.readString()
			if !ok {
				return nil, false
			}
			var f float64
			if t == rdbTypeZSet2 {
				b, ok := r.read(8)
				if !ok {
					return nil, false
				}
				f = math.Float64frombits(binary.LittleEndian.Uint64(b))
			} else if f, ok = r.readStringDouble(); !ok {
				return nil, false
			}
			if math.IsNaN(f) {
				return nil, false
			}
			ents = append(ents, zent{f, string(m)})
		}
	default:
		pairs, ok := readFlatPairs(r, t == rdbTypeZSetZiplist)
		if !ok {
			return nil, false
		}
		ents = make([]zent, 0, len(pairs)/2)
		for i := 0; i < len(pairs); i += 2 {
			f, err := strconv.ParseFloat(string(pairs[i+1]), 64)
			if err != nil && !isRangeErr(err) || math.IsNaN(f) {
				return nil, false
			}
			ents = append(ents, zent{f, string(pairs[i])})
		}
	}
	slices.SortFunc(ents, zentCompare)
	seen := make(map[string]struct{}, len(ents))
	for _, e := range ents {
		if _, dup := seen[e.member]; dup {
			return nil, false // "Duplicate zset fields detected"
		}
		seen[e.member] = struct{}{}
	}
	return ents, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// readStringDouble is rdbLoadDoubleValue: a length byte (253 nan, 254
// inf, 255 -inf) and that many bytes of text.
func (r *rdbReader) readStringDouble() (float64, bool) {
	l, ok := r.read(1)
	if !ok {
		return 0, false
	}
	switch l[0] {
	case 253:
		return math.NaN(), true
	case 254:
		return math.Inf(1), true
	case 255:
		return math.Inf(-1), true
	}
	b, ok := r.read(uint64(l[0]))
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	return f, err == nil || isRangeErr(err)
}

// readFlatPairs reads a listpack (or ziplist) of pairs, as
// lpPairsValidateIntegrityAndDups and ziplistPairsConvertAndValidateIntegrity
// do: an even count, not empty (an empty key), no key twice.
func readFlatPairs(r *rdbReader, ziplist bool) ([][]byte, bool) {
	blob, ok := r.readBlob()
	if !ok {
		return nil, false
	}
	var es [][]byte
	if ziplist {
		es, ok = ziplistEntries(blob)
	} else {
		es, ok = lpEntries(blob)
	}
	if !ok || len(es) == 0 || len(es)%2 != 0 {
		return nil, false
	}
	seen := make(map[string]struct{}, len(es)/2)
	for i := 0; i < len(es); i += 2 {
		if _, dup := seen[string(es[i])]; dup {
			return nil, false
		}
		seen[string(es[i])] = struct{}{}
	}
	return es, true
}

func readDumpHash(r *rdbReader, t byte) ([]hpair, bool) {
	var flat [][]byte
	if t == rdbTypeHash {
		n, ok := r.readCount()
		if !ok {
			return nil, false
		}
		flat = make([][]byte, 0, 2*n)
		for range 2 * n {
			s, ok := r.readString()
			if !ok {
				return nil, false
			}
			flat = append(flat, s)
		}
	} else if t == rdbTypeHashZipmap {
		zm, ok := r.readBlob()
		if !ok {
			return nil, false
		}
		if flat, ok = zipmapPairs(zm); !ok {
			return nil, false
		}
	} else {
		var ok bool
		if flat, ok = readFlatPairs(r, t == rdbTypeHashZiplist); !ok {
			return nil, false
		}
	}
	ps := make([]hpair, 0, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		ps = append(ps, hpair{memberHash(flat[i]), flat[i], flat[i+1]})
	}
	slices.SortFunc(ps, func(a, b hpair) int {
		return compareHashed(hashed{a.hash, a.f}, hashed{b.hash, b.f})
	})
	for i := 1; i < len(ps); i++ {
		if ps[i].hash == ps[i-1].hash && string(ps[i].f) == string(ps[i-1].f) {
			return nil, false // "Duplicate hash fields detected"
		}
	}
	return ps, true
}
