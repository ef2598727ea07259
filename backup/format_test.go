package backup

import (
	"bytes"
	"errors"
	"io"
	"strings"
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

// TestParts: the parts of a backup of several groups come back as they
// were written, whatever their writes' sizes, and a body cut short is
// damaged.
func TestParts(t *testing.T) {
	var body bytes.Buffer
	want := map[uint32]string{0: "", 1: strings.Repeat("a", 70000), 2: "snapshot of group two"}
	for id := range uint32(3) {
		err := WritePart(&body, id, uint64(100+id), func(w io.Writer) error {
			s := want[id]
			for len(s) > 0 {
				n := min(len(s), 4096)
				if _, err := w.Write([]byte(s[:n])); err != nil {
					return err
				}
				s = s[n:]
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var seen []uint32
	err := ReadParts(bytes.NewReader(body.Bytes()), func(id uint32, index uint64, snap io.Reader) error {
		b, err := io.ReadAll(snap)
		if err != nil {
			return err
		}
		if index != uint64(100+id) || string(b) != want[id] {
			t.Errorf("part %d: index %d, %d bytes", id, index, len(b))
		}
		seen = append(seen, id)
		return nil
	})
	if err != nil || len(seen) != 3 {
		t.Fatalf("ReadParts: %v, parts %v", err, seen)
	}
	for _, cut := range []int{0, 5, 12, 20, body.Len() - 1} {
		err := ReadParts(bytes.NewReader(body.Bytes()[:cut]), func(uint32, uint64, io.Reader) error { return nil })
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("body cut at %d of %d: %v, want ErrCorrupt", cut, body.Len(), err)
		}
	}
}

// groupsBackup is a verified FlagGroups backup of the given groups, each
// part's snapshot its group's name repeated and its index 100 + id; it
// returns the header and the body.
func groupsBackup(t *testing.T, h Header, ids ...uint32) (Header, []byte) {
	t.Helper()
	h.Flags |= FlagGroups
	var body bytes.Buffer
	for _, id := range ids {
		err := WritePart(&body, id, uint64(100+id), func(w io.Writer) error {
			_, err := w.Write(bytes.Repeat([]byte("group"+itoa(id)), int(id)*1000))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	file := encodeFile(t, h, body.Bytes())
	got, off, n, err := Verify(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	return got, file[off : off+n]
}

func itoa(id uint32) string { return string(rune('0' + id)) }

// TestAssemble: the parts of several backups, each of some groups, make
// one backup of every group in order, which verifies and reads back part
// by part as written; its header is group 0's source's index, the
// earliest time, and unsynced if any source is.
func TestAssemble(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	hA, a := groupsBackup(t, Header{Mode: ModeCluster, Index: 100, Created: t0.Add(time.Second)}, 0)
	hB, b := groupsBackup(t, Header{Mode: ModeCluster, Flags: FlagUnsynced, Index: 101, Created: t0}, 1, 2)
	hC, c := groupsBackup(t, Header{Mode: ModeCluster, Index: 103, Created: t0.Add(2 * time.Second)}, 3)
	h := MergeHeaders([]Header{hA, hB, hC})
	if want := (Header{Mode: ModeCluster, Flags: FlagGroups | FlagUnsynced, Index: 100, Created: t0}); h != want {
		t.Fatalf("merged header %+v, want %+v", h, want)
	}
	var file bytes.Buffer
	as, err := NewAssembler(&file, h)
	if err != nil {
		t.Fatal(err)
	}
	for i, src := range []struct {
		h    Header
		body []byte
	}{{hA, a}, {hB, b}, {hC, c}} {
		if err := as.Add(src.h, bytes.NewReader(src.body)); err != nil {
			t.Fatalf("source %d: %v", i, err)
		}
	}
	if err := as.Close(); err != nil {
		t.Fatal(err)
	}
	got, off, n, err := Verify(bytes.NewReader(file.Bytes()), int64(file.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode != h.Mode || got.Flags != h.Flags || got.Index != h.Index || !got.Created.Equal(h.Created) {
		t.Fatalf("header read back %+v, want %+v", got, h)
	}
	var ids []uint32
	err = ReadParts(bytes.NewReader(file.Bytes()[off:off+n]), func(id uint32, index uint64, snap io.Reader) error {
		s, err := io.ReadAll(snap)
		if err != nil {
			return err
		}
		if index != uint64(100+id) || string(s) != strings.Repeat("group"+itoa(id), int(id)*1000) {
			t.Errorf("group %d: index %d, %d bytes", id, index, len(s))
		}
		ids = append(ids, id)
		return nil
	})
	if err != nil || len(ids) != 4 {
		t.Fatalf("parts %v, %v; want groups 0 to 3", ids, err)
	}
}

// TestAssembleRefuses: parts out of order, twice, missing, or from a
// backup of one group, and a backup of fewer than two groups, are refused.
func TestAssembleRefuses(t *testing.T) {
	h0, g0 := groupsBackup(t, Header{Mode: ModeCluster}, 0)
	h12, g12 := groupsBackup(t, Header{Mode: ModeCluster}, 1, 2)
	h2, g2 := groupsBackup(t, Header{Mode: ModeCluster}, 2)
	single := Header{Mode: ModeCluster}
	type src struct {
		h    Header
		body []byte
	}
	for _, c := range []struct {
		name string
		srcs []src
	}{
		{"group 0 missing", []src{{h12, g12}}},
		{"out of order", []src{{h0, g0}, {h2, g2}, {h12, g12}}},
		{"group 2 twice", []src{{h0, g0}, {h12, g12}, {h2, g2}}},
		{"one group's backup", []src{{h0, g0}, {single, []byte("snapshot")}}},
		{"an empty body", []src{{h0, g0}, {h12, nil}}},
	} {
		as, err := NewAssembler(io.Discard, MergeHeaders([]Header{c.srcs[0].h}))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range c.srcs {
			if err = as.Add(s.h, bytes.NewReader(s.body)); err != nil {
				break
			}
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
	// A gap is a group removed from the cluster.
	gap, _ := NewAssembler(io.Discard, MergeHeaders([]Header{h0}))
	if err := gap.Add(h0, bytes.NewReader(g0)); err != nil {
		t.Fatal(err)
	}
	if err := gap.Add(h2, bytes.NewReader(g2)); err != nil {
		t.Fatalf("groups 0 and 2: %v", err)
	}
	if err := gap.Close(); err != nil {
		t.Fatalf("groups 0 and 2: %v", err)
	}
	as, _ := NewAssembler(io.Discard, MergeHeaders([]Header{h0}))
	if err := as.Add(h0, bytes.NewReader(g0)); err != nil {
		t.Fatal(err)
	}
	if err := as.Close(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Close after one group: %v, want ErrCorrupt", err)
	}
}
