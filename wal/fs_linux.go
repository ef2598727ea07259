package wal

import (
	"os"
	"syscall"
)

// startWriteback asks the kernel to start writing [off, off+n) of the file
// to disk, first waiting for writeback of that range started earlier, which
// paces the writer to the disk as pebble's bytes-per-sync does. Used
// while writing snapshots so dirty pages do not pile up for one huge fsync
// at the end: on ext4 that fsync would also hold up the log's fsyncs, which
// share the journal.
// Flags of sync_file_range(2), which package syscall does not export.
const (
	syncFileRangeWaitBefore = 1
	syncFileRangeWrite      = 2
)

func (f osFile) startWriteback(off, n int64) error {
	return syscall.SyncFileRange(int(f.Fd()), off, n,
		syncFileRangeWaitBefore|syncFileRangeWrite)
}

// Sync makes the file's data durable with fdatasync(2), as Redis does for
// its append-only file: it flushes the data and the metadata needed to read
// it back (the size), but not timestamps, which saves a metadata write per
// fsync. Directory entries are made durable separately, by SyncDir.
//
// The fdatasync is submitted to an io_uring where the kernel allows it (see
// uring_linux.go): the calling goroutine then waits in the netpoller rather
// than blocking an OS thread.
func (f osFile) Sync() error {
	if r := ringForSync(); r != nil {
		if err, ok := r.fdatasync(f.Fd()); ok {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
