package resp

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestQueryLimit: a request that stays incomplete past the query buffer
// limit ends the stream with ErrQueryBufferLimit; requests completed
// within it, large ones included, are parsed.
func TestQueryLimit(t *testing.T) {
	const limit = 64 << 10
	for _, tc := range []struct {
		name string
		in   string
		cmds int
		err  error
	}{
		{"endless bulk", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$900000\r\n" + strings.Repeat("x", 200<<10), 0, ErrQueryBufferLimit},
		{"many arguments", "*100000\r\n" + strings.Repeat("$1\r\nx\r\n", 40<<10), 0, ErrQueryBufferLimit},
		{"within", "*2\r\n$4\r\nECHO\r\n$60000\r\n" + strings.Repeat("x", 60000) + "\r\n", 1, nil},
		{"complete ones before", strings.Repeat("*1\r\n$4\r\nPING\r\n", 30<<10), 30 << 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := NewReader(&chunkReader{data: []byte(tc.in), sizes: []int{4096}}, func() int64 { return 1 << 20 })
			rr.SetQueryLimit(func() int64 { return limit })
			n := 0
			var err error
			for err == nil {
				var cmds [][][]byte
				cmds, err = rr.ReadCommands()
				n += len(cmds)
			}
			if n != tc.cmds {
				t.Errorf("parsed %d requests, want %d", n, tc.cmds)
			}
			want := tc.err
			if want == nil {
				want = io.EOF
			}
			if !errors.Is(err, want) {
				t.Errorf("stream ended with %v, want %v", err, want)
			}
			if held := rr.end - rr.start; held > limit+ReadChunk {
				t.Errorf("held %d bytes unparsed, limit %d", held, limit)
			}
		})
	}
}
