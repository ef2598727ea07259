package fsm

import (
	"slices"
	"strconv"
	"testing"
)

func TestReads(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		{t0, c(OpMSet, "a", "1", "b", "22", "c", "333"), ok},
		{t0, c(OpSet, "t", "x").i(t0 + 1499), ok},
		{t0, c(OpSet, "dead", "x").i(t0 + 1), ok},
		{t0 + 1, c(OpExists, "a", "a", "nokey", "b", "dead"), in(3)},
		{t0 + 1, c(OpType, "a"), status("string")},
		{t0 + 1, c(OpType, "dead"), status("none")},
		{t0 + 1, c(OpStrLen, "c"), in(3)},
		{t0 + 1, c(OpStrLen, "nokey"), in(0)},
		{t0 + 1, c(OpGet, "dead"), nilr},
		{t0, c(OpGet, "dead"), bulk("x")},
		{t0 + 1, c(OpDBSize), in(4)},
		{t0, c(OpDBSize), in(5)},
		// TTL rounds to the nearest second, as Redis does.
		{t0, c(OpTTL, "t"), in(1)},
		{t0 - 1, c(OpTTL, "t"), in(2)},
		{t0, c(OpPTTL, "t"), in(1499)},
		{t0, c(OpExpireTime, "t"), in((t0 + 1499 + 500) / 1000)},
		{t0, c(OpPExpireTime, "t"), in(t0 + 1499)},
		{t0, c(OpTTL, "a"), in(-1)},
		{t0, c(OpPTTL, "a"), in(-1)},
		{t0, c(OpExpireTime, "a"), in(-1)},
		{t0, c(OpTTL, "nokey"), in(-2)},
		{t0 + 1, c(OpPExpireTime, "dead"), in(-2)},
		{t0 + 1, c(OpKeys, "?"), bulksIn(s, t0+1, "a", "b", "c", "t")},
		{t0 + 1, c(OpKeys, "dead"), bulks()},
		{t0 + 1, c(OpKeys, "a"), bulks("a")},
		{t0 + 1, c(OpKeys, "[ab]"), bulksIn(s, t0+1, "a", "b")},
		{t0 + 1, c(OpMemoryUsage, "nokey"), nilr},
	})
	if r := s.Read(t0, c(OpMemoryUsage, "c")); r.Kind != ReplyInt || r.Int < 50 || r.Int > 200 {
		t.Errorf("MEMORY USAGE of a small key = %v, want roughly 100", r)
	}
	if r := s.Read(t0+1, c(OpRandomKey)); r.Kind != ReplyBulk || string(r.Bulk) == "dead" {
		t.Errorf("RANDOMKEY = %v", r)
	}
	if r := NewStore().Read(t0, c(OpRandomKey)); r.Kind != ReplyNil {
		t.Errorf("RANDOMKEY of empty store = %v", r)
	}
	st := s.Stats(t0 + 1)
	if st.Keys != 4 || st.Expires != 1 || st.Bytes <= 0 {
		t.Errorf("Stats = %+v, want 4 keys, 1 with TTL", st)
	}
	if got := s.ExpiredKeys(t0+1, 10); len(got) != 1 || string(got[0]) != "dead" {
		t.Errorf("ExpiredKeys = %q", got)
	}
	if got := s.ExpiredKeys(t0+1500, 1); len(got) != 1 || string(got[0]) != "dead" {
		t.Errorf("ExpiredKeys(max 1) = %q, want the earliest", got)
	}
}

// bulksIn returns the keys in the order KEYS gives them (keyspace order).
func bulksIn(s *Store, now int64, keys ...string) Reply {
	slices.SortFunc(keys, func(a, b string) int {
		x, y := item{hash: keyHash(a), key: a}, item{hash: keyHash(b), key: b}
		if itemLess(x, y) {
			return -1
		}
		return 1
	})
	return bulks(keys...)
}

func TestRandomKeyAllExpired(t *testing.T) {
	s := NewStore()
	for i := range 50 {
		s.Apply(0, t0, []Command{c(OpSet, strconv.Itoa(i), "v").i(t0 + 1)})
	}
	s.Apply(0, t0, []Command{c(OpSet, "live", "v")})
	for range 20 {
		if r := s.Read(t0+1, c(OpRandomKey)); string(r.Bulk) != "live" {
			t.Fatalf("RANDOMKEY = %v, want the only live key", r)
		}
	}
	s.Apply(0, t0, []Command{c(OpDel, "live")})
	if r := s.Read(t0+1, c(OpRandomKey)); r.Kind != ReplyNil {
		t.Fatalf("RANDOMKEY with only expired keys = %v", r)
	}
}

// scanAll runs a full SCAN iteration, calling between after each call.
func scanAll(s *Store, now, count int64, pattern, typ string, between func()) (keys []string, calls int) {
	cursor := int64(0)
	for {
		cmd := c(OpScan, pattern, typ).i(cursor).i2(count)
		r := s.Read(now, cmd)
		calls++
		for _, k := range r.Array[1].Array {
			keys = append(keys, string(k.Bulk))
		}
		next, err := strconv.ParseUint(string(r.Array[0].Bulk), 10, 64)
		if err != nil || next >= 1<<63 {
			panic("bad cursor " + string(r.Array[0].Bulk))
		}
		if next == 0 {
			return keys, calls
		}
		cursor = int64(next)
		if between != nil {
			between()
		}
	}
}

func TestScan(t *testing.T) {
	s := NewStore()
	const n = 1000
	for i := range n {
		s.Apply(0, t0, []Command{c(OpSet, "k"+strconv.Itoa(i), "v")})
	}
	s.Apply(0, t0, []Command{c(OpSet, "gone", "v").i(t0 + 1)})

	keys, calls := scanAll(s, t0+1, 10, "", "", nil)
	if len(keys) != n {
		t.Fatalf("full scan returned %d keys, want %d", len(keys), n)
	}
	if calls < n/11 || calls > n/9+2 {
		t.Errorf("COUNT 10 over %d keys took %d calls", n, calls)
	}
	keys, _ = scanAll(s, t0+1, 100, "k1?", "", nil)
	if len(keys) != 10 {
		t.Errorf("MATCH k1? returned %d keys, want 10", len(keys))
	}
	if keys, _ = scanAll(s, t0+1, 100, "", "string", nil); len(keys) != n {
		t.Errorf("TYPE string returned %d keys", len(keys))
	}
	if keys, _ = scanAll(s, t0+1, 100, "", "list", nil); len(keys) != 0 {
		t.Errorf("TYPE list returned %d keys", len(keys))
	}

	// Keys present for the whole scan are returned even while others come
	// and go between calls.
	added := 0
	keys, _ = scanAll(s, t0+1, 7, "k*", "", func() {
		added++
		s.Apply(0, t0, []Command{
			c(OpSet, "new"+strconv.Itoa(added), "v"),
			c(OpDel, "k"+strconv.Itoa(added)),
		})
	})
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	for i := added + 1; i < n; i++ {
		if k := "k" + strconv.Itoa(i); !seen[k] {
			t.Fatalf("key %s, present for the whole scan, was not returned", k)
		}
	}
}

func TestScanCollidingHashes(t *testing.T) {
	// Plant items sharing one hash: a batch must not end inside the run,
	// or the cursor would never move past it.
	s := NewStore()
	for i := range 30 {
		it := newItem([]byte("c"+strconv.Itoa(i)), []byte("v"), 0)
		it.hash = 42
		s.putLocked(it)
	}
	keys, calls := scanAll(s, t0, 5, "", "", nil)
	if len(keys) != 30 || calls != 1 {
		t.Fatalf("scan of 30 colliding keys: %d keys in %d calls", len(keys), calls)
	}
}
