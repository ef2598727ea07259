package resp

import (
	"math"
	"testing"
)

func TestAppend(t *testing.T) {
	cases := []struct {
		name string
		got  []byte
		want string
	}{
		{"status", AppendStatus(nil, "OK"), "+OK\r\n"},
		{"error", AppendError(nil, "ERR syntax error"), "-ERR syntax error\r\n"},
		{"int", AppendInt(nil, -42), ":-42\r\n"},
		{"bulk", AppendBulk(nil, []byte("hi")), "$2\r\nhi\r\n"},
		{"empty bulk", AppendBulk(nil, nil), "$0\r\n\r\n"},
		{"bulk string", AppendBulkString(nil, "a\r\nb"), "$4\r\na\r\nb\r\n"},
		{"bulk int", AppendBulkInt(nil, math.MinInt64), "$20\r\n-9223372036854775808\r\n"},
		{"array", AppendArrayLen(nil, 3), "*3\r\n"},
		{"null 2", AppendNull(nil, 2), "$-1\r\n"},
		{"null 3", AppendNull(nil, 3), "_\r\n"},
		{"null array 2", AppendNullArray(nil, 2), "*-1\r\n"},
		{"null array 3", AppendNullArray(nil, 3), "_\r\n"},
		{"map 2", AppendMapLen(nil, 2, 2), "*4\r\n"},
		{"map 3", AppendMapLen(nil, 2, 3), "%2\r\n"},
		{"set 2", AppendSetLen(nil, 5, 2), "*5\r\n"},
		{"set 3", AppendSetLen(nil, 5, 3), "~5\r\n"},
		{"push 2", AppendPushLen(nil, 3, 2), "*3\r\n"},
		{"push 3", AppendPushLen(nil, 3, 3), ">3\r\n"},
		{"verbatim 2", AppendVerbatim(nil, "a:1\r\n", 2), "$5\r\na:1\r\n\r\n"},
		{"verbatim 3", AppendVerbatim(nil, "a:1\r\n", 3), "=9\r\ntxt:a:1\r\n\r\n"},
		{"bool 2", AppendBool(AppendBool(nil, true, 2), false, 2), ":1\r\n:0\r\n"},
		{"bool 3", AppendBool(AppendBool(nil, true, 3), false, 3), "#t\r\n#f\r\n"},
		{"big number 2", AppendBigNumber(nil, "-12345678901234567890", 2), "$21\r\n-12345678901234567890\r\n"},
		{"big number 3", AppendBigNumber(nil, "12345678901234567890", 3), "(12345678901234567890\r\n"},
		{"appends", AppendInt([]byte("+OK\r\n"), 1), "+OK\r\n:1\r\n"},
	}
	for _, tc := range cases {
		if string(tc.got) != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// TestAppendDouble holds AppendDouble to what redis-server 7.0.15 answers
// ZSCORE for a member ZADDed with the score given, in RESP2 and after
// HELLO 3. (-0 as redis-server answers it from a skiplist-encoded sorted
// set: a listpack one stores the score as the integer 0.)
func TestAppendDouble(t *testing.T) {
	cases := []struct {
		score      string
		resp2, txt string // the RESP2 reply and the RESP3 double's text
	}{
		{"0", "$1\r\n0\r\n", "0"},
		{"-0", "$2\r\n-0\r\n", "-0"},
		{"1", "$1\r\n1\r\n", "1"},
		{"1.1", "$18\r\n1.1000000000000001\r\n", "1.1000000000000001"},
		{"0.1", "$19\r\n0.10000000000000001\r\n", "0.10000000000000001"},
		{"1.5", "$3\r\n1.5\r\n", "1.5"},
		{"-3.25", "$5\r\n-3.25\r\n", "-3.25"},
		{"4.35", "$18\r\n4.3499999999999996\r\n", "4.3499999999999996"},
		{"1e16", "$17\r\n10000000000000000\r\n", "10000000000000000"},
		{"1e17", "$5\r\n1e+17\r\n", "1e+17"},
		{"99999999999999999", "$5\r\n1e+17\r\n", "1e+17"},
		{"123456789012345678", "$22\r\n1.2345678901234568e+17\r\n", "1.2345678901234568e+17"},
		{"1000000000000000.3", "$18\r\n1000000000000000.2\r\n", "1000000000000000.2"},
		{"0.0001", "$6\r\n0.0001\r\n", "0.0001"},
		{"0.00001", "$22\r\n1.0000000000000001e-05\r\n", "1.0000000000000001e-05"},
		{"1.2345678901234567e-5", "$22\r\n1.2345678901234568e-05\r\n", "1.2345678901234568e-05"},
		{"0.3333333333333333", "$19\r\n0.33333333333333331\r\n", "0.33333333333333331"},
		{"1e100", "$6\r\n1e+100\r\n", "1e+100"},
		{"-1e-100", "$7\r\n-1e-100\r\n", "-1e-100"},
		{"5e-324", "$23\r\n4.9406564584124654e-324\r\n", "4.9406564584124654e-324"},
		{"1.7976931348623157e308", "$23\r\n1.7976931348623157e+308\r\n", "1.7976931348623157e+308"},
		{"inf", "$3\r\ninf\r\n", "inf"},
		{"-inf", "$4\r\n-inf\r\n", "-inf"},
	}
	for _, tc := range cases {
		f := parseScore(t, tc.score)
		if got := AppendDouble(nil, f, 2); string(got) != tc.resp2 {
			t.Errorf("%s in RESP2: %q, want %q", tc.score, got, tc.resp2)
		}
		if got, want := AppendDouble(nil, f, 3), ","+tc.txt+"\r\n"; string(got) != want {
			t.Errorf("%s in RESP3: %q, want %q", tc.score, got, want)
		}
	}
	if got := AppendDouble(nil, math.NaN(), 3); string(got) != ",nan\r\n" {
		t.Errorf("NaN: %q", got)
	}
}

func parseScore(t *testing.T, s string) float64 {
	t.Helper()
	f, err := parseDouble([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return f
}

func TestAppendAllocs(t *testing.T) {
	b := make([]byte, 0, 256)
	n := testing.AllocsPerRun(100, func() {
		b = AppendDouble(b[:0], 1.1, 3)
		b = AppendDouble(b, 1.1, 2)
		b = AppendBulkInt(b, 123)
		b = AppendVerbatim(b, "x", 3)
	})
	if n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}
