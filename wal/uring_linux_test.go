package wal

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// requireRing returns the process's sync ring, or skips where this kernel
// does not let the process use io_uring (Sync then calls fdatasync itself,
// which every other test covers).
func requireRing(t *testing.T) *syncRing {
	t.Helper()
	r := ringForSync()
	if r == nil {
		_, err := newSyncRing()
		t.Skipf("io_uring is not usable here (%v); Sync calls fdatasync directly", err)
	}
	return r
}

func TestSyncRingFdatasync(t *testing.T) {
	r := requireRing(t)
	f, err := OSFS{}.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("durable"), 0); err != nil {
		t.Fatal(err)
	}
	before := r.completed.Load()
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := r.completed.Load(); got != before+1 {
		t.Fatalf("the ring completed %d fsyncs for one Sync, want 1", got-before)
	}
}

func TestFsyncMethod(t *testing.T) {
	requireRing(t)
	if got := fsyncMethod(); got != "io_uring" {
		t.Fatalf("fsyncMethod() = %q with a working ring", got)
	}
}

// An fdatasync the kernel refuses reports the same error through the ring
// as when called directly.
func TestSyncRingError(t *testing.T) {
	r := requireRing(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	want := syscall.Fdatasync(int(pw.Fd()))
	if want == nil {
		t.Fatal("fdatasync of a pipe succeeded; the test needs a file it refuses")
	}
	err, ok := r.fdatasync(pw.Fd())
	if !ok {
		t.Fatal("the ring did not take the request")
	}
	if !errors.Is(err, want) {
		t.Fatalf("ring fdatasync of a pipe: %v, want %v", err, want)
	}
	perr := osFile{pw}.Sync()
	var pe *os.PathError
	if !errors.As(perr, &pe) || pe.Op != "fdatasync" || !errors.Is(perr, want) {
		t.Fatalf("Sync of a pipe: %v, want a fdatasync PathError wrapping %v", perr, want)
	}
}

// More concurrent Syncs than the ring has room for: those that find it full
// call fdatasync themselves, and every one succeeds.
func TestSyncRingConcurrent(t *testing.T) {
	r := requireRing(t)
	dir := t.TempDir()
	var files []File
	for i := range 4 {
		f, err := OSFS{}.Create(filepath.Join(dir, string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	before := r.completed.Load()
	const goroutines, each = 2 * uringEntries, 10
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			f := files[g%len(files)]
			for i := range each {
				if _, err := f.WriteAt([]byte{byte(i)}, int64(g)); err != nil {
					errs <- err
					return
				}
				if err := f.Sync(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if r.completed.Load() == before {
		t.Fatal("no Sync went through the ring")
	}
}
