package rdb

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"kvs/fsm"
)

// LoadOptions says how Load treats what kvs cannot keep.
type LoadOptions struct {
	// Now is the clock (Unix ms) that decides which keys have expired:
	// those are skipped, as redis-server skips them loading a file.
	Now int64
	// Databases is the number of databases the store will be served
	// with (kvs serve --databases; 0: fsm.MaxDB+1). A file that selects
	// a database beyond them is refused, as redis-server refuses to load
	// one written by a server with more databases than it has.
	Databases int
	// SkipOtherDBs skips the keys of databases other than 0 (counted in
	// Stats.SkippedDBs), for a store that will have database 0 alone (a
	// cluster of several groups, as Redis Cluster has), instead of loading
	// them into their databases.
	SkipOtherDBs bool
}

// Stats is what Load loaded.
type Stats struct {
	Version    int               // the file's RDB version
	Keys       map[uint64]int    // keys loaded, by db
	Expires    map[uint64]int    // of them, those with a deadline
	Expired    int               // keys skipped: their deadline had passed
	Empty      int               // empty keys skipped, as Redis skips them
	SkippedDBs map[uint64]int    // keys of other dbs skipped (SkipOtherDBs)
	Functions  int               // function libraries loaded
	Aux        map[string]string // the AUX fields
	Bytes      int64             // the file's length
}

// Total is the number of keys loaded.
func (st *Stats) Total() int {
	n := 0
	for _, k := range st.Keys {
		n += k
	}
	return n
}

// String says what was loaded, for a person: "12 keys in db 0 (3 with
// an expiry), 1 expired key skipped, 2 function libraries".
func (st *Stats) String() string {
	var parts []string
	dbs := make([]uint64, 0, len(st.Keys))
	for db := range st.Keys {
		dbs = append(dbs, db)
	}
	sort.Slice(dbs, func(i, j int) bool { return dbs[i] < dbs[j] })
	for _, db := range dbs {
		parts = append(parts, fmt.Sprintf("%s in db %d (%d with an expiry)", plural(st.Keys[db], "key"), db, st.Expires[db]))
	}
	if len(dbs) == 0 {
		parts = append(parts, "no keys")
	}
	if st.Expired > 0 {
		parts = append(parts, plural(st.Expired, "expired key")+" skipped")
	}
	dbs = dbs[:0]
	for db := range st.SkippedDBs {
		dbs = append(dbs, db)
	}
	sort.Slice(dbs, func(i, j int) bool { return dbs[i] < dbs[j] })
	for _, db := range dbs {
		parts = append(parts, fmt.Sprintf("%s of db %d skipped", plural(st.SkippedDBs[db], "key"), db))
	}
	if st.Empty > 0 {
		parts = append(parts, plural(st.Empty, "empty key")+" skipped")
	}
	parts = append(parts, plural(st.Functions, "function library"))
	return strings.Join(parts, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if strings.HasSuffix(what, "ry") {
		return fmt.Sprintf("%d %sies", n, what[:len(what)-1])
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// loadBatch is how many keys Load applies under one lock.
const loadBatch = 256

// Load reads an RDB file from r into s, which should be empty (a key
// already there is a duplicate): each key as an OpRestore, each function
// library as an OpFunctionRestore, applied at index 0 with opts.Now as
// the clock; each key goes into its database (the file's SELECTDB). It
// refuses, with an *Error naming the offset, a damaged file, a module's
// value, a key of a database beyond opts.Databases (even with
// opts.SkipOtherDBs, as redis-server refuses the file), a key twice, and
// a value or library RESTORE or FUNCTION RESTORE would refuse. On an error
// s holds part of the file: load into a store of its own and drop it.
func Load(r io.Reader, s *fsm.Store, opts LoadOptions) (*Stats, error) {
	st := &Stats{Keys: map[uint64]int{}, Expires: map[uint64]int{}, SkippedDBs: map[uint64]int{}, Aux: map[string]string{}}
	dbs := opts.Databases
	if dbs <= 0 || dbs > fsm.MaxDB+1 {
		dbs = fsm.MaxDB + 1
	}
	d := NewDecoder(r)
	var cmds []fsm.Command
	var pending []*Entry
	flush := func() error {
		if len(cmds) == 0 {
			return nil
		}
		replies := s.Apply(0, opts.Now, cmds)
		for i, rep := range replies {
			e := pending[i]
			if rep.Kind != fsm.ReplyError {
				if e.Kind == KindFunction {
					st.Functions++
				} else {
					st.Keys[e.DB]++
					if e.Expire != -1 {
						st.Expires[e.DB]++
					}
				}
				continue
			}
			switch {
			case e.Kind == KindFunction:
				return &Error{e.Offset, "function library: " + strings.TrimPrefix(rep.Str, "ERR ")}
			case rep.Str == fsm.ErrBusyKey:
				return &Error{e.Offset, fmt.Sprintf("key %q is in the file twice", e.Key)}
			}
			return &Error{e.Offset, fmt.Sprintf("key %q: its value (RDB type %d, a %s) is damaged: %s", e.Key, e.Type, TypeName(e.Type), rep.Str)}
		}
		cmds, pending = cmds[:0], pending[:0]
		return nil
	}
	for {
		e, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, err
		}
		switch e.Kind {
		case KindAux:
			st.Aux[string(e.Key)] = string(e.Value)
			continue
		case KindFunction:
			// In order with the keys: a library applies after the ones
			// before it, whose names it may not take.
			cmds = append(cmds, Command(e))
			pending = append(pending, e)
			continue
		}
		if e.DB >= uint64(dbs) {
			return st, &Error{e.Offset, fmt.Sprintf("key %q is in db %d: the file was written by a server with more databases than the %d kvs is configured with (--databases)", e.Key, e.DB, dbs)}
		}
		if e.DB != 0 && opts.SkipOtherDBs {
			st.SkippedDBs[e.DB]++
			continue
		}
		if v := append([]byte{e.Type}, e.Value...); !fsm.CheckRDBValue(e.Version, v) {
			if fsm.EmptyRDBValue(v) {
				st.Empty++
				continue
			}
			return st, &Error{e.Offset, fmt.Sprintf("key %q: its value (RDB type %d, a %s) is damaged", e.Key, e.Type, TypeName(e.Type))}
		}
		if e.Expire != -1 && e.Expire <= opts.Now {
			st.Expired++
			continue
		}
		c := Command(e)
		if err := c.Validate(); err != nil {
			return st, &Error{e.Offset, fmt.Sprintf("key %q: %v", e.Key, err)}
		}
		cmds = append(cmds, c)
		pending = append(pending, e)
		if len(cmds) >= loadBatch {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
	st.Version, st.Bytes = d.Version(), d.Offset()
	return st, flush()
}

// Command is the fsm command that adds e to a store: for a key an
// OpRestore of its payload with its deadline and access record (without
// REPLACE: a key already there answers BUSYKEY), for a function library
// an OpFunctionRestore that appends it. Load applies these; a caller that
// replicates what it loads proposes them instead, after the checks Load
// makes (the db, fsm.CheckRDBValue, the deadline). The command
// runs in e's database. Entry e must
// be a KindKey or a KindFunction.
func Command(e *Entry) fsm.Command {
	if e.Kind == KindFunction {
		return fsm.Command{Op: fsm.OpFunctionRestore, Args: [][]byte{fsm.FunctionPayload(e.Value)}, Int: fsm.RestoreAppend}
	}
	c := fsm.Command{Op: fsm.OpRestore, DB: uint16(e.DB), Args: [][]byte{e.Key, e.Payload()}}
	if e.Expire != -1 {
		c.Int = e.Expire
	}
	if e.Freq != -1 {
		c.Flags, c.Int2 = fsm.FlagRestoreFreq, int64(e.Freq)
	} else if e.Idle != -1 {
		c.Flags, c.Int2 = fsm.FlagRestoreIdle, min(e.Idle, 1<<31)
	}
	return c
}
