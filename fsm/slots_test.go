package fsm

import (
	"slices"
	"testing"
)

// Keys of two slots: "{a}..." and "{b}..." share the slot of "a" and "b".
var (
	slotA = KeySlot("a")
	slotB = KeySlot("b")
)

// allBut returns the ranges of every slot but those given.
func allBut(slots ...int) []SlotRange {
	var out []SlotRange
	lo := 0
	slices.Sort(slots)
	for _, s := range slots {
		if s > lo {
			out = append(out, SlotRange{lo, s - 1})
		}
		lo = s + 1
	}
	if lo < ClusterSlots {
		out = append(out, SlotRange{lo, ClusterSlots - 1})
	}
	return out
}

func notOwned(slot int) Reply { return slotNotOwnedReply(slot) }
func moving(slot int) Reply   { return slotMovingReply(slot) }

func TestSlotRangesEncoding(t *testing.T) {
	b := AppendSlotRanges(nil, []SlotRange{{10, 20}, {0, 3}, {4, 5}, {15, 30}, {100, 100}})
	got, err := decodeSlotRanges(b)
	if want := []SlotRange{{0, 5}, {10, 30}, {100, 100}}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("decoded %v, %v; want %v", got, err, want)
	}
	for _, bad := range [][]byte{
		{1, 5, 4},                   // lo > hi
		{1, 0x80, 0x80, 1, 0, 0},    // hi 16384
		{2, 0, 5, 6, 7},             // adjacent
		{2, 6, 7, 0, 5},             // descending
		{1, 0, 5, 9},                // trailing
		{3, 0, 1},                   // short
		{0xff, 0xff, 0xff, 0xff, 1}, // count beyond the bytes
	} {
		if _, err := decodeSlotRanges(bad); err == nil {
			t.Errorf("% x decoded", bad)
		}
	}
	if err := (&Command{Op: OpSlotsAssign, Args: [][]byte{{1, 5, 4}}}).Validate(); err == nil {
		t.Error("OpSlotsAssign with bad ranges validated")
	}
	if cmd := SlotsPurge(allBut(), 0); cmd.Validate() == nil {
		t.Error("OpSlotsPurge of 0 keys validated")
	}
}

// TestSlotRefusals checks that a store owning some slots refuses, as a
// whole and changing nothing, every command with a key of a slot it does
// not own, and hides that slot's keys from every keyspace-wide read.
func TestSlotRefusals(t *testing.T) {
	s := newScriptStore()
	run(t, s, []step{
		{t0, c(OpSet, "{a}1", "x"), ok},
		{t0, c(OpSet, "{b}1", "y"), ok},
		{t0, c(OpSet, "{b}2", "z").i(t0 + 10), ok},
		{t0, c(OpRPush, "{b}list", "e"), in(1)},
		{t0, SlotsAssign(allBut(slotB)), ok},
	})
	nb := notOwned(slotB)
	const undeclared = "redis.call('set', KEYS[1], 'v') return redis.call('get', '{b}1')"
	exec := ExecCommand(nil, nil, []Command{c(OpSet, "{a}1", "changed"), c(OpGet, "{b}1")})
	run(t, s, []step{
		// Writes and reads of the slot not owned, single or among others.
		{t0, c(OpSet, "{b}1", "w"), nb},
		{t0, c(OpGet, "{b}1"), nb},
		{t0, c(OpLRange, "{b}list").i2(-1), nb},
		{t0, c(OpMSet, "{a}1", "changed", "{b}1", "w"), nb},
		{t0, c(OpMGet, "{a}1", "{b}1"), nb},
		{t0, c(OpExists, "{a}1", "{b}1"), nb},
		{t0, c(OpDel, "{a}1", "{b}1"), nb},
		{t0, c(OpRename, "{a}1", "{b}9"), nb},
		{t0, exec, nb},
		{t0, eval("return redis.call('set', KEYS[1], 'v')", 1, 0, "{a}1", "{b}1").i(2), nb},
		{t0, c(OpEvalRO, "return 1", "{b}1").i(1), nb},
		// A script reaching an undeclared key fails there.
		{t0, eval(undeclared, 1, 0, "{a}2").i(1), errr(nb.Str + " script: " + ScriptSHA([]byte(undeclared)) + ", on @user_script:1.")},
		{t0, c(OpGet, "{a}2"), bulk("v")},
		// Nothing above changed the owned key.
		{t0, c(OpGet, "{a}1"), bulk("x")},
		// The hidden keys are nobody's.
		{t0, c(OpDBSize), in(2)},
		{t0, c(OpKeys, "*"), bulks("{a}1", "{a}2")},
		{t0, c(OpKeys, "{b}1"), bulks()},
		{t0, c(OpCountKeysInSlot).i(int64(slotB)), in(0)},
		{t0, c(OpGetKeysInSlot).i(int64(slotB)).i2(10), bulks()},
		{t0, c(OpCountKeysInSlot).i(int64(slotA)), in(2)},
		// Keyless reads run.
		{t0, c(OpScriptExists, "{b}"), arr(in(0))},
	})
	if st := s.Stats(t0); st.Keys != 2 || st.Expires != 0 {
		t.Errorf("Stats %+v, want 2 keys, 0 with a TTL", st)
	}
	if r := s.Read(t0, c(OpScan).i2(1000)); r.Array[1].String() != bulks("{a}1", "{a}2").String() {
		t.Errorf("SCAN: %v", r)
	}
	for range 20 {
		if r := s.Read(t0, c(OpRandomKey)); string(r.Bulk) != "{a}1" && string(r.Bulk) != "{a}2" {
			t.Fatalf("RANDOMKEY: %v", r)
		}
	}
	if keys := s.ExpiredKeys(t0+100, 10); len(keys) != 0 {
		t.Errorf("ExpiredKeys: %q", keys)
	}
	for range 20 {
		keys, _ := s.EvictionCandidates(EvictAllKeysRandom, 5, 100, 1<<30)
		for _, k := range keys {
			if KeySlot(k) != slotA {
				t.Fatalf("eviction candidates %q", keys)
			}
		}
	}
	if keys, _ := s.EvictionCandidates(EvictVolatileTTL, 5, 100, 1<<30); len(keys) != 0 {
		t.Errorf("volatile-ttl candidates %q", keys)
	}
	// Active expiry and eviction pass over keys they may not delete.
	run(t, s, []step{
		{t0 + 100, c(OpDelExpired, "{b}2"), in(0)},
		{t0 + 100, c(OpEvict, "{b}1", "{a}2"), in(1)},
	})
	if slot, ok := SlotNotOwned(s.Read(t0, c(OpGet, "{b}1"))); !ok || slot != slotB {
		t.Errorf("SlotNotOwned: %d, %v", slot, ok)
	}
	if _, ok := SlotMoving(s.Read(t0, c(OpGet, "{b}1"))); ok {
		t.Error("SlotMoving recognised a NOTOWNED reply")
	}
	if _, ok := SlotNotOwned(errr("NOTOWNED slot 99999 is not served by this group")); ok {
		t.Error("SlotNotOwned took slot 99999")
	}
	if got := s.SlotsOwned(); !slices.Equal(got, allBut(slotB)) {
		t.Errorf("SlotsOwned %v", got)
	}
}

// TestSlotsPurge deletes the keys left in slots not owned, in bounded
// steps, and nothing else.
func TestSlotsPurge(t *testing.T) {
	s := NewStore()
	for i := range 25 {
		s.Apply(0, t0, []Command{c(OpSet, "{b}"+itoa(i), "v"), c(OpSet, "{a}"+itoa(i), "v")})
	}
	ranges := []SlotRange{{0, ClusterSlots - 1}}
	run(t, s, []step{
		{t0, SlotsPurge(ranges, 10), in(0)}, // owns every slot: nothing to purge
		{t0, SlotsAssign(allBut(slotB)), ok},
		{t0, SlotsPurge([]SlotRange{{slotA, slotA}}, 10), in(0)},
		{t0, SlotsPurge(ranges, 10), in(15)},
		{t0, SlotsPurge(ranges, 10), in(5)},
		{t0, SlotsPurge(ranges, 10), in(0)},
		{t0, c(OpDBSize), in(25)},
	})
	if n := s.Snapshot().Len(); n != 25 {
		t.Errorf("%d keys left, want 25", n)
	}
	if st := s.Stats(t0); st.Keys != 25 {
		t.Errorf("Stats %+v", st)
	}
}

// TestSlotTableCostsNothingUnset checks that a store never told of slots
// keeps no table.
func TestSlotTableCostsNothingUnset(t *testing.T) {
	s := NewStore()
	s.Apply(0, t0, []Command{c(OpSet, "{b}1", "v"), c(OpFlushAll)})
	if s.slots != nil {
		t.Fatal("a store never told of slots has a slot table")
	}
	if got := s.SlotsOwned(); !slices.Equal(got, []SlotRange{{0, ClusterSlots - 1}}) {
		t.Errorf("SlotsOwned %v", got)
	}
}

// TestSlotsAssignStale: a slot given up keeps its keys, invisible, until
// purged; giving it back before is refused, so they cannot come back.
func TestSlotsAssignStale(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		{t0, c(OpSet, "{b}1", "old"), ok},
		{t0, SlotsAssign(allBut(slotB)), ok},
		{t0, SlotsAssign(allBut()), errr("ERR slot 3300 holds keys left to purge")},
		{t0, SlotsAssign(allBut(slotB, slotA)), ok},
		{t0, SlotsPurge(allBut(), 10), in(0)},
		{t0, SlotsAssign(allBut()), ok},
		{t0, c(OpGet, "{b}1"), nilr},
	})
}

// TestSlotsWatch: a transaction watching a key of a slot not owned is
// refused: whether it may run is for the key's owner to say.
func TestSlotsWatch(t *testing.T) {
	s := NewStore()
	seen := s.WatchKey(t0, []byte("{b}1"))
	run(t, s, []step{
		{t0, SlotsAssign(allBut(slotB)), ok},
		{t0, ExecCommand([][]byte{[]byte("{b}1")}, []KeyVersion{seen}, []Command{c(OpSet, "{a}1", "v")}), notOwned(slotB)},
		{t0, c(OpGet, "{a}1"), nilr},
	})
}

// TestCountRange checks the keyspace's count of a hash range against a
// walk, for ranges within a shard, across shards and to the end.
func TestCountRange(t *testing.T) {
	s := NewStore()
	for i := range 3000 {
		s.Apply(0, t0, []Command{c(OpSet, "k"+itoa(i), "v")})
	}
	walk := func(lo, hi uint64) int {
		n := 0
		s.keys.Ascend(item{hash: lo}, func(it item) bool {
			if hi != 0 && it.hash >= hi {
				return false
			}
			n++
			return true
		})
		return n
	}
	for _, r := range []SlotRange{{0, 0}, {0, 15}, {0, 16}, {5, 9000}, {100, 100}, {16000, ClusterSlots - 1},
		{0, ClusterSlots - 1}, {ClusterSlots - 1, ClusterSlots - 1}, {4095, 4097}} {
		lo, hi := slotRangeBounds(r)
		if got, want := s.keys.countRange(lo, hi), walk(lo, hi); got != want {
			t.Errorf("slots %d-%d: counted %d, walked %d", r.Lo, r.Hi, got, want)
		}
	}
}

// TestSlotSizes: KVS.SLOTS SIZES counts each served slot's live keys and
// their MEMORY USAGE, skipping expired keys and slots not served here.
func TestSlotSizes(t *testing.T) {
	s := NewStore()
	var want [ClusterSlots]struct{ keys, bytes int64 }
	for i := range 40 {
		for _, k := range []string{"{a}" + itoa(i), "{b}" + itoa(i), "k" + itoa(i)} {
			s.Apply(0, t0, []Command{c(OpSet, k, "value-"+itoa(i))})
		}
		s.Apply(0, t0, []Command{c(OpRPush, "{a}list"+itoa(i), "x", "y", "z")})
	}
	s.Apply(0, t0, []Command{c(OpSet, "{b}gone", "v"), c(OpExpireAt, "{b}gone").i(t0 + 5)})
	s.keys.Ascend(item{}, func(it item) bool {
		if !it.expired(t0 + 10) {
			slot := KeySlot(it.key)
			want[slot].keys++
			want[slot].bytes += s.Read(t0+10, c(OpMemoryUsage, it.key)).Int
		}
		return true
	})
	check := func(lo, hi int, hidden ...int) {
		t.Helper()
		got := s.Read(t0+10, c(OpSlotSizes).i(int64(lo)).i2(int64(hi)))
		if got.Kind != ReplyArray || len(got.Array)%3 != 0 {
			t.Fatalf("SIZES %d %d = %v", lo, hi, got)
		}
		seen := map[int64]bool{}
		prev := int64(-1)
		for i := 0; i < len(got.Array); i += 3 {
			slot, keys, bytes := got.Array[i].Int, got.Array[i+1].Int, got.Array[i+2].Int
			if slot <= prev || slot < int64(lo) || slot > int64(hi) {
				t.Errorf("SIZES %d %d: slot %d out of order or range", lo, hi, slot)
			}
			prev = slot
			seen[slot] = true
			w := want[slot]
			if slices.Contains(hidden, int(slot)) {
				w.keys, w.bytes = 0, 0
			}
			if keys != w.keys || bytes != w.bytes {
				t.Errorf("SIZES slot %d: %d keys %d bytes, want %d and %d", slot, keys, bytes, w.keys, w.bytes)
			}
		}
		for slot := lo; slot <= hi; slot++ {
			if want[slot].keys > 0 && !seen[int64(slot)] && !slices.Contains(hidden, slot) {
				t.Errorf("SIZES %d %d misses slot %d (%d keys)", lo, hi, slot, want[slot].keys)
			}
		}
	}
	check(0, ClusterSlots-1)
	check(slotA, slotA)
	check(min(slotA, slotB), max(slotA, slotB))
	run(t, s, []step{{t0 + 10, SlotsAssign(allBut(slotB)), ok}})
	check(0, ClusterSlots-1, slotB)
	for _, bad := range []Command{c(OpSlotSizes).i(-1).i2(3), c(OpSlotSizes).i(5).i2(4), c(OpSlotSizes).i(0).i2(ClusterSlots)} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
