package resp

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// chunkReader returns its data in reads of the given sizes (cycling).
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = max(1, c.sizes[c.i%len(c.sizes)])
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// drain parses everything in, read in reads of the given sizes, and
// returns the requests re-encoded as RESP and the error it stops with.
func drain(in []byte, sizes []int) ([]byte, error) {
	rr := NewReader(&chunkReader{data: in, sizes: sizes}, func() int64 { return 1 << 20 })
	var out []byte
	for {
		cmds, err := rr.ReadCommands()
		for _, args := range cmds {
			out = AppendArrayLen(out, len(args))
			for _, a := range args {
				out = AppendBulk(out, a)
			}
		}
		if err != nil {
			return out, err
		}
	}
}

func TestReader(t *testing.T) {
	big := strings.Repeat("x", 100000)
	cases := []struct {
		name, in, out string
		err           string // "" means the stream ends with io.EOF
	}{
		{"commands pass", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n", ""},
		{"big payload passes", "*2\r\n$4\r\nECHO\r\n$100000\r\n" + big + "\r\n", "*2\r\n$4\r\nECHO\r\n$100000\r\n" + big + "\r\n", ""},
		{"empty requests dropped", "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", "*1\r\n$4\r\nPING\r\n", ""},
		{"inline becomes RESP", "PING\r\n \r\nECHO a\n", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\na\r\n", ""},
		{"inline unbalanced", "PING\r\nECHO \"a\r\n", "*1\r\n$4\r\nPING\r\n", MsgUnbalancedQuotes},
		{"bulk too long", "*1\r\n$4\r\nPING\r\n*1\r\n$1048577\r\n", "*1\r\n$4\r\nPING\r\n", MsgInvalidBulkLength},
		{"payload without CRLF", "*1\r\n$4\r\nPING\r\n*1\r\n$1\r\nxyz", "*1\r\n$4\r\nPING\r\n", MsgInvalidBulkLength},
		{"negative bulk length", "*1\r\n$-1\r\n", "", MsgInvalidBulkLength},
		{"bad count", "*1\r\n$4\r\nPING\r\n*x\r\n", "*1\r\n$4\r\nPING\r\n", MsgInvalidMultiBulkLength},
		{"count with plus", "*+1\r\n", "", MsgInvalidMultiBulkLength},
		{"no dollar", "*1\r\n:1\r\n", "", "ERR Protocol error: expected '$', got ':'"},
		{"header line too long", "*1\r\n$" + strings.Repeat("1", maxInlineLen+1), "", MsgBulkCountTooBig},
		{"inline too long", strings.Repeat("a", maxInlineLen+1), "", MsgInlineTooBig},
		{"inline line too long", "PING\n" + strings.Repeat("a", maxInlineLen+1) + "\n", "*1\r\n$4\r\nPING\r\n", MsgInlineTooBig},
	}
	for _, tc := range cases {
		for _, sizes := range [][]int{nil, {1}, {3, 7, 1}, {4096}} {
			out, err := drain([]byte(tc.in), sizes)
			var pe *ProtocolError
			switch {
			case tc.err == "" && err != io.EOF:
				t.Errorf("%s %v: error %v", tc.name, sizes, err)
			case tc.err != "" && (!errors.As(err, &pe) || pe.Text != tc.err):
				t.Errorf("%s %v: error %v, want %q", tc.name, sizes, err, tc.err)
			}
			if string(out) != tc.out {
				t.Errorf("%s %v: out %.60q, want %.60q", tc.name, sizes, out, tc.out)
			}
		}
	}
}

// FuzzReader checks that how the input is split into reads changes
// neither the requests the Reader returns nor how it stops, and that nothing
// panics.
func FuzzReader(f *testing.F) {
	f.Add([]byte("*1\r\n$4\r\nPING\r\n*0\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), []byte{1, 2, 3})
	f.Add([]byte("*1\r\n$99999999\r\n"), []byte{5})
	f.Add([]byte("PING\r\n*1\r\nx"), []byte{2})
	f.Fuzz(func(t *testing.T, in, split []byte) {
		sizes := make([]int, len(split))
		for i, s := range split {
			sizes[i] = int(s)
		}
		if bytes.Contains(in, []byte("\n")) && len(in) > maxInlineLen {
			return // inline overflows depend on read boundaries by design
		}
		want, werr := drain(in, nil)
		got, gerr := drain(in, sizes)
		if !bytes.Equal(got, want) {
			t.Fatalf("split %v changed the output:\n got %q\nwant %q", sizes, got, want)
		}
		if (werr == io.EOF) != (gerr == io.EOF) {
			t.Fatalf("split %v changed the error: %v vs %v", sizes, gerr, werr)
		}
	})
}

// TestInlineSplitting checks inline requests against what redis-server 7
// answers to ECHO with the same argument.
func TestInlineSplitting(t *testing.T) {
	cases := []struct {
		line string
		args []string // nil: unbalanced quotes
	}{
		{`ECHO 'x\ny'`, []string{"ECHO", `x\ny`}},
		{`ECHO "x\ny"`, []string{"ECHO", "x\ny"}},
		{`ECHO "\x41\x4g"`, []string{"ECHO", "Ax4g"}},
		{`ECHO a"b c"`, []string{"ECHO", "ab c"}},
		{`ECHO a"b c"d`, nil},
		{`ECHO "a"b`, nil},
		{`ECHO 'it\'s'`, []string{"ECHO", "it's"}},
		{`ECHO "a\"b"`, []string{"ECHO", `a"b`}},
		{`ECHO "abc`, nil},
		{"ECHO  a\t", []string{"ECHO", "a"}},
		{`ECHO "" ''`, []string{"ECHO", "", ""}},
		{`ECHO "\q\t"`, []string{"ECHO", "q\t"}},
		{`ECHO 'a\b'`, []string{"ECHO", `a\b`}},
		{"   ", []string{}},
	}
	for _, tc := range cases {
		got, ok := appendInline(nil, []byte(tc.line))
		if tc.args == nil {
			if ok {
				t.Errorf("%q: accepted as %q, want unbalanced quotes", tc.line, got)
			}
			continue
		}
		var want []byte
		if len(tc.args) > 0 {
			want = encodeCommand(tc.args...)
		}
		if !ok || string(got) != string(want) {
			t.Errorf("%q: got %q (%v), want %q", tc.line, got, ok, want)
		}
	}
}

// encodeCommand is args as a RESP request.
func encodeCommand(args ...string) []byte {
	b := AppendArrayLen(nil, len(args))
	for _, a := range args {
		b = AppendBulkString(b, a)
	}
	return b
}

// BenchmarkReader parses pipelines of 64 GET requests.
func BenchmarkReader(b *testing.B) {
	var pipeline []byte
	for range 64 {
		pipeline = append(pipeline, encodeCommand("GET", "key:000123")...)
	}
	r := &repeatReader{data: pipeline}
	rr := NewReader(r, func() int64 { return 512 << 20 })
	b.SetBytes(int64(len(pipeline)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rr.ReadCommands(); err != nil {
			b.Fatal(err)
		}
	}
}

// repeatReader returns data whole on every read.
type repeatReader struct{ data []byte }

func (r *repeatReader) Read(p []byte) (int, error) { return copy(p, r.data), nil }

// TestPlainInline: the quote-free fast path splits every line exactly as
// the general splitter does, whitespace of every kind included.
func TestPlainInline(t *testing.T) {
	alphabet := []byte("ab \t\r\n\v\f\x01z")
	x := uint32(1)
	line := make([]byte, 0, 24)
	for range 20000 {
		line = line[:0]
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		n := int(x % 24)
		for range n {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			line = append(line, alphabet[x%uint32(len(alphabet))])
		}
		want, ok := appendQuotedInline(nil, line)
		if got := appendPlainInline(nil, line); !ok || string(got) != string(want) {
			t.Fatalf("%q: plain %q, general %q (%v)", line, got, want, ok)
		}
	}
}

// TestSplitArgs: config files, shebangs and library metadata are split as
// Redis's sdssplitargs splits them, the same code as inline requests.
func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"  \t\v\f ", nil, true},
		{"a bb  ccc", []string{"a", "bb", "ccc"}, true},
		{`x "a b\x41\n" 'it\'s'`, []string{"x", "a bA\n", "it's"}, true},
		{`a""b`, []string{"a"}, false},
		{`"" ''`, []string{"", ""}, true},
		{`"open`, nil, false},
		{`'open`, nil, false},
		{"before\x00after", []string{"before"}, true},
		{"a\vb", []string{"a\vb"}, true},
	} {
		got, ok := SplitArgs(tc.line)
		if ok != tc.ok || (ok && !slices.Equal(got, tc.want)) {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}
