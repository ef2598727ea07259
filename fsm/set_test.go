package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// setLimits are the thresholds the set tests run under: Redis's defaults,
// everything large (no set is ever packed) and everything packed.
var setLimits = []struct {
	name string
	lim  Limits
}{
	{"default", DefaultLimits()},
	{"large", Limits{SetMaxIntsetEntries: 0, SetMaxListpackEntries: 0, SetMaxListpackValue: 0}},
	{"packed", Limits{SetMaxIntsetEntries: 1 << 20, SetMaxListpackEntries: 1 << 20, SetMaxListpackValue: 1 << 20}},
}

func storeWith(lim Limits) *Store {
	s := NewStore()
	s.SetLimits(lim)
	return s
}

// sorted renders a reply whose elements Redis leaves unordered with them
// sorted, so tables can state it.
func sorted(r Reply) Reply {
	out := r
	out.Array = slices.Clone(r.Array)
	slices.SortFunc(out.Array, func(a, b Reply) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func set(ss ...string) Reply {
	r := bulks(ss...)
	r.Kind = ReplySet
	return sorted(r)
}

// runSet is run for set replies: members are compared sorted.
func runSet(t *testing.T, s *Store, steps []step) {
	t.Helper()
	for i, st := range steps {
		var got Reply
		if st.cmd.Op.IsWrite() {
			got = s.Apply(0, st.now, []Command{st.cmd})[0]
		} else {
			got = s.Read(st.now, st.cmd)
		}
		switch {
		case st.cmd.Op == OpSScan:
			got = sortedScan(got)
		case st.want.Kind == ReplySet || st.cmd.Op == OpSRandMember:
			got = sorted(got)
		}
		if got.String() != st.want.String() || got.Kind != st.want.Kind {
			t.Errorf("step %d: %v %q: got %v, want %v", i, st.cmd.Op, st.cmd.Args, got, st.want)
		}
	}
}

// sortedScan sorts the members of an SSCAN page.
func sortedScan(r Reply) Reply {
	if r.Kind == ReplyArray && len(r.Array) == 2 {
		r.Array = []Reply{r.Array[0], sorted(r.Array[1])}
	}
	return r
}

func TestSetCommands(t *testing.T) {
	for _, l := range setLimits {
		t.Run(l.name, func(t *testing.T) {
			s := storeWith(l.lim)
			runSet(t, s, []step{
				{t0, c(OpSAdd, "s", "a", "b", "a", "1"), in(3)},
				{t0, c(OpSAdd, "s", "b", "c"), in(1)},
				{t0, c(OpSCard, "s"), in(4)},
				{t0, c(OpSCard, "none"), in(0)},
				{t0, c(OpSMembers, "s"), set("1", "a", "b", "c")},
				{t0, c(OpSMembers, "none"), set()},
				{t0, c(OpSIsMember, "s", "a"), in(1)},
				{t0, c(OpSIsMember, "s", "z"), in(0)},
				{t0, c(OpSIsMember, "none", "a"), in(0)},
				{t0, c(OpSMIsMember, "s", "a", "z", "1"), arr(in(1), in(0), in(1))},
				{t0, c(OpSMIsMember, "none", "a"), arr(in(0))},
				{t0, c(OpSRem, "s", "a", "z", "a"), in(1)},
				{t0, c(OpSRem, "none", "a"), in(0)},
				{t0, c(OpSRem, "s", "1", "b", "c"), in(3)},
				{t0, c(OpType, "s"), status("none")},

				{t0, c(OpSet, "str", "x"), ok},
				{t0, c(OpSAdd, "str", "a"), errr(ErrWrongType)},
				{t0, c(OpSRem, "str", "a"), errr(ErrWrongType)},
				{t0, c(OpSCard, "str"), errr(ErrWrongType)},
				{t0, c(OpSIsMember, "str", "a"), errr(ErrWrongType)},
				{t0, c(OpSMIsMember, "str", "a"), errr(ErrWrongType)},
				{t0, c(OpSMembers, "str"), errr(ErrWrongType)},
				{t0, c(OpSPop, "str"), errr(ErrWrongType)},
				{t0, c(OpSRandMember, "str"), errr(ErrWrongType)},
				{t0, c(OpSScan, "str", "").i2(10), errr(ErrWrongType)},
				{t0, c(OpSInter, "none", "str"), errr(ErrWrongType)},
				{t0, c(OpSUnion, "none", "str"), errr(ErrWrongType)},
				{t0, c(OpSDiff, "none", "str"), errr(ErrWrongType)},
				{t0, c(OpSInterCard, "none", "str"), errr(ErrWrongType)},
				{t0, c(OpSInterStore, "d", "none", "str"), errr(ErrWrongType)},

				// The algebra, with a missing key as the empty set.
				{t0, c(OpSAdd, "u", "1", "2", "3", "4", "5"), in(5)},
				{t0, c(OpSAdd, "v", "3", "4", "5", "6", "x"), in(5)},
				{t0, c(OpSInter, "u", "v"), set("3", "4", "5")},
				{t0, c(OpSInter, "u", "v", "none"), set()},
				{t0, c(OpSInter, "u", "u"), set("1", "2", "3", "4", "5")},
				{t0, c(OpSUnion, "u", "v", "none"), set("1", "2", "3", "4", "5", "6", "x")},
				{t0, c(OpSUnion, "none"), set()},
				{t0, c(OpSDiff, "u", "v"), set("1", "2")},
				{t0, c(OpSDiff, "u", "u"), set()},
				{t0, c(OpSDiff, "none", "u"), set()},
				{t0, c(OpSDiff, "v", "none"), set("3", "4", "5", "6", "x")},
				{t0, c(OpSInterCard, "u", "v"), in(3)},
				{t0, c(OpSInterCard, "u", "v").i(2), in(2)},
				{t0, c(OpSInterCard, "u", "v").i(0), in(3)},
				{t0, c(OpSInterCard, "u", "none"), in(0)},

				// The STORE forms replace any type, drop the TTL, and
				// delete the destination when the result is empty.
				{t0, c(OpSInterStore, "str", "u", "v"), in(3)},
				{t0, c(OpSMembers, "str"), set("3", "4", "5")},
				{t0, c(OpExpireAt, "str").i(t0 + 1000), in(1)},
				{t0, c(OpSUnionStore, "str", "u", "v"), in(7)},
				{t0, c(OpTTL, "str"), in(-1)},
				{t0, c(OpSDiffStore, "str", "u", "v"), in(2)},
				{t0, c(OpSMembers, "str"), set("1", "2")},
				{t0, c(OpSDiffStore, "str", "u", "u"), in(0)},
				{t0, c(OpType, "str"), status("none")},
				{t0, c(OpSInterStore, "u2", "u"), in(5)},
				{t0, c(OpSUnionStore, "u2", "none"), in(0)},
				{t0, c(OpSDiffStore, "u", "u", "v"), in(2)},
				{t0, c(OpSMembers, "u"), set("1", "2")},

				// SMOVE
				{t0, c(OpSMove, "none", "str", "a"), in(0)},
				{t0, c(OpSet, "str", "x"), ok},
				{t0, c(OpSMove, "u", "str", "1"), errr(ErrWrongType)},
				{t0, c(OpSMove, "str", "u", "1"), errr(ErrWrongType)},
				{t0, c(OpSMove, "u", "u", "1"), in(1)},
				{t0, c(OpSMove, "u", "u", "9"), in(0)},
				{t0, c(OpSMove, "u", "v", "9"), in(0)},
				{t0, c(OpSMove, "u", "v", "1"), in(1)},
				{t0, c(OpSMove, "u", "v", "2"), in(1)},
				{t0, c(OpExists, "u"), in(0)},
				{t0, c(OpSMove, "v", "w", "x"), in(1)},
				{t0, c(OpSMembers, "w"), set("x")},
				{t0, c(OpSMove, "v", "w", "1"), in(1)},
				{t0, c(OpSMembers, "w"), set("1", "x")},
				{t0, c(OpSMembers, "v"), set("2", "3", "4", "5", "6")},

				// SRANDMEMBER, with counts whose results are not random.
				{t0, c(OpSRandMember, "none"), nilr},
				{t0, c(OpSRandMember, "none").fl(FlagSetCount).i(3), arr()},
				{t0, c(OpSRandMember, "w").fl(FlagSetCount).i(0), arr()},
				{t0, c(OpSRandMember, "w").fl(FlagSetCount).i(5), bulks("1", "x")},
				{t0, c(OpSRandMember, "w").fl(FlagSetCount).i(-SetMaxRandCount - 1), errr(ErrSetRandCount)},
				{t0, c(OpSRandMember, "none").fl(FlagSetCount).i(-SetMaxRandCount - 1), arr()},
				{t0, c(OpSAdd, "one", "m"), in(1)},
				{t0, c(OpSRandMember, "one"), bulk("m")},
				{t0, c(OpSRandMember, "one").fl(FlagSetCount).i(-3), bulks("m", "m", "m")},
				{t0, c(OpSRandMember, "one").fl(FlagSetCount).i(1), bulks("m")},

				// SPOP
				{t0, c(OpSPop, "none"), nilr},
				{t0, c(OpSPop, "none").fl(FlagSetCount).i(2), set()},
				{t0, c(OpSPop, "one").fl(FlagSetCount).i(0), set()},
				{t0, c(OpSPop, "one"), bulk("m")},
				{t0, c(OpExists, "one"), in(0)},
				{t0, c(OpSPop, "w").fl(FlagSetCount).i(10), set("1", "x")},
				{t0, c(OpExists, "w"), in(0)},

				// SSCAN of a missing key, and bad options only for a set.
				{t0, c(OpSScan, "none", "").i2(10), arr(bulk("0"), arr())},
				{t0, c(OpSScan, "none", "").i2(10).fl(FlagSetScanSyntax), arr(bulk("0"), arr())},
				{t0, c(OpSScan, "v", "").i2(10).fl(FlagSetScanSyntax), errr("ERR syntax error")},
				{t0, c(OpSScan, "v", "").i2(10).fl(FlagSetScanNotInt), errr(ErrNotInteger)},
				{t0, c(OpSScan, "v", "[23]").i2(100), arr(bulk("0"), bulks("2", "3"))},
			})
			checkInvariants(t, s)
		})
	}
}

func TestSetKeepsTTL(t *testing.T) {
	for _, l := range setLimits {
		s := storeWith(l.lim)
		run(t, s, []step{
			{t0, c(OpSAdd, "s", "a", "b", "c", "d"), in(4)},
			{t0, c(OpExpireAt, "s").i(t0 + 5000), in(1)},
			{t0, c(OpSAdd, "s", "e"), in(1)},
			{t0, c(OpSRem, "s", "a"), in(1)},
			{t0, c(OpSMove, "x", "s", "b"), in(0)},
			{t0, c(OpSAdd, "s2", "z"), in(1)},
			{t0, c(OpSMove, "s2", "s", "z"), in(1)},
			{t0, c(OpSCard, "s"), in(5)},
		})
		s.Apply(0, t0, []Command{c(OpSPop, "s").i2(1), c(OpSPop, "s").fl(FlagSetCount).i(1).i2(2)})
		run(t, s, []step{{t0, c(OpPTTL, "s"), in(5000)}, {t0, c(OpSCard, "s"), in(3)}, {t0 + 5000, c(OpSCard, "s"), in(0)}})
	}
}

// TestSetEncodings follows Redis 7.0's OBJECT ENCODING: an intset while
// every member is an integer and there are at most set-max-intset-entries,
// "hashtable" otherwise, and once a hashtable always one.
func TestSetEncodings(t *testing.T) {
	s := NewStore()
	enc := func(key string) string {
		t.Helper()
		s.mu.RLock()
		defer s.mu.RUnlock()
		it, ok := s.getLocked([]byte(key))
		if !ok {
			return "none"
		}
		return kindTable[it.kind].encoding(&it)
	}
	form := func(key string) string {
		s.mu.RLock()
		defer s.mu.RUnlock()
		it, _ := s.getLocked([]byte(key))
		if it.obj != nil {
			return "large"
		}
		return "packed"
	}
	s.Apply(0, t0, []Command{c(OpSAdd, "i", "1", "2", "-3")})
	if enc("i") != "intset" || form("i") != "packed" {
		t.Fatalf("integers: %s %s", enc("i"), form("i"))
	}
	s.Apply(0, t0, []Command{c(OpSAdd, "i", "01")}) // not an integer to Redis
	if enc("i") != "hashtable" || form("i") != "packed" {
		t.Fatalf("after a non-integer: %s %s", enc("i"), form("i"))
	}
	s.Apply(0, t0, []Command{c(OpSRem, "i", "01")})
	if enc("i") != "hashtable" {
		t.Fatalf("back to integers only: %s, want hashtable (Redis does not convert back)", enc("i"))
	}

	// set-max-intset-entries integers stay an intset; one more goes large.
	var args []string
	for i := range 512 {
		args = append(args, strconv.Itoa(i*7))
	}
	s.Apply(0, t0, []Command{c(OpSAdd, append([]string{"big"}, args...)...)})
	if enc("big") != "intset" || form("big") != "packed" {
		t.Fatalf("512 integers: %s %s", enc("big"), form("big"))
	}
	s.Apply(0, t0, []Command{c(OpSAdd, "big", "-1")})
	if enc("big") != "hashtable" || form("big") != "large" {
		t.Fatalf("513 integers: %s %s", enc("big"), form("big"))
	}

	// Strings: packed up to set-max-listpack-entries members of at most
	// set-max-listpack-value bytes.
	args = args[:0]
	for i := range 128 {
		args = append(args, "m"+strconv.Itoa(i))
	}
	s.Apply(0, t0, []Command{c(OpSAdd, append([]string{"str"}, args...)...)})
	if enc("str") != "hashtable" || form("str") != "packed" {
		t.Fatalf("128 strings: %s %s", enc("str"), form("str"))
	}
	s.Apply(0, t0, []Command{c(OpSAdd, "str", "one more")})
	if form("str") != "large" {
		t.Fatalf("129 strings: %s", form("str"))
	}
	s.Apply(0, t0, []Command{c(OpSAdd, "long", "a", strings.Repeat("x", 65))})
	if form("long") != "large" {
		t.Fatalf("a 65-byte member: %s", form("long"))
	}
	s.Apply(0, t0, []Command{c(OpSAdd, "long2", "a"), c(OpSAdd, "long2", strings.Repeat("x", 65))})
	if form("long2") != "large" {
		t.Fatalf("a 65-byte member added: %s", form("long2"))
	}

	// STORE results and SPOP leaving few members are built anew.
	s.Apply(0, t0, []Command{c(OpSInterStore, "d", "big", "big")})
	if enc("d") != "hashtable" || form("d") != "large" {
		t.Fatalf("SINTERSTORE of 513: %s %s", enc("d"), form("d"))
	}
	s.Apply(0, t0, []Command{c(OpSPop, "d").fl(FlagSetCount).i(500).i2(7)})
	if enc("d") != "intset" || form("d") != "packed" {
		t.Fatalf("SPOP leaving 13 integers: %s %s", enc("d"), form("d"))
	}
	s.Apply(0, t0, []Command{c(OpSUnionStore, "d", "str", "i")})
	if form("d") != "large" {
		t.Fatalf("SUNIONSTORE of 132 strings: %s", form("d"))
	}
	s.Apply(0, t0, []Command{c(OpSDiffStore, "d", "i", "none")})
	if enc("d") != "intset" {
		t.Fatalf("SDIFFSTORE of 3 integers: %s", enc("d"))
	}
	checkInvariants(t, s)
}

// setWorkload is a reproducible mix of every set write, over keys that
// grow past the packed limits and shrink again.
func setWorkload(seed uint64, n int) [][]Command {
	rng := rand.New(rand.NewPCG(seed, 1))
	key := func() string { return "s" + strconv.Itoa(rng.IntN(6)) }
	member := func() string {
		switch rng.IntN(4) {
		case 0:
			return "m" + strconv.Itoa(rng.IntN(300))
		case 1:
			return strings.Repeat("l", 60+rng.IntN(10))
		}
		return strconv.Itoa(rng.IntN(700) - 50)
	}
	var entries [][]Command
	for range n {
		var cmds []Command
		for range 1 + rng.IntN(4) {
			var cmd Command
			switch rng.IntN(12) {
			case 0, 1, 2, 3:
				args := []string{key()}
				for range 1 + rng.IntN(40) {
					args = append(args, member())
				}
				cmd = c(OpSAdd, args...)
			case 4, 5:
				args := []string{key()}
				for range 1 + rng.IntN(20) {
					args = append(args, member())
				}
				cmd = c(OpSRem, args...)
			case 6:
				cmd = c(OpSPop, key()).i2(rng.Int64())
			case 7:
				cmd = c(OpSPop, key()).fl(FlagSetCount).i(int64(rng.IntN(30))).i2(rng.Int64())
			case 8:
				cmd = c(OpSMove, key(), key(), member())
			case 9:
				cmd = c([]Op{OpSInterStore, OpSUnionStore, OpSDiffStore}[rng.IntN(3)], key(), key(), key())
			case 10:
				cmd = c(OpExpireAt, key()).i(t0 + int64(rng.IntN(100000)))
			case 11:
				if rng.IntN(3) == 0 {
					cmd = c(OpSet, key(), "string")
				} else {
					cmd = c(OpDel, key())
				}
			}
			cmds = append(cmds, cmd)
		}
		entries = append(entries, cmds)
	}
	return entries
}

// TestSetDeterminism applies one workload to stores with different
// thresholds, through the log encoding: every reply (SPOP's picks
// included) is the same whatever form each store chose, and stores with
// the same thresholds write byte-identical snapshots.
func TestSetDeterminism(t *testing.T) {
	entries := setWorkload(1, 3000)
	var stores []*Store
	for _, l := range setLimits {
		stores = append(stores, storeWith(l.lim), storeWith(l.lim))
	}
	for i, cmds := range entries {
		enc := EncodeEntry(nil, t0, cmds)
		now, dec, err := DecodeEntry(enc)
		if err != nil {
			t.Fatal(err)
		}
		want := stores[0].Apply(uint64(i+1), t0, cmds)
		for j, s := range stores[1:] {
			got := s.Apply(uint64(i+1), now, dec)
			for k := range got {
				if got[k].String() != want[k].String() || got[k].Kind != want[k].Kind {
					t.Fatalf("entry %d cmd %d (%v) on store %d: %v, want %v", i, k, cmds[k].Op, j+1, got[k], want[k])
				}
			}
		}
	}
	for i := 0; i < len(stores); i += 2 {
		checkInvariants(t, stores[i])
		if !bytes.Equal(snapshotBytes(t, stores[i]), snapshotBytes(t, stores[i+1])) {
			t.Fatalf("%s: same entries gave different snapshots", setLimits[i/2].name)
		}
	}
	n := 0
	for _, k := range []string{"s0", "s1", "s2", "s3", "s4", "s5"} {
		n += int(stores[0].Read(t0, c(OpSCard, k)).Int)
	}
	if n == 0 {
		t.Fatal("the workload left no members; the test proves nothing")
	}
}

func TestSetSnapshotRestore(t *testing.T) {
	for _, l := range setLimits {
		s := storeWith(l.lim)
		for i, cmds := range setWorkload(2, 1500) {
			s.Apply(uint64(i+1), t0, cmds)
		}
		snap := snapshotBytes(t, s)
		r := NewStore()
		if _, err := r.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		checkInvariants(t, r)
		if !bytes.Equal(snapshotBytes(t, r), snap) {
			t.Fatalf("%s: restored store writes a different snapshot", l.name)
		}
		for k := range 6 {
			key := "s" + strconv.Itoa(k)
			for _, op := range []Op{OpSMembers, OpSCard, OpType} {
				a, b := s.Read(t0, c(op, key)), r.Read(t0, c(op, key))
				if a.String() != b.String() {
					t.Fatalf("%s: %v %s: %v before, %v after", l.name, op, key, a, b)
				}
			}
		}
	}
}

// TestSetSnapshotCOW writes to large and packed sets while a snapshot
// taken before is streamed: it must show the state at Snapshot.
func TestSetSnapshotCOW(t *testing.T) {
	s := NewStore()
	var big []string
	for i := range 5000 {
		big = append(big, "member"+strconv.Itoa(i))
	}
	s.Apply(0, t0, []Command{c(OpSAdd, append([]string{"big"}, big...)...), c(OpSAdd, "small", "1", "2", "3")})
	want := snapshotBytes(t, s)
	sn := s.Snapshot()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			s.Apply(0, t0, []Command{
				c(OpSRem, "big", big[i]),
				c(OpSAdd, "big", "new"+strconv.Itoa(i)),
				c(OpSAdd, "small", strconv.Itoa(i+10)),
				c(OpSPop, "big").i2(int64(i)),
			})
		}
	}()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	<-done
	sn.Release()
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("snapshot changed under concurrent set writes")
	}
	if bytes.Equal(snapshotBytes(t, s), want) {
		t.Fatal("writes after the snapshot are missing from the store")
	}
	checkInvariants(t, s)
}

// setSnapshot builds a snapshot holding one set "s" with the given form
// byte, count and members, as raw bytes.
func setSnapshot(form byte, count int, members ...string) []byte {
	b := []byte{snapshotVersionV3, 1, 0, 1, byte(kindSet), 1, 's', 0, form}
	b = binary.AppendUvarint(b, uint64(count))
	for _, m := range members {
		b = binary.AppendUvarint(b, uint64(len(m)))
		b = append(b, m...)
	}
	return appendCRC(b)
}

// inMemberOrder returns ms sorted as sets hold them.
func inMemberOrder(ms ...string) []string {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b string) int {
		return compareHashed(hashed{memberHashString(a), []byte(a)}, hashed{memberHashString(b), []byte(b)})
	})
	return out
}

func TestSetRestoreCorrupt(t *testing.T) {
	ordered := inMemberOrder("1", "2", "3")
	if _, err := NewStore().Restore(bytes.NewReader(setSnapshot(setFormIntset, 3, ordered...))); err != nil {
		t.Fatalf("a well-formed set does not restore: %v", err)
	}
	strs := inMemberOrder("a", "b")
	bad := map[string][]byte{
		"unknown form":        setSnapshot(9, 3, ordered...),
		"empty set":           setSnapshot(setFormPacked, 0),
		"out of order":        setSnapshot(setFormPacked, 3, ordered[2], ordered[0], ordered[1]),
		"duplicate":           setSnapshot(setFormLarge, 3, ordered[0], ordered[0], ordered[1]),
		"duplicate packed":    setSnapshot(setFormPacked, 2, ordered[1], ordered[1]),
		"intset of strings":   setSnapshot(setFormIntset, 2, strs...),
		"intset of 01":        setSnapshot(setFormIntset, 1, "01"),
		"count beyond data":   setSnapshot(setFormLarge, 4, ordered...),
		"count of 2^40":       setSnapshot(setFormLarge, 1<<40, ordered...),
		"truncated member":    setSnapshot(setFormPacked, 1, "a")[:11],
		"member longer than":  append(setSnapshot(setFormPacked, 1)[:10], 0xff, 0xff, 0xff, 0xff, 0x0f),
		"large out of order":  setSnapshot(setFormLarge, 2, strs[1], strs[0]),
		"intset out of order": setSnapshot(setFormIntset, 3, ordered[1], ordered[0], ordered[2]),
	}
	for name, b := range bad {
		target := NewStore()
		target.Apply(3, t0, []Command{c(OpSAdd, "keep", "me")})
		_, err := target.Restore(bytes.NewReader(b))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
		if target.Read(t0, c(OpSIsMember, "keep", "me")).Int != 1 {
			t.Errorf("%s: a failed Restore changed the store", name)
		}
	}
}

// TestSetBookkeeping checks the byte count through conversions both ways.
func TestSetBookkeeping(t *testing.T) {
	for _, l := range setLimits {
		s := storeWith(l.lim)
		for i, cmds := range setWorkload(3, 2000) {
			s.Apply(uint64(i+1), t0, cmds)
			if i%200 == 0 {
				s.Snapshot().Release() // later edits clone the large forms
				checkInvariants(t, s)
			}
		}
		checkInvariants(t, s)
		s.Apply(0, t0, []Command{c(OpFlushAll)})
		checkInvariants(t, s)
	}
}

// TestSetScanLarge follows SSCAN's cursor over a large set while members
// come and go: every member present throughout is returned, and members
// whose hashes collide never make the cursor stand still.
func TestSetScanLarge(t *testing.T) {
	s := storeWith(setLimits[1].lim)
	var all []string
	for i := range 1000 {
		all = append(all, "m"+strconv.Itoa(i))
	}
	s.Apply(0, t0, []Command{c(OpSAdd, append([]string{"s"}, all...)...)})
	seen := map[string]bool{}
	cursor, pages := int64(0), 0
	for {
		r := s.Read(t0, c(OpSScan, "s", "").i(cursor).i2(7))
		for _, m := range r.Array[1].Array {
			seen[string(m.Bulk)] = true
		}
		next, _ := strconv.ParseUint(string(r.Array[0].Bulk), 10, 64)
		if next == 0 {
			break
		}
		if int64(next) <= cursor {
			t.Fatalf("cursor went from %d to %d", cursor, next)
		}
		cursor = int64(next)
		pages++
		s.Apply(0, t0, []Command{c(OpSAdd, "s", "new"+strconv.Itoa(pages)), c(OpSRem, "s", all[pages])})
	}
	for _, m := range all[pages+1:] {
		if !seen[m] {
			t.Fatalf("member %s, present throughout, was not returned", m)
		}
	}
	if pages < 100 {
		t.Fatalf("%d pages of about 7 members for 1000 members", pages)
	}
	r := s.Read(t0, c(OpSScan, "s", "m99?").i2(1<<20))
	if got := sorted(r.Array[1]); got.String() != bulks("m990", "m991", "m992", "m993", "m994", "m995", "m996", "m997", "m998", "m999").String() {
		t.Fatalf("MATCH m99?: %v", got)
	}
	if r := s.Read(t0, c(OpSScan, "s", "").i(-1).i2(10)); len(r.Array[1].Array) != 0 || string(r.Array[0].Bulk) != "0" {
		t.Fatalf("a cursor past any kvs hands out: %v", r)
	}
}

// TestSetPopUniform checks that SPOP's seeded picks are spread over the
// members (a constant seed is deterministic, not fair, and the server
// draws a fresh one per command).
func TestSetPopUniform(t *testing.T) {
	for _, l := range setLimits {
		counts := map[string]int{}
		for seed := range 3000 {
			s := storeWith(l.lim)
			s.Apply(0, t0, []Command{c(OpSAdd, "s", "a", "b", "c", "1", "2", "3")})
			r := s.Apply(0, t0, []Command{c(OpSPop, "s").i2(int64(seed))})[0]
			counts[string(r.Bulk)]++
		}
		for _, m := range []string{"a", "b", "c", "1", "2", "3"} {
			if counts[m] < 350 || counts[m] > 650 {
				t.Errorf("%s: %s popped %d times in 3000, expected about 500", l.name, m, counts[m])
			}
		}
	}
}

func TestSetRandMemberDistinct(t *testing.T) {
	for _, l := range setLimits {
		s := storeWith(l.lim)
		var ms []string
		for i := range 200 {
			ms = append(ms, "m"+strconv.Itoa(i))
		}
		s.Apply(0, t0, []Command{c(OpSAdd, append([]string{"s"}, ms...)...)})
		for _, n := range []int64{2, 10, 67, 150, 199} {
			r := s.Read(t0, c(OpSRandMember, "s").fl(FlagSetCount).i(n))
			seen := map[string]bool{}
			for _, m := range r.Array {
				if seen[string(m.Bulk)] || !slices.Contains(ms, string(m.Bulk)) {
					t.Fatalf("%s: count %d: %q repeated or not a member", l.name, n, m.Bulk)
				}
				seen[string(m.Bulk)] = true
			}
			if len(seen) != int(n) {
				t.Fatalf("%s: count %d gave %d members", l.name, n, len(seen))
			}
		}
		if r := s.Read(t0, c(OpSRandMember, "s").fl(FlagSetCount).i(-500)); len(r.Array) != 500 {
			t.Fatalf("count -500 gave %d", len(r.Array))
		}
	}
}

// The fuzz targets' seeds with sets are files in testdata/fuzz, built
// from setFuzzSeeds; TestSetFuzzSeeds says when they are out of date and
// rewrites them with KVS_WRITE_FUZZ_SEEDS=1.
func setFuzzSeeds(t *testing.T) map[string][]byte {
	seeds := map[string][]byte{}
	for _, l := range setLimits {
		s := storeWith(l.lim)
		for i, cmds := range setWorkload(4, 60) {
			s.Apply(uint64(i+1), t0, cmds)
		}
		seeds["FuzzRestore/set-"+l.name] = snapshotBytes(t, s)
	}
	var cmds []Command
	for _, e := range setWorkload(5, 10) {
		cmds = append(cmds, e...)
	}
	cmds = append(cmds,
		c(OpSCard, "k"), c(OpSIsMember, "k", "m"), c(OpSMIsMember, "k", "a", "b"), c(OpSMembers, "k"),
		c(OpSRandMember, "k").fl(FlagSetCount).i(-3), c(OpSInter, "a", "b"), c(OpSUnion, "a"), c(OpSDiff, "a", "b"),
		c(OpSInterCard, "a", "b").i(5), c(OpSScan, "k", "m*").i(12345).i2(10).fl(FlagSetScanNotInt))
	seeds["FuzzDecodeEntry/set-ops"] = EncodeEntry(nil, t0, cmds)
	return seeds
}

func TestSetFuzzSeeds(t *testing.T) {
	for name, b := range setFuzzSeeds(t) {
		path := filepath.Join("testdata", "fuzz", name)
		want := []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n")
		if os.Getenv("KVS_WRITE_FUZZ_SEEDS") == "1" {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("fuzz seed %s is missing or out of date (%v): rerun with KVS_WRITE_FUZZ_SEEDS=1", path, err)
		}
	}
}

// TestDirtySMove: SMOVE counts Redis's changes: the removal, and the
// addition only when the destination did not hold the member, packed or
// large.
func TestDirtySMove(t *testing.T) {
	s := NewStore()
	sadd := func(key string, n int) Command {
		args := []string{key}
		for i := range n {
			args = append(args, "m"+strconv.Itoa(i))
		}
		return c(OpSAdd, args...)
	}
	for _, size := range []int{3, 1000} { // packed, then the large form
		src, dst := "src"+strconv.Itoa(size), "dst"+strconv.Itoa(size)
		s.Apply(0, 1000, []Command{sadd(src, size), sadd(dst, size)})
		for i, st := range []struct {
			member string
			want   int64
		}{
			{"m0", 1},     // already in dst: the removal only
			{"m1", 1},     // likewise
			{"absent", 0}, // not in src: nothing
		} {
			before := s.Dirty()
			s.Apply(0, 1000, []Command{c(OpSMove, src, dst, st.member)})
			if got := s.Dirty() - before; got != st.want {
				t.Errorf("size %d step %d: SMOVE %s counted %d changes, want %d", size, i, st.member, got, st.want)
			}
		}
		s.Apply(0, 1000, []Command{c(OpSAdd, src, "fresh")})
		before := s.Dirty()
		s.Apply(0, 1000, []Command{c(OpSMove, src, dst, "fresh")})
		if got := s.Dirty() - before; got != 2 {
			t.Errorf("size %d: SMOVE of a member new to dst counted %d changes, want 2", size, got)
		}
	}
}
