package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

func init() {
	restoreSeeds = append(restoreSeeds, func(t testing.TB) []byte {
		s := NewStore()
		s.Apply(0, t0, hashSeedCmds)
		return snapshotBytes(t, s)
	})
	entrySeeds = append(entrySeeds, hashSeedCmds)
}

// hashSeedCmds use every hash write op and build both forms.
var hashSeedCmds = []Command{
	c(OpHSet, "h", "a", "1", "b", "2"),
	c(OpHSet, "h", "c", "3").fl(FlagHashOK),
	c(OpHSetNX, "h", "d", "4"),
	c(OpHIncrBy, "h", "a").i(-7),
	c(OpHIncrByFloat, "h", "e", "0.1").f(0.1),
	c(OpHIncrByFloat, "h", "e").f(2.5),
	c(OpHDel, "h", "b", "zz"),
	c(OpHSet, "big", "long", string(bytes.Repeat([]byte("v"), 65)), "x", "y"),
	c(OpExpireAt, "big").i(t0 + 5000),
}

// hashStores returns a store with Redis's limits, where small hashes are
// packed, and one where every hash is large: every reply must be the same
// in both, since fields are in the same order in both forms.
func hashStores() []*Store {
	large := NewStore()
	large.limits.HashMaxListpackEntries = 0
	return []*Store{NewStore(), large}
}

func hashEncoding(t *testing.T, s *Store, key string) string {
	t.Helper()
	it, ok := s.getLocked([]byte(key))
	if !ok || it.kind != kindHash {
		t.Fatalf("%s is not a hash", key)
	}
	return kindTable[kindHash].encoding(&it)
}

// inHashOrder returns field-value pairs sorted as a hash holds them.
func inHashOrder(pairs ...string) []string {
	type fv struct{ f, v string }
	var ps []fv
	for i := 0; i < len(pairs); i += 2 {
		ps = append(ps, fv{pairs[i], pairs[i+1]})
	}
	slices.SortFunc(ps, func(a, b fv) int {
		ha, hb := memberHashString(a.f), memberHashString(b.f)
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		case a.f < b.f:
			return -1
		case a.f > b.f:
			return 1
		}
		return 0
	})
	out := make([]string, 0, len(pairs))
	for _, p := range ps {
		out = append(out, p.f, p.v)
	}
	return out
}

func every(ss []string, from int) []string {
	var out []string
	for i := from; i < len(ss); i += 2 {
		out = append(out, ss[i])
	}
	return out
}

func mapr(ss ...string) Reply {
	r := bulks(ss...)
	r.Kind = ReplyMap
	return r
}

func TestHashCommands(t *testing.T) {
	wrong := errr(ErrWrongType)
	all := inHashOrder("a", "1", "b", "two", "c", "3", "n", "10")
	for _, s := range hashStores() {
		s.Apply(0, t0, []Command{c(OpSet, "s", "x")})
		run(t, s, []step{
			{t0, c(OpHSet, "h", "a", "1", "b", "2", "b", "two"), in(2)},
			{t0, c(OpHSet, "h", "a", "1", "c", "3").fl(FlagHashOK), ok},
			{t0, c(OpHSetNX, "h", "a", "9"), in(0)},
			{t0, c(OpHSetNX, "h", "n", "10"), in(1)},
			{t0, c(OpHSet, "s", "a", "1"), wrong},
			{t0, c(OpHSetNX, "s", "a", "1"), wrong},
			{t0, c(OpHGet, "h", "b"), bulk("two")},
			{t0, c(OpHGet, "h", "zz"), nilr},
			{t0, c(OpHGet, "nokey", "b"), nilr},
			{t0, c(OpHGet, "s", "b"), wrong},
			{t0, c(OpHMGet, "h", "a", "zz", "c"), arr(bulk("1"), nilr, bulk("3"))},
			{t0, c(OpHMGet, "nokey", "a"), arr(nilr)},
			{t0, c(OpHMGet, "s", "a"), wrong},
			{t0, c(OpHLen, "h"), in(4)},
			{t0, c(OpHLen, "nokey"), in(0)},
			{t0, c(OpHLen, "s"), wrong},
			{t0, c(OpHStrLen, "h", "b"), in(3)},
			{t0, c(OpHStrLen, "h", "zz"), in(0)},
			{t0, c(OpHStrLen, "s", "zz"), wrong},
			{t0, c(OpHExists, "h", "a"), in(1)},
			{t0, c(OpHExists, "h", "zz"), in(0)},
			{t0, c(OpHExists, "s", "a"), wrong},
			{t0, c(OpHGetAll, "h"), mapr(all...)},
			{t0, c(OpHGetAll, "nokey"), mapr()},
			{t0, c(OpHGetAll, "s"), wrong},
			{t0, c(OpHKeys, "h"), bulks(every(all, 0)...)},
			{t0, c(OpHVals, "h"), bulks(every(all, 1)...)},
			{t0, c(OpHKeys, "nokey"), bulks()},
			{t0, c(OpHVals, "s"), wrong},

			{t0, c(OpHIncrBy, "h", "n").i(-15), in(-5)},
			{t0, c(OpHIncrBy, "h", "new").i(7), in(7)},
			{t0, c(OpHIncrBy, "h", "b").i(1), errr(ErrHashNotInteger)},
			{t0, c(OpHIncrBy, "h", "n").i(math.MinInt64), errr(ErrOverflow)},
			{t0, c(OpHIncrBy, "s", "n").i(1), wrong},
			{t0, c(OpHIncrByFloat, "f", "x", "0.1"), bulk("0.1")},
			{t0, c(OpHIncrByFloat, "f", "x", "0.2"), bulk("0.3")},
			{t0, c(OpHIncrByFloat, "f", "x").f(1.5), bulk("1.8")},
			{t0, c(OpHIncrByFloat, "h", "b", "1"), errr(ErrHashNotFloat)},
			{t0, c(OpHIncrByFloat, "s", "b", "1"), wrong},
			{t0, c(OpHSet, "f", "inf", "inf"), in(1)},
			{t0, c(OpHIncrByFloat, "f", "inf", "1"), errr(ErrNaNOrInfinity)},
			{t0, c(OpHSet, "f", "huge", "1e4932"), in(1)},
			{t0, c(OpHIncrByFloat, "f", "huge", "1e4932"), errr(ErrNaNOrInfinity)},
			{t0, c(OpHGet, "f", "x"), bulk("1.8")},

			{t0, c(OpHDel, "h", "a", "a", "zz"), in(1)},
			{t0, c(OpHDel, "nokey", "a"), in(0)},
			{t0, c(OpHDel, "s", "a"), wrong},
			{t0, c(OpHDel, "h", "b", "c", "n", "new"), in(4)},
			{t0, c(OpExists, "h"), in(0)},
			{t0, c(OpType, "f"), status("hash")},
		})
		checkInvariants(t, s)
	}
}

func TestHashKeepsTTL(t *testing.T) {
	for _, s := range hashStores() {
		run(t, s, []step{
			{t0, c(OpHSet, "h", "a", "1"), in(1)},
			{t0, c(OpExpireAt, "h").i(t0 + 1000), in(1)},
			{t0, c(OpHSet, "h", "b", "2"), in(1)},
			{t0, c(OpHIncrBy, "h", "c").i(1), in(1)},
			{t0, c(OpHDel, "h", "a"), in(1)},
			{t0, c(OpPTTL, "h"), in(1000)},
			{t0 + 1000, c(OpHLen, "h"), in(0)},
			{t0 + 1000, c(OpHSet, "h", "x", "1"), in(1)},
			{t0 + 1000, c(OpPTTL, "h"), in(-1)},
		})
		checkInvariants(t, s)
	}
}

// TestHashConversion follows Redis's rule: packed while at most
// hash-max-listpack-entries fields and no field or value longer than
// hash-max-listpack-value, converted on the write that breaks either, and
// never converted back.
func TestHashConversion(t *testing.T) {
	s := NewStore()
	lim := DefaultLimits()
	lim.HashMaxListpackEntries = 128
	s.SetLimits(lim)
	var args []string
	for i := range 128 {
		args = append(args, "f"+itoa(i), "v")
	}
	s.Apply(0, t0, []Command{c(OpHSet, append([]string{"h"}, args...)...)})
	if e := hashEncoding(t, s, "h"); e != "listpack" {
		t.Fatalf("128 fields: %s", e)
	}
	s.Apply(0, t0, []Command{c(OpHSet, "h", "f0", "again")})
	if e := hashEncoding(t, s, "h"); e != "listpack" {
		t.Fatalf("128 fields, one replaced: %s", e)
	}
	s.Apply(0, t0, []Command{c(OpHSetNX, "h", "f128", "v")})
	if e := hashEncoding(t, s, "h"); e != "hashtable" {
		t.Fatalf("129 fields: %s", e)
	}
	s.Apply(0, t0, []Command{c(OpHDel, append([]string{"h"}, every(args, 0)...)...)})
	if e := hashEncoding(t, s, "h"); e != "hashtable" {
		t.Fatalf("back to 1 field: %s (Redis never converts back)", e)
	}

	long := string(bytes.Repeat([]byte("x"), 65))
	for _, cmd := range []Command{
		c(OpHSet, "v", "a", long[:64]),
		c(OpHSet, "w", long[:64], "a"),
	} {
		s.Apply(0, t0, []Command{cmd})
		if e := hashEncoding(t, s, string(cmd.Args[0])); e != "listpack" {
			t.Fatalf("%q of 64 bytes: %s", cmd.Args[0], e)
		}
	}
	s.Apply(0, t0, []Command{c(OpHSet, "v", "a", long), c(OpHSet, "w", long, "a"), c(OpHSet, "new", "a", long)})
	for _, k := range []string{"v", "w", "new"} {
		if e := hashEncoding(t, s, k); e != "hashtable" {
			t.Fatalf("%s with 65 bytes: %s", k, e)
		}
	}
	s.limits.HashMaxListpackValue = 3
	s.Apply(0, t0, []Command{c(OpHIncrBy, "n", "a").i(999)})
	if e := hashEncoding(t, s, "n"); e != "listpack" {
		t.Fatalf("999: %s", e)
	}
	s.Apply(0, t0, []Command{c(OpHIncrBy, "n", "a").i(1)})
	if e := hashEncoding(t, s, "n"); e != "hashtable" {
		t.Fatalf("1000 with a limit of 3 bytes: %s", e)
	}
	if r := s.Read(t0, c(OpHGet, "n", "a")); string(r.Bulk) != "1000" {
		t.Fatalf("HGET after conversion: %v", r)
	}
	checkInvariants(t, s)
}

// collectHScan follows an HSCAN iteration to its end and returns every
// field-value pair in visiting order, and the number of pages.
func collectHScan(t *testing.T, s *Store, key string, count int64) (pairs []string, pages int) {
	t.Helper()
	cursor := int64(0)
	for {
		pages++
		r := s.Read(t0, c(OpHScan, key, "").i(cursor).i2(count))
		if r.Kind != ReplyArray || len(r.Array) != 2 {
			t.Fatalf("HSCAN reply %v", r)
		}
		for _, e := range r.Array[1].Array {
			pairs = append(pairs, string(e.Bulk))
		}
		next, err := strconv.ParseUint(string(r.Array[0].Bulk), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if next == 0 {
			return pairs, pages
		}
		if int64(next) <= cursor {
			t.Fatalf("cursor went from %d to %d", cursor, next)
		}
		cursor = int64(next)
	}
}

func TestHashScan(t *testing.T) {
	stores := hashStores()
	var args []string
	for i := range 100 {
		args = append(args, "f"+itoa(i), "v"+itoa(i))
	}
	want := inHashOrder(args...)
	for i, s := range stores {
		s.Apply(0, t0, []Command{c(OpHSet, append([]string{"h"}, args...)...), c(OpSet, "s", "x")})
		got, pages := collectHScan(t, s, "h", 7)
		if !slices.Equal(got, want) {
			t.Errorf("store %d: HSCAN gave %v, want %v", i, got, want)
		}
		if packed := i == 0; packed != (pages == 1) {
			t.Errorf("store %d: %d pages (a packed hash comes whole)", i, pages)
		}
		run(t, s, []step{
			{t0, c(OpHScan, "nokey", "").i2(10), replyEmptyScan},
			{t0, c(OpHScan, "nokey", "").fl(FlagHScanSyntax), replyEmptyScan},
			{t0, c(OpHScan, "s", "").fl(FlagHScanSyntax), errr(ErrWrongType)},
			{t0, c(OpHScan, "h", "").fl(FlagHScanSyntax), errr("ERR syntax error")},
			{t0, c(OpHScan, "h", "").fl(FlagHScanNotInteger), errr(ErrNotInteger)},
			{t0, c(OpHScan, "h", "f1?").fl(FlagHScanMatch).i2(1000), arr(bulk("0"), bulks(inHashOrder(args[20:40]...)...))},
			{t0, c(OpHScan, "h", "").fl(FlagHScanMatch).i2(1000), arr(bulk("0"), bulks())},
		})
	}
	// Past every cursor: a large hash has nothing after it; a packed one
	// is returned whole, as Redis returns a listpack whatever the cursor.
	if r := stores[1].Read(t0, c(OpHScan, "h", "").i(-1)); len(r.Array[1].Array) != 0 {
		t.Errorf("large hash past the last cursor: %v", r)
	}
	if r := stores[0].Read(t0, c(OpHScan, "h", "").i(-1)); len(r.Array[1].Array) != 200 {
		t.Errorf("packed hash, any cursor: %d elements", len(r.Array[1].Array))
	}
}

func TestHashScanSeesEveryFieldUnderWrites(t *testing.T) {
	s := hashStores()[1]
	for i := range 300 {
		s.Apply(0, t0, []Command{c(OpHSet, "h", "keep"+itoa(i), "v")})
	}
	seen := map[string]bool{}
	cursor := int64(0)
	for n := 0; ; n++ {
		r := s.Read(t0, c(OpHScan, "h", "").i(cursor).i2(5))
		for j := 0; j < len(r.Array[1].Array); j += 2 {
			seen[string(r.Array[1].Array[j].Bulk)] = true
		}
		// Churn between pages: fields come and go.
		s.Apply(0, t0, []Command{c(OpHSet, "h", "tmp"+itoa(n), "v"), c(OpHDel, "h", "tmp"+itoa(n-3))})
		next, _ := strconv.ParseUint(string(r.Array[0].Bulk), 10, 64)
		if next == 0 {
			break
		}
		cursor = int64(next)
	}
	for i := range 300 {
		if !seen["keep"+itoa(i)] {
			t.Fatalf("field keep%d, present throughout, was never returned", i)
		}
	}
}

func TestHashRandField(t *testing.T) {
	for _, s := range hashStores() {
		s.Apply(0, t0, []Command{c(OpHSet, "h", "a", "1", "b", "2", "c", "3"), c(OpSet, "s", "x")})
		value := map[string]string{"a": "1", "b": "2", "c": "3"}
		run(t, s, []step{
			{t0, c(OpHRandField, "nokey"), nilr},
			{t0, c(OpHRandField, "s"), errr(ErrWrongType)},
			{t0, c(OpHRandField, "nokey").fl(FlagHashCount).i(3), bulks()},
			{t0, c(OpHRandField, "s").fl(FlagHashCount).i(0), errr(ErrWrongType)},
			{t0, c(OpHRandField, "h").fl(FlagHashCount).i(0), bulks()},
			{t0, c(OpHRandField, "h").fl(FlagHashCount).i(-MaxHRandFieldRepeats - 1), errr(errOutOfRange)},
			{t0, c(OpHRandField, "nokey").fl(FlagHashCount).i(-MaxHRandFieldRepeats - 1), bulks()},
		})
		for range 20 {
			if f := s.Read(t0, c(OpHRandField, "h")); value[string(f.Bulk)] == "" {
				t.Fatalf("HRANDFIELD gave %v", f)
			}
		}
		for _, n := range []int64{-5, -1, 1, 2, 3, 10} {
			r := s.Read(t0, c(OpHRandField, "h").fl(FlagHashCount|FlagHashWithValues).i(n))
			want := int(n)
			switch {
			case n < 0:
				want = int(-n)
			case n > 3:
				want = 3
			}
			if r.Kind != ReplyPairs || len(r.Array) != want {
				t.Fatalf("count %d: %v", n, r)
			}
			seen := map[string]bool{}
			for _, p := range r.Array {
				f, v := string(p.Array[0].Bulk), string(p.Array[1].Bulk)
				if value[f] != v || (n > 0 && seen[f]) {
					t.Fatalf("count %d: %v", n, r)
				}
				seen[f] = true
			}
		}
	}
	big := NewStore()
	for i := range 1000 {
		big.Apply(0, t0, []Command{c(OpHSet, "h", "f"+itoa(i), "v")})
	}
	for _, n := range []int64{1, 10, 500, 999} {
		r := big.Read(t0, c(OpHRandField, "h").fl(FlagHashCount).i(n))
		seen := map[string]bool{}
		for _, e := range r.Array {
			seen[string(e.Bulk)] = true
		}
		if len(r.Array) != int(n) || len(seen) != int(n) {
			t.Fatalf("count %d: %d fields, %d distinct", n, len(r.Array), len(seen))
		}
	}
}

func TestHashFieldForSort(t *testing.T) {
	for _, s := range hashStores() {
		s.Apply(0, t0, []Command{c(OpHSet, "h", "w", "3"), c(OpSet, "s", "x")})
		h, _ := s.getLocked([]byte("h"))
		str, _ := s.getLocked([]byte("s"))
		if v, ok := hashField(&h, []byte("w")); !ok || string(v) != "3" {
			t.Errorf("hashField(h, w) = %q, %v", v, ok)
		}
		if _, ok := hashField(&h, []byte("x")); ok {
			t.Error("hashField found a missing field")
		}
		if _, ok := hashField(&str, []byte("w")); ok {
			t.Error("hashField found a field in a string")
		}
	}
}

// hashWorkload is a reproducible mix of hash writes over a few keys, with
// values long enough now and then to convert a hash.
func hashWorkload(seed uint64, n int) [][]Command {
	rng := rand.New(rand.NewPCG(seed, 1))
	key := func() string { return "h" + itoa(rng.IntN(6)) }
	field := func() string { return "f" + itoa(rng.IntN(200)) }
	value := func() string {
		if rng.IntN(50) == 0 {
			return string(bytes.Repeat([]byte("L"), 70))
		}
		return itoa(rng.IntN(100))
	}
	var entries [][]Command
	for range n {
		var cmds []Command
		for range 1 + rng.IntN(5) {
			var cmd Command
			switch rng.IntN(8) {
			case 0, 1, 2:
				cmd = c(OpHSet, key(), field(), value(), field(), value())
			case 3:
				cmd = c(OpHSetNX, key(), field(), value())
			case 4:
				cmd = c(OpHDel, key(), field(), field(), field())
			case 5:
				cmd = c(OpHIncrBy, key(), field()).i(int64(rng.IntN(10)))
			case 6:
				cmd = c(OpHIncrByFloat, key(), field(), "0.5")
			default:
				cmd = c(OpExpireAt, key()).i(t0 + 1_000_000)
			}
			cmds = append(cmds, cmd)
		}
		entries = append(entries, cmds)
	}
	return entries
}

// TestHashDeterminism: the same entries give the same replies and
// byte-identical snapshots; a replica with other limits gives the same
// replies and reads too.
func TestHashDeterminism(t *testing.T) {
	entries := hashWorkload(7, 3000)
	a, b := NewStore(), NewStore()
	other := hashStores()[1]
	for i, cmds := range entries {
		ra := a.Apply(uint64(i+1), t0, cmds)
		rb := b.Apply(uint64(i+1), t0, cmds)
		ro := other.Apply(uint64(i+1), t0, cmds)
		for j := range ra {
			if ra[j].String() != rb[j].String() || ra[j].String() != ro[j].String() {
				t.Fatalf("entry %d cmd %d: %v, %v, %v", i, j, ra[j], rb[j], ro[j])
			}
		}
		if i%300 == 0 {
			checkInvariants(t, a)
			checkInvariants(t, other)
		}
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("snapshots of the same entries differ")
	}
	for k := range 6 {
		for _, op := range []Op{OpHGetAll, OpHKeys, OpHVals, OpHLen} {
			cmd := c(op, "h"+itoa(k))
			if ra, ro := a.Read(t0, cmd), other.Read(t0, cmd); ra.String() != ro.String() {
				t.Fatalf("%v h%d: %v with Redis's limits, %v all large", op, k, ra, ro)
			}
		}
	}
}

func TestHashSnapshotRoundTrip(t *testing.T) {
	s := NewStore()
	for i, cmds := range hashWorkload(3, 500) {
		s.Apply(uint64(i+1), t0, cmds)
	}
	s.Apply(0, t0, hashSeedCmds)
	before := snapshotBytes(t, s)
	restored := NewStore()
	if _, err := restored.Restore(bytes.NewReader(before)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), before) {
		t.Fatal("restored store snapshots differently")
	}
	checkInvariants(t, restored)
	forms := map[string]int{}
	s.keys.Scan(func(it item) bool {
		again, _ := restored.getLocked([]byte(it.key))
		e := kindTable[kindHash].encoding(&it)
		if e != kindTable[kindHash].encoding(&again) {
			t.Errorf("%s was %s, restored %s", it.key, e, kindTable[kindHash].encoding(&again))
		}
		forms[e]++
		for _, op := range []Op{OpHGetAll, OpPTTL} {
			if a, b := s.Read(t0, c(op, it.key)), restored.Read(t0, c(op, it.key)); a.String() != b.String() {
				t.Errorf("%v %s: %v, restored %v", op, it.key, a, b)
			}
		}
		return true
	})
	if forms["listpack"] == 0 || forms["hashtable"] == 0 {
		t.Fatalf("workload should leave both forms: %v", forms)
	}
}

// TestHashSnapshotIsolation: a snapshot taken while writes go on to
// hashes of both forms writes the state at the moment it was taken.
func TestHashSnapshotIsolation(t *testing.T) {
	s := NewStore()
	for i := range 2000 {
		s.Apply(0, t0, []Command{c(OpHSet, "large", "f"+itoa(i), "v")})
	}
	s.Apply(0, t0, []Command{c(OpHSet, "small", "a", "1", "b", "2")})
	want := snapshotBytes(t, s)
	sn := s.Snapshot()
	defer sn.Release()
	s.Apply(0, t0, []Command{
		c(OpHSet, "large", "f1", "changed", "new", "x"),
		c(OpHDel, "large", "f2", "f3"),
		c(OpHIncrBy, "large", "n").i(4),
		c(OpHSet, "small", "a", "changed"),
		c(OpHDel, "small", "b"),
	})
	for i := range 2000 {
		s.Apply(0, t0, []Command{c(OpHDel, "large", "f"+itoa(i))})
	}
	var got bytes.Buffer
	if _, err := sn.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("the snapshot saw writes made after it was taken")
	}
	checkInvariants(t, s)
	if r := s.Read(t0, c(OpHGetAll, "large")); len(r.Array) != 4 {
		t.Fatalf("large after the writes: %v", r)
	}
}

// hashSnapshot builds a version 3 snapshot holding one hash "h" whose
// value record (after the deadline) is value.
func hashSnapshot(value []byte) []byte {
	b := []byte{snapshotVersionV3}
	b = binary.AppendUvarint(b, 1) // index
	b = binary.AppendUvarint(b, 0) // metadata
	b = binary.AppendUvarint(b, 1) // keys
	b = append(b, byte(kindHash))
	b = appendString(b, "h")
	b = binary.AppendVarint(b, 0)
	b = append(b, value...)
	return binary.LittleEndian.AppendUint32(b, crcUpdate(0, b))
}

// packedValue is a packed-form record: the packed buffer holding pairs
// in the order given.
func packedValue(count int, pairs ...string) []byte {
	buf := binary.AppendUvarint(nil, uint64(count))
	for _, p := range pairs {
		buf = appendString(buf, p)
	}
	return appendString(binary.AppendUvarint(nil, hashFormPacked), string(buf))
}

func largeValue(count int, pairs ...string) []byte {
	b := binary.AppendUvarint(nil, hashFormLarge)
	b = binary.AppendUvarint(b, uint64(count))
	for _, p := range pairs {
		b = appendString(b, p)
	}
	return b
}

func TestHashRestoreRejectsCorruption(t *testing.T) {
	ordered := inHashOrder("a", "1", "b", "2")
	reversed := []string{ordered[2], ordered[3], ordered[0], ordered[1]}
	for _, v := range [][]byte{packedValue(2, ordered...), largeValue(2, ordered...)} {
		s := NewStore()
		if _, err := s.Restore(bytes.NewReader(hashSnapshot(v))); err != nil {
			t.Fatalf("valid hash %q: %v", v, err)
		}
		if r := s.Read(t0, c(OpHGetAll, "h")); r.String() != mapr(ordered...).String() {
			t.Fatalf("restored %v", r)
		}
		checkInvariants(t, s)
	}
	for name, v := range map[string][]byte{
		"unknown form":         append(binary.AppendUvarint(nil, 7), 0),
		"packed, empty":        packedValue(0),
		"packed, short":        packedValue(3, ordered...),
		"packed, odd":          packedValue(2, ordered[:3]...),
		"packed, trailing":     packedValue(1, ordered...),
		"packed, out of order": packedValue(2, reversed...),
		"packed, repeated":     packedValue(2, "a", "1", "a", "2"),
		"packed, bad length":   appendString(binary.AppendUvarint(nil, hashFormPacked), "\x01\xff\xff\xff\x0f"),
		"large, empty":         largeValue(0),
		"large, out of order":  largeValue(2, reversed...),
		"large, repeated":      largeValue(2, "a", "1", "a", "2"),
		"large, short":         largeValue(3, ordered...),
	} {
		_, err := NewStore().Restore(bytes.NewReader(hashSnapshot(v)))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Restore returned %v, want ErrCorrupt", name, err)
		}
	}
}
