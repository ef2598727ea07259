package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kvs/backup"
	"kvs/fsm"
	"kvs/wal"
)

// writeBackupFile writes a backup of a store holding n keys.
func writeBackupFile(t *testing.T, n int) string {
	t.Helper()
	st := fsm.NewStore()
	var cmds []fsm.Command
	for i := range n {
		cmds = append(cmds, fsm.Command{Op: fsm.OpSet, Args: [][]byte{[]byte("k" + itoa(i)), []byte("v" + itoa(i))}})
	}
	st.Apply(7, time.Now().UnixMilli(), cmds)
	snap := st.Snapshot()
	defer snap.Release()
	var buf bytes.Buffer
	w, err := backup.NewWriter(&buf, backup.Header{Mode: backup.ModeDurable, Index: snap.Index(), Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snap.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.kvsb")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestRestoreDurable: a restored data dir opens as a log holding the
// backup's keys, at the backup's index.
func TestRestoreDurable(t *testing.T) {
	file := writeBackupFile(t, 100)
	dir := filepath.Join(t.TempDir(), "data")
	var out, errOut bytes.Buffer
	if code := run([]string{"restore", file, "--data-dir", dir}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "restored 100 keys") {
		t.Errorf("output %q", out.String())
	}
	st := fsm.NewStore()
	l, err := wal.Open(wal.Options{
		Dir:     dir,
		Apply:   func(uint64, []byte) any { return nil },
		Restore: func(r io.Reader) error { _, err := st.Restore(r); return err },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if k := st.Stats(time.Now().UnixMilli()).Keys; k != 100 {
		t.Errorf("%d keys after restore, want 100", k)
	}
	if got := l.Stats().SnapshotIndex; got != 7 {
		t.Errorf("snapshot index %d, want 7", got)
	}
	// A second restore into the same dir is refused.
	errOut.Reset()
	if code := run([]string{"restore", file, "--data-dir", dir}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "not empty") {
		t.Errorf("restore into a dir with data: exit %d, %q", code, errOut.String())
	}
}

func TestRestoreFlags(t *testing.T) {
	file := writeBackupFile(t, 1)
	for _, args := range [][]string{
		{"restore", file},
		{"restore", "--data-dir", "x"},
		{"restore", file, "--data-dir", "x", "--node-id", "n1"},
		{"restore", file, "--data-dir", "x", "--raft-addr", "127.0.0.1:1"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
}

// TestRestoreCorruptBody: a backup whose checksum matches but whose
// snapshot does not decode is refused too, and nothing is written.
func TestRestoreCorruptBody(t *testing.T) {
	var buf bytes.Buffer
	w, _ := backup.NewWriter(&buf, backup.Header{Mode: backup.ModeMemory})
	w.Write([]byte("not a snapshot"))
	w.Close()
	file := filepath.Join(t.TempDir(), "b.kvsb")
	os.WriteFile(file, buf.Bytes(), 0o644)
	dir := filepath.Join(t.TempDir(), "data")
	var out, errOut bytes.Buffer
	if code := run([]string{"restore", file, "--data-dir", dir}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "does not decode") {
		t.Errorf("exit %d, %q", code, errOut.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s exists after a refused restore", dir)
	}
}
