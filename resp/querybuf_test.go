package resp

import (
	"strings"
	"testing"
)

// feedReader hands out what the test appends to it, then ErrAgain, as a
// non-blocking socket does.
type feedReader struct{ data []byte }

func (f *feedReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, ErrAgain
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestQueryBuf: a batch counts as buffered while it runs (Redis's qbuf
// holds the command that asks CLIENT LIST), the room after it is the
// rest of the buffer, and Resize gives room back as Redis's cron does.
func TestQueryBuf(t *testing.T) {
	f := &feedReader{}
	rr := NewReader(f, func() int64 { return 1 << 30 })
	get := func() int {
		cmds, _, err := rr.ReadReady()
		if err != nil {
			t.Fatal(err)
		}
		return len(cmds)
	}
	list := "*2\r\n$6\r\nclient\r\n$4\r\nlist\r\n"
	f.data = []byte(list + "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n") // and half a request
	if n := get(); n != 2 {
		t.Fatalf("%d requests", n)
	}
	if used, free := rr.QueryBuf(true); used != len(list)+14+13 || used+free != ReadChunk {
		t.Errorf("running: qbuf %d qbuf-free %d", used, free)
	}
	if used, free := rr.QueryBuf(false); used != 13 || free != ReadChunk-13 {
		t.Errorf("after the batch: qbuf %d qbuf-free %d", used, free)
	}
	rr.Resize(false) // a 16 KB buffer is under the threshold
	if used, free := rr.QueryBuf(false); used+free != ReadChunk {
		t.Errorf("busy 16 KB buffer resized to %d", used+free)
	}
	rr.Resize(true)
	if used, free := rr.QueryBuf(false); used != 13 || free != 0 {
		t.Errorf("idle: qbuf %d qbuf-free %d, want 13 and 0", used, free)
	}
	f.data = []byte("$1\r\nk\r\n")
	if n := get(); n != 1 {
		t.Fatalf("%d requests after an idle resize", n)
	}
	rr.Resize(true)
	if used, free := rr.QueryBuf(false); used != 0 || free != 0 {
		t.Errorf("idle and empty: qbuf %d qbuf-free %d", used, free)
	}

	// A large request grows the buffer; small ones after it let a busy
	// Resize shrink it to the most buffered since the last Resize.
	big := "*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$400000\r\n" + strings.Repeat("A", 400000) + "\r\n"
	f.data = []byte(big)
	n := 0
	for n == 0 {
		n = get()
	}
	grown := len(rr.buf)
	if grown < 400000 {
		t.Fatalf("buffer of %d bytes for a 400 KB request", grown)
	}
	rr.Resize(false) // the peak is the large request: nothing to give back
	if len(rr.buf) != grown {
		t.Fatalf("resized to %d with the large request as the peak", len(rr.buf))
	}
	small := "*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$100\r\n" + strings.Repeat("A", 100) + "\r\n"
	f.data = []byte(small)
	if n := get(); n != 1 {
		t.Fatal("the small request")
	}
	rr.Resize(false)
	if used, free := rr.QueryBuf(false); used+free != len(small) {
		t.Errorf("busy resize after small requests: %d bytes, want %d", used+free, len(small))
	}
	f.data = []byte(small)
	if n := get(); n != 1 {
		t.Fatal("a request after the busy resize")
	}
	if len(rr.buf) != ReadChunk {
		t.Errorf("a read after a cut grows the buffer to %d, want %d", len(rr.buf), ReadChunk)
	}
}
