package fsm

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// Read answers a read command at now under the shared lock. Keys whose
// deadline is not after now are absent to every read, whether or not their
// deletion has been applied yet. Bulk replies alias the store's memory
// (which is never modified in place) and stay valid after Read returns.
//
// Read panics on a command that fails Validate or is a write: the server
// built it, so that is a bug.
func (s *Store) Read(now int64, c Command) Reply {
	if c.Op == OpGet && len(c.Args) == 1 && c.Flags == 0 {
		return s.get(now, c.Args[0])
	}
	if err := c.Validate(); err != nil {
		panic(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	a := c.Args
	switch c.Op {
	case OpGet:
		it, ok := s.liveLocked(a[0], now)
		if !ok {
			return replyNil
		}
		if it.kind != kindString {
			return ErrorReply(ErrWrongType)
		}
		return valueReply(it.val)
	case OpMGet:
		out := make([]Reply, len(a))
		for i, k := range a {
			if it, ok := s.liveLocked(k, now); ok && it.kind == kindString {
				out[i] = valueReply(it.val)
			}
		}
		return Reply{Kind: ReplyArray, Array: out}
	case OpStrLen:
		it, ok := s.liveLocked(a[0], now)
		if ok && it.kind != kindString {
			return ErrorReply(ErrWrongType)
		}
		return IntReply(int64(len(it.val)))
	case OpGetRange:
		it, ok := s.liveLocked(a[0], now)
		if ok && it.kind != kindString {
			return ErrorReply(ErrWrongType)
		}
		return getRange(it.val, c.Int, c.Int2)
	case OpExists:
		var n int64
		for _, k := range a {
			if _, ok := s.liveLocked(k, now); ok {
				n++
			}
		}
		return IntReply(n)
	case OpType:
		it, ok := s.liveLocked(a[0], now)
		if !ok {
			return Reply{Kind: ReplyStatus, Str: "none"}
		}
		return Reply{Kind: ReplyStatus, Str: it.kind.typeName()}
	case OpKeys:
		return s.keysLocked(now, string(a[0]))
	case OpScan:
		return s.scanLocked(now, c)
	case OpRandomKey:
		return s.randomKeyLocked(now)
	case OpTTL, OpPTTL, OpExpireTime, OpPExpireTime:
		return ttlReply(c.Op, now, s, a[0])
	case OpDBSize:
		return IntReply(int64(s.keys.Len() - s.countExpiredLocked(now)))
	case OpMemoryUsage:
		it, ok := s.liveLocked(a[0], now)
		if !ok {
			return replyNil
		}
		return IntReply(it.size())
	}
	panic(fmt.Sprintf("fsm: Read of %v, which is not a read", c.Op))
}

// get is GET, the most frequent command, without Read's general checks and
// deferred unlock.
func (s *Store) get(now int64, key []byte) Reply {
	s.mu.RLock()
	it, ok := s.liveLocked(key, now)
	s.mu.RUnlock()
	switch {
	case !ok:
		return replyNil
	case it.kind != kindString:
		return ErrorReply(ErrWrongType)
	}
	return valueReply(it.val)
}

// getRange is GETRANGE's index arithmetic, as in Redis 7.0's getrangeCommand:
// negative indexes count from the end, both are clamped, and an empty or
// inverted range (or a missing key) gives an empty string, never nil.
func getRange(v []byte, start, end int64) Reply {
	n := int64(len(v))
	if start < 0 && end < 0 && start > end {
		return replyEmpty
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	if end >= n {
		end = n - 1
	}
	if start > end || n == 0 {
		return replyEmpty
	}
	return valueReply(v[start : end+1])
}

func ttlReply(op Op, now int64, s *Store, key []byte) Reply {
	it, ok := s.liveLocked(key, now)
	switch {
	case !ok:
		return IntReply(-2)
	case it.exp == 0:
		return IntReply(-1)
	}
	// As Redis's ttlGenericCommand: seconds are rounded to the nearest,
	// for the absolute forms too.
	ms := max(it.exp-now, 0)
	if op == OpExpireTime || op == OpPExpireTime {
		ms = it.exp
	}
	if op == OpTTL || op == OpExpireTime {
		// (ms+500)/1000 without overflowing near the largest deadline.
		return IntReply(ms/1000 + (ms%1000+500)/1000)
	}
	return IntReply(ms)
}

func (s *Store) keysLocked(now int64, pattern string) Reply {
	out := []Reply{}
	if globIsLiteral(pattern) {
		if _, ok := s.liveLocked([]byte(pattern), now); ok {
			out = append(out, BulkReply([]byte(pattern)))
		}
		return Reply{Kind: ReplyArray, Array: out}
	}
	all := pattern == "*"
	s.keys.Scan(func(it item) bool {
		if !it.expired(now) && (all || matchGlob(pattern, it.key)) {
			out = append(out, BulkReply([]byte(it.key)))
		}
		return true
	})
	return Reply{Kind: ReplyArray, Array: out}
}

// scanLocked visits about Int2 keys from the cursor Int on, in hash order.
// The next cursor is the hash of the first key not visited, so a key that
// exists for the whole iteration is returned at least once however the
// keyspace changes between calls. A batch never ends inside a run of equal
// hashes, so even colliding keys cannot make the cursor stand still.
func (s *Store) scanLocked(now int64, c Command) Reply {
	count := c.Int2
	if count <= 0 {
		count = 10
	}
	var pattern, typ string
	if len(c.Args) > 0 {
		pattern = string(c.Args[0])
	}
	if len(c.Args) > 1 {
		typ = string(c.Args[1])
	}
	usePattern := pattern != "" && pattern != "*"
	var out []Reply
	var visited int64
	var last, next uint64
	s.keys.Ascend(item{hash: uint64(c.Int)}, func(it item) bool {
		if visited >= count && it.hash != last {
			next = it.hash
			return false
		}
		visited++
		last = it.hash
		if it.expired(now) ||
			(typ != "" && it.kind.typeName() != typ) ||
			(usePattern && !matchGlob(pattern, it.key)) {
			return true
		}
		out = append(out, BulkReply([]byte(it.key)))
		return true
	})
	if out == nil {
		out = []Reply{}
	}
	cursor := strconv.AppendUint(nil, next, 10)
	return Reply{Kind: ReplyArray, Array: []Reply{BulkReply(cursor), {Kind: ReplyArray, Array: out}}}
}

// randomKeyLocked picks a key uniformly by rank (the tree keeps subtree
// counts). Expired keys are skipped; if the sample keeps hitting them, a walk
// from a random point finds a live one or proves there is none.
func (s *Store) randomKeyLocked(now int64) Reply {
	n := s.keys.Len()
	if n == 0 {
		return replyNil
	}
	for range 100 {
		it, _ := s.keys.GetAt(rand.IntN(n))
		if !it.expired(now) {
			return BulkReply([]byte(it.key))
		}
	}
	var found *item
	visit := func(it item) bool {
		if !it.expired(now) {
			found = &it
			return false
		}
		return true
	}
	start, _ := s.keys.GetAt(rand.IntN(n))
	s.keys.Ascend(start, visit)
	if found == nil {
		s.keys.Scan(visit)
	}
	if found == nil {
		return replyNil
	}
	return BulkReply([]byte(found.key))
}
