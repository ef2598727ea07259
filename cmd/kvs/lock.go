package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"kvs/wal"
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
	if err := wal.MkdirDurable(wal.OSFS{}, dir); err != nil {
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
