package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDataDirLock: a second lock on a held dir fails at once naming the
// holder's pid, and leaves the holder's pid in place; once released, the
// dir can be locked again.
func TestDataDirLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	first, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("locking a missing dir: %v", err)
	}
	pid := strconv.Itoa(os.Getpid())
	path := filepath.Join(dir, lockName)
	if b, err := os.ReadFile(path); err != nil || strings.TrimSpace(string(b)) != pid {
		t.Fatalf("lock file holds %q, %v; want pid %s", b, err, pid)
	}
	// flock locks belong to an open file description, so a second open in
	// this process conflicts as another process's would.
	for range 2 {
		_, err := lockDataDir(dir)
		if !errors.Is(err, errDirInUse) {
			t.Fatalf("second lock: %v, want errDirInUse", err)
		}
		if want := "data dir " + dir + " is in use by another kvs process (pid " + pid + ")"; err.Error() != want {
			t.Errorf("second lock: %q, want %q", err, want)
		}
	}
	if err := first.release(); err != nil {
		t.Fatal(err)
	}
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("locking after release: %v", err)
	}
	defer again.release()
	// A longer pid left by an earlier holder is overwritten, not appended to.
	if err := os.WriteFile(path, []byte("123456789012\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again.release()
	third, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer third.release()
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != pid {
		t.Errorf("lock file holds %q after a new holder took it, want %s", b, pid)
	}
}

func TestDataDirLockErrors(t *testing.T) {
	dir := t.TempDir()
	// The holder has locked the file but not yet written its pid.
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	if err := os.Truncate(filepath.Join(dir, lockName), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := lockDataDir(dir); !errors.Is(err, errDirInUse) || !strings.Contains(err.Error(), "pid not yet written") {
		t.Errorf("lock held with no pid written: %v", err)
	}
	// A data dir that is a file.
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := lockDataDir(file); err == nil || errors.Is(err, errDirInUse) {
		t.Errorf("locking a file as a data dir: %v", err)
	}
}
