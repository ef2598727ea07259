package rdb

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"kvs/fsm"
)

// Encoder writes an RDB file of version Version: see the package's doc.
type Encoder struct {
	w   *bufio.Writer
	crc uint64
	n   int64
	err error
	buf []byte
}

// NewEncoder writes the header and returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder {
	e := &Encoder{w: bufio.NewWriterSize(w, 256<<10)}
	e.write([]byte(fmt.Sprintf("REDIS%04d", Version)))
	return e
}

func (e *Encoder) write(p []byte) {
	if e.err != nil {
		return
	}
	e.crc = fsm.CRC64(e.crc, p)
	n, err := e.w.Write(p)
	e.n += int64(n)
	e.err = err
}

// Written is the number of bytes written so far.
func (e *Encoder) Written() int64 { return e.n }

// Aux writes an AUX field.
func (e *Encoder) Aux(name, value string) error {
	b := fsm.AppendRDBString(append(e.buf[:0], opAux), []byte(name))
	e.buf = fsm.AppendRDBString(b, []byte(value))
	e.write(e.buf)
	return e.err
}

// SelectDB writes SELECTDB and RESIZEDB: the keys that follow are db's,
// keys of them with expires of them having a deadline (hints).
func (e *Encoder) SelectDB(db, keys, expires uint64) error {
	b := fsm.AppendRDBLen(append(e.buf[:0], opSelectDB), db)
	b = fsm.AppendRDBLen(append(b, opResizeDB), keys)
	e.buf = fsm.AppendRDBLen(b, expires)
	e.write(e.buf)
	return e.err
}

// Function writes a function library's code (FUNCTION2).
func (e *Encoder) Function(code []byte) error {
	e.buf = fsm.AppendRDBString(append(e.buf[:0], opFunction2), code)
	e.write(e.buf)
	return e.err
}

// Key writes a key with its deadline (Unix ms, -1 for none) and its
// value: the RDB type byte and the encoding, as fsm's Snapshot.DumpEach
// and a DUMP payload without its footer hold it.
func (e *Encoder) Key(key []byte, expire int64, value []byte) error {
	if len(value) == 0 {
		return fmt.Errorf("rdb: key %q without a value", key)
	}
	b := e.buf[:0]
	if expire != -1 {
		b = binary.LittleEndian.AppendUint64(append(b, opExpireTimeMs), uint64(expire))
	}
	b = fsm.AppendRDBString(append(b, value[0]), key)
	e.buf = b
	e.write(b)
	e.write(value[1:])
	return e.err
}

// Close writes the EOF opcode and the checksum and flushes; it does not
// close the underlying writer.
func (e *Encoder) Close() error {
	e.write([]byte{opEOF})
	e.write(binary.LittleEndian.AppendUint64(nil, e.crc))
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.err
}

// Info is what WriteSnapshot writes in the AUX fields.
type Info struct {
	RedisVersion string // redis-ver; empty: "7.0.15"
	// Replication, for a full sync: repl-id and repl-offset (written
	// when ReplID is not empty).
	ReplID     string
	ReplOffset int64
}

// SnapshotPart is one store's view for WriteSnapshot: a node of several
// groups writes the keys of each (every key is in one group).
type SnapshotPart struct {
	Snap   *fsm.Snapshot
	Limits fsm.Limits // the store's encoding limits (a list's node size)
	// NoKeys leaves the part's keys out, NoFunctions the libraries (a
	// replica's REPLCONF rdb-filter-only).
	NoKeys, NoFunctions bool
}

// WriteSnapshot writes an RDB file of the parts to w: the AUX fields
// Redis 7.0 writes, the function libraries (the first part's: each group
// has them all), and every key live at now (Unix ms) with its deadline,
// in its database. It returns the number of keys written.
func WriteSnapshot(w io.Writer, parts []SnapshotPart, now int64, info Info) (int, error) {
	e := NewEncoder(w)
	ver := info.RedisVersion
	if ver == "" {
		ver = "7.0.15"
	}
	e.Aux("redis-ver", ver)
	e.Aux("redis-bits", "64")
	e.Aux("ctime", strconv.FormatInt(time.UnixMilli(now).Unix(), 10))
	e.Aux("used-mem", "0")
	if info.ReplID != "" {
		e.Aux("repl-stream-db", "0")
		e.Aux("repl-id", info.ReplID)
		e.Aux("repl-offset", strconv.FormatInt(info.ReplOffset, 10))
	}
	e.Aux("aof-base", "0")
	if len(parts) > 0 && !parts[0].NoFunctions {
		for _, code := range parts[0].Snap.Libraries() {
			e.Function([]byte(code))
		}
	}
	// Every database holding keys in any part, each behind its SELECTDB
	// and RESIZEDB, ascending, as redis-server writes them; database 0's
	// (with no keys) when there is none.
	var dbs []int
	seen := map[int]bool{}
	for _, p := range parts {
		if p.NoKeys {
			continue
		}
		for _, db := range p.Snap.DBs() {
			if !seen[db] {
				seen[db] = true
				dbs = append(dbs, db)
			}
		}
	}
	sort.Ints(dbs)
	if len(dbs) == 0 {
		dbs = []int{0}
	}
	keys := 0
	for _, db := range dbs {
		total, expires := 0, 0
		for _, p := range parts {
			if !p.NoKeys {
				n, x := p.Snap.DBLen(db)
				total, expires = total+n, expires+x
			}
		}
		if err := e.SelectDB(uint64(db), uint64(total), uint64(expires)); err != nil {
			return keys, err
		}
		for _, p := range parts {
			if p.NoKeys {
				continue
			}
			err := p.Snap.DumpEachDB(db, now, p.Limits, func(key []byte, exp int64, value []byte) error {
				if exp == 0 {
					exp = -1
				}
				keys++
				return e.Key(key, exp, value)
			})
			if err != nil {
				return keys, err
			}
		}
	}
	return keys, e.Close()
}
