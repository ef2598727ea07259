package backup

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func encodeFile(t testing.TB, h Header, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	// Two writes, as a stream arrives.
	if _, err := w.Write(body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(body[len(body)/2:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, body := range [][]byte{{}, []byte("x"), bytes.Repeat([]byte("snapshot"), 10000)} {
		h := Header{Mode: ModeCluster, Flags: FlagUnsynced, Index: 12345, Created: time.Unix(1700000000, 42)}
		file := encodeFile(t, h, body)
		if len(file) != HeaderSize+len(body)+TrailerSize {
			t.Fatalf("file of %d bytes for a body of %d", len(file), len(body))
		}
		got, off, n, err := Verify(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			t.Fatal(err)
		}
		if got.Mode != h.Mode || got.Flags != h.Flags || got.Index != h.Index || !got.Created.Equal(h.Created) {
			t.Fatalf("header %+v, want %+v", got, h)
		}
		if !bytes.Equal(file[off:off+n], body) {
			t.Fatal("body differs")
		}
	}
}

// TestEveryCorruptionDetected flips each byte and cuts the file at each
// length: every one must be refused with ErrCorrupt.
func TestEveryCorruptionDetected(t *testing.T) {
	body := bytes.Repeat([]byte{1, 2, 3, 250}, 40)
	file := encodeFile(t, Header{Mode: ModeDurable, Index: 7, Created: time.Unix(1, 0)}, body)
	for i := range file {
		bad := bytes.Clone(file)
		bad[i] ^= 0x10
		if _, _, _, err := Verify(bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: err %v, want ErrCorrupt", i, err)
		}
	}
	for n := 0; n < len(file); n++ {
		if _, _, _, err := Verify(bytes.NewReader(file[:n]), int64(n)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut to %d bytes: err %v, want ErrCorrupt", n, err)
		}
	}
	// A size that claims more than the reader holds is a truncation too.
	if _, _, _, err := Verify(bytes.NewReader(file), int64(len(file)+5)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short reader: err %v, want ErrCorrupt", err)
	}
	if _, _, _, err := Verify(bytes.NewReader(append(bytes.Clone(file), 0)), int64(len(file))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("long reader: err %v, want ErrCorrupt", err)
	}
}

func TestUnknownVersionNamed(t *testing.T) {
	file := encodeFile(t, Header{Mode: ModeMemory}, []byte("abc"))
	file[8] = 9
	_, _, _, err := Verify(bytes.NewReader(file), int64(len(file)))
	if !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("version 9")) {
		t.Fatalf("err %v, want one naming version 9", err)
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(encodeFile(f, Header{Mode: ModeMemory, Created: time.Unix(0, 0)}, []byte("body")))
	f.Add(encodeFile(f, Header{Mode: ModeCluster, Index: 1 << 40}, nil))
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, off, n, err := Verify(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if off != HeaderSize || off+n+TrailerSize != int64(len(b)) {
			t.Fatalf("body at %d+%d in a file of %d", off, n, len(b))
		}
		// What verified re-encodes to a file that verifies with the same header.
		again := encodeFile(t, h, b[off:off+n])
		h2, _, _, err := Verify(bytes.NewReader(again), int64(len(again)))
		if err != nil || h2.Mode != h.Mode || h2.Flags != h.Flags || h2.Index != h.Index || !h2.Created.Equal(h.Created) {
			t.Fatalf("re-encoded: %+v, %v; want %+v", h2, err, h)
		}
	})
}
