package fsm

import (
	"bytes"
	"encoding/hex"
	"math/rand"
	"testing"
)

// xadd is XADD key id f v with Redis's default node limits.
func xadd(key, id string, pairs ...string) Command {
	return c(OpXAdd, append([]string{key, id}, pairs...)...).i(100).i2(4096)
}

func entry(id string, pairs ...string) Reply { return arr(bulk(id), bulks(pairs...)) }

func TestStreamBasics(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		{t0, xadd("s", "1-1", "a", "1"), bulk("1-1")},
		{t0, xadd("s", "1-*", "b", "2"), bulk("1-2")},
		{t0, xadd("s", "1-1", "x", "y"), errr(ErrStreamXAddSmaller)},
		{t0, xadd("s", "0-0", "x", "y"), errr(ErrStreamXAddZero)},
		{t0, xadd("s", "*", "c", "3"), bulk(itoa(t0) + "-0")},
		{t0, xadd("s", "*", "d", "4"), bulk(itoa(t0) + "-1")},
		{t0, c(OpXLen, "s"), in(4)},
		{t0, c(OpXRange, "s", "-", "+", "COUNT", "2"), arr(entry("1-1", "a", "1"), entry("1-2", "b", "2"))},
		{t0, c(OpXRevRange, "s", "+", "(1-2"), arr(entry(itoa(t0)+"-1", "d", "4"), entry(itoa(t0)+"-0", "c", "3"))},
		{t0, c(OpXRange, "s", "-", "+", "COUNT", "0"), Reply{Kind: ReplyNilArray}},
		{t0, c(OpXRange, "s", "x", "+"), errr(ErrStreamID)},
		{t0, c(OpXDel, "s", "1-2", "9-9"), in(1)},
		{t0, c(OpXRange, "s", "-", "1"), arr(entry("1-1", "a", "1"))},
		{t0, c(OpXTrim, "s", "MAXLEN", "1").i(100), in(2)},
		{t0, c(OpXLen, "s"), in(1)},
		{t0, xadd("nokey", "NOMKSTREAM", "*", "a", "b"), nilr},
		{t0, c(OpXLen, "nokey"), in(0)},
		{t0, c(OpSet, "str", "v"), ok},
		{t0, xadd("str", "*", "a", "b"), replyWrongType},
		{t0, c(OpXSetID, "s", "1-0"), errr("ERR The ID specified in XSETID is smaller than the target stream top item")},
		{t0, c(OpXSetID, "s", "99999999999999-0"), ok},
		{t0, xadd("s", "*", "e", "5"), bulk("99999999999999-1")},
	})
}

// TestStreamNodes checks that nodes split where Redis's listpacks do and
// that approximate trimming removes whole nodes only, as Redis does.
func TestStreamNodes(t *testing.T) {
	s := NewStore()
	for i := 1; i <= 250; i++ {
		s.Apply(0, t0, []Command{xadd("s", itoa(i), "f", itoa(i))})
	}
	it, _ := s.getLocked([]byte("s"))
	st := it.obj.(*stream)
	if len(st.nodes) != 3 || st.nodes[0].count != 100 || st.nodes[2].count != 50 {
		t.Fatalf("nodes: %d", len(st.nodes))
	}
	run(t, s, []step{
		{t0, c(OpXTrim, "s", "MAXLEN", "~", "180").i(100), in(0)},
		{t0, c(OpXTrim, "s", "MAXLEN", "~", "150").i(100), in(100)},
		{t0, c(OpXTrim, "s", "MINID", "~", "210").i(100), in(100)},
		{t0, c(OpXTrim, "s", "MINID", "205").i(100), in(4)},
		{t0, c(OpXLen, "s"), in(46)},
		{t0, c(OpXRange, "s", "-", "+", "COUNT", "1"), arr(entry("205-0", "f", "205"))},
	})
	// A node's byte limit: entries of 1000 bytes fill a 4096-byte node
	// after four (nine make three nodes in redis-server too).
	big := string(bytes.Repeat([]byte("x"), 1000))
	for i := 1; i <= 9; i++ {
		s.Apply(0, t0, []Command{xadd("b", itoa(i), "f", big)})
	}
	it, _ = s.getLocked([]byte("b"))
	if n := len(it.obj.(*stream).nodes); n != 3 {
		t.Fatalf("byte-limited nodes: %d", n)
	}
}

func TestStreamGroups(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		{t0, c(OpXGroup, "s", "CREATE", "g", "$"), errr("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")},
		{t0, c(OpXGroup, "s", "CREATE", "g", "$", "MKSTREAM"), ok},
		{t0, c(OpXGroup, "s", "CREATE", "g", "$"), errr("BUSYGROUP Consumer Group name already exists")},
		{t0, xadd("s", "1-1", "a", "1"), bulk("1-1")},
		{t0, xadd("s", "2-1", "b", "2"), bulk("2-1")},
		{t0, c(OpXReadGroup, "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
			Reply{Kind: ReplyKeyed, Array: []Reply{arr(bulk("s"), arr(entry("1-1", "a", "1")))}}},
		{t0 + 10, c(OpXReadGroup, "GROUP", "g", "bob", "STREAMS", "s", ">"),
			Reply{Kind: ReplyKeyed, Array: []Reply{arr(bulk("s"), arr(entry("2-1", "b", "2")))}}},
		{t0 + 20, c(OpXReadGroup, "GROUP", "g", "bob", "STREAMS", "s", ">"), Reply{Kind: ReplyNilArray}},
		{t0 + 30, c(OpXPending, "s", "g"), arr(in(2), bulk("1-1"), bulk("2-1"), arr(bulks("alice", "1"), bulks("bob", "1")))},
		{t0 + 30, c(OpXPending, "s", "g", "-", "+", "10"),
			arr(arr(bulk("1-1"), bulk("alice"), in(30), in(1)), arr(bulk("2-1"), bulk("bob"), in(20), in(1)))},
		{t0 + 40, c(OpXClaim, "s", "g", "carol", "0", "1-1", "JUSTID"), arr(bulk("1-1"))},
		{t0 + 40, c(OpXAck, "s", "g", "1-1", "5-5"), in(1)},
		{t0 + 50, c(OpXDel, "s", "2-1"), in(1)},
		{t0 + 50, c(OpXAutoClaim, "s", "g", "dave", "0", "0"), arr(bulk("0-0"), arr(), bulks("2-1"))},
		{t0 + 50, c(OpXGroup, "s", "DELCONSUMER", "g", "carol"), in(0)},
		{t0 + 50, c(OpXReadGroup, "GROUP", "nog", "c", "STREAMS", "s", ">"),
			errr("NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option")},
		{t0 + 50, c(OpXGroup, "s", "DESTROY", "g"), in(1)},
		{t0 + 50, c(OpXGroup, "s", "DESTROY", "g"), in(0)},
	})
}

// randomStreamEntries draws n entries of stream commands over a few keys.
func randomStreamEntries(seed int64, n int) ([]int64, [][]Command) {
	r := rand.New(rand.NewSource(seed))
	keys := []string{"s0", "s1", "s2"}
	groups := []string{"g1", "g2"}
	now := int64(t0)
	var nows []int64
	var entries [][]Command
	for range n {
		now += int64(r.Intn(3))
		var cmds []Command
		for range 1 + r.Intn(3) {
			k := keys[r.Intn(len(keys))]
			g := groups[r.Intn(len(groups))]
			var cmd Command
			switch r.Intn(10) {
			case 0, 1, 2, 3:
				id := "*"
				if r.Intn(2) == 0 {
					id = itoa(r.Intn(2000)) + "-" + itoa(r.Intn(3))
				}
				cmd = xadd(k, id, "f", itoa(r.Intn(100)), "g", "v")
			case 4:
				cmd = c(OpXDel, k, itoa(r.Intn(2000))+"-0", itoa(r.Intn(2000))+"-1")
			case 5:
				cmd = c(OpXTrim, k, "MAXLEN", "~", itoa(r.Intn(300))).i(10)
			case 6:
				cmd = c(OpXGroup, k, "CREATE", g, "0", "MKSTREAM")
			case 7:
				cmd = c(OpXReadGroup, "GROUP", g, "c"+itoa(r.Intn(3)), "COUNT", "5", "STREAMS", k, ">")
			case 8:
				cmd = c(OpXAck, k, g, itoa(r.Intn(2000))+"-0")
			default:
				cmd = c(OpXAutoClaim, k, g, "c"+itoa(r.Intn(3)), "1", "0", "COUNT", "3")
			}
			cmds = append(cmds, cmd)
		}
		nows = append(nows, now)
		entries = append(entries, cmds)
	}
	return nows, entries
}

// TestStreamDeterminismAndSnapshot applies the same entries to two
// stores, one through the log encoding, and requires the same replies and
// snapshots; a snapshot restored writes itself again byte for byte and
// answers as the original.
func TestStreamDeterminismAndSnapshot(t *testing.T) {
	nows, entries := randomStreamEntries(7, 3000)
	a, b := NewStore(), NewStore()
	for i, cmds := range entries {
		now, dec, err := DecodeEntry(EncodeEntry(nil, nows[i], cmds))
		if err != nil {
			t.Fatal(err)
		}
		ra := a.Apply(uint64(i+1), nows[i], cmds)
		rb := b.Apply(uint64(i+1), now, dec)
		for j := range ra {
			if ra[j].String() != rb[j].String() {
				t.Fatalf("entry %d cmd %d: %v vs %v", i, j, ra[j], rb[j])
			}
		}
		if i%300 == 0 {
			checkInvariants(t, a)
			checkStreamBytes(t, a)
		}
	}
	checkInvariants(t, a)
	checkStreamBytes(t, a)
	sa := snapshotBytes(t, a)
	if !bytes.Equal(sa, snapshotBytes(t, b)) {
		t.Fatal("same entries gave different snapshots")
	}
	r := NewStore()
	if _, err := r.Restore(bytes.NewReader(sa)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, r), sa) {
		t.Fatal("restored store writes a different snapshot")
	}
	now := nows[len(nows)-1]
	for _, k := range []string{"s0", "s1", "s2"} {
		for _, cmd := range []Command{
			c(OpXRange, k, "-", "+"),
			c(OpXInfo, k, "STREAM", "FULL"),
			c(OpXInfo, k, "GROUPS"),
			c(OpXPending, k, "g1", "-", "+", "100"),
		} {
			want, got := a.Read(now, cmd), r.Read(now, cmd)
			if got.String() != want.String() {
				t.Errorf("%v %q after restore: %v, want %v", cmd.Op, cmd.Args, got, want)
			}
		}
	}
}

// TestStreamSnapshotWhileWriting streams a snapshot while writes go on:
// it holds exactly the state at Snapshot.
func TestStreamSnapshotWhileWriting(t *testing.T) {
	s := NewStore()
	s.Apply(0, t0, []Command{c(OpXGroup, "s", "CREATE", "g", "0", "MKSTREAM")})
	for i := 1; i <= 2000; i++ {
		s.Apply(0, t0, []Command{xadd("s", itoa(i), "f", itoa(i))})
	}
	s.Apply(0, t0, []Command{c(OpXReadGroup, "GROUP", "g", "c", "COUNT", "500", "STREAMS", "s", ">")})
	want := snapshotBytes(t, s)
	sn := s.Snapshot()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 2001; i <= 3000; i++ {
			s.Apply(0, t0, []Command{
				xadd("s", itoa(i), "f", itoa(i)),
				c(OpXDel, "s", itoa(i-1500)),
				c(OpXReadGroup, "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">"),
				c(OpXAck, "s", "g", itoa(i-1900)+"-0"),
			})
		}
		s.Apply(0, t0, []Command{c(OpXTrim, "s", "MAXLEN", "10").i(100)})
	}()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	<-done
	sn.Release()
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("snapshot changed under concurrent writes")
	}
	if bytes.Equal(snapshotBytes(t, s), want) {
		t.Fatal("writes after the snapshot are missing")
	}
}

// TestStreamSnapshotCorrupt: a damaged stream record is refused, never a
// panic.
func TestStreamSnapshotCorrupt(t *testing.T) {
	s := NewStore()
	s.Apply(0, t0, []Command{xadd("s", "1", "f", "v"), xadd("s", "2", "f", "w"),
		c(OpXGroup, "s", "CREATE", "g", "0"),
		c(OpXReadGroup, "GROUP", "g", "c", "STREAMS", "s", ">")})
	good := snapshotBytes(t, s)
	r := rand.New(rand.NewSource(1))
	for range 2000 {
		bad := append([]byte(nil), good...)
		bad[r.Intn(len(bad))] ^= byte(1 + r.Intn(255))
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("restore panicked: %v", p)
				}
			}()
			_, _ = NewStore().Restore(bytes.NewReader(bad))
		}()
	}
}

func init() {
	// FuzzRestore starts from a stream with a group, a PEL and a deleted
	// entry too.
	restoreSeeds = append(restoreSeeds, func(t testing.TB) []byte {
		s := NewStore()
		s.Apply(0, t0, []Command{xadd("s", "1", "f", "v"), xadd("s", "2", "f", "w", "g", "x"),
			c(OpXGroup, "s", "CREATE", "g", "0"),
			c(OpXReadGroup, "GROUP", "g", "c", "STREAMS", "s", ">"), c(OpXDel, "s", "1")})
		return snapshotBytes(t, s)
	})
}

// TestStreamDump: a stream's DUMP payload restores to the same stream,
// groups and PEL included, and a payload redis-server 7.0.15 wrote (its
// bytes are what kvs writes for a stream without deleted entries) too.
func TestStreamDump(t *testing.T) {
	s := NewStore()
	s.Apply(0, t0, []Command{xadd("s", "1-1", "a", "1", "b", "2"), xadd("s", "1-2", "a", "3", "b", "4"),
		xadd("s", "2-0", "c", "5"), c(OpXGroup, "s", "CREATE", "g", "0"), c(OpXGroup, "s", "CREATE", "g2", "$"),
		c(OpXReadGroup, "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
		c(OpXSetID, "s", "5-0", "ENTRIESADDED", "10", "MAXDELETEDID", "0-5")})
	it, _ := s.getLocked([]byte("s"))
	p := dumpPayload(&it, &s.limits)
	if !VerifyDumpPayload(p) {
		t.Fatal("payload does not verify")
	}
	v, ok := decodeDumpPayload(p)
	if !ok || v.kind != kindStream {
		t.Fatal("payload does not decode")
	}
	r := NewStore()
	r.restoreValueLocked([]byte("s"), &v, 0)
	for _, cmd := range []Command{c(OpXRange, "s", "-", "+"), c(OpXInfo, "s", "STREAM", "FULL"), c(OpXInfo, "s", "GROUPS")} {
		if got, want := r.Read(t0, cmd), s.Read(t0, cmd); got.String() != want.String() {
			t.Errorf("%q after DUMP and RESTORE: %v, want %v", cmd.Args, got, want)
		}
	}
	it2, _ := r.getLocked([]byte("s"))
	if !bytes.Equal(dumpPayload(&it2, &r.limits), p) {
		t.Error("a restored stream dumps other bytes")
	}
	// redis-server 7.0.15's DUMP of the stream before XREADGROUP (no
	// delivery times): kvs writes the same bytes.
	s2 := NewStore()
	s2.Apply(0, t0, []Command{xadd("s", "1-1", "a", "1", "b", "2"), xadd("s", "1-2", "a", "3", "b", "4"),
		xadd("s", "2-0", "c", "5"), c(OpXGroup, "s", "CREATE", "g", "0"), c(OpXGroup, "s", "CREATE", "g2", "$"),
		c(OpXSetID, "s", "5-0", "ENTRIESADDED", "10", "MAXDELETEDID", "0-5")})
	it3, _ := s2.getLocked([]byte("s"))
	redis, _ := hex.DecodeString("130110000000000000000100000000000000013d3d0000001900030100010201816102816202000102010001000101010201050102010001010103010401050100010101dfff02010181630205010601ff030500010100050a020167000081ffffffffffffffff0000026732020081ffffffffffffffff00000a00db04e3806ed3354f")
	if got := dumpPayload(&it3, &s2.limits); !bytes.Equal(got, redis) {
		t.Errorf("DUMP: %x, redis-server: %x", got, redis)
	}
	// Corrupt payloads are refused, never a panic.
	rnd := rand.New(rand.NewSource(3))
	for range 3000 {
		bad := append([]byte(nil), p[:len(p)-10]...)
		bad[rnd.Intn(len(bad))] ^= byte(1 + rnd.Intn(255))
		decodeDumpPayload(bad)
	}
}

// checkStreamBytes checks that each stream's size, kept as it changes,
// is what counting it afresh gives.
func checkStreamBytes(t *testing.T, s *Store) {
	t.Helper()
	s.keys.Scan(func(it item) bool {
		if st, ok := it.obj.(*stream); ok {
			kept := st.bytes
			c := *st
			c.recount()
			if c.bytes != kept {
				t.Errorf("%s: bytes %d, counted %d", it.key, kept, c.bytes)
			}
		}
		return true
	})
}

// TestStreamCopyAppends: a COPY and its source share their nodes, and
// both go on appending to their tail without either seeing the other's
// entries.
func TestStreamCopyAppends(t *testing.T) {
	s := NewStore()
	// An entry of 9 bytes in a buffer of 16: the next, of 7, fits in
	// its spare capacity.
	s.Apply(0, t0, []Command{xadd("a", "1", "f", "vvv")})
	s.Apply(0, t0, []Command{c(OpCopy, "a", "b")})
	for i := 3; i < 40; i++ {
		s.Apply(0, t0, []Command{xadd("a", itoa(i), "f", "a"), xadd("b", itoa(i), "f", "b")})
	}
	for _, k := range []string{"a", "b"} {
		r := s.Read(t0, c(OpXRange, k, "3", "3"))
		if want := arr(entry("3-0", "f", k)); r.String() != want.String() {
			t.Errorf("%s: %v, want %v", k, r, want)
		}
	}
	checkInvariants(t, s)
	checkStreamBytes(t, s)
}
