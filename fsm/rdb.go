package fsm

import (
	"encoding/binary"
	"hash/crc64"
	"strings"
)

// What package rdb (Redis's RDB files) needs of the value codec: kvs
// reads and writes a value in an RDB file exactly as DUMP and RESTORE do,
// one codec for both.
//
// A key read from an RDB file reaches a store as an OpRestore of
// RDBPayload(version, value); a function library as an OpFunctionRestore
// of FunctionPayload(code).

// RDBVersion is the RDB version kvs writes (Redis 7.0's).
const RDBVersion = rdbVersion

// RDBPayload makes a DUMP payload of one RDB value (its type byte and
// encoding) read from an RDB file of the given version, which OpRestore
// applies. A payload of version 11 may hold the set listpack of Redis
// 7.2, which RESTORE refuses over the wire as Redis 7.0 does (the
// server's VerifyDumpPayload stops at version 10).
func RDBPayload(version int, value []byte) []byte {
	b := make([]byte, 0, len(value)+10)
	b = append(b, value...)
	b = binary.LittleEndian.AppendUint16(b, uint16(version))
	return binary.LittleEndian.AppendUint64(b, crc64Jones(b))
}

// FunctionPayload makes the payload of FUNCTION RESTORE for one library's
// code, which OpFunctionRestore applies.
func FunctionPayload(code []byte) []byte {
	b := appendRDBString([]byte{rdbOpcodeFunction2}, code)
	return appendDumpFooter(b)
}

// CheckRDBValue reports whether value, one RDB value of an RDB file of
// the given version, is one RESTORE reads: a kind kvs keeps, passing
// Redis's deep validation.
func CheckRDBValue(version int, value []byte) bool {
	_, ok := decodeDumpPayload(RDBPayload(version, value))
	return ok
}

// AppendRDBLen appends n as Redis's rdbSaveLen writes a length.
func AppendRDBLen(b []byte, n uint64) []byte { return appendRDBLen(b, n) }

// AppendRDBString appends s as Redis's rdbSaveRawString writes a string
// with rdbcompression on.
func AppendRDBString(b, s []byte) []byte { return appendRDBString(b, s) }

// LZFDecompress decompresses an RDB string's LZF bytes, which must give
// exactly n bytes.
func LZFDecompress(in []byte, n int) ([]byte, bool) { return lzfDecompress(in, n) }

// CRC64 is Redis's crc64(crc, b), the checksum of RDB files and DUMP
// payloads: start from 0, and feed it the bytes in pieces.
func CRC64(crc uint64, b []byte) uint64 {
	return ^crc64.Update(^crc, jonesTable, b)
}

// DumpEach calls fn with each key of database 0 of the snapshot that is live at now,
// its deadline (Unix ms, 0 for none) and its value as one RDB value (the
// type byte and the object as DUMP writes it under lim), in keyspace
// order, until fn returns an error, which it returns. value is fn's only
// for the call.
func (sn *Snapshot) DumpEach(now int64, lim Limits, fn func(key []byte, exp int64, value []byte) error) error {
	return sn.DumpEachDB(0, now, lim, fn)
}

// DBs returns the databases of the snapshot holding keys (expired or
// not), ascending.
func (sn *Snapshot) DBs() []int {
	var out []int
	if sn.keys != nil && sn.keys.Len() > 0 {
		out = append(out, 0)
	}
	for _, d := range sn.dbs {
		out = append(out, int(d.db))
	}
	return out
}

// dbKeys is database db's keyspace in the snapshot, nil when it holds
// none.
func (sn *Snapshot) dbKeys(db int) *keyspace {
	if db == 0 {
		return sn.keys
	}
	for _, d := range sn.dbs {
		if int(d.db) == db {
			return d.keys
		}
	}
	return nil
}

// DBLen returns the number of keys of database db in the snapshot, and
// of them those with a deadline, expired or not (RESIZEDB's hints).
func (sn *Snapshot) DBLen(db int) (keys, expires int) {
	if ks := sn.dbKeys(db); ks != nil {
		return ks.Len(), ks.TTLs()
	}
	return 0, 0
}

// DumpEachDB is DumpEach of database db's keys.
func (sn *Snapshot) DumpEachDB(db int, now int64, lim Limits, fn func(key []byte, exp int64, value []byte) error) error {
	if sn.keys == nil {
		return errReleased
	}
	ks := sn.dbKeys(db)
	if ks == nil {
		return nil
	}
	var err error
	var buf []byte
	ks.Scan(func(it item) bool {
		if it.expired(now) {
			return true
		}
		buf = appendDumpValue(buf[:0], &it, &lim)
		err = fn([]byte(it.key), it.exp, buf)
		return err == nil
	})
	return err
}

// Libraries returns the code of the snapshot's function libraries, in
// the order of their names.
func (sn *Snapshot) Libraries() []string {
	var out []string
	for _, name := range sortedMeta(sn.meta) {
		if strings.HasPrefix(name, libraryMetaPrefix) {
			out = append(out, sn.meta[name])
		}
	}
	return out
}

// EmptyRDBValue reports whether value, one RDB value that CheckRDBValue
// refuses, is a well-formed empty collection: Redis skips such a key
// when it loads a file (older versions could write them), where RESTORE
// refuses it.
func EmptyRDBValue(value []byte) bool {
	r := rdbReader{b: value}
	t, ok := r.read(1)
	if !ok {
		return false
	}
	switch t[0] {
	case rdbTypeList, rdbTypeListZiplist, rdbTypeListQuicklist, rdbTypeListQuicklist2:
		if n, enc, ok := (&rdbReader{b: value, pos: 1}).readLen(); ok && !enc && n == 0 && t[0] != rdbTypeListZiplist {
			return true
		}
		elems, ok := readDumpList(&r, t[0])
		return ok && len(elems) == 0
	case rdbTypeSet, rdbTypeZSet, rdbTypeZSet2, rdbTypeHash:
		n, enc, ok := r.readLen()
		return ok && !enc && n == 0
	case rdbTypeSetIntset:
		b, ok := r.readString()
		if !ok {
			return false
		}
		ms, ok := intsetMembers(b)
		return ok && len(ms) == 0
	case rdbTypeZSetZiplist, rdbTypeHashZiplist:
		b, ok := r.readString()
		if !ok {
			return false
		}
		es, ok := ziplistEntries(b)
		return ok && len(es) == 0
	case rdbTypeHashListpack, rdbTypeZSetListpack, rdbTypeSetListpack:
		b, ok := r.readString()
		if !ok {
			return false
		}
		es, ok := lpEntries(b)
		return ok && len(es) == 0
	}
	return false
}
