package fsm

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// recordedDump is one key DUMPed by redis-server 7.0.15
// (testdata/dump-redis-7.0.15.txt).
type recordedDump struct {
	key, typ, enc string
	payload       []byte
	content       string // as content renders it
}

func loadRecordedDumps(t testing.TB) []recordedDump {
	f, err := os.Open("testdata/dump-redis-7.0.15.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []recordedDump
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 {
			t.Fatalf("bad line %q", sc.Text())
		}
		p, err1 := hex.DecodeString(fs[3])
		var c []byte
		var err2 error
		if len(fs) > 4 {
			c, err2 = hex.DecodeString(fs[4])
		}
		if err1 != nil || err2 != nil {
			t.Fatalf("bad hex in %q", fs[0])
		}
		out = append(out, recordedDump{fs[0], fs[1], fs[2], p, string(c)})
	}
	return out
}

// content renders key's value as redis-cli --raw prints GET, LRANGE,
// SMEMBERS, ZRANGE WITHSCORES or HGETALL (sets and hashes sorted), as
// the recordings were made.
func content(t testing.TB, s *Store, key string) string {
	t.Helper()
	it, ok := s.liveLocked([]byte(key), 0)
	if !ok {
		t.Fatalf("%s: no key", key)
	}
	var lines []string
	switch it.kind {
	case kindString:
		return string(it.val)
	case kindList:
		listElements(&it, func(e []byte) bool { lines = append(lines, string(e)+"\n"); return true })
	case kindSet:
		viewOf(&it).each(func(_ uint64, m []byte) bool { lines = append(lines, string(m)+"\n"); return true })
		slices.Sort(lines)
	case kindZSet:
		zsetView(&it).each(0, false, func(e zent) bool {
			lines = append(lines, e.member+"\n"+string(formatScore(e.score))+"\n")
			return true
		})
	case kindHash:
		hashEach(&it, func(f, v []byte) bool { lines = append(lines, string(f)+"\t"+string(v)+"\n"); return true })
		slices.Sort(lines)
	}
	return strings.Join(lines, "")
}

func encodingOf(s *Store, key string) string {
	return string(s.Read(0, c(OpObject, key).i(ObjectEncoding)).Bulk)
}

func restoreCmd(key string, payload []byte) Command {
	return Command{Op: OpRestore, Args: [][]byte{[]byte(key), payload}}
}

// deterministicDump reports whether kvs's DUMP of a value of this type and
// encoding is Redis's byte for byte: not where Redis's order is its
// dict's or a listpack hash's insertion order.
func deterministicDump(typ, enc string) bool {
	return typ != "hash" && !(typ == "set" && enc == "hashtable")
}

// TestRestoreRedisPayloads: every payload redis-server wrote restores to
// the same value in the same encoding, and DUMP gives back Redis's bytes
// where Redis's are deterministic.
func TestRestoreRedisPayloads(t *testing.T) {
	for _, d := range loadRecordedDumps(t) {
		t.Run(d.key, func(t *testing.T) {
			s := NewStore()
			if r := s.Apply(0, 1, []Command{restoreCmd(d.key, d.payload)})[0]; r.String() != ok.String() {
				t.Fatalf("RESTORE: %v", r)
			}
			if got := content(t, s, d.key); got != d.content {
				t.Errorf("content %q, want %q", got, d.content)
			}
			if got := encodingOf(s, d.key); got != d.enc {
				t.Errorf("encoding %s, want %s", got, d.enc)
			}
			dump := s.Read(1, c(OpDump, d.key)).Bulk
			if deterministicDump(d.typ, d.enc) && string(dump) != string(d.payload) {
				t.Errorf("DUMP differs from Redis's:\n got %x\nwant %x", dump, d.payload)
			}
			// Whatever the order, kvs's own payload restores the same.
			s.Apply(0, 1, []Command{restoreCmd("again", dump)})
			if content(t, s, "again") != d.content || encodingOf(s, "again") != d.enc {
				t.Errorf("kvs's payload restores differently")
			}
		})
	}
}

// TestDumpRoundTrip: every type in each of its encodings restores from
// kvs's DUMP with the same value and encoding.
func TestDumpRoundTrip(t *testing.T) {
	s := NewStore()
	long := strings.Repeat("x", 100)
	var cmds []Command
	add := func(cmd Command) { cmds = append(cmds, cmd) }
	add(c(OpSet, "str", "value"))
	add(c(OpSet, "strint", "-42"))
	add(c(OpSet, "strlong", strings.Repeat("ab", 100)))
	add(c(OpRPush, "list", "a", "1", "-70000", long))
	add(c(OpSAdd, "intset", "1", "-5", "99999999999"))
	add(c(OpSAdd, "set", "a", "b", "3"))
	add(zadd("zset", 1.5, "a", -2, "b", math.Inf(1), "c"))
	add(zadd("zsetlong", 1, long, 2, "m"))
	add(c(OpHSet, "hash", "f", "v", "1", "2"))
	add(c(OpHSet, "hashlong", "f", long))
	for i := range 1000 {
		n := itoa(i)
		add(c(OpRPush, "biglist", "element-"+n+"-"+long))
		add(c(OpSAdd, "bigintset", n))
		add(c(OpSAdd, "bigset", "m"+n))
		add(zadd("bigzset", float64(i)+0.5, "m"+n))
		add(c(OpHSet, "bighash", "f"+n, "v"+n))
	}
	for _, r := range s.Apply(0, 1, cmds) {
		if r.Kind == ReplyError {
			t.Fatalf("setup: %v", r)
		}
	}
	for _, key := range []string{"str", "strint", "strlong", "list", "intset", "set", "zset", "zsetlong", "hash",
		"hashlong", "biglist", "bigintset", "bigset", "bigzset", "bighash"} {
		dump := s.Read(1, c(OpDump, key))
		if dump.Kind != ReplyBulk || !VerifyDumpPayload(dump.Bulk) || !CheckDumpPayload(dump.Bulk) {
			t.Fatalf("%s: DUMP %v", key, dump)
		}
		to := key + ":copy"
		if r := s.Apply(0, 1, []Command{restoreCmd(to, dump.Bulk)})[0]; r.String() != ok.String() {
			t.Fatalf("%s: RESTORE %v", key, r)
		}
		if content(t, s, key) != content(t, s, to) || encodingOf(s, key) != encodingOf(s, to) {
			t.Errorf("%s: restored as %s with different content", key, encodingOf(s, to))
		}
		if again := s.Read(1, c(OpDump, to)); string(again.Bulk) != string(dump.Bulk) {
			t.Errorf("%s: DUMP of the restored value differs", key)
		}
	}
	wantEnc := map[string]string{"list": "quicklist", "intset": "intset", "set": "hashtable", "zset": "listpack",
		"zsetlong": "skiplist", "hash": "listpack", "hashlong": "hashtable", "bigintset": "hashtable",
		"bigzset": "skiplist", "bighash": "hashtable"}
	for k, want := range wantEnc {
		if got := encodingOf(s, k+":copy"); got != want {
			t.Errorf("%s: encoding %s, want %s", k, got, want)
		}
	}
}

// ziplist builds a ziplist of entries (as strings or, when they are
// integers, in the smallest integer encoding), as Redis 6 wrote them.
func ziplist(entries ...string) []byte {
	b := make([]byte, 10)
	prev, tail := 0, 10
	for _, e := range entries {
		start := len(b)
		if prev < 254 {
			b = append(b, byte(prev))
		} else {
			b = append(b, 0xFE)
			b = binary.LittleEndian.AppendUint32(b, uint32(prev))
		}
		v, isInt := lpStringToInt64([]byte(e))
		switch {
		case isInt && v >= 0 && v <= 12:
			b = append(b, 0xF1+byte(v))
		case isInt && v >= -128 && v <= 127:
			b = append(b, 0xFE, byte(v))
		case isInt && v >= -32768 && v <= 32767:
			b = binary.LittleEndian.AppendUint16(append(b, 0xC0), uint16(v))
		case isInt && v >= -1<<23 && v < 1<<23:
			b = append(b, 0xF0, byte(v), byte(v>>8), byte(v>>16))
		case isInt && v >= -1<<31 && v < 1<<31:
			b = binary.LittleEndian.AppendUint32(append(b, 0xD0), uint32(v))
		case isInt:
			b = binary.LittleEndian.AppendUint64(append(b, 0xE0), uint64(v))
		case len(e) < 64:
			b = append(append(b, byte(len(e))), e...)
		case len(e) < 16384:
			b = append(append(b, 0x40|byte(len(e)>>8), byte(len(e))), e...)
		default:
			b = append(binary.BigEndian.AppendUint32(append(b, 0x80), uint32(len(e))), e...)
		}
		prev, tail = len(b)-start, start
	}
	b = append(b, 0xFF)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	binary.LittleEndian.PutUint32(b[4:], uint32(tail))
	binary.LittleEndian.PutUint16(b[8:], uint16(len(entries)))
	return b
}

// zipmap builds a zipmap of field, value pairs, as Redis 2.4 wrote them
// (each value followed by one byte of free space).
func zipmap(pairs ...string) []byte {
	b := []byte{byte(len(pairs) / 2)}
	l := func(n int) {
		if n < 254 {
			b = append(b, byte(n))
		} else {
			b = binary.LittleEndian.AppendUint32(append(b, 254), uint32(n))
		}
	}
	for i := 0; i < len(pairs); i += 2 {
		l(len(pairs[i]))
		b = append(b, pairs[i]...)
		l(len(pairs[i+1]))
		b = append(append(b, 1), pairs[i+1]...)
		b = append(b, 0) // the free byte
	}
	return append(b, 0xFF)
}

func payload(t byte, body ...[]byte) []byte {
	b := []byte{t}
	for _, p := range body {
		b = append(b, p...)
	}
	return appendDumpFooter(b)
}

func rdbStr(s string) []byte  { return appendRDBString(nil, []byte(s)) }
func rdbLen(n int) []byte     { return appendRDBLen(nil, uint64(n)) }
func rdbBlob(b []byte) []byte { return appendRDBString(nil, b) }

func lp(entries ...string) []byte {
	l := newLPBuilder()
	for _, e := range entries {
		l.add([]byte(e))
	}
	return l.finish()
}

// TestRestoreOlderEncodings: the encodings of Redis 6.x's and older
// DUMPs, which RESTORE still reads.
func TestRestoreOlderEncodings(t *testing.T) {
	long := strings.Repeat("z", 300)
	cases := []struct {
		name    string
		payload []byte
		enc     string
		content string
	}{
		{"list plain", payload(rdbTypeList, rdbLen(3), rdbStr("a"), rdbStr("12"), rdbStr(long)), "quicklist",
			"a\n12\n" + long + "\n"},
		{"list ziplist", payload(rdbTypeListZiplist, rdbBlob(ziplist("a", "5", "-200", "70000", "5000000000", long))),
			"quicklist", "a\n5\n-200\n70000\n5000000000\n" + long + "\n"},
		{"quicklist of ziplists", payload(rdbTypeListQuicklist, rdbLen(3), rdbBlob(ziplist("a", "b")),
			rdbBlob(ziplist()), rdbBlob(ziplist("1", "-1"))), "quicklist", "a\nb\n1\n-1\n"},
		{"quicklist 2 plain node", payload(rdbTypeListQuicklist2, rdbLen(2), rdbLen(quicklistPlain), rdbStr("big"),
			rdbLen(quicklistPacked), rdbBlob(lp("x"))), "quicklist", "big\nx\n"},
		{"zset string scores", payload(rdbTypeZSet, rdbLen(3), rdbStr("a"), []byte{3}, []byte("1.5"), rdbStr("b"),
			[]byte{254}, rdbStr("c"), []byte{255}), "listpack", "c\n-inf\na\n1.5\nb\ninf\n"},
		{"zset ziplist", payload(rdbTypeZSetZiplist, rdbBlob(ziplist("a", "1", "b", "0.5"))), "listpack",
			"b\n0.5\na\n1\n"},
		{"hash ziplist", payload(rdbTypeHashZiplist, rdbBlob(ziplist("f", "v", "n", "-7"))), "listpack",
			"f\tv\nn\t-7\n"},
		{"hash listpack, long value kept", payload(rdbTypeHashListpack, rdbBlob(lp("f", long))), "listpack",
			"f\t" + long + "\n"},
		{"hash, long value", payload(rdbTypeHash, rdbLen(1), rdbStr("f"), rdbStr(long)), "hashtable",
			"f\t" + long + "\n"},
		{"zipmap", payload(rdbTypeHashZipmap, rdbBlob(zipmap("f", "v", "n", "7"))), "listpack", "f\tv\nn\t7\n"},
		{"zipmap, long value", payload(rdbTypeHashZipmap, rdbBlob(zipmap("f", long))), "hashtable",
			"f\t" + long + "\n"},
		{"set of strings", payload(rdbTypeSet, rdbLen(2), rdbStr("1"), rdbStr("2")), "intset", "1\n2\n"},
		{"zset 2", payload(rdbTypeZSet2, rdbLen(1), rdbStr("m"), binary.LittleEndian.AppendUint64(nil, math.Float64bits(2))),
			"listpack", "m\n2\n"},
	}
	for _, tc := range cases {
		s := NewStore()
		if r := s.Apply(0, 1, []Command{restoreCmd("k", tc.payload)})[0]; r.String() != ok.String() {
			t.Errorf("%s: %v", tc.name, r)
			continue
		}
		if got := content(t, s, "k"); got != tc.content {
			t.Errorf("%s: content %q, want %q", tc.name, got, tc.content)
		}
		if got := encodingOf(s, "k"); got != tc.enc {
			t.Errorf("%s: encoding %s, want %s", tc.name, got, tc.enc)
		}
	}
}

// TestRestoreConverts: a payload holding more elements than the limits
// allow packed converts on restore, as rdbLoadObject converts.
func TestRestoreConverts(t *testing.T) {
	s := NewStore()
	s.limits.HashMaxListpackEntries = 1
	s.limits.ZSetMaxListpackEntries = 1
	s.limits.SetMaxIntsetEntries = 1
	for _, tc := range []struct {
		payload []byte
		enc     string
	}{
		{payload(rdbTypeHashListpack, rdbBlob(lp("a", "1", "b", "2"))), "hashtable"},
		{payload(rdbTypeZSetListpack, rdbBlob(lp("a", "1", "b", "2"))), "skiplist"},
		{payload(rdbTypeSetIntset, rdbBlob(appendIntset(nil, []int64{1, 2}))), "hashtable"},
	} {
		s.Apply(0, 1, []Command{restoreCmd("k", tc.payload).fl(FlagReplace)})
		if got := encodingOf(s, "k"); got != tc.enc {
			t.Errorf("payload %x: encoding %s, want %s", tc.payload, got, tc.enc)
		}
	}
}

// TestRestoreRefusesBadPayloads: what Redis refuses with "Bad data
// format" under sanitize-dump-payload yes.
func TestRestoreRefusesBadPayloads(t *testing.T) {
	good := lp("a", "1")
	badBacklen := slices.Clone(good)
	badBacklen[len(badBacklen)-2] = 9
	badCount := slices.Clone(good)
	badCount[4] = 3
	unsorted := appendIntset(nil, []int64{2, 1})
	for name, p := range map[string][]byte{
		"empty":               appendDumpFooter(nil),
		"unknown type":        payload(8),
		"stream":              payload(rdbTypeStreamListpacks, rdbLen(0)),
		"module":              payload(rdbTypeModule2, rdbLen(1)),
		"empty zipmap":        payload(rdbTypeHashZipmap, rdbBlob([]byte{0, 0xFF})),
		"zipmap count":        payload(rdbTypeHashZipmap, rdbBlob(append([]byte{2}, zipmap("f", "v")[1:]...))),
		"zipmap past its end": payload(rdbTypeHashZipmap, rdbBlob([]byte{1, 1, 'f', 9, 0, 'v', 0xFF})),
		// Redis's tests of the fix for CVE-2026-25243 (corrupt-dump.tcl):
		// a small length in 5 bytes.
		"zipmap small field in 5 bytes": []byte("\x09\x11\x01\xfe\x04\x00\x00\x00\x01\x00\xff\x00\x04\x00\x76\x61\x6c\x31\xff\x09\x00\xf9\xd5\xa4\xf7\x7d\x00\x3f\x1b"),
		"zipmap small value in 5 bytes": []byte("\x09\x0e\x01\x01\x6b\xfe\x04\x00\x00\x00\x00\x76\x61\x6c\x31\xff\x09\x00\xd0\xf9\xe4\x1d\xe4\xfb\x11\x4c"),
		"truncated string":              payload(rdbTypeString, []byte{0x80, 0, 0, 0xff, 0xff}),
		"empty list":                    payload(rdbTypeList, rdbLen(0)),
		"empty quicklist":               payload(rdbTypeListQuicklist2, rdbLen(1), rdbLen(quicklistPacked), rdbBlob(lp())),
		"bad container":                 payload(rdbTypeListQuicklist2, rdbLen(1), rdbLen(3), rdbBlob(good)),
		"listpack backlen":              payload(rdbTypeListQuicklist2, rdbLen(1), rdbLen(quicklistPacked), rdbBlob(badBacklen)),
		"listpack count":                payload(rdbTypeListQuicklist2, rdbLen(1), rdbLen(quicklistPacked), rdbBlob(badCount)),
		"duplicate member":              payload(rdbTypeSet, rdbLen(2), rdbStr("a"), rdbStr("a")),
		"unsorted intset":               payload(rdbTypeSetIntset, rdbBlob(unsorted)),
		"duplicate field":               payload(rdbTypeHash, rdbLen(2), rdbStr("f"), rdbStr("1"), rdbStr("f"), rdbStr("2")),
		"odd listpack pairs":            payload(rdbTypeHashListpack, rdbBlob(lp("a", "1", "b"))),
		"listpack dup keys":             payload(rdbTypeZSetListpack, rdbBlob(lp("a", "1", "a", "2"))),
		"nan score":                     payload(rdbTypeZSet2, rdbLen(1), rdbStr("m"), binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN()))),
		"nan string score":              payload(rdbTypeZSet, rdbLen(1), rdbStr("m"), []byte{253}),
		"score not a number":            payload(rdbTypeZSetListpack, rdbBlob(lp("a", "x"))),
		"huge count":                    payload(rdbTypeSet, []byte{0x81, 0, 0, 0, 1, 0, 0, 0, 0}),
		"bad ziplist":                   payload(rdbTypeListZiplist, rdbBlob([]byte{11, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0xFF})),
	} {
		if !VerifyDumpPayload(p) {
			t.Fatalf("%s: footer", name)
		}
		if CheckDumpPayload(p) {
			t.Errorf("%s: accepted", name)
		}
		s := NewStore()
		if r := s.Apply(0, 1, []Command{restoreCmd("k", p)})[0]; r.Str != ErrRestoreBadData {
			t.Errorf("%s: %v", name, r)
		}
		if _, ok := s.liveLocked([]byte("k"), 1); ok {
			t.Errorf("%s: key added", name)
		}
	}
}

// TestRestoreSemantics: BUSYKEY, REPLACE, deadlines, refusals.
func TestRestoreSemantics(t *testing.T) {
	s := NewStore()
	p := payload(rdbTypeString, rdbStr("v"))
	run(t, s, []step{
		{1, c(OpSet, "k", "old"), ok},
		{2, restoreCmd("k", p), errr(ErrBusyKey)},
		{3, restoreCmd("k", p).fl(FlagReplace).i(1000), ok},
		{4, c(OpGet, "k"), bulk("v")},
		{4, c(OpPTTL, "k"), in(996)},
		{5, restoreCmd("k", p).fl(FlagReplace).i(5), ok}, // deadline passed: deleted
		{6, c(OpExists, "k"), in(0)},
		{7, c(OpRestoreRefused, "k").i(RestoreBadChecksum), errr(ErrRestoreChecksum)},
		{8, c(OpSet, "k", "x"), ok},
		{9, c(OpRestoreRefused, "k").i(RestoreNegativeTTL), errr(ErrBusyKey)},
		{10, c(OpDump, "nokey"), nilr},
	})
}

// TestRestoreAccessRecords: IDLETIME under LRU tracking, FREQ under LFU.
func TestRestoreAccessRecords(t *testing.T) {
	p := payload(rdbTypeString, rdbStr("v"))
	s := NewStore()
	s.SetAccessTracking(TrackIdle, 1_000_000)
	s.Apply(0, 1_000_000, []Command{restoreCmd("k", p).fl(FlagRestoreIdle).i2(100)})
	if r := s.Read(1_000_000, c(OpObject, "k").i(ObjectIdleTime)); r.Int != 100 {
		t.Errorf("IDLETIME: %v", r)
	}
	s = NewStore()
	s.SetAccessTracking(TrackLFU, 1_000_000)
	s.Apply(0, 1_000_000, []Command{restoreCmd("k", p).fl(FlagRestoreFreq).i2(77)})
	if r := s.Read(1_000_000, c(OpObject, "k").i(ObjectFreq)); r.Int != 77 {
		t.Errorf("FREQ: %v", r)
	}
}

// FuzzDumpPayload: decoding never panics, and a value it accepts restores
// and DUMPs to a payload that decodes to the same value.
func FuzzDumpPayload(f *testing.F) {
	for _, d := range loadRecordedDumps(f) {
		if len(d.payload) < 2000 {
			f.Add(d.payload)
		}
	}
	f.Add(payload(rdbTypeListZiplist, rdbBlob(ziplist("a", "5", "-200"))))
	f.Add(payload(rdbTypeZSetZiplist, rdbBlob(ziplist("a", "1", "b", "0.5"))))
	f.Add(payload(rdbTypeHashZiplist, rdbBlob(ziplist("f", "v"))))
	f.Add(payload(rdbTypeListQuicklist, rdbLen(1), rdbBlob(ziplist("a", "b"))))
	f.Add(payload(rdbTypeZSet, rdbLen(1), rdbStr("a"), []byte{3}, []byte("1.5")))
	f.Add(payload(rdbTypeHashZipmap, rdbBlob(zipmap("f", "v", "n", "7"))))
	f.Fuzz(func(t *testing.T, p []byte) {
		v, ok := decodeDumpPayload(p)
		if !ok {
			return
		}
		s := NewStore()
		if r := s.Apply(0, 1, []Command{restoreCmd("k", appendDumpFooter(p))})[0]; r.Kind == ReplyError {
			t.Fatalf("accepted payload refused at apply: %v", r)
		}
		want := content(t, s, "k")
		dump := s.Read(1, c(OpDump, "k")).Bulk
		again, ok := decodeDumpPayload(dump)
		if !ok || again.kind != v.kind {
			t.Fatalf("kvs's DUMP %x does not decode", dump)
		}
		s.Apply(0, 1, []Command{restoreCmd("k2", dump)})
		if got := content(t, s, "k2"); got != want {
			t.Fatalf("round trip: %q, want %q", got, want)
		}
	})
}

// TestRestoreNotify: RESTORE's events are Redis's: new and restore for
// the key added (also over one REPLACE deleted), del for the key REPLACE
// deleted when the deadline had passed, expired for an expired key only
// without REPLACE (which deletes without looking the key up).
func TestRestoreNotify(t *testing.T) {
	s, l := notifyingStore(NotifyAll | NotifyNew | NotifyKeyMiss)
	p := payload(rdbTypeString, rdbStr("v"))
	for _, st := range []struct {
		cmd  Command
		want string
	}{
		{restoreCmd("r", p), "new:r restore:r"},
		{restoreCmd("r", p), ""}, // BUSYKEY
		{restoreCmd("r", p).fl(FlagReplace), "new:r restore:r"},
		{restoreCmd("r", p).fl(FlagReplace).i(10), "del:r"},
		{restoreCmd("r", p).i(10), ""},
		{c(OpSet, "e", "v").i(500), "new:e set:e expire:e"},
		{restoreCmd("e", p), "expired:e new:e restore:e"},
		{c(OpSet, "f", "v").i(500), "new:f set:f expire:f"},
		{restoreCmd("f", p).fl(FlagReplace), "new:f restore:f"},
		{c(OpDump, "nosuch"), "keymiss:nosuch"},
		{c(OpRestoreRefused, "nosuch").i(RestoreBadData), ""},
	} {
		now := int64(1000)
		if st.cmd.Op == OpSet {
			now = 1
		}
		if st.cmd.Op.IsWrite() {
			s.Apply(0, now, []Command{st.cmd})
		} else {
			s.Read(now, st.cmd)
		}
		if got := strings.Join(l.take(), " "); got != st.want {
			t.Errorf("%v %q: events %q, want %q", st.cmd.Op, st.cmd.Args[0], got, st.want)
		}
	}
}
