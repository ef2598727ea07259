package fsm

import (
	"crypto/sha1"
	"encoding/binary"
	"math"
	"strconv"
)

// DEBUG DIGEST and DEBUG DIGEST-VALUE: Redis's digest of a value and of a
// dataset (src/debug.c's xorObjectDigest and computeDatasetDigest), ported
// exactly, so that a digest taken before an operation and after it can be
// compared as Redis's own tests compare them, and a kvs digest equals
// redis-server's for the same data. Elements whose order does not matter
// (a set's members, a hash's fields, a sorted set's members) are xored
// together (their digests' SHA-1s); a list's are mixed in order (digest = SHA1(digest xor
// SHA1(element))). A key's digest mixes the key, its Redis type number and
// the value, and xors "!!expire!!" in when it has a TTL; a dataset's is the
// xor of its keys', logically expired keys included (Redis's DEBUG reads
// its dict), mixed with the database number 0 first when there are any.

// ObjectDigest is OpObject's Int for DEBUG DIGEST-VALUE: reply the
// key's digest as 20 bytes (nil for a missing key).
const ObjectDigest = ObjectRefCount + 1

// OpDebugDigest: no arguments. Reply an array of the xor of the SHA-1 of
// every stored key's digest (20 bytes) and the number of keys: the server combines the
// stores of a node's groups (DatasetDigest).
const OpDebugDigest = OpSlotSizes + 1

func init() {
	registerOp(OpDebugDigest, opSpec{name: "DEBUG DIGEST", args: 0, keys: keysNone, read: readDebugDigest, level: 3})
}

// xorDigest is debug.c's: digest ^= SHA1(data).
func xorDigest(d *[20]byte, data []byte) {
	h := sha1.Sum(data)
	for i := range d {
		d[i] ^= h[i]
	}
}

// mixDigest is debug.c's: digest = SHA1(digest xor SHA1(data)).
func mixDigest(d *[20]byte, data []byte) {
	xorDigest(d, data)
	*d = sha1.Sum(d[:])
}

// Redis's type numbers (OBJ_STRING ...), which each key's digest mixes in.
var redisTypeNumber = [...]uint32{kindString: 0, kindList: 1, kindSet: 2, kindZSet: 3, kindHash: 4, kindStream: 6}

// keyDigest is a key's digest as DEBUG DIGEST sums it: the key, then the
// value (itemDigest).
func keyDigest(it *item) [20]byte {
	var d [20]byte
	mixDigest(&d, []byte(it.key))
	itemDigest(&d, it)
	return d
}

// itemDigest mixes the value of it into d, as xorObjectDigest does.
func itemDigest(d *[20]byte, it *item) {
	var aux [4]byte
	if int(it.kind) < len(redisTypeNumber) {
		binary.BigEndian.PutUint32(aux[:], redisTypeNumber[it.kind])
	}
	mixDigest(d, aux[:])
	switch it.kind {
	case kindString:
		mixDigest(d, it.val)
	case kindList:
		kindTable[kindList].elements(it, func(e []byte) bool { mixDigest(d, e); return true })
	case kindSet:
		kindTable[kindSet].elements(it, func(e []byte) bool { xorDigest(d, e); return true })
	case kindZSet:
		zsetView(it).each(0, false, func(e zent) bool {
			var ed [20]byte
			mixDigest(&ed, []byte(e.member))
			mixDigest(&ed, []byte(formatG17(e.score)))
			xorDigest(d, ed[:])
			return true
		})
	case kindStream:
		// Each entry's ID as "ms.seq", then its fields and values.
		it.obj.(*stream).rangeFn(streamIDMin, streamIDMax, false, func(e streamEntry) bool {
			id := strconv.AppendUint(nil, e.id.ms, 10)
			id = strconv.AppendUint(append(id, '.'), e.id.seq, 10)
			mixDigest(d, id)
			for _, p := range e.pairs {
				mixDigest(d, p)
			}
			return true
		})
	case kindHash:
		hashEach(it, func(f, v []byte) bool {
			var ed [20]byte
			mixDigest(&ed, f)
			mixDigest(&ed, v)
			xorDigest(d, ed[:])
			return true
		})
	}
	if it.exp != 0 {
		xorDigest(d, []byte("!!expire!!"))
	}
}

// formatG17 is C's printf("%.17g", f).
func formatG17(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}

// valueDigest is DEBUG DIGEST-VALUE's answer for a stored key, expired
// or not: the digest of its value alone (the key is not mixed in).
func (s *Store) valueDigestLocked(key []byte) (Reply, bool) {
	k := unsafeString(key)
	p := s.keys.peek(keyHash(k), k)
	if p == nil {
		return Reply{}, false
	}
	var d [20]byte
	itemDigest(&d, p)
	return BulkReply(d[:]), true
}

func readDebugDigest(s *Store, now int64, c *Command) Reply {
	d, n := keysDigest(s.keys)
	return Reply{Kind: ReplyArray, Array: []Reply{BulkReply(d[:]), IntReply(n)}}
}

// keysDigest is the xor of the SHA-1 of every key's digest, and the
// number of keys.
func keysDigest(ks *keyspace) ([20]byte, int64) {
	var d [20]byte
	n := int64(0)
	ks.Scan(func(it item) bool {
		kd := keyDigest(&it)
		xorDigest(&d, kd[:])
		n++
		return true
	})
	return d, n
}

// Digest is OpDebugDigest's answer for the snapshot's keys: what DEBUG
// RELOAD compares with the store the snapshot is loaded into.
func (sn *Snapshot) Digest() ([20]byte, int64) { return keysDigest(sn.keys) }

// DatabaseDigest is DEBUG DIGEST's dataset digest d with database db's
// keys mixed in, as Redis's computeDatasetDigest goes over its databases:
// the database's number, then the xor of its keys' digests (keys, of n
// keys; a database without keys leaves d as it was).
func DatabaseDigest(d [20]byte, db int, keys [20]byte, n int64) [20]byte {
	if n == 0 {
		return d
	}
	mixDigest(&d, []byte{byte(db >> 24), byte(db >> 16), byte(db >> 8), byte(db)})
	for i := range d {
		d[i] ^= keys[i]
	}
	return d
}

// DatasetDigest is DEBUG DIGEST's 20 bytes from the xor of the SHA-1 of
// every key's digest and the number of keys (OpDebugDigest's replies, xored across a
// node's stores): zero without keys, else database 0's number mixed in
// first, as computeDatasetDigest does.
func DatasetDigest(keys [20]byte, n int64) [20]byte {
	var d [20]byte
	if n == 0 {
		return d
	}
	mixDigest(&d, []byte{0, 0, 0, 0})
	for i := range d {
		d[i] ^= keys[i]
	}
	return d
}
