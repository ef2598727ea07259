package wal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// logBuffer collects log lines, for tests that check what recovery says.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *logBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *logBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// twoSnapshots writes records 1..30 with snapshots at 10 and 20, and
// returns the file system.
func twoSnapshots(t *testing.T) *MemFS {
	t.Helper()
	fs := NewMemFS()
	l := mustOpen(t, memOptions(t, fs, &model{}))
	appendN(t, l, 1, 10)
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 11, 10)
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 21, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestDamagedSnapshotFallsBack: compaction keeps the previous snapshot and
// the log after it, so a bit flipped anywhere in the newest snapshot
// (header, body, trailer) costs nothing, and recovery names the damage.
func TestDamagedSnapshotFallsBack(t *testing.T) {
	name := filepath.Join(testDir, snapshotName(20))
	good, err := twoSnapshots(t).ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		where string
		off   int
	}{
		{"magic", 2}, {"version", 8}, {"index", 16}, {"body", snapHeaderSize + 20},
		{"length", len(good) - snapTrailerSize}, {"checksum", len(good) - 2},
	} {
		t.Run(tc.where, func(t *testing.T) {
			fs := twoSnapshots(t)
			flipByte(t, fs, name, tc.off)
			var logs logBuffer
			m := &model{}
			opts := memOptions(t, fs, m)
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			l, err := Open(opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer l.Close()
			wantRecords(t, m, 30)
			out := logs.String()
			for _, want := range []string{"level=ERROR", name, "offset", "fell back", snapshotName(10)} {
				if !strings.Contains(out, want) {
					t.Errorf("recovery log does not say %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestDamagedSnapshotWithoutLog: a damaged only snapshot whose log was
// deleted (as kvs once compacted) is corruption naming the snapshot; a
// repair would leave nothing, so it is refused unless RepairAllowEmpty.
func TestDamagedSnapshotWithoutLog(t *testing.T) {
	fs := NewMemFS()
	l := mustOpen(t, memOptions(t, fs, &model{}))
	appendN(t, l, 1, 10)
	if err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 11, 5)
	l.Close()
	for _, s := range []uint64{1} { // the segment the snapshot covers, as an older kvs deleted it
		fs.Remove(segPath(s))
	}
	fs.SyncDir(testDir)
	name := filepath.Join(testDir, snapshotName(10))
	flipByte(t, fs, name, snapHeaderSize+3)

	_, _, err := reopen(t, fs, false)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Open = %v, want ErrCorrupt naming %s and its damage", err, name)
	}
	_, _, err = reopen(t, fs, true)
	if !errors.Is(err, ErrRepairEmpty) {
		t.Fatalf("Open with Repair = %v, want ErrRepairEmpty", err)
	}
	if c, _ := listDir(fs, testDir); len(c.segments) == 0 || len(c.snapshots) != 1 {
		t.Fatalf("a refused repair changed the directory: %+v", c)
	}
	m := &model{}
	opts := memOptions(t, fs, m)
	opts.Repair, opts.RepairAllowEmpty = true, true
	l, err = Open(opts)
	if err != nil {
		t.Fatalf("Open with RepairAllowEmpty: %v", err)
	}
	wantRecords(t, m, 0)
	appendN(t, l, 1, 1)
	l.Close()
	if _, err := fs.ReadFile(name + brokenExt); err != nil {
		t.Fatalf("the damaged snapshot was not kept aside: %v", err)
	}
	l, m, err = reopen(t, fs, false)
	if err != nil {
		t.Fatal(err)
	}
	wantRecords(t, m, 1)
	l.Close()
}

// TestFallbackLogTooShort: when the log after the older snapshot ends
// before the damaged newer one's index, the records between are named as
// lost, and only a repair goes on.
func TestFallbackLogTooShort(t *testing.T) {
	fs := twoSnapshots(t)
	c, _ := listDir(fs, testDir)
	for _, s := range c.segments {
		if s > 10 {
			fs.Remove(segPath(s))
		}
	}
	fs.SyncDir(testDir)
	flipByte(t, fs, filepath.Join(testDir, snapshotName(20)), snapHeaderSize+3)
	_, _, err := reopen(t, fs, false)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "11..20") {
		t.Fatalf("Open = %v, want ErrCorrupt naming records 11..20", err)
	}
	l, m, err := reopen(t, fs, true)
	if err != nil {
		t.Fatal(err)
	}
	wantRecords(t, m, 10)
	l.Close()
}

// TestRepairAnnouncesCut: before a repair cuts, it logs every record and
// key it will cut; what is lost is exactly that.
func TestRepairAnnouncesCut(t *testing.T) {
	fs := NewMemFS()
	writeLog(t, fs, 30, 100) // several segments
	c, _ := listDir(fs, testDir)
	damaged := c.segments[1]
	flipByte(t, fs, segPath(damaged), headerSize+2) // its first record's payload

	keys := func(rec []byte) ([]string, error) { return []string{"k" + string(rec)}, nil }
	for _, repair := range []bool{false, true} {
		var logs logBuffer
		m := &model{}
		opts := memOptions(t, fs, m)
		opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		opts.Repair, opts.RecordKeys = repair, keys
		l, err := Open(opts)
		out := logs.String()
		verb := "would cut"
		if repair {
			verb = "will cut"
			if err != nil {
				t.Fatal(err)
			}
			wantRecords(t, m, int(damaged)-1)
			l.Close()
		} else if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("%d..30", damaged)) {
			t.Fatalf("Open = %v, want ErrCorrupt saying what a repair would cut", err)
		}
		lost := 30 - int(damaged) + 1
		for _, want := range []string{
			"repair " + verb + " these records", fmt.Sprintf("records=%d", lost), "unreadable_records=1",
			fmt.Sprintf("first_index=%d", damaged), "last_index=30", fmt.Sprintf("keys_count=%d", lost-1),
			"krecord-30", segmentName(damaged),
		} {
			if !strings.Contains(out, want) {
				t.Errorf("repair=%v: the log does not say %q:\n%s", repair, want, out)
			}
		}
		if strings.Contains(out, fmt.Sprintf("krecord-%d ", damaged-1)) {
			t.Errorf("the announcement names a key of a record that is kept:\n%s", out)
		}
	}
}
