package fsm

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ACL users are replicated state beside the keyspace, like the cluster
// metadata: a table of user names to each user's rules, in the form ACL
// LIST shows them without the "user <name> " prefix ("on #<sha256> ~*
// &* +@all"). The fsm treats a rule line as opaque text: the server
// parses, validates and enforces it. The table is written only through
// OpACLSet entries, so every replica holds the same users in the log's
// order; it is kept in snapshots and survives FLUSHALL. An empty table
// means the server's built-in default user ("on nopass ~* &* +@all").

// ACL modes, OpACLSet's Int.
const (
	// ACLUpdate sets each named user's line (an empty line deletes the
	// user) and leaves the others alone: ACL SETUSER, DELUSER, CONFIG SET
	// requirepass.
	ACLUpdate = 0
	// ACLReplace replaces the whole table with the named users: ACL LOAD.
	ACLReplace = 1
	// ACLSeed sets the named users only when no ACL entry was ever
	// applied (the table is empty and was never written): the users
	// --requirepass and --aclfile give at startup, proposed by every node
	// of a cluster, of which the first applied wins.
	ACLSeed = 2
)

// OpACLSet: Int=mode (ACLUpdate, ACLReplace, ACLSeed), Args = name1,
// line1, name2, line2, ... Reply +OK.
const OpACLSet Op = opBaseAdmin + 0

func init() {
	registerOp(OpACLSet, opSpec{name: "ACLSET", write: true, args: argsAny, step: 2, apply: applyACLSet,
		keys: keysNone, check: checkACLSet})
}

// checkACLSet checks the mode. Names may be empty: Redis lets ACL SETUSER
// make a user named "".
func checkACLSet(c *Command) error {
	if c.Int < ACLUpdate || c.Int > ACLSeed {
		return errorString("unknown ACL mode")
	}
	return nil
}

func applyACLSet(s *Store, now int64, c *Command) Reply {
	if c.Int == ACLSeed && s.aclWritten {
		return replyOK
	}
	next := make(map[string]string, len(s.acl)+len(c.Args)/2)
	if c.Int == ACLUpdate {
		maps.Copy(next, s.acl)
	}
	for i := 0; i+1 < len(c.Args); i += 2 {
		if name, line := string(c.Args[i]), string(c.Args[i+1]); line == "" {
			delete(next, name)
		} else {
			next[name] = line
		}
	}
	if len(next) == 0 {
		next = nil
	}
	s.aclWritten = true
	s.setACLLocked(next)
	return replyOK
}

// aclTable is the ACL table with its generation, as published to readers
// without the lock.
type aclTable struct {
	users map[string]string
	gen   uint64
}

// setACLLocked makes users the ACL table, a new generation of it. Like
// the metadata, the map is never changed once set, and is published to
// readers without the lock: a connection compiles its users from it
// while a script may hold the lock (AUTH, HELLO, after an ACL change).
func (s *Store) setACLLocked(users map[string]string) {
	s.acl = users
	s.aclPub.Store(&aclTable{users: users, gen: s.aclGen.Add(1)})
}

// ACLUsers returns a copy of the ACL table (user name to rule line) and
// its generation (see ACLGen) at the moment it was read.
func (s *Store) ACLUsers() (map[string]string, uint64) {
	t := s.aclPub.Load()
	if t == nil {
		return map[string]string{}, 0
	}
	out := make(map[string]string, len(t.users))
	maps.Copy(out, t.users)
	return out, t.gen
}

// ACLGen returns a number that changes whenever the ACL table may have
// changed (an OpACLSet applied, a snapshot restored). It is one atomic
// load, for the server's check before every command.
func (s *Store) ACLGen() uint64 { return s.aclGen.Load() }

// appendACL appends the snapshot's ACL section: written:byte count:uvarint
// (name line)*count, names ascending.
func appendACL(b []byte, written bool, acl map[string]string) []byte {
	w := byte(0)
	if written {
		w = 1
	}
	b = append(b, w)
	b = binary.AppendUvarint(b, uint64(len(acl)))
	for _, name := range slices.Sorted(maps.Keys(acl)) {
		b = appendString(b, name)
		b = appendString(b, acl[name])
	}
	return b
}

// aclSection reads the ACL section of a version 5 snapshot.
func (s *snapReader) aclSection() (bool, map[string]string) {
	written := s.byte() == 1
	n := s.uvarint()
	var m map[string]string
	prev := ""
	for i := uint64(0); i < n && s.err == nil; i++ {
		name, line := string(s.bytes(nil)), string(s.bytes(nil))
		switch {
		case s.err != nil:
		case line == "" || strings.ContainsAny(name, " \x00"):
			s.fail(fmt.Errorf("%w: snapshot ACL user %d: invalid name or empty rules", ErrCorrupt, i))
		case i > 0 && name <= prev:
			s.fail(fmt.Errorf("%w: snapshot ACL user %d: name %q out of order", ErrCorrupt, i, name))
		default:
			if m == nil {
				m = make(map[string]string)
			}
			m[name] = line
			prev = name
		}
	}
	return written, m
}
