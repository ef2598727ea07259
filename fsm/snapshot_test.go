package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// randomEntries makes a reproducible workload touching every write op.
func randomEntries(seed uint64, n int) (nows []int64, entries [][]Command) {
	rng := rand.New(rand.NewPCG(seed, seed))
	key := func() string { return "k" + strconv.Itoa(rng.IntN(200)) }
	now := int64(t0)
	for range n {
		now += int64(rng.IntN(50))
		var cmds []Command
		for range 1 + rng.IntN(8) {
			var cmd Command
			switch rng.IntN(13) {
			case 0, 1, 2:
				cmd = c(OpSet, key(), strconv.Itoa(rng.IntN(1000)))
				if rng.IntN(3) == 0 {
					cmd = cmd.i(now + int64(rng.IntN(2000)))
				}
			case 3:
				cmd = c(OpIncrBy, key()).i(int64(rng.IntN(10)))
			case 4:
				cmd = c(OpIncrByFloat, key(), "0.1")
			case 5:
				cmd = c(OpAppend, key(), "x")
			case 6:
				cmd = c(OpDel, key(), key())
			case 7:
				cmd = c(OpExpireAt, key()).i(now + int64(rng.IntN(2000)-100))
			case 8:
				cmd = c(OpRename, key(), key())
			case 9:
				cmd = c(OpSetRange, key(), "ab").i(int64(rng.IntN(5)))
			case 10:
				cmd = c(OpMSet, key(), "1", key(), "2")
			case 11:
				cmd = c(OpDelExpired, key(), key())
			case 12:
				// An empty value deletes the name.
				cmd = c(OpMetaSet, "m"+strconv.Itoa(rng.IntN(4)), []string{"", "a", "b"}[rng.IntN(3)])
			}
			cmds = append(cmds, cmd)
		}
		nows, entries = append(nows, now), append(entries, cmds)
	}
	return nows, entries
}

func snapshotBytes(t testing.TB, s *Store) []byte {
	t.Helper()
	sn := s.Snapshot()
	defer sn.Release()
	var buf bytes.Buffer
	n, err := sn.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo: %d, %v (wrote %d)", n, err, buf.Len())
	}
	return buf.Bytes()
}

func TestDeterminism(t *testing.T) {
	nows, entries := randomEntries(1, 2000)
	a, b := NewStore(), NewStore()
	for i, cmds := range entries {
		// b applies what went through the log encoding, as a replica does.
		enc := EncodeEntry(nil, nows[i], cmds)
		now, dec, err := DecodeEntry(enc)
		if err != nil {
			t.Fatal(err)
		}
		ra := a.Apply(uint64(i+1), nows[i], cmds)
		rb := b.Apply(uint64(i+1), now, dec)
		for j := range ra {
			if ra[j].String() != rb[j].String() {
				t.Fatalf("entry %d cmd %d: replies differ: %v vs %v", i, j, ra[j], rb[j])
			}
		}
	}
	sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
	if !bytes.Equal(sa, sb) {
		t.Fatal("same entries gave different snapshots")
	}
	if a.Stats(nows[len(nows)-1]).Keys == 0 {
		t.Fatal("workload left no keys; the test proves nothing")
	}
}

func TestSnapshotRestore(t *testing.T) {
	nows, entries := randomEntries(2, 500)
	s := NewStore()
	for i, cmds := range entries {
		s.Apply(uint64(i+1), nows[i], cmds)
	}
	now := nows[len(nows)-1]
	sn := s.Snapshot()
	// Writes after the snapshot must not show in it.
	s.Apply(10_000, now, []Command{c(OpFlushAll)})
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sn.Release()
	if _, err := sn.WriteTo(io.Discard); err == nil {
		t.Error("WriteTo after Release succeeded")
	}

	want := NewStore()
	for i, cmds := range entries {
		want.Apply(uint64(i+1), nows[i], cmds)
	}
	r := NewStore()
	r.Apply(0, now, []Command{c(OpSet, "stale", "x")})
	idx, err := r.Restore(bytes.NewReader(buf.Bytes()))
	if err != nil || idx != uint64(len(entries)) || r.AppliedIndex() != idx {
		t.Fatalf("Restore: index %d, applied %d, err %v", idx, r.AppliedIndex(), err)
	}
	if !bytes.Equal(snapshotBytes(t, r), snapshotBytes(t, want)) {
		t.Fatal("restored store differs from the original")
	}
	// Bytes may differ: APPEND leaves spare capacity that a restore trims.
	if got, w := r.Stats(now), want.Stats(now); got.Keys != w.Keys || got.Expires != w.Expires || got.Bytes > w.Bytes {
		t.Errorf("Stats after restore %+v, want %+v", got, w)
	}
	if !slicesEqual(r.ExpiredKeys(now+5000, 1000), want.ExpiredKeys(now+5000, 1000)) {
		t.Error("expiry index not rebuilt")
	}
	keys, _ := scanAll(r, now, 10, "", "", nil)
	if len(keys) != want.Stats(now).Keys {
		t.Errorf("SCAN after restore: %d keys, want %d", len(keys), want.Stats(now).Keys)
	}
}

func slicesEqual(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestRestoreCorrupt(t *testing.T) {
	s := NewStore()
	s.Apply(7, t0, []Command{c(OpMSet, "a", "1", "b", "2", "c", "3"), c(OpExpireAt, "a").i(t0 + 10)})
	good := snapshotBytes(t, s)

	target := NewStore()
	target.Apply(3, t0, []Command{c(OpSet, "keep", "me")})
	check := func(name string, b []byte) {
		t.Helper()
		_, err := target.Restore(bytes.NewReader(b))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		} else if !strings.Contains(err.Error(), "at byte ") {
			t.Errorf("%s: error %q does not say where the damage is", name, err)
		}
		if target.AppliedIndex() != 3 || target.Read(t0, c(OpGet, "keep")).Kind != ReplyBulk {
			t.Fatalf("%s: a failed Restore changed the store", name)
		}
	}
	check("empty", nil)
	check("version", append([]byte{9}, good[1:]...))
	for i := 1; i < len(good); i++ {
		check("truncated at "+strconv.Itoa(i), good[:i])
	}
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x20
		check("bit flip at "+strconv.Itoa(i), b)
	}

	// Out-of-order and duplicate records are corrupt even with a valid CRC.
	dup := NewStore()
	dup.Apply(1, t0, []Command{c(OpSet, "a", "1")})
	one := snapshotBytes(t, dup)
	// version, index 1, no metadata, no ACL users, the versions, no slot
	// table, count 2, the record twice, then a fresh CRC.
	head := append([]byte{snapshotVersion, 1, 0, 0, 0}, appendVersions(nil, &dup.keys.vers)...)
	head = append(head, 0)
	rec := one[len(head)+1 : len(one)-4]
	b := append(append(head, 2), rec...)
	b = append(b, rec...)
	b = appendCRC(b)
	check("duplicate key", b)
	// The same in version 1, which has no metadata section and no
	// versions.
	v1 := toV1(t, dup)
	rec = v1[3 : len(v1)-4]
	b = append([]byte{1, 1, 2}, rec...)
	b = append(b, rec...)
	check("duplicate key v1", appendCRC(b))

	// Metadata out of order, duplicated or empty.
	meta := func(pairs ...string) []byte {
		b := []byte{snapshotVersionV3, 1, byte(len(pairs) / 2)}
		for _, p := range pairs {
			b = appendString(b, p)
		}
		return appendCRC(append(b, 0))
	}
	if _, err := NewStore().Restore(bytes.NewReader(meta("a", "1", "b", "2"))); err != nil {
		t.Fatalf("well-formed metadata: %v", err)
	}
	check("metadata out of order", meta("b", "1", "a", "2"))
	check("metadata duplicate", meta("a", "1", "a", "2"))
	check("metadata empty name", meta("", "1"))
	check("metadata empty value", meta("a", ""))
}

// legacySnapshot writes a string-only store as snapshot version 2 (or 1,
// without the metadata section) was written before version 3: records in
// legacyKeyHash order, each value a length and its bytes. It is the
// encoding of kvs before the slot order, rebuilt here so that the restore
// of old data dirs is tested against the bytes they hold.
func legacySnapshot(t testing.TB, s *Store, version byte) []byte {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var items []item
	s.keys.Scan(func(it item) bool {
		if it.kind != kindString {
			t.Fatalf("legacySnapshot: key %q is not a string", it.key)
		}
		items = append(items, it)
		return true
	})
	sort.Slice(items, func(i, j int) bool {
		hi, hj := legacyKeyHash(items[i].key), legacyKeyHash(items[j].key)
		return hi < hj || (hi == hj && items[i].key < items[j].key)
	})
	b := binary.AppendUvarint([]byte{version}, s.applied)
	if version >= 2 {
		names := sortedMeta(s.meta)
		b = binary.AppendUvarint(b, uint64(len(names)))
		for _, name := range names {
			b = appendString(b, name)
			b = appendString(b, s.meta[name])
		}
	} else if len(s.meta) != 0 {
		t.Fatal("legacySnapshot: version 1 has no metadata")
	}
	b = binary.AppendUvarint(b, uint64(len(items)))
	for _, it := range items {
		b = append(b, byte(kindString))
		b = appendString(b, it.key)
		b = binary.AppendVarint(b, it.exp)
		b = binary.AppendUvarint(b, uint64(len(it.val)))
		b = append(b, it.val...)
	}
	return appendCRC(b)
}

// clearVersions sets every version of s to 0, as restoring a snapshot
// older than version 4 leaves them.
func clearVersions(s *Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var items []item
	s.keys.Scan(func(it item) bool {
		items = append(items, it)
		return true
	})
	s.keys.vers = versions{}
	for _, it := range items {
		s.keys.Set(it)
	}
}

// toV1 is legacySnapshot version 1 of a store without metadata.
func toV1(t testing.TB, s *Store) []byte { return legacySnapshot(t, s, 1) }

func TestRestoreLegacyVersions(t *testing.T) {
	nows, entries := randomEntries(4, 300)
	s := NewStore()
	for i, cmds := range entries {
		s.Apply(uint64(i+1), nows[i], cmds)
	}
	v2 := legacySnapshot(t, s, 2)
	clearVersions(s) // which a version 2 snapshot does not hold
	want := snapshotBytes(t, s)
	r := NewStore()
	r.Apply(1, t0, []Command{c(OpSet, "stale", "x")})
	idx, err := r.Restore(bytes.NewReader(v2))
	if err != nil || idx != uint64(len(entries)) {
		t.Fatalf("Restore v2: index %d, err %v", idx, err)
	}
	if !bytes.Equal(snapshotBytes(t, r), want) {
		t.Fatal("a version 2 snapshot restored to a different state")
	}
	if want[0] != snapshotVersionV5 {
		t.Fatalf("a store never told of slots writes version %d, want %d", want[0], snapshotVersionV5)
	}

	// Version 1 has no metadata: drop what the workload set.
	for name := range s.MetaAll() {
		s.Apply(0, t0, []Command{c(OpMetaSet, name, "")})
	}
	clearVersions(s)
	want = snapshotBytes(t, s)
	r = NewStore()
	r.Apply(1, t0, []Command{c(OpMetaSet, "stale", "x")})
	idx, err = r.Restore(bytes.NewReader(toV1(t, s)))
	if err != nil || idx != uint64(len(entries)) {
		t.Fatalf("Restore v1: index %d, err %v", idx, err)
	}
	if !bytes.Equal(snapshotBytes(t, r), want) {
		t.Fatal("a version 1 snapshot restored to a different state")
	}
	if len(r.MetaAll()) != 0 {
		t.Fatal("restoring a version 1 snapshot kept the old metadata")
	}

	// A legacy snapshot out of its own order is corrupt, even though
	// today's order may accept it.
	two := NewStore()
	two.Apply(1, t0, []Command{c(OpSet, "a", "1"), c(OpSet, "b", "2")})
	good := legacySnapshot(t, two, 2)
	if _, err := NewStore().Restore(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	body := good[4 : len(good)-4] // after version, index, nmeta, count
	ra, rb := body[:len(body)/2], body[len(body)/2:]
	swapped := appendCRC(append(append([]byte{2, 1, 0, 2}, rb...), ra...))
	if _, err := NewStore().Restore(bytes.NewReader(swapped)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("legacy records out of order: err %v", err)
	}
}

func appendCRC(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crcUpdate(0, b))
}

// restoreSeeds are more FuzzRestore seeds, one list per type's test file
// (hash_test.go, ...), added from its init function.
var restoreSeeds []func(t testing.TB) []byte

func FuzzRestore(f *testing.F) {
	for _, seed := range restoreSeeds {
		f.Add(seed(f))
	}
	s := NewStore()
	s.Apply(9, t0, []Command{c(OpMSet, "a", "1", "b", "22"), c(OpExpireAt, "a").i(t0 + 10)})
	f.Add(snapshotBytes(f, s))
	f.Add(snapshotBytes(f, NewStore()))
	s.Apply(10, t0, []Command{c(OpMetaSet, "node/a/resp", "127.0.0.1:7001"), c(OpMetaSet, "x", "y")})
	f.Add(snapshotBytes(f, s))
	f.Add(toV1(f, NewStore()))
	two := NewStore()
	two.Apply(3, t0, []Command{c(OpMSet, "a", "1", "b", "22"), c(OpExpireAt, "a").i(t0 + 10)})
	f.Add(toV1(f, two))
	f.Add(legacySnapshot(f, two, 2))
	bits := NewStore()
	bits.Apply(11, t0, bitsSampleCmds)
	f.Add(snapshotBytes(f, bits))
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{2, 0, 0, 0})
	f.Add([]byte{1, 0, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{2, 0, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		st := NewStore()
		idx, err := st.Restore(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// A snapshot that restores writes back out as the same bytes;
		// an older version, or a version 6 without a slot table, as
		// bytes of the version written today that restore to the same
		// state.
		got := snapshotBytes(t, st)
		if idx != st.AppliedIndex() {
			t.Fatalf("Restore returned %d, AppliedIndex %d", idx, st.AppliedIndex())
		}
		if b[0] < snapshotVersion || got[0] != b[0] {
			again := NewStore()
			if _, err := again.Restore(bytes.NewReader(got)); err != nil {
				t.Fatalf("rewritten version 1 snapshot does not restore: %v", err)
			}
			b = got
			got = snapshotBytes(t, again)
		}
		if !bytes.Equal(got, b[:len(got)]) {
			t.Fatalf("restored snapshot does not round-trip")
		}
	})
}

// checkInvariants verifies the bookkeeping beside the keyspace: the tree's
// counts, order and deadlines (the TTL index), and bytes the items' sizes.
func checkInvariants(t *testing.T, s *Store) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.keys.check(t)
	var bytes int64
	s.keys.Scan(func(it item) bool {
		bytes += it.size()
		return true
	})
	if bytes != s.bytes {
		t.Errorf("bytes %d, counted %d", bytes, s.bytes)
	}
}

func TestBookkeeping(t *testing.T) {
	nows, entries := randomEntries(3, 3000)
	s := NewStore()
	for i, cmds := range entries {
		s.Apply(uint64(i+1), nows[i], cmds)
		if i%500 == 0 {
			checkInvariants(t, s)
		}
	}
	checkInvariants(t, s)
	r := NewStore()
	if _, err := r.Restore(bytes.NewReader(snapshotBytes(t, s))); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
}

// TestSnapshotWhileWriting streams a snapshot while another goroutine
// rewrites, appends to and deletes the same keys (run with -race): the
// snapshot must show exactly the state at Snapshot.
func TestSnapshotWhileWriting(t *testing.T) {
	s := NewStore()
	for i := range 5000 {
		s.Apply(0, t0, []Command{c(OpSet, "k"+strconv.Itoa(i), "v"), c(OpAppend, "k"+strconv.Itoa(i), "x")})
	}
	want := snapshotBytes(t, s)
	sn := s.Snapshot()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5000 {
			k := "k" + strconv.Itoa(i)
			s.Apply(0, t0, []Command{c(OpAppend, k, "y"), c(OpSet, k+"new", "v")})
			if i%3 == 0 {
				s.Apply(0, t0, []Command{c(OpDel, k)})
			}
		}
	}()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	<-done
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("snapshot changed under concurrent writes")
	}
	// A second snapshot sees the writes, and the first is unaffected.
	if bytes.Equal(snapshotBytes(t, s), want) {
		t.Fatal("writes after the snapshot are missing from the store")
	}
	checkInvariants(t, s)
}
