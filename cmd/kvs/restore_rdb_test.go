package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreRDB: an RDB file of Redis's own tests seeds a data dir that
// opens with its keys; the flags that do not go with --rdb are refused;
// a backup given as an RDB file is refused with nothing written.
func TestRestoreRDB(t *testing.T) {
	file, err := filepath.Abs("../../rdb/testdata/encodings.rdb")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "data")
	var out, errOut bytes.Buffer
	if code := run([]string{"restore", "--rdb", file, "--data-dir", dir}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "restored 13 keys in db 0 (0 with an expiry), 0 function libraries from ") ||
		!strings.Contains(out.String(), "(RDB version 4)") {
		t.Errorf("output %q", out.String())
	}
	for _, args := range [][]string{
		{"restore", "--rdb", file},
		{"restore", "--rdb", file, "other", "--data-dir", "x"},
		{"restore", file, "--data-dir", "x", "--skip-other-dbs"},
		{"restore", file, "--data-dir", "x", "--databases", "4"},
		{"restore", "--rdb", file, "--data-dir", "x", "--databases", "0"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
	backupFile := writeBackupFile(t, 3)
	bad := filepath.Join(t.TempDir(), "data")
	errOut.Reset()
	if code := run([]string{"restore", "--rdb", backupFile, "--data-dir", bad}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "rdb: at offset 0: not an RDB file") || !strings.Contains(errOut.String(), "nothing was written") {
		t.Errorf("a backup as an RDB file: exit %d, %s", code, errOut.String())
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("the data dir of a refused restore: %v", err)
	}
}
