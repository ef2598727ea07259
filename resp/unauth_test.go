package resp

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestUnauthenticatedLimits: while the client must authenticate, a
// request of more than 10 arguments or with a bulk over 16 KiB is refused
// at its header with Redis's texts; Redis's own limits are checked first;
// inline requests keep only their line limit; without the hook, or once
// it says no, nothing changes.
func TestUnauthenticatedLimits(t *testing.T) {
	bulk := bulkRequest
	args := func(n int) string {
		return "*" + strconv.Itoa(n) + "\r\n" + strings.Repeat("$1\r\nx\r\n", n)
	}
	cases := []struct {
		name, in string
		unauth   bool
		cmds     int
		err      string // "" means the stream ends with io.EOF
	}{
		{"10 arguments", args(10), true, 1, ""},
		{"11 arguments", args(11), true, 0, MsgUnauthMultiBulkLength},
		{"11 arguments, only the header", "*11\r\n", true, 0, MsgUnauthMultiBulkLength},
		{"11 arguments, authenticated", args(11), false, 1, ""},
		{"count past INT_MAX", "*3000000000\r\n", true, 0, MsgInvalidMultiBulkLength},
		{"count not a number", "*1x\r\n", true, 0, MsgInvalidMultiBulkLength},
		{"empty requests", "*0\r\n*-1\r\n", true, 0, ""},
		{"16 KiB bulk", bulk(16 << 10), true, 1, ""},
		{"16 KiB + 1 bulk", bulk(16<<10 + 1), true, 0, MsgUnauthBulkLength},
		{"bulk header and part of its payload", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$900000\r\n" + strings.Repeat("x", 200<<10), true, 0, MsgUnauthBulkLength},
		{"16 KiB + 1 bulk, authenticated", bulk(16<<10 + 1), false, 1, ""},
		{"bulk past proto-max-bulk-len", "*1\r\n$1048577\r\n", true, 0, MsgInvalidBulkLength},
		{"negative bulk", "*1\r\n$-1\r\n", true, 0, MsgInvalidBulkLength},
		{"inline of 11 arguments", "a b c d e f g h i j k\r\n", true, 1, ""},
		{"inline of 60 KiB", "ECHO " + strings.Repeat("x", 60<<10) + "\r\n", true, 1, ""},
		{"inline past 64 KiB", strings.Repeat("x", maxInlineLen+1), true, 0, MsgInlineTooBig},
		{"requests before the refused one", args(2) + args(3) + args(11), true, 2, MsgUnauthMultiBulkLength},
	}
	for _, tc := range cases {
		for _, sizes := range [][]int{nil, {1}, {4096}} {
			rr := NewReader(&chunkReader{data: []byte(tc.in), sizes: sizes}, func() int64 { return 1 << 20 })
			rr.SetAuthRequired(func() bool { return tc.unauth })
			held := 0
			rr.SetBufferAccount(func(d int) { held += d })
			n, err := 0, error(nil)
			for err == nil {
				var cmds [][][]byte
				cmds, err = rr.ReadCommands()
				n += len(cmds)
			}
			if n != tc.cmds {
				t.Errorf("%s %v: %d requests, want %d", tc.name, sizes, n, tc.cmds)
			}
			var pe *ProtocolError
			switch {
			case tc.err == "" && err != io.EOF:
				t.Errorf("%s %v: error %v", tc.name, sizes, err)
			case tc.err != "" && (!errors.As(err, &pe) || pe.Text != tc.err):
				t.Errorf("%s %v: error %v, want %q", tc.name, sizes, err, tc.err)
			}
			if tc.unauth && tc.err == MsgUnauthBulkLength && held > 2*ReadChunk {
				t.Errorf("%s %v: held %d bytes for a refused request", tc.name, sizes, held)
			}
		}
	}
}

// TestAuthInPipeline: a request over the unauthenticated limits pipelined
// after an AUTH is judged once the AUTH has run, as Redis judges it: the
// parse stops before it, and the next one asks again. After a failed AUTH
// it is refused.
func TestAuthInPipeline(t *testing.T) {
	big := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20000\r\n" + strings.Repeat("v", 20000) + "\r\n"
	for _, ok := range []bool{true, false} {
		in := "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n" + big + "*1\r\n$4\r\nPING\r\n"
		rr := NewReader(&chunkReader{data: []byte(in)}, func() int64 { return 1 << 20 })
		authed := false
		asked := 0
		rr.SetAuthRequired(func() bool { asked++; return !authed })
		var got []string
		var err error
		for err == nil {
			var cmds [][][]byte
			cmds, err = rr.ReadCommands()
			for _, args := range cmds {
				got = append(got, string(args[0]))
				if string(args[0]) == "AUTH" && ok {
					authed = true // the command runs before the next parse
				}
			}
		}
		want, wantErr := "AUTH SET PING", error(io.EOF)
		if !ok {
			want, wantErr = "AUTH", &ProtocolError{MsgUnauthBulkLength}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("AUTH ok=%v: requests %q, want %q", ok, got, want)
		}
		var pe *ProtocolError
		if wantErr == io.EOF && err != io.EOF || wantErr != io.EOF && (!errors.As(err, &pe) || pe.Text != MsgUnauthBulkLength) {
			t.Errorf("AUTH ok=%v: error %v, want %v", ok, err, wantErr)
		}
		if asked == 0 {
			t.Errorf("AUTH ok=%v: the hook was never asked", ok)
		}
	}
}

// TestBufferAccount: the deltas a Reader reports sum to the buffer and
// argument lists it holds as it grows for a large request, drops it when
// idle, and releases it.
func TestBufferAccount(t *testing.T) {
	in := bulkRequest(3<<20) + "*1\r\n$4\r\nPING\r\n"
	rr := NewReader(&chunkReader{data: []byte(in), sizes: []int{64 << 10}}, func() int64 { return 8 << 20 })
	held, peak := 0, 0
	rr.SetBufferAccount(func(d int) {
		held += d
		peak = max(peak, held)
	})
	for {
		_, err := rr.ReadCommands()
		if want := len(rr.buf) + slotBytes(rr); held != want {
			t.Fatalf("account says %d bytes, the reader holds %d", held, want)
		}
		if err != nil {
			break
		}
	}
	if peak < 3<<20 {
		t.Errorf("peak %d: the 3 MiB request was not counted", peak)
	}
	before := len(rr.buf)
	if n := rr.Release(); n != before || held != 0 {
		t.Errorf("Release returned %d of %d bytes; the account holds %d after it", n, before, held)
	}
}

// slotBytes is the size of rr's argument lists.
func slotBytes(rr *Reader) int { return (cap(rr.args) + cap(rr.cmds)) * sliceHeader }

// TestManyArgumentsLetGo: the argument list a request of 100,000
// arguments needed is counted while it is held and let go at the next
// read, and no argument slot kept for reuse points into a read buffer the
// reader has let go, which would keep that buffer reachable.
func TestManyArgumentsLetGo(t *testing.T) {
	var big strings.Builder
	big.WriteString("*100001\r\n$4\r\nSADD\r\n")
	for i := range 100000 {
		s := strconv.Itoa(i)
		big.WriteString("$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n")
	}
	// After it, a large value of few arguments, whose buffer is let go
	// at the next read while the slot that held it is not overwritten.
	in := big.String() + "*1\r\n$4\r\nPING\r\n" + "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2097152\r\n" + strings.Repeat("v", 2<<20) + "\r\n" + "*1\r\n$4\r\nPING\r\n"
	rr := NewReader(&chunkReader{data: []byte(in), sizes: []int{64 << 10}}, func() int64 { return 8 << 20 })
	held, peak := 0, 0
	rr.SetBufferAccount(func(d int) {
		held += d
		peak = max(peak, held)
	})
	var seen []int
	for {
		cmds, err := rr.ReadCommands()
		if want := len(rr.buf) + slotBytes(rr); held != want {
			t.Fatalf("account says %d bytes, the reader holds %d", held, want)
		}
		for _, a := range rr.args[:cap(rr.args)] {
			if len(a) > 0 && !inside(a, rr.buf) && !inside(a, rr.inline) {
				t.Fatalf("an argument slot points outside the read buffer")
			}
		}
		if err != nil {
			break
		}
		for _, c := range cmds {
			seen = append(seen, len(c))
		}
	}
	if fmt.Sprint(seen) != "[100001 1 3 1]" {
		t.Fatalf("requests of %v arguments, want [100001 1 3 1]", seen)
	}
	if peak < 100001*sliceHeader {
		t.Errorf("peak %d: the argument list was not counted", peak)
	}
	if cap(rr.args) > maxReusedArgs {
		t.Errorf("%d argument slots kept after a small request", cap(rr.args))
	}
}

// inside reports whether a lies within b's backing array.
func inside(a, b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b[:1])))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	return p >= lo && p < lo+uintptr(cap(b))
}

// bulkRequest is ECHO of an n-byte argument.
func bulkRequest(n int) string {
	return "*2\r\n$4\r\nECHO\r\n$" + strconv.Itoa(n) + "\r\n" + strings.Repeat("x", n) + "\r\n"
}
