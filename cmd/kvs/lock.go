package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// lockName is the file in a data dir that a running kvs holds locked. It
// holds the holder's pid, for the message a second process prints. Neither
// the append log (which reads only its segment, snapshot and temporary
// names) nor cluster mode (whose state is under DIR/raft) looks at it.
const lockName = "LOCK"

// errDirInUse is the error of a kvs started on a data dir that another
// running process holds.
var errDirInUse = errors.New("in use by another kvs process")

// dirLock is a data dir held by this process: an exclusive flock(2) on
// DIR/LOCK, taken without waiting. The kernel drops the lock when the file
// is closed, which happens however the process ends (kill -9 included), so
// the lock never outlives its holder and a LOCK file left behind by a dead
// one is taken over at once. The lock is advisory: it keeps out other kvs
// processes, not other programs. On a network file system it holds only
// where that file system implements flock.
type dirLock struct {
	f *os.File // open for the life of the lock; closing it releases the lock
}

// lockDataDir creates dir (and its missing parents, durably) if need be,
// then takes its lock and writes this process's pid into the lock file. If
// another process holds the lock it returns at once with an error wrapping
// errDirInUse that names dir and, where it can be read, the holder's pid.
func lockDataDir(dir string) (*dirLock, error) {
	if err := mkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockName)
	// No O_TRUNC: until the lock is ours the file is the holder's.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := flockExclusive(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("data dir %s is %w (%s)", dir, errDirInUse, holder(path))
		}
		return nil, fmt.Errorf("data dir %s: locking %s: %w", dir, path, err)
	}
	// The pid is for people: a crash between the truncate and the write
	// leaves the file empty, which costs nothing but the pid in a message.
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	return &dirLock{f: f}, nil
}

// holder describes the process named in the lock file at path.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("pid unknown: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		// The holder has locked the file but not yet written its pid.
		return "pid not yet written"
	}
	return "pid " + strconv.Itoa(pid)
}

// release drops the lock. The pid stays in the file: the next holder
// overwrites it, and a stale pid in an unlocked file means nothing.
func (l *dirLock) release() error { return l.f.Close() }

// mkdirDurable creates dir and any missing parents, and fsyncs the parent
// of each one it created, top down, so that the directory a log is then
// written into survives a power cut. The log and the raft stores make their
// own directories the same way; the lock comes first, so it must not leave
// a directory whose name is not yet durable for them to find already there.
// The parent of dir is synced even when dir exists, as a run that created
// it may have crashed before syncing.
func mkdirDurable(dir string) error {
	dir = filepath.Clean(dir)
	var created []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created = append(created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(created) == 0 {
		created = []string{dir}
	}
	for i := len(created) - 1; i >= 0; i-- {
		if parent := filepath.Dir(created[i]); parent != created[i] {
			if err := syncDir(parent); err != nil {
				return err
			}
		}
	}
	return nil
}

// syncDir makes dir's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
