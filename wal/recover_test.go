package wal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// writeLog appends n records to a fresh log on fs and closes it.
func writeLog(t *testing.T, fs *MemFS, n int, segSize int64) {
	t.Helper()
	m := &model{}
	opts := memOptions(t, fs, m)
	opts.SegmentSize = segSize
	l := mustOpen(t, opts)
	appendN(t, l, 1, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// reopen opens the log on fs with a fresh model and returns both.
func reopen(t *testing.T, fs FS, repair bool) (*Log, *model, error) {
	m := &model{}
	opts := memOptions(t, fs, m)
	opts.Repair = repair
	l, err := Open(opts)
	return l, m, err
}

func TestTornTailEveryOffset(t *testing.T) {
	const n = 5
	base := NewMemFS()
	writeLog(t, base, n, 0)
	full, err := base.ReadFile(segPath(1))
	if err != nil {
		t.Fatal(err)
	}
	lastLen := headerSize + len(rec(n))
	lastStart := len(full) - lastLen
	for cut := lastStart; cut < len(full); cut++ {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			fs := NewMemFS()
			fs.MkdirAll(testDir)
			fs.WriteFile(segPath(1), full[:cut])
			l, m, err := reopen(t, fs, false)
			if err != nil {
				t.Fatal(err)
			}
			wantRecords(t, m, n-1)
			if got, _ := fs.ReadFile(segPath(1)); len(got) != lastStart {
				t.Fatalf("segment is %d bytes after recovery, want %d", len(got), lastStart)
			}
			// The log must be appendable where the torn record was.
			appendN(t, l, n, 1)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			fs.ResetToSyncedState()
			l, m, err = reopen(t, fs, false)
			if err != nil {
				t.Fatal(err)
			}
			wantRecords(t, m, n)
			l.Close()
		})
	}
}

// TestTornTailGarbage: a tail of bytes that never formed a record (a crash
// mid-write can leave anything) is cut, whatever it contains.
func TestTornTailGarbage(t *testing.T) {
	for name, tail := range map[string][]byte{
		"zeros":       make([]byte, 4096),
		"ones":        bytes.Repeat([]byte{0xff}, 100),
		"bad crc":     encode(4, []byte("never acknowledged"))[1:],
		"wrong index": append(encode(9, []byte("x"))[:headerSize-1], 0),
	} {
		t.Run(name, func(t *testing.T) {
			fs := NewMemFS()
			writeLog(t, fs, 3, 0)
			data, _ := fs.ReadFile(segPath(1))
			fs.WriteFile(segPath(1), append(data, tail...))
			l, m, err := reopen(t, fs, false)
			if err != nil {
				t.Fatal(err)
			}
			wantRecords(t, m, 3)
			appendN(t, l, 4, 1)
			l.Close()
		})
	}
}

// TestTornPageBeforeValidRecords: a crash can persist a later page of an
// unsynced write but not an earlier one; the zeroed sector marks it torn.
func TestTornPageBeforeValidRecords(t *testing.T) {
	fs := NewMemFS()
	writeLog(t, fs, 2, 0)
	data, _ := fs.ReadFile(segPath(1))
	good := len(data)
	data = append(data, make([]byte, 2*sectorSize)...) // record 3, never written
	data = append(data, encode(4, []byte("four"))...)
	fs.WriteFile(segPath(1), data)
	l, m, err := reopen(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	wantRecords(t, m, 2)
	if got, _ := fs.ReadFile(segPath(1)); len(got) != good {
		t.Fatalf("segment is %d bytes, want %d", len(got), good)
	}
	l.Close()
}

func flipByte(t *testing.T, fs *MemFS, name string, off int) {
	t.Helper()
	data, err := fs.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x10
	fs.WriteFile(name, data)
}

func recordOffset(i int) int {
	off := 0
	for j := 1; j < i; j++ {
		off += headerSize + len(rec(j))
	}
	return off
}

func TestCorruptOlderRecord(t *testing.T) {
	const n = 5
	fs := NewMemFS()
	writeLog(t, fs, n, 0)
	off := recordOffset(2)
	flipByte(t, fs, segPath(1), off+headerSize+3) // in record 2's payload

	_, _, err := reopen(t, fs, false)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
	if want := fmt.Sprintf("%s at offset %d", segPath(1), off); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
	t.Log(err)

	l, m, err := reopen(t, fs, true)
	if err != nil {
		t.Fatalf("Open with Repair: %v", err)
	}
	wantRecords(t, m, 1)
	cut, err := fs.ReadFile(segPath(1) + brokenExt)
	if err != nil {
		t.Fatalf("no copy of the cut bytes: %v", err)
	}
	if whole := recordOffset(n + 1); len(cut) != whole-off {
		t.Fatalf("kept %d cut bytes, want %d", len(cut), whole-off)
	}
	appendN(t, l, 2, 1)
	l.Close()
	l, m, err = reopen(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	wantRecords(t, m, 2)
	l.Close()
}

func TestCorruptNonFinalSegment(t *testing.T) {
	fs := NewMemFS()
	writeLog(t, fs, 30, 100) // about 4 records a segment
	c, _ := listDir(fs, testDir)
	if len(c.segments) < 3 {
		t.Fatalf("want at least 3 segments, have %v", c.segments)
	}
	// Cut the last record of the first segment short: a torn tail, but
	// not in the newest segment, so it is corruption.
	first := segPath(c.segments[0])
	data, _ := fs.ReadFile(first)
	fs.WriteFile(first, data[:len(data)-1])
	_, _, err := reopen(t, fs, false)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), first) {
		t.Fatalf("Open = %v, want ErrCorrupt naming %s", err, first)
	}

	l, m, err := reopen(t, fs, true)
	if err != nil {
		t.Fatal(err)
	}
	kept := int(c.segments[1]) - 2
	wantRecords(t, m, kept)
	for _, s := range c.segments[1:] {
		if _, err := fs.ReadFile(segPath(s) + brokenExt); err != nil {
			t.Errorf("later segment %d not kept: %v", s, err)
		}
	}
	appendN(t, l, kept+1, 10)
	l.Close()
	l, m, err = reopen(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	wantRecords(t, m, kept+10)
	l.Close()
}

func TestMissingSegmentIsCorruption(t *testing.T) {
	fs := NewMemFS()
	writeLog(t, fs, 30, 100)
	c, _ := listDir(fs, testDir)
	fs.Remove(segPath(c.segments[1]))
	fs.SyncDir(testDir)
	if _, _, err := reopen(t, fs, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
}

func TestEmptyAndMissing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(fs *MemFS)
		want  int
	}{
		{"missing dir", func(fs *MemFS) {}, 0},
		{"empty dir", func(fs *MemFS) { fs.MkdirAll(testDir) }, 0},
		{"empty segment", func(fs *MemFS) {
			fs.MkdirAll(testDir)
			fs.WriteFile(segPath(1), nil)
		}, 0},
		{"empty newest segment", func(fs *MemFS) {
			writeLog(t, fs, 3, 0)
			fs.WriteFile(segPath(4), nil)
		}, 3},
		{"unrelated files", func(fs *MemFS) {
			fs.MkdirAll(testDir)
			fs.WriteFile(filepath.Join(testDir, "README"), []byte("hi"))
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewMemFS()
			tc.setup(fs)
			l, m, err := reopen(t, fs, false)
			if err != nil {
				t.Fatal(err)
			}
			wantRecords(t, m, tc.want)
			appendN(t, l, tc.want+1, 2)
			l.Close()
			l, m, err = reopen(t, fs, false)
			if err != nil {
				t.Fatal(err)
			}
			wantRecords(t, m, tc.want+2)
			l.Close()
		})
	}
}

func TestSegmentRollover(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	opts.SegmentSize = 256
	l := mustOpen(t, opts)
	appendN(t, l, 1, 200)
	if s := l.Stats(); s.Segments < 10 {
		t.Fatalf("only %d segments", s.Segments)
	}
	l.Close()
	// Only what was fsynced, including every new segment's directory entry,
	// may be relied on.
	fs.ResetToSyncedState()
	c, _ := listDir(fs, testDir)
	for i, s := range c.segments {
		data, _ := fs.ReadFile(segPath(s))
		if i < len(c.segments)-1 && len(data) < 256 {
			t.Errorf("segment %d closed at %d bytes", s, len(data))
		}
	}
	l, m, err := reopen(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	wantRecords(t, m, 200)
	l.Close()
}

// FuzzRecover opens a log whose only segment holds arbitrary bytes. Open may
// fail, but must not panic, and whatever it keeps must be appendable.
func FuzzRecover(f *testing.F) {
	var seg []byte
	for i := 1; i <= 3; i++ {
		seg = append(seg, encode(uint64(i), rec(i))...)
	}
	f.Add(seg, false)
	f.Add(seg[:len(seg)-3], false)
	f.Add(append(bytes.Clone(seg), 0, 0, 0), true)
	bad := bytes.Clone(seg)
	bad[20] ^= 1
	f.Add(bad, false)
	f.Add(bad, true)
	f.Add([]byte{}, false)
	f.Add(make([]byte, 1000), false)
	f.Fuzz(func(t *testing.T, data []byte, repair bool) {
		fs := NewMemFS()
		fs.MkdirAll(testDir)
		fs.WriteFile(segPath(1), data)
		m := &model{}
		// Logging every repair would slow the fuzzer down tenfold.
		quiet := slog.New(slog.DiscardHandler)
		opts := Options{Dir: testDir, FS: fs, Apply: m.apply, Repair: repair, RepairAllowEmpty: repair, Logger: quiet}
		l, err := Open(opts)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open failed without ErrCorrupt: %v", err)
			}
			return
		}
		m.check(t)
		kept := m.last()
		if _, err := l.Append([]byte("after")); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		m2 := &model{}
		opts.Apply = m2.apply
		l, err = Open(opts)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		m2.check(t)
		if m2.last() != kept+1 {
			t.Fatalf("reopen has %d records, want %d", m2.last(), kept+1)
		}
		l.Close()
	})
}
