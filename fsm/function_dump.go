package fsm

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// FUNCTION DUMP and FUNCTION RESTORE, in Redis 7.0's payload format
// (dump.go), so that a payload from redis-server restores into kvs and
// one from kvs into redis-server. DUMP is a read; RESTORE a write that
// goes through the log like FUNCTION LOAD, decided at apply against the
// libraries the log has there.

const (
	// OpFunctionDump: Reply: every library, in name order, as a DUMP
	// payload.
	OpFunctionDump Op = opBaseScript + 12 + iota
	// OpFunctionRestore: Args[0]=the payload (its footer checked by the
	// server: VerifyDumpPayload); Int=the policy, RestoreAppend,
	// RestoreReplace or RestoreFlush. Reply +OK, or Redis's error, having
	// changed nothing.
	OpFunctionRestore
)

// FUNCTION RESTORE's policies.
const (
	RestoreAppend = iota
	RestoreReplace
	RestoreFlush
)

func init() {
	registerOp(OpFunctionDump, opSpec{name: "FUNCTION", args: 0, read: readFunctionDump, keys: keysNone})
	registerOp(OpFunctionRestore, opSpec{name: "FUNCTION", write: true, args: 1, apply: applyFunctionRestore,
		keys: keysNone, check: func(c *Command) error {
			if c.Int < RestoreAppend || c.Int > RestoreFlush {
				return fmt.Errorf("restore policy %d", c.Int)
			}
			return nil
		}})
}

func readFunctionDump(s *Store, now int64, c *Command) Reply {
	var b []byte
	for _, name := range sortedMeta(s.meta) {
		if strings.HasPrefix(name, libraryMetaPrefix) {
			b = append(b, rdbOpcodeFunction2)
			b = appendRDBString(b, []byte(s.meta[name]))
		}
	}
	return BulkReply(appendDumpFooter(b))
}

// functionPayloadCodes reads the libraries' code from a payload, as
// functionRestoreCommand and rdbFunctionLoad do, or returns their error.
func functionPayloadCodes(p []byte) ([]string, string) {
	r := rdbReader{b: p}
	var codes []string
	// The last 10 bytes are the footer; a string may still reach into
	// them, as in Redis, which reads from the whole payload.
	for len(p)-r.pos > 10 {
		t, _ := r.read(1)
		switch t[0] {
		case rdbOpcodeFunction2:
			code, ok := r.readString()
			if !ok {
				return nil, "ERR Failed loading library payload"
			}
			codes = append(codes, string(code))
		case rdbOpcodeFunction:
			// 7.0's release candidates: name, engine, description, code.
			name, ok := r.readString()
			if !ok {
				return nil, "ERR Failed loading library name"
			}
			engine, ok := r.readString()
			if !ok {
				return nil, "ERR Failed loading engine name"
			}
			hasDesc, encoded, ok := r.readLen()
			if !ok || encoded {
				return nil, "ERR Failed loading library description indicator"
			}
			if hasDesc != 0 {
				if _, ok := r.readString(); !ok {
					return nil, "ERR Failed loading library description"
				}
			}
			blob, ok := r.readString()
			if !ok {
				return nil, "ERR Failed loading library blob"
			}
			codes = append(codes, "#!"+string(engine)+" name="+string(name)+"\n"+string(blob))
		default:
			return nil, "ERR given type is not a function"
		}
	}
	return codes, ""
}

func applyFunctionRestore(s *Store, now int64, c *Command) Reply {
	codes, e := functionPayloadCodes(c.Args[0])
	if e != "" {
		return errorReply(e)
	}
	// The payload's libraries, checked as FUNCTION LOAD checks them
	// (functionsCreateWithLibraryCtx into a new set of libraries).
	var libs []*library
	names := map[string]bool{}
	funcs := map[string]bool{} // lower-cased
	for _, code := range codes {
		name, e := libraryName(code)
		if e != "" {
			return errorReply(e)
		}
		if names[name] {
			return errorReply("ERR Library '" + name + "' already exists")
		}
		lib, e := s.libraryOf(code)
		if e != "" {
			return errorReply(e)
		}
		for _, f := range lib.funcs {
			if funcs[strings.ToLower(f.name)] {
				return errorReply("ERR Function " + f.name + " already exists")
			}
		}
		for _, f := range lib.funcs {
			funcs[strings.ToLower(f.name)] = true
		}
		names[name] = true
		libs = append(libs, lib)
	}
	next := maps.Clone(s.meta)
	if next == nil {
		next = make(map[string]string)
	}
	if c.Int == RestoreFlush {
		maps.DeleteFunc(next, func(k, _ string) bool {
			return strings.HasPrefix(k, libraryMetaPrefix) || strings.HasPrefix(k, functionMetaPrefix)
		})
	} else {
		// libraryJoin: a library already there is an error, or with
		// REPLACE is replaced; then no function may collide with one of
		// the libraries that stay.
		for _, lib := range sortedLibraries(libs) {
			if _, ok := next[libraryMetaPrefix+lib.name]; !ok {
				continue
			}
			if c.Int != RestoreReplace {
				return errorReply("ERR Library " + lib.name + " already exists")
			}
			delete(next, libraryMetaPrefix+lib.name)
			maps.DeleteFunc(next, func(k, v string) bool { return v == lib.name && strings.HasPrefix(k, functionMetaPrefix) })
		}
		for _, lib := range sortedLibraries(libs) {
			for _, f := range lib.funcs {
				if _, ok := next[functionMetaPrefix+strings.ToLower(f.name)]; ok {
					return errorReply("ERR Function " + f.name + " already exists")
				}
			}
		}
	}
	for _, lib := range libs {
		next[libraryMetaPrefix+lib.name] = lib.code
		for _, f := range lib.funcs {
			next[functionMetaPrefix+strings.ToLower(f.name)] = lib.name
		}
	}
	if len(next) == 0 {
		next = nil
	}
	s.setMetaMapLocked(next)
	return replyOK
}

// sortedLibraries returns libs in name order: the order kvs checks them in
// (Redis: its hash table's).
func sortedLibraries(libs []*library) []*library {
	out := append([]*library(nil), libs...)
	slices.SortFunc(out, func(a, b *library) int { return strings.Compare(a.name, b.name) })
	return out
}
