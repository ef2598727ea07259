package powercut

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// mount mounts a fresh FS on a temporary directory, or skips t where FUSE
// cannot be mounted. It unmounts at the end of the test.
func mount(t *testing.T) (*FS, string) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("FUSE unavailable, power-cut file system not tested: %v", err)
	}
	dir := t.TempDir()
	f := New()
	if err := f.Mount(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f, dir
}

// reboot cuts the power and mounts again.
func reboot(t *testing.T, f *FS, dir string) {
	t.Helper()
	f.PowerCut()
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := f.Mount(dir); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// writeFile creates name with data, fsyncing the file if sync is set.
func writeFile(t *testing.T, name string, data []byte, sync bool) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func wantFile(t *testing.T, name string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s holds %d bytes %.40q, want %d bytes %.40q", name, len(got), got, len(want), want)
	}
}

func wantGone(t *testing.T, name string) {
	t.Helper()
	if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: want it gone after the power cut, stat says %v", name, err)
	}
}

func TestSyncedFileSurvives(t *testing.T) {
	f, dir := mount(t)
	name := filepath.Join(dir, "a")
	writeFile(t, name, []byte("durable"), true)
	syncDir(t, dir)
	reboot(t, f, dir)
	wantFile(t, name, []byte("durable"))
	if files, dirs := f.Syncs(); files != 1 || dirs != 1 {
		t.Errorf("served %d file and %d directory fsyncs, want 1 and 1", files, dirs)
	}
}

// The negative control: a writer that never fsyncs loses everything, so a
// test on this file system can fail.
func TestUnsyncedWritesLost(t *testing.T) {
	f, dir := mount(t)
	name := filepath.Join(dir, "a")
	writeFile(t, name, []byte("v1"), true)
	syncDir(t, dir)
	// Appended, overwritten and extended without an fsync: all undone.
	fh, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("X"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(bytes.Repeat([]byte("y"), 100000), 2); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	wantFile(t, name, append([]byte("X1"), bytes.Repeat([]byte("y"), 100000)...))
	// Never synced at all: neither data nor name.
	writeFile(t, filepath.Join(dir, "never"), []byte("lost"), false)
	reboot(t, f, dir)
	wantFile(t, name, []byte("v1"))
	wantGone(t, filepath.Join(dir, "never"))
}

func TestFdatasyncAndTruncate(t *testing.T) {
	f, dir := mount(t)
	name := filepath.Join(dir, "a")
	writeFile(t, name, bytes.Repeat([]byte("a"), 3*pageSize+5), true)
	syncDir(t, dir)
	fh, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	// fdatasync makes a truncation and a write durable, as fsync does.
	if err := fh.Truncate(pageSize + 1); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("b"), pageSize+3); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fdatasync(int(fh.Fd())); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Repeat([]byte("a"), pageSize+1), 0, 0, 'b')
	// A truncation not synced is undone.
	if err := fh.Truncate(10); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	reboot(t, f, dir)
	wantFile(t, name, want)
}

// A file fsynced under a name its directory never synced is lost with
// the name, in a subdirectory as well as at the root; so is a directory
// whose parent was not synced after mkdir.
func TestCreateNeedsDirSync(t *testing.T) {
	f, dir := mount(t)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, dir)
	writeFile(t, filepath.Join(dir, "a"), []byte("a"), true)
	writeFile(t, filepath.Join(sub, "b"), []byte("b"), true)
	writeFile(t, filepath.Join(sub, "c"), []byte("c"), true)
	syncDir(t, sub)
	if err := os.Mkdir(filepath.Join(dir, "sub2"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub2", "d"), []byte("d"), true)
	syncDir(t, filepath.Join(dir, "sub2"))
	writeFile(t, filepath.Join(sub, "e"), []byte("e"), true)
	reboot(t, f, dir)
	wantGone(t, filepath.Join(dir, "a"))
	wantFile(t, filepath.Join(sub, "b"), []byte("b"))
	wantFile(t, filepath.Join(sub, "c"), []byte("c"))
	wantGone(t, filepath.Join(sub, "e"))
	wantGone(t, filepath.Join(dir, "sub2"))
}

// The temp-file-and-rename pattern: the rename is durable only once the
// directory is synced; before that the old name (and old contents) come
// back. Removes likewise.
func TestRenameAndRemoveNeedDirSync(t *testing.T) {
	f, dir := mount(t)
	name, tmp := filepath.Join(dir, "snap"), filepath.Join(dir, "snap.tmp")
	gone := filepath.Join(dir, "gone")
	writeFile(t, name, []byte("old"), true)
	writeFile(t, gone, []byte("gone"), true)
	syncDir(t, dir)

	writeFile(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	wantFile(t, name, []byte("new"))
	reboot(t, f, dir)
	wantFile(t, name, []byte("old"))
	wantFile(t, gone, []byte("gone"))
	wantGone(t, tmp)

	writeFile(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	syncDir(t, dir)
	reboot(t, f, dir)
	wantFile(t, name, []byte("new"))
	wantGone(t, gone)
	wantGone(t, tmp)
	names, err := os.ReadDir(dir)
	if err != nil || len(names) != 1 {
		t.Fatalf("ReadDir after reboot: %v %v, want just snap", names, err)
	}
}

// While the power is off nothing answers, so a process still running
// cannot make anything durable afterwards.
func TestPowerOffFailsEverything(t *testing.T) {
	f, dir := mount(t)
	fh, err := os.Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	f.PowerCut()
	if _, err := fh.Write([]byte("x")); !errors.Is(err, syscall.EIO) {
		t.Errorf("write after power cut: %v, want EIO", err)
	}
	if err := fh.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("fsync after power cut: %v, want EIO", err)
	}
	fh.Close()
}

// bbolt reads its file through a shared read-only mmap while writing it
// with pwrite: the map must see the writes. The mapping is used from a
// child process: a page fault on a mount served by this very process can
// deadlock it (the faulting thread cannot be preempted, and a
// stop-the-world then waits for it while the goroutines that would answer
// the fault are stopped).
func TestMmapSeesWrites(t *testing.T) {
	if name := os.Getenv("POWERCUT_MMAP_FILE"); name != "" {
		mmapAndWrite(t, name)
		return
	}
	_, dir := mount(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMmapSeesWrites$", "-test.count=1")
	cmd.Env = append(os.Environ(), "POWERCUT_MMAP_FILE="+filepath.Join(dir, "db"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mmap in a child process: %v\n%s", err, out)
	}
}

// mmapAndWrite runs in the child process of TestMmapSeesWrites.
func mmapAndWrite(t *testing.T, name string) {
	fh, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := fh.Truncate(2 * pageSize); err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(fh.Fd()), 0, 2*pageSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	if m[pageSize+7] != 0 {
		t.Fatalf("fresh map byte = %d", m[pageSize+7])
	}
	if _, err := fh.WriteAt([]byte("hello"), pageSize+3); err != nil {
		t.Fatal(err)
	}
	if got := string(m[pageSize+3 : pageSize+8]); got != "hello" {
		t.Fatalf("map reads %q after pwrite, want hello", got)
	}
	if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock: %v", err)
	}
}

// Concurrent appenders with fsyncs in between, a power cut at the end:
// each writer's synced prefix survives.
func TestConcurrentWritersKeepSyncedPrefix(t *testing.T) {
	f, dir := mount(t)
	const writers, rounds = 8, 50
	synced := make([][]byte, writers)
	var wg sync.WaitGroup
	for w := range writers {
		name := filepath.Join(dir, string(rune('a'+w)))
		fh, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer fh.Close()
			var all []byte
			for i := range rounds {
				rec := bytes.Repeat([]byte{byte('0' + i%10)}, 1000+w*97+i)
				if _, err := fh.Write(rec); err != nil {
					t.Error(err)
					return
				}
				all = append(all, rec...)
				if i%3 == 0 {
					if err := fh.Sync(); err != nil {
						t.Error(err)
						return
					}
					synced[w] = slices.Clone(all)
				}
			}
		}()
	}
	wg.Wait()
	syncDir(t, dir)
	reboot(t, f, dir)
	for w := range writers {
		wantFile(t, filepath.Join(dir, string(rune('a'+w))), synced[w])
	}
}
