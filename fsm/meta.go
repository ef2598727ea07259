package fsm

import (
	"maps"
	"slices"
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
