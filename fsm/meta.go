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
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.meta[name]
	return v, ok
}

// MetaAll returns a copy of all metadata entries.
func (s *Store) MetaAll() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]string, len(s.meta))
	maps.Copy(out, s.meta)
	return out
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
	s.meta = next
}

// sortedMeta returns the names of m in ascending order, the order snapshots
// store them in (map iteration order must not reach a snapshot).
func sortedMeta(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
