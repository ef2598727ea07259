package rdb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kvs/fsm"
)

// The files of Redis's own tests (tests/assets), of RDB versions 3 to 10:
// zipmaps, ziplists, intsets, quicklists of ziplists, linked lists.
var assets = []struct {
	name  string
	keys  int
	empty int
}{
	{"encodings", 13, 0},
	{"hash-ziplist", 1, 0},
	{"hash-zipmap", 1, 0},
	{"list-quicklist", 2, 0},
	{"zset-ziplist", 1, 0},
	{"scriptbackup", 0, 0},
	{"corrupt_empty_keys", 0, 9},
}

func readAsset(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name+".rdb"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadAssets(t *testing.T) {
	for _, a := range assets {
		s := fsm.NewStore()
		st, err := Load(bytes.NewReader(readAsset(t, a.name)), s, LoadOptions{Now: time.Now().UnixMilli()})
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		if st.Total() != a.keys || st.Empty != a.empty || s.Snapshot().Len() != a.keys {
			t.Errorf("%s: loaded %s, store holds %d; want %d keys, %d empty", a.name, st, s.Snapshot().Len(), a.keys, a.empty)
		}
	}
}

func TestLoadRefusesDamagedZiplist(t *testing.T) {
	_, err := Load(bytes.NewReader(readAsset(t, "corrupt_ziplist")), fsm.NewStore(), LoadOptions{})
	var re *Error
	if !errors.As(err, &re) || re.Offset != 470 || !strings.Contains(err.Error(), `"key:000000000091"`) {
		t.Fatalf("got %v, want the damaged hash at offset 470 named", err)
	}
}

// sample is a store holding every kind in each of its encodings, with
// deadlines and a function library.
func sample(t testing.TB, n int) *fsm.Store {
	s := fsm.NewStore()
	now := time.Now().UnixMilli()
	var cmds []fsm.Command
	add := func(key string, exp int64, value []byte) {
		cmds = append(cmds, fsm.Command{Op: fsm.OpRestore, Args: [][]byte{[]byte(key), fsm.RDBPayload(Version, value)}, Int: exp})
	}
	enc := func(t byte, parts ...[]byte) []byte {
		b := []byte{t}
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	str := func(s string) []byte { return fsm.AppendRDBString(nil, []byte(s)) }
	ln := func(n int) []byte { return fsm.AppendRDBLen(nil, uint64(n)) }
	add("s", 0, enc(TypeString, str("hello")))
	add("n", now+3600_000, enc(TypeString, str("12345")))
	add("long", 0, enc(TypeString, str(strings.Repeat("abc", 1000))))
	list := [][]byte{ln(n)}
	set := [][]byte{ln(n)}
	hash := [][]byte{ln(n)}
	for i := range n {
		m := str(strings.Repeat("m", i%70) + string(rune('a'+i%26)) + string(rune('0'+i/26)))
		list = append(list, m)
		set = append(set, m)
		hash = append(hash, m, str("v"))
	}
	add("list", 0, enc(TypeList, list...))
	add("set", now+7200_000, enc(TypeSet, set...))
	add("hash", 0, enc(TypeHash, hash...))
	add("intset", 0, enc(TypeSet, ln(3), str("1"), str("-5"), str("70000")))
	add("zset", 0, enc(TypeZSet2, ln(2), str("a"), []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x3f}, str("b"), []byte{0, 0, 0, 0, 0, 0, 0, 0x40}))
	add("smallhash", 0, enc(TypeHash, ln(1), str("f"), str("v")))
	cmds = append(cmds, fsm.Command{Op: fsm.OpFunctionRestore, Args: [][]byte{fsm.FunctionPayload([]byte(
		"#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return 1 end)"))}})
	for i, r := range s.Apply(0, now, cmds) {
		if r.Kind == fsm.ReplyError {
			t.Fatalf("command %d: %s", i, r.Str)
		}
	}
	return s
}

func writeStore(t testing.TB, s *fsm.Store) []byte {
	var buf bytes.Buffer
	snap := s.Snapshot()
	defer snap.Release()
	if _, err := WriteSnapshot(&buf, []SnapshotPart{{Snap: snap, Limits: s.Limits()}}, time.Now().UnixMilli(), Info{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dumps is the store's keys as DumpEach writes them.
func dumps(t testing.TB, s *fsm.Store) map[string]string {
	out := map[string]string{}
	snap := s.Snapshot()
	defer snap.Release()
	err := snap.DumpEach(time.Now().UnixMilli(), s.Limits(), func(key []byte, exp int64, value []byte) error {
		out[string(key)] = string(value) + "@" + time.UnixMilli(exp).String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range snap.Libraries() {
		out["function:"+lib] = ""
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	s := sample(t, 300)
	file := writeStore(t, s)
	back := fsm.NewStore()
	st, err := Load(bytes.NewReader(file), back, LoadOptions{Now: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if st.Total() != 9 || st.Expires[0] != 2 || st.Functions != 1 || st.Version != Version || st.Aux["redis-ver"] == "" {
		t.Fatalf("loaded %s (%+v)", st, st)
	}
	want, got := dumps(t, s), dumps(t, back)
	if len(want) != 10 || len(got) != len(want) {
		t.Fatalf("%d keys and libraries, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s differs after the round trip", k)
		}
	}
}

// Every strict prefix of a file is refused with an *Error, and so is
// every byte flipped after the header (the checksum, or the framing,
// sees it), with nothing panicking.
func TestDamagedFiles(t *testing.T) {
	files := map[string][]byte{"sample": writeStore(t, sample(t, 4)), "hash-ziplist": readAsset(t, "hash-ziplist"),
		"encodings": readAsset(t, "encodings")}
	for name, file := range files {
		for n := range len(file) {
			_, err := Load(bytes.NewReader(file[:n]), fsm.NewStore(), LoadOptions{})
			var re *Error
			if !errors.As(err, &re) || re.Offset > int64(n) {
				t.Fatalf("%s cut at %d: %v", name, n, err)
			}
		}
		if name == "encodings" {
			continue // version 4: no checksum
		}
		for i := 9; i < len(file); i++ {
			b := bytes.Clone(file)
			b[i] ^= 0x5a
			_, err := Load(bytes.NewReader(b), fsm.NewStore(), LoadOptions{})
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("%s with byte %d flipped: %v", name, i, err)
			}
		}
	}
}

func TestChecksumNamed(t *testing.T) {
	file := writeStore(t, sample(t, 300))
	file[len(file)-1] ^= 1
	_, err := Load(bytes.NewReader(file), fsm.NewStore(), LoadOptions{})
	var re *Error
	if !errors.As(err, &re) || re.Offset != int64(len(file)-8) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("got %v, want the checksum at %d", err, len(file)-8)
	}
	// A checksum of 0: the writer did not compute one (rdbchecksum no).
	copy(file[len(file)-8:], make([]byte, 8))
	if _, err := Load(bytes.NewReader(file), fsm.NewStore(), LoadOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hand builds a file of the given version from records.
func hand(version int, records ...[]byte) []byte {
	b := []byte("REDIS00" + string(rune('0'+version/10)) + string(rune('0'+version%10)))
	for _, r := range records {
		b = append(b, r...)
	}
	b = append(b, opEOF)
	var sum [8]byte
	crc := fsm.CRC64(0, b)
	for i := range 8 {
		sum[i] = byte(crc >> (8 * i))
	}
	return append(b, sum[:]...)
}

func key(t byte, k string, value ...byte) []byte {
	return append(fsm.AppendRDBString([]byte{t}, []byte(k)), value...)
}

func TestRefusals(t *testing.T) {
	str := func(s string) []byte { return fsm.AppendRDBString(nil, []byte(s)) }
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"db", hand(10, []byte{opSelectDB, 0x80, 0, 1, 0, 0}, key(TypeString, "k", str("v")...)), `key "k" is in db 65536`},
		{"module", hand(10, key(TypeModule2, "m", 0)), `key "m": a module's value`},
		{"module aux", hand(10, []byte{opModuleAux}), "MODULE_AUX"},
		{"unknown", hand(10, key(30, "u", 0)), "unknown value type 30"},
		{"version", hand(12), "RDB version 12"},
		{"twice", hand(10, key(TypeString, "k", str("v")...), key(TypeString, "k", str("w")...)), `key "k" is in the file twice`},
		{"function", hand(10, append([]byte{opFunction2}, str("#!lua name=x\nnot lua(")...)), "function library"},
		{"not rdb", []byte("HELLO0009"), "not an RDB file"},
	}
	for _, c := range cases {
		_, err := Load(bytes.NewReader(c.file), fsm.NewStore(), LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	// Each key goes into its database; a database beyond Databases
	// refuses the file, with or without SkipOtherDBs.
	s := fsm.NewStore()
	st, err := Load(bytes.NewReader(hand(10, []byte{opSelectDB, 3}, key(TypeString, "k", str("v")...),
		[]byte{opSelectDB, 0}, key(TypeString, "j", str("v")...))), s, LoadOptions{Databases: 4})
	if err != nil || st.Total() != 2 || st.Keys[3] != 1 || st.Keys[0] != 1 {
		t.Fatalf("dbs: %v %v", st, err)
	}
	if r := s.Read(0, fsm.Command{Op: fsm.OpGet, DB: 3, Args: [][]byte{[]byte("k")}}); string(r.Bulk) != "v" {
		t.Errorf("db 3's k: %+v", r)
	}
	if r := s.Read(0, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte("k")}}); r.Kind != fsm.ReplyNil {
		t.Errorf("db 0's k: %+v", r)
	}
	for _, skip := range []bool{false, true} {
		_, err = Load(bytes.NewReader(hand(10, []byte{opSelectDB, 3}, key(TypeString, "k", str("v")...))), fsm.NewStore(), LoadOptions{Databases: 3, SkipOtherDBs: skip})
		if err == nil || !strings.Contains(err.Error(), "more databases than the 3") {
			t.Errorf("db 3 of 3 (skip %v): %v", skip, err)
		}
	}
	// --skip-other-dbs leaves db 3 out and loads db 0.
	s = fsm.NewStore()
	st, err = Load(bytes.NewReader(hand(10, []byte{opSelectDB, 3}, key(TypeString, "k", str("v")...),
		[]byte{opSelectDB, 0}, key(TypeString, "j", str("v")...))), s, LoadOptions{SkipOtherDBs: true})
	if err != nil || st.Total() != 1 || st.SkippedDBs[3] != 1 {
		t.Fatalf("skip: %v %v", st, err)
	}
	if !strings.Contains(st.String(), "1 key of db 3 skipped") {
		t.Errorf("stats: %s", st)
	}
}

// RDB 11 (Redis 7.2): a set as a listpack; RESTORE refuses it in a
// payload of version 10.
func TestSetListpack(t *testing.T) {
	// A listpack of "a", "b", "7": header (total, count), entries, end.
	lp := []byte{0, 0, 0, 0, 3, 0, 0x81, 'a', 2, 0x81, 'b', 2, 7, 1, 0xff}
	lp[0] = byte(len(lp))
	value := fsm.AppendRDBString(nil, lp)
	s := fsm.NewStore()
	st, err := Load(bytes.NewReader(hand(11, key(TypeSetListpack, "set", value...))), s, LoadOptions{})
	if err != nil || st.Total() != 1 {
		t.Fatalf("%v %v", st, err)
	}
	if fsm.CheckRDBValue(10, append([]byte{TypeSetListpack}, value...)) {
		t.Error("a set listpack in a version 10 payload passes")
	}
	// And it is written back as Redis 7.0 writes a small set of strings.
	d := dumps(t, s)
	if v := d["set"]; len(v) == 0 || v[0] != TypeSet {
		t.Errorf("written back as type %d", v[0])
	}
}

func TestDecoderStopsAtChecksum(t *testing.T) {
	file := writeStore(t, sample(t, 300))
	r := bufioReader(append(bytes.Clone(file), "+PING\r\n"...))
	d := NewDecoder(r)
	for {
		if _, err := d.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "+PING\r\n" || d.Offset() != int64(len(file)) {
		t.Fatalf("after the file: %q (offset %d of %d)", rest, d.Offset(), len(file))
	}
}

// A stream of Redis 7.0 (type 19: a consumer group, a consumer with a
// pending entry, one without) is read to its end, the key after it and
// the checksum too; Load loads it.
func TestStream(t *testing.T) {
	file := readAsset(t, "stream-7.0")
	d := NewDecoder(bytes.NewReader(file))
	var keys []string
	for {
		e, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == KindKey {
			keys = append(keys, fmt.Sprintf("%s:%d", e.Key, e.Type))
		}
	}
	if strings.Join(keys, " ") != "events:19 after-stream:0" && strings.Join(keys, " ") != "after-stream:0 events:19" {
		t.Fatalf("keys %q", keys)
	}
	s := fsm.NewStore()
	st, err := Load(bytes.NewReader(file), s, LoadOptions{})
	if err != nil || st.Total() != 2 {
		t.Fatalf("got %v, %v", st, err)
	}
	if r := s.Read(0, fsm.Command{Op: fsm.OpType, Args: [][]byte{[]byte("events")}}); r.Str != "stream" {
		t.Fatalf("TYPE events: %+v", r)
	}
}

// A stream of Redis 7.2 (type 21: consumers with an active time) is read
// to its end too, and given as the type 19 value without the active
// times, which Load loads.
func TestStream72(t *testing.T) {
	str := func(s string) []byte { return fsm.AppendRDBString(nil, []byte(s)) }
	var v []byte
	v = append(v, 0)                      // no nodes
	v = append(v, 0, 5, 1)                // length, last id
	v = append(v, 0, 0, 5, 1, 2)          // first id, max deleted, entries added
	v = append(v, 1)                      // a group
	v = append(v, str("g1")...)           // its name
	v = append(v, 5, 1, 2)                // last delivered id, entries read
	v = append(v, 1)                      // a pending entry
	v = append(v, make([]byte, 24)...)    // its id, delivery time
	v = append(v, 1)                      // delivery count
	v = append(v, 1)                      // a consumer
	v = append(v, str("alice")...)        // its name
	v = append(v, 1, 0, 0, 0, 0, 0, 0, 0) // seen time
	at := len(v)
	v = append(v, 2, 0, 0, 0, 0, 0, 0, 0) // active time
	v = append(v, 1)                      // a pending entry
	v = append(v, make([]byte, 16)...)    // its id
	v19 := append(bytes.Clone(v[:at]), v[at+8:]...)
	file := hand(11, key(TypeStreamListpacks3, "events", v...), key(TypeString, "after", str("v")...))
	d := NewDecoder(bytes.NewReader(file))
	var keys []string
	for {
		e, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, string(e.Key))
		if string(e.Key) == "events" && (e.Type != TypeStreamListpacks2 || !bytes.Equal(e.Value, v19)) {
			t.Fatalf("the stream is given as type %d, %x; want 19, %x", e.Type, e.Value, v19)
		}
	}
	if strings.Join(keys, " ") != "events after" {
		t.Fatalf("keys %q", keys)
	}
	s := fsm.NewStore()
	if st, err := Load(bytes.NewReader(file), s, LoadOptions{}); err != nil || st.Total() != 2 {
		t.Fatalf("Load: %v, %v", st, err)
	}
	r := s.Read(0, fsm.Command{Op: fsm.OpXInfo, Args: [][]byte{[]byte("events"), []byte("CONSUMERS"), []byte("g1")}})
	if r.Kind != fsm.ReplyArray || len(r.Array) != 1 {
		t.Fatalf("XINFO CONSUMERS: %+v", r)
	}
}
