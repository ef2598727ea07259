package fsm

import (
	"maps"
	"slices"
	"strconv"
)

// Cluster metadata is a small replicated map of names to values beside the
// keyspace, such as "node/<id>/resp" -> "127.0.0.1:7001", so that every
// replica can find every node's client address. It is written only through
// OpMetaSet entries, so it is in the log's order on every replica, is kept
// in snapshots, and survives FLUSHALL. No key command can see it.

// Meta returns the value of the metadata entry name.
func (s *Store) Meta(name string) (string, bool) {
	v, ok := s.publishedMeta()[name]
	return v, ok
}

// MetaAll returns a copy of all metadata entries.
func (s *Store) MetaAll() map[string]string {
	meta := s.publishedMeta()
	out := make(map[string]string, len(meta))
	maps.Copy(out, meta)
	return out
}

// setMetaMapLocked makes m the metadata. The map is never changed once
// it is the store's, so it is published to readers without the lock
// (publishedMeta): the scripts and functions loaded are looked up while
// a script holds the lock (EVALSHA's, FCALL's parsing; FUNCTION STATS).
func (s *Store) setMetaMapLocked(m map[string]string) {
	s.meta = m
	s.metaPub.Store(&m)
	s.metaChanged = true
}

// publishedMeta is the metadata as last set, without the lock.
func (s *Store) publishedMeta() map[string]string {
	if p := s.metaPub.Load(); p != nil {
		return *p
	}
	return nil
}

// setMetaLocked sets name to value, or deletes it when value is empty. It
// replaces the map rather than changing it, because snapshots taken earlier
// share the old one; metadata writes are rare and the map is small.
func (s *Store) setMetaLocked(name, value string) {
	if _, ok := s.meta[name]; !ok && value == "" {
		return
	}
	next := make(map[string]string, len(s.meta)+1)
	maps.Copy(next, s.meta)
	if value == "" {
		delete(next, name)
	} else {
		next[name] = value
	}
	if len(next) == 0 {
		next = nil
	}
	s.setMetaMapLocked(next)
}

// sortedMeta returns the names of m in ascending order, the order snapshots
// store them in (map iteration order must not reach a snapshot).
func sortedMeta(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// OpMetaCAS: Args[0]=name (not empty), Args[1]=the value expected, Args[2]=
// the value to set. Sets name to Args[2] (deleting it when empty) only
// while its value is Args[1], an empty Args[1] standing for "absent" (no
// name holds an empty value). Reply :1 when it set, :0 when the value was
// another, which leaves everything as it was. A value that many nodes may
// decide to write (the slot map, written once when absent and then only
// from the version it replaces) is written with it, so that a proposal
// delayed past another, or forwarded by a node whose view is stale, cannot
// take a newer value back.
const OpMetaCAS Op = opBaseAdmin + 50

func init() {
	registerOp(OpMetaCAS, opSpec{name: "METACAS", write: true, args: 3, apply: applyMetaCAS, keys: keysNone, level: 1,
		check: func(c *Command) error {
			if len(c.Args[0]) == 0 {
				return errorString("empty name")
			}
			return nil
		}})
}

func applyMetaCAS(s *Store, now int64, c *Command) Reply {
	if s.meta[string(c.Args[0])] != string(c.Args[1]) {
		return IntReply(0)
	}
	s.setMetaLocked(string(c.Args[0]), string(c.Args[2]))
	return IntReply(1)
}

// OpMetaTxn: Args[0]=k, the count of comparisons (decimal, at least 1),
// then k pairs of name and the value expected (empty for absent), then
// pairs of name and the value to set (empty deletes), at least one. Sets
// every name only while every comparison holds, all in the one apply:
// reply :1 when it set, :0 when a value was another, which leaves
// everything as it was. It is etcd's transaction for the metadata: two
// writers that each check what the other writes (a move of slots into a
// group, which checks the group exists; the group's removal, which checks
// no move involves it) name both in their comparisons, and then at most
// one of them goes through, which two compare-and-sets of one name each
// cannot promise.
const OpMetaTxn Op = opBaseAdmin + 51

func init() {
	registerOp(OpMetaTxn, opSpec{name: "METATXN", write: true, args: argsAtLeast(5), apply: applyMetaTxn, keys: keysNone, level: 2,
		check: func(c *Command) error {
			k, ok := metaTxnCompares(c)
			if !ok {
				return errorString("bad count of comparisons")
			}
			if (len(c.Args)-1-2*k)%2 != 0 || len(c.Args)-1-2*k < 2 {
				return errorString("want pairs of name and value to set after the comparisons")
			}
			for i := 1; i < len(c.Args); i += 2 {
				if len(c.Args[i]) == 0 {
					return errorString("empty name")
				}
			}
			return nil
		}})
}

// metaTxnCompares is an OpMetaTxn's count of comparisons, false when
// Args[0] is not one its arguments hold.
func metaTxnCompares(c *Command) (int, bool) {
	k := 0
	for _, b := range c.Args[0] {
		if b < '0' || b > '9' || k > len(c.Args) {
			return 0, false
		}
		k = k*10 + int(b-'0')
	}
	if len(c.Args[0]) == 0 || k < 1 || 1+2*k > len(c.Args) {
		return 0, false
	}
	return k, true
}

// MetaTxn is the OpMetaTxn that sets each of sets (name, value, ...)
// only while each of compares (name, value expected, ...) holds.
func MetaTxn(compares, sets []string) Command {
	args := make([][]byte, 0, 1+len(compares)+len(sets))
	args = append(args, []byte(strconv.Itoa(len(compares)/2)))
	for _, a := range compares {
		args = append(args, []byte(a))
	}
	for _, a := range sets {
		args = append(args, []byte(a))
	}
	return Command{Op: OpMetaTxn, Args: args}
}

func applyMetaTxn(s *Store, now int64, c *Command) Reply {
	k, _ := metaTxnCompares(c)
	for i := 1; i < 1+2*k; i += 2 {
		if s.meta[string(c.Args[i])] != string(c.Args[i+1]) {
			return IntReply(0)
		}
	}
	for i := 1 + 2*k; i < len(c.Args); i += 2 {
		s.setMetaLocked(string(c.Args[i]), string(c.Args[i+1]))
	}
	return IntReply(1)
}

// SetMetaHook sets the function told, after an apply or a restore that
// changed the metadata, once the lock is released, that it changed; nil
// removes it. It runs on every replica, on the goroutine that applied,
// and must not block or call back into the store's writes. Set it before
// the store takes writes.
func (s *Store) SetMetaHook(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metaHook = fn
}

// takeMetaChangedLocked returns the hook to tell that the metadata
// changed since the last call, nil when it did not or there is none.
func (s *Store) takeMetaChangedLocked() func() {
	if !s.metaChanged {
		return nil
	}
	s.metaChanged = false
	return s.metaHook
}
