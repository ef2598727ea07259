package resp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
)

func readOne(in string, lim Limits) (Value, error) {
	return ReadReply(bufio.NewReader(strings.NewReader(in)), lim)
}

func TestReadReplyTypes(t *testing.T) {
	bulk := func(s string) Value { return Value{Kind: KindBulk, Str: []byte(s)} }
	cases := []struct {
		in   string
		want Value
	}{
		{"+OK\r\n", Value{Kind: KindStatus, Str: []byte("OK")}},
		{"+\r\n", Value{Kind: KindStatus, Str: []byte{}}},
		{"-ERR x y\r\n", Value{Kind: KindError, Str: []byte("ERR x y")}},
		{":-9223372036854775808\r\n", Value{Kind: KindInt, Int: math.MinInt64}},
		{"$3\r\na\nb\r\n", bulk("a\nb")},
		{"$0\r\n\r\n", bulk("")},
		{"$-1\r\n", Value{Kind: KindBulk, Null: true}},
		{"*-1\r\n", Value{Kind: KindArray, Null: true}},
		{"*0\r\n", Value{Kind: KindArray, Elems: []Value{}}},
		{"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", Value{Kind: KindArray, Elems: []Value{bulk("a"), {Kind: KindArray, Elems: []Value{{Kind: KindInt, Int: 1}}}}}},
		{"_\r\n", Value{Kind: KindNull, Null: true}},
		{",1.5\r\n", Value{Kind: KindDouble, Float: 1.5}},
		{",-inf\r\n", Value{Kind: KindDouble, Float: math.Inf(-1)}},
		{",1e+17\r\n", Value{Kind: KindDouble, Float: 1e17}},
		{"#t\r\n", Value{Kind: KindBool, Int: 1}},
		{"#f\r\n", Value{Kind: KindBool}},
		{"!5\r\nERR x\r\n", Value{Kind: KindBlobError, Str: []byte("ERR x")}},
		{"=10\r\ntxt:a\r\nb\r\n\r\n", Value{Kind: KindVerbatim, Format: "txt", Str: []byte("a\r\nb\r\n")}},
		{"(-123456789012345678901234567890\r\n", Value{Kind: KindBigNumber, Str: []byte("-123456789012345678901234567890")}},
		{"%1\r\n+k\r\n:2\r\n", Value{Kind: KindMap, Elems: []Value{{Kind: KindStatus, Str: []byte("k")}, {Kind: KindInt, Int: 2}}}},
		{"~2\r\n$1\r\na\r\n$1\r\nb\r\n", Value{Kind: KindSet, Elems: []Value{bulk("a"), bulk("b")}}},
		{">2\r\n$7\r\nmessage\r\n_\r\n", Value{Kind: KindPush, Elems: []Value{bulk("message"), {Kind: KindNull, Null: true}}}},
		{"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n", bulk("v")},
		{"*1\r\n|1\r\n+a\r\n:1\r\n|1\r\n+b\r\n_\r\n:7\r\n", Value{Kind: KindArray, Elems: []Value{{Kind: KindInt, Int: 7}}}},
	}
	for _, tc := range cases {
		got, err := readOne(tc.in, Limits{})
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !equalValues(&got, &tc.want) {
			t.Errorf("%q: %+v, want %+v", tc.in, got, tc.want)
		}
		ri, err := SkipReply(bufio.NewReader(strings.NewReader(tc.in)), Limits{})
		if err != nil || ri.Size != len(tc.in) || ri.Kind != got.Kind || ri.Null != got.Null {
			t.Errorf("%q: SkipReply %+v, %v; want size %d, kind %c, null %v", tc.in, ri, err, len(tc.in), got.Kind, got.Null)
		}
		if got.Kind == KindError && string(ri.Text) != string(got.Str) {
			t.Errorf("%q: SkipReply text %q", tc.in, ri.Text)
		}
	}
}

// TestReadReplyWriter reads back what the writer writes, in both
// protocols, as a client would see it.
func TestReadReplyWriter(t *testing.T) {
	for _, proto := range []int{2, 3} {
		var b []byte
		b = AppendMapLen(b, 2, proto)
		b = AppendBulkString(b, "score")
		b = AppendDouble(b, 1.1, proto)
		b = AppendBulkString(b, "members")
		b = AppendSetLen(b, 2, proto)
		b = AppendNull(b, proto)
		b = AppendNullArray(b, proto)
		b = AppendPushLen(b, 3, proto)
		b = AppendBool(b, true, proto)
		b = AppendBigNumber(b, "-99999999999999999999", proto)
		b = AppendVerbatim(b, "line\r\n", proto)
		b = AppendStatus(b, "OK")
		b = AppendError(b, "ERR no")
		b = AppendInt(b, 12)
		b = AppendBulkInt(b, -5)

		br := bufio.NewReader(bytes.NewReader(b))
		var got []Value
		for {
			v, err := ReadReply(br, Limits{})
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("proto %d: %v after %d replies", proto, err, len(got))
			}
			got = append(got, v)
		}
		if len(got) != 6 {
			t.Fatalf("proto %d: %d replies, want 6", proto, len(got))
		}
		m, push := got[0], got[1]
		if proto == 3 {
			if m.Kind != KindMap || len(m.Elems) != 4 || m.Elems[1].Kind != KindDouble || m.Elems[1].Float != 1.1 {
				t.Errorf("RESP3 map: %+v", m)
			}
			set := m.Elems[3]
			if set.Kind != KindSet || len(set.Elems) != 2 || set.Elems[0].Kind != KindNull || set.Elems[1].Kind != KindNull {
				t.Errorf("RESP3 set: %+v", set)
			}
			if push.Kind != KindPush || push.Elems[0].Kind != KindBool || push.Elems[0].Int != 1 ||
				push.Elems[1].Kind != KindBigNumber || string(push.Elems[1].Str) != "-99999999999999999999" ||
				push.Elems[2].Kind != KindVerbatim || push.Elems[2].Format != "txt" || string(push.Elems[2].Str) != "line\r\n" {
				t.Errorf("RESP3 push: %+v", push)
			}
		} else {
			if m.Kind != KindArray || len(m.Elems) != 4 || string(m.Elems[1].Str) != "1.1000000000000001" {
				t.Errorf("RESP2 map: %+v", m)
			}
			set := m.Elems[3]
			if set.Kind != KindArray || !set.Elems[0].Null || set.Elems[0].Kind != KindBulk || !set.Elems[1].Null || set.Elems[1].Kind != KindArray {
				t.Errorf("RESP2 set: %+v", set)
			}
			if push.Kind != KindArray || push.Elems[0].Kind != KindInt || push.Elems[0].Int != 1 ||
				string(push.Elems[1].Str) != "-99999999999999999999" || string(push.Elems[2].Str) != "line\r\n" {
				t.Errorf("RESP2 push: %+v", push)
			}
		}
		if string(got[2].Str) != "OK" || !got[3].IsError() || string(got[3].Str) != "ERR no" || got[4].Int != 12 || string(got[5].Str) != "-5" {
			t.Errorf("proto %d: simple replies %+v", proto, got[2:])
		}
	}
}

func TestReadReplyMalformed(t *testing.T) {
	cases := []struct {
		name, in string
		want     error // nil: ErrProtocol
	}{
		{"empty", "", io.EOF},
		{"no CRLF", "+OK\n", nil},
		{"LF only at end", "+OK", io.ErrUnexpectedEOF},
		{"unknown type", "?x\r\n", nil},
		{"attribute alone", "|1\r\n+a\r\n+b\r\n", io.ErrUnexpectedEOF},
		{"bad int", ":12a\r\n", nil},
		{"int plus", ":+1\r\n", nil},
		{"int overflow", ":9223372036854775808\r\n", nil},
		{"bulk bad length", "$x\r\n", nil},
		{"bulk leading zero", "$01\r\na\r\n", nil},
		{"bulk negative", "$-2\r\n", nil},
		{"bulk short", "$5\r\nab", io.ErrUnexpectedEOF},
		{"bulk no CRLF", "$2\r\nabcd", nil},
		{"bulk no CRLF at end", "$2\r\nab", io.ErrUnexpectedEOF},
		{"blob error null", "!-1\r\n", nil},
		{"verbatim null", "=-1\r\n", nil},
		{"verbatim no format", "=3\r\ntxt\r\n", nil},
		{"verbatim bad format", "=5\r\ntxt-a\r\n", nil},
		{"array bad count", "*1x\r\n", nil},
		{"array short", "*2\r\n:1\r\n", io.ErrUnexpectedEOF},
		{"set null", "~-1\r\n", nil},
		{"map null", "%-1\r\n", nil},
		{"map short", "%1\r\n:1\r\n", io.ErrUnexpectedEOF},
		{"null with body", "_x\r\n", nil},
		{"bool", "#x\r\n", nil},
		{"bool long", "#tt\r\n", nil},
		{"double", ",1.5x\r\n", nil},
		{"double empty", ",\r\n", nil},
		{"double hex", ",0x10\r\n", nil},
		{"double Inf", ",Inf\r\n", nil},
		{"double exponent", ",1e\r\n", nil},
		{"big number", "(12a\r\n", nil},
		{"big number empty", "(\r\n", nil},
		{"streamed", "$?\r\n", nil},
	}
	for _, tc := range cases {
		_, err := readOne(tc.in, Limits{})
		_, serr := SkipReply(bufio.NewReader(strings.NewReader(tc.in)), Limits{})
		want := tc.want
		if want == nil {
			want = ErrProtocol
		}
		if !errors.Is(err, want) || !errors.Is(serr, want) {
			t.Errorf("%s %q: ReadReply %v, SkipReply %v, want %v", tc.name, tc.in, err, serr, want)
		}
	}
}

func TestReadReplyLimits(t *testing.T) {
	lim := Limits{MaxBulk: 4, MaxElems: 2, MaxDepth: 2}
	cases := []struct {
		in string
		ok bool
	}{
		{"$4\r\nabcd\r\n", true},
		{"$5\r\nabcde\r\n", false},
		{"!5\r\nERR x\r\n", false},
		{"=8\r\ntxt:abcd\r\n", false},
		{"*2\r\n:1\r\n:2\r\n", true},
		{"*3\r\n", false},
		{"%2\r\n:1\r\n:2\r\n:3\r\n:4\r\n", true},
		{"%3\r\n", false},
		{"*1\r\n*1\r\n:1\r\n", true},
		{"*1\r\n*1\r\n*1\r\n:1\r\n", false},
		{"*1\r\n*1\r\n*0\r\n", true}, // an empty aggregate nests nothing
		{"*1\r\n*1\r\n|1\r\n:1\r\n:1\r\n:1\r\n", false},
		{"*9999999999\r\n", false},
	}
	for _, tc := range cases {
		_, err := readOne(tc.in, lim)
		_, serr := SkipReply(bufio.NewReader(strings.NewReader(tc.in)), lim)
		if tc.ok != (err == nil) || tc.ok != (serr == nil) || (!tc.ok && (!errors.Is(err, ErrProtocol) || !errors.Is(serr, ErrProtocol))) {
			t.Errorf("%q: ReadReply %v, SkipReply %v, want ok %v", tc.in, err, serr, tc.ok)
		}
	}

	// A header announcing more than arrives costs about what arrives.
	in := "$400000000\r\n" + strings.Repeat("x", 1000)
	if n := allocatedBytes(func() {
		if _, err := readOne(in, Limits{}); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("a cut bulk: %v", err)
		}
	}); n > 4<<20 {
		t.Errorf("a cut 400 MB bulk allocated %d bytes", n)
	}
	in = "*2000000000\r\n:1\r\n"
	if n := allocatedBytes(func() {
		if _, err := readOne(in, Limits{}); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("a cut array: %v", err)
		}
	}); n > 4<<20 {
		t.Errorf("a cut array of 2e9 elements allocated %d bytes", n)
	}

	// Deep nesting within the default limit is read, not a stack
	// overflow, and past it is refused.
	deep := strings.Repeat("*1\r\n", DefaultMaxDepth) + ":1\r\n"
	if _, err := readOne(deep, Limits{}); err != nil {
		t.Fatalf("%d levels: %v", DefaultMaxDepth, err)
	}
	if _, err := readOne("*1\r\n"+deep, Limits{}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("%d levels: %v", DefaultMaxDepth+1, err)
	}
	// So are many attributes in a row.
	attrs := strings.Repeat("|1\r\n_\r\n_\r\n", 100000) + ":1\r\n"
	if v, err := readOne(attrs, Limits{}); err != nil || v.Int != 1 {
		t.Fatalf("many attributes: %+v, %v", v, err)
	}
}

// TestReadReplyLongLine: a line longer than the bufio.Reader's buffer is
// a protocol error, not a stall or a panic.
func TestReadReplyLongLine(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader("+"+strings.Repeat("a", 100)+"\r\n"), 16)
	if _, err := ReadReply(br, Limits{}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("got %v", err)
	}
}

// allocatedBytes is how much the heap handed out while f ran.
func allocatedBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestSkipReplyAllocs(t *testing.T) {
	in := []byte("+OK\r\n-ERR x\r\n$3\r\nabc\r\n$-1\r\n*2\r\n:1\r\n,1.5\r\n%1\r\n_\r\n#t\r\n=5\r\ntxt:a\r\n(1\r\n")
	r := bytes.NewReader(in)
	br := bufio.NewReader(r)
	n := testing.AllocsPerRun(100, func() {
		r.Reset(in)
		br.Reset(r)
		for range 8 {
			if _, err := SkipReply(br, Limits{}); err != nil {
				t.Fatal(err)
			}
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}

// FuzzReadReply checks that no input panics ReadReply or SkipReply, that
// the two agree on where each reply ends and whether it is valid, and that
// every reply read comes back the same once written out again.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "-ERR x\r\n", ":1\r\n", "$3\r\nabc\r\n", "$-1\r\n", "*-1\r\n",
		"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", "_\r\n", ",1.5\r\n", ",-inf\r\n", "#t\r\n",
		"!3\r\nERR\r\n", "=7\r\ntxt:abc\r\n", "(123\r\n", "%1\r\n+a\r\n:1\r\n",
		"~1\r\n_\r\n", ">1\r\n+m\r\n", "|1\r\n+a\r\n+b\r\n:1\r\n", "*1\r\n*1\r\n*1\r\n",
		"$99999999999\r\n", "*1\r\n|0\r\n_\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		lim := Limits{MaxBulk: 1 << 20, MaxElems: 1 << 16, MaxDepth: 16}
		br := bufio.NewReader(bytes.NewReader(in))
		sr := bufio.NewReader(bytes.NewReader(in))
		for {
			v, err := ReadReply(br, lim)
			ri, serr := SkipReply(sr, lim)
			if (err == nil) != (serr == nil) {
				t.Fatalf("ReadReply %v, SkipReply %v", err, serr)
			}
			if err != nil {
				return
			}
			if ri.Kind != v.Kind || ri.Null != v.Null {
				t.Fatalf("SkipReply %+v for %+v", ri, v)
			}
			out := appendValue(nil, &v)
			back, err := ReadReply(bufio.NewReader(bytes.NewReader(out)), lim)
			if err != nil || !equalValues(&back, &v) {
				t.Fatalf("%+v written as %q reads back as %+v, %v", v, out, back, err)
			}
		}
	})
}

// appendValue writes v back in its own type.
func appendValue(b []byte, v *Value) []byte {
	switch v.Kind {
	case KindStatus:
		return AppendStatus(b, string(v.Str))
	case KindError:
		return AppendError(b, string(v.Str))
	case KindInt:
		return AppendInt(b, v.Int)
	case KindNull:
		return AppendNull(b, 3)
	case KindDouble:
		return AppendDouble(b, v.Float, 3)
	case KindBool:
		return AppendBool(b, v.Int == 1, 3)
	case KindBigNumber:
		return AppendBigNumber(b, string(v.Str), 3)
	case KindBulk:
		if v.Null {
			return AppendNull(b, 2)
		}
		return AppendBulk(b, v.Str)
	case KindBlobError:
		b = appendHeader(b, '!', len(v.Str))
		b = append(b, v.Str...)
		return append(b, '\r', '\n')
	case KindVerbatim:
		b = appendHeader(b, '=', len(v.Str)+4)
		b = append(b, v.Format...)
		b = append(b, ':')
		b = append(b, v.Str...)
		return append(b, '\r', '\n')
	}
	if v.Null {
		return AppendNullArray(b, 2)
	}
	n := len(v.Elems)
	if v.Kind == KindMap {
		n /= 2
	}
	b = appendHeader(b, byte(v.Kind), n)
	for i := range v.Elems {
		b = appendValue(b, &v.Elems[i])
	}
	return b
}

func equalValues(a, b *Value) bool {
	if a.Kind != b.Kind || a.Null != b.Null || !bytes.Equal(a.Str, b.Str) || a.Format != b.Format ||
		a.Int != b.Int || len(a.Elems) != len(b.Elems) {
		return false
	}
	if a.Float != b.Float && !(math.IsNaN(a.Float) && math.IsNaN(b.Float)) {
		return false
	}
	if math.Signbit(a.Float) != math.Signbit(b.Float) {
		return false
	}
	for i := range a.Elems {
		if !equalValues(&a.Elems[i], &b.Elems[i]) {
			return false
		}
	}
	return true
}

// BenchmarkSkipReply reads the replies kvs bench sees most.
func BenchmarkSkipReply(b *testing.B) {
	in := []byte("+OK\r\n$5\r\nvalue\r\n$-1\r\n")
	r := bytes.NewReader(in)
	br := bufio.NewReader(r)
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(in)
		br.Reset(r)
		for range 3 {
			if _, err := SkipReply(br, Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}
