package fsm

// Limits are Redis's encoding thresholds: up to these sizes a collection is
// kept packed in one flat buffer (Redis's listpack and intset), beyond them
// in its large form. They change memory and OBJECT ENCODING, never a reply
// or an iteration order, so replicas with different settings still agree
// on every answer. The server sets them from CONFIG SET (Redis 7 names and
// their older ziplist aliases).
type Limits struct {
	HashMaxListpackEntries int64 // hash-max-listpack-entries (hash-max-ziplist-entries)
	HashMaxListpackValue   int64 // hash-max-listpack-value (hash-max-ziplist-value)
	SetMaxIntsetEntries    int64 // set-max-intset-entries
	SetMaxListpackEntries  int64 // set-max-listpack-entries
	SetMaxListpackValue    int64 // set-max-listpack-value
	ZSetMaxListpackEntries int64 // zset-max-listpack-entries (zset-max-ziplist-entries)
	ZSetMaxListpackValue   int64 // zset-max-listpack-value (zset-max-ziplist-value)
	ListMaxListpackSize    int64 // list-max-listpack-size (list-max-ziplist-size): > 0 entries, -1..-5 4..64 KiB
	ListCompressDepth      int64 // list-compress-depth
}

// DefaultLimits are Redis 7's defaults.
func DefaultLimits() Limits {
	return Limits{
		HashMaxListpackEntries: 512, HashMaxListpackValue: 64,
		SetMaxIntsetEntries: 512, SetMaxListpackEntries: 128, SetMaxListpackValue: 64,
		ZSetMaxListpackEntries: 128, ZSetMaxListpackValue: 64,
		ListMaxListpackSize: -2, ListCompressDepth: 0,
	}
}

// Limits returns the encoding thresholds in force.
// It reads them without the lock (CONFIG GET, while a script may hold
// it).
func (s *Store) Limits() Limits {
	if l := s.limitsPub.Load(); l != nil {
		return *l
	}
	return DefaultLimits()
}

// SetLimits sets the encoding thresholds for collections created or grown
// from now on; existing collections convert when next written, as in Redis.
func (s *Store) SetLimits(l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLimitsLocked(l)
}

func (s *Store) setLimitsLocked(l Limits) {
	s.limits = l
	s.limitsPub.Store(&l)
}

// Blocked clients. A write that may satisfy a blocked pop (a push that
// creates a list, an add that creates a sorted set, a key renamed or
// copied into place; not a write to a key that exists, as in Redis 7.0)
// calls signalReadyLocked with its key; once
// the entry is applied and the lock released, the hook set by SetReadyHook
// receives every key signalled, in order, without duplicates. It runs on
// every replica (each wakes its own blocked clients) and must not block.

// SetReadyHook sets the function told of keys that became ready; nil
// removes it. Set it before the store takes writes.
func (s *Store) SetReadyHook(fn func(keys []string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyHook = fn
}

func (s *Store) signalReadyLocked(key []byte) {
	if s.readyHook == nil {
		return
	}
	if s.cur != 0 {
		s.signalReadyNameLocked(DBKey(s.cur, string(key)))
		return
	}
	for _, k := range s.ready {
		if k == string(key) {
			return
		}
	}
	s.ready = append(s.ready, string(key))
}

// signalReadyNameLocked is signalReadyLocked of a key of another database
// than 0, named by DBKey.
func (s *Store) signalReadyNameLocked(name string) {
	for _, k := range s.ready {
		if k == name {
			return
		}
	}
	s.ready = append(s.ready, name)
}

// takeReadyLocked returns the keys signalled since the last call and the
// hook to give them to.
func (s *Store) takeReadyLocked() ([]string, func([]string)) {
	if len(s.ready) == 0 {
		return nil, nil
	}
	keys := s.ready
	s.ready = nil
	return keys, s.readyHook
}
