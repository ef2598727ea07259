// Package rdb reads and writes Redis's RDB files: what redis-server's
// SAVE and BGSAVE write to dump.rdb, and what a master sends a replica in
// a full sync. kvs loads them (kvs restore --rdb) and writes them (SAVE,
// BGSAVE, SYNC and PSYNC), so that data moves between kvs and
// redis-server either way.
//
// The file format (Redis's rdb.c and rdb.h):
//
//	file     = "REDIS" version:4 digits  record*  EOF(255) checksum
//	record   = AUX(250) name:string value:string
//	         | SELECTDB(254) db:length
//	         | RESIZEDB(251) keys:length expires:length
//	         | FUNCTION2(245) code:string
//	         | FUNCTION(246) name:string engine:string has-desc:length [desc:string] code:string   (7.0 rc)
//	         | MODULE_AUX(247) ...                 (refused: kvs has no modules)
//	         | [EXPIRETIME(253) seconds:int32le | EXPIRETIME_MS(252) ms:int64le]
//	           [IDLE(248) seconds:length] [FREQ(249) freq:byte]
//	           type:byte key:string value
//	checksum = CRC-64 (Redis's crc64) of every byte before it, uint64le;
//	           absent before version 5, 0 when the writer did not compute it
//
// A value is the object as rdbSaveObject writes it for its type (the
// RDB_TYPE_* constants), the same bytes as a DUMP payload's before its
// footer; a length and a string are as fsm's DUMP codec reads them.
// Versions 1 to 11 are read: 9 is Redis 5 and 6, 10 Redis 7.0, 11 Redis
// 7.2 (a set as a listpack, TypeSetListpack; streams with their consumers'
// active time, TypeStreamListpacks3, which the Decoder gives as a
// TypeStreamListpacks2 without those times: Redis 7.0 has none). Version
// 10 is written.
//
// # Reading
//
// A Decoder reads a file as a stream, one Entry at a time, checking the
// framing and the checksum, never holding more than one value:
//
//	d := rdb.NewDecoder(r)
//	for {
//		e, err := d.Next()
//		if err == io.EOF {
//			break // the EOF opcode and a matching checksum were read
//		}
//		if err != nil {
//			return err // an *rdb.Error, naming the offset
//		}
//		switch e.Kind {
//		case rdb.KindKey:      // e.DB, e.Key, e.Expire, e.Type, e.Value
//		case rdb.KindFunction: // e.Value is a library's code
//		case rdb.KindAux:      // e.Key, e.Value
//		}
//	}
//
// The Decoder walks a value's structure to find its end but does not
// decode it: e.Value is its raw encoding, and e.Payload() makes the DUMP
// payload that fsm's OpRestore applies (fsm.RDBPayload), where fsm's one
// value codec decodes and validates it as RESTORE does. The Decoder reads
// nothing past the checksum: a replica reads the command stream that
// follows a full sync from the same reader.
//
// Load does all of that into an fsm.Store (a new one, or one being
// replaced by a full sync): it applies each key as an OpRestore and each
// function library as an OpFunctionRestore (Command makes them), each key
// in its database, refuses keys of databases beyond those the store will
// have, module values and anything damaged, and counts what
// it loaded (Stats). Load applies straight to the store, outside any log;
// on an error the store holds part of the file, so load into a new store
// and put it in place only once Load returned nil.
//
// # A replica's full sync
//
// A replica of a redis-server reads the master's answer to PSYNC
// (+FULLRESYNC replid offset) and then the file's length line, "$<len>"
// or, diskless, "$EOF:<40-byte mark>", from a *bufio.Reader br on the
// connection, and hands br itself to NewDecoder or Load: the Decoder
// reads from br and stops right after the checksum, so br then holds, in
// the EOF form, the 40-byte mark, and after it the command stream. With
// "$<len>", the file is exactly len bytes (Decoder.Offset tells how many
// were read). Keys whose deadline has passed at LoadOptions.Now are left
// out, which a replica may do too: kvs never serves an expired key.
//
// # Writing
//
// An Encoder writes a file: NewEncoder writes the header and the AUX
// fields, then Function and Key records, and Close writes the EOF opcode
// and the checksum. WriteSnapshot writes a whole fsm.Snapshot (every live
// key with its deadline, and the function libraries) in the format Redis
// 7.0 loads.
package rdb

import (
	"fmt"

	"kvs/fsm"
)

// Version is the RDB version the Encoder writes (Redis 7.0's); MaxVersion
// the newest the Decoder reads (Redis 7.2's).
const (
	Version    = fsm.RDBVersion
	MaxVersion = 11
)

// Value types (RDB_TYPE_*).
const (
	TypeString           = 0
	TypeList             = 1
	TypeSet              = 2
	TypeZSet             = 3
	TypeHash             = 4
	TypeZSet2            = 5
	TypeModule           = 6
	TypeModule2          = 7
	TypeHashZipmap       = 9
	TypeListZiplist      = 10
	TypeSetIntset        = 11
	TypeZSetZiplist      = 12
	TypeHashZiplist      = 13
	TypeListQuicklist    = 14
	TypeStreamListpacks  = 15
	TypeHashListpack     = 16
	TypeZSetListpack     = 17
	TypeListQuicklist2   = 18
	TypeStreamListpacks2 = 19
	TypeSetListpack      = 20
	TypeStreamListpacks3 = 21
)

// Opcodes (RDB_OPCODE_*).
const (
	opFunction2    = 245
	opFunction     = 246
	opModuleAux    = 247
	opIdle         = 248
	opFreq         = 249
	opAux          = 250
	opResizeDB     = 251
	opExpireTimeMs = 252
	opExpireTime   = 253
	opSelectDB     = 254
	opEOF          = 255
)

// IsStream reports whether t is one of the stream types.
func IsStream(t byte) bool {
	return t == TypeStreamListpacks || t == TypeStreamListpacks2 || t == TypeStreamListpacks3
}

// TypeName names a value type as Redis's TYPE would ("string", "list",
// ...), or "module" or "unknown".
func TypeName(t byte) string {
	switch t {
	case TypeString:
		return "string"
	case TypeList, TypeListZiplist, TypeListQuicklist, TypeListQuicklist2:
		return "list"
	case TypeSet, TypeSetIntset, TypeSetListpack:
		return "set"
	case TypeZSet, TypeZSet2, TypeZSetZiplist, TypeZSetListpack:
		return "zset"
	case TypeHash, TypeHashZipmap, TypeHashZiplist, TypeHashListpack:
		return "hash"
	case TypeStreamListpacks, TypeStreamListpacks2, TypeStreamListpacks3:
		return "stream"
	case TypeModule, TypeModule2:
		return "module"
	}
	return "unknown"
}

// Kind is what an Entry holds.
type Kind uint8

const (
	// KindKey is a key: DB, Key, Expire, Idle, Freq, Type and Value.
	KindKey Kind = iota
	// KindAux is an AUX field: Key is its name, Value its value.
	KindAux
	// KindFunction is a function library: Value is its code (for the
	// format of 7.0's release candidates, translated as Redis does).
	KindFunction
)

// Entry is one record of an RDB file. Its slices are the Entry's own.
type Entry struct {
	Kind   Kind
	Offset int64  // where the record (its first opcode) starts in the file
	DB     uint64 // the last SELECTDB's (0 before any)
	Key    []byte
	// Expire is the key's deadline, Unix ms, or -1 for none.
	Expire int64
	// Idle (seconds) and Freq are the key's IDLE and FREQ, or -1.
	Idle int64
	Freq int
	// Type is the value's RDB type; Value its encoding (for KindKey), the
	// AUX field's value, or the library's code. A TypeStreamListpacks3
	// in the file is given as TypeStreamListpacks2, its consumers'
	// active times left out.
	Type  byte
	Value []byte
	// Version is the file's RDB version.
	Version int
}

// Payload returns a key's value as a DUMP payload, which fsm's
// OpRestore applies: Type, Value and the footer of the file's version.
func (e *Entry) Payload() []byte {
	v := make([]byte, 0, 1+len(e.Value))
	v = append(append(v, e.Type), e.Value...)
	return fsm.RDBPayload(e.Version, v)
}

// Error is a damaged or unreadable file: what is wrong and where.
type Error struct {
	Offset int64 // of the record (or header, or checksum) that is wrong
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("rdb: at offset %d: %s", e.Offset, e.Msg) }
