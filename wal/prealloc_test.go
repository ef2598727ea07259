package wal

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// logCapture collects a log's output at every level.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// reopenCapture is reopen with the log's output captured.
func reopenCapture(t *testing.T, fs FS) (*Log, *model, *logCapture) {
	t.Helper()
	m := &model{}
	c := &logCapture{}
	opts := memOptions(t, fs, m)
	opts.Logger = c.logger()
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v\n%s", err, c)
	}
	return l, m, c
}

// recordsEnd returns where the records in data end, failing the test if
// anything but whole records lies there.
func recordsEnd(t *testing.T, name string, data []byte) int {
	t.Helper()
	off := 0
	for off < len(data) {
		_, _, n, err := decodeRecord(data[off:])
		if err != nil {
			t.Fatalf("%s at offset %d of %d: %v", name, off, len(data), err)
		}
		off += n
	}
	return off
}

// TestZeroTailRecovery: a crash leaves the newest segment with zeros after
// its last record (preallocated, never written). Recovery cuts them without
// a warning, and the log appends and recovers again.
func TestZeroTailRecovery(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	l := mustOpen(t, memOptions(t, fs, m))
	appendN(t, l, 1, 5)
	crashed := fs.CrashClone() // power cut with the log open: the tail is there
	l.Close()

	data, _ := crashed.ReadFile(segPath(1))
	end := recordsEnd(t, "records", data[:recordOffset(6)])
	if len(data) <= end || !allZero(data[end:]) {
		t.Fatalf("segment is %d bytes with records to %d; want a zero tail after them", len(data), end)
	}

	l, m, logs := reopenCapture(t, crashed)
	wantRecords(t, m, 5)
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("warning for a preallocated tail:\n%s", logs)
	}
	if got, _ := crashed.ReadFile(segPath(1)); len(got) != end {
		t.Fatalf("segment is %d bytes after recovery, want %d", len(got), end)
	}
	appendN(t, l, 6, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	crashed.ResetToSyncedState()
	l, m, logs = reopenCapture(t, crashed)
	defer l.Close()
	wantRecords(t, m, 8)
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("warning after a clean close:\n%s", logs)
	}
}

// TestTornRecordBeforeZeros: a partly written record followed by zeros is
// a torn write, not preallocated space, and is reported as one.
func TestTornRecordBeforeZeros(t *testing.T) {
	fs := NewMemFS()
	writeLog(t, fs, 3, 0)
	data, _ := fs.ReadFile(segPath(1))
	good := len(data)
	data = append(data, encode(4, []byte("never acknowledged"))[:headerSize+4]...)
	data = append(data, make([]byte, 4096)...)
	fs.WriteFile(segPath(1), data)
	l, m, logs := reopenCapture(t, fs)
	defer l.Close()
	wantRecords(t, m, 3)
	if !strings.Contains(logs.String(), "truncated torn tail") {
		t.Fatalf("no torn-tail warning:\n%s", logs)
	}
	if got, _ := fs.ReadFile(segPath(1)); len(got) != good {
		t.Fatalf("segment is %d bytes, want %d", len(got), good)
	}
	appendN(t, l, 4, 1)
}

// TestRotationTrimsPrealloc: every segment but the active one ends at its
// last record, in the live files and in what a power cut would leave, while
// the active one carries preallocated zeros; Close trims that one too.
func TestRotationTrimsPrealloc(t *testing.T) {
	fs := NewMemFS()
	m := &model{}
	opts := memOptions(t, fs, m)
	opts.SegmentSize = 300
	opts.prealloc = 64
	l := mustOpen(t, opts)
	appendN(t, l, 1, 100)

	check := func(fs *MemFS, what string, activeTail bool) {
		t.Helper()
		names, err := fs.ReadDir(testDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) < 5 {
			t.Fatalf("%s: only %d segments", what, len(names))
		}
		for i, name := range names {
			data, _ := fs.ReadFile(testDir + "/" + name)
			if i < len(names)-1 {
				recordsEnd(t, what+" "+name, data)
				continue
			}
			end := recordsEnd(t, what+" "+name, data[:len(bytes.TrimRight(data, "\x00"))])
			if activeTail && end == len(data) {
				t.Fatalf("%s: active segment %s has no preallocated tail", what, name)
			}
			if !activeTail && end != len(data) {
				t.Fatalf("%s: active segment %s is %d bytes, records end at %d", what, name, len(data), end)
			}
		}
	}
	check(fs, "open", true)
	check(fs.CrashClone(), "power cut", true)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check(fs, "closed", false)
	fs.ResetToSyncedState()
	check(fs, "closed, power cut", false)
}
