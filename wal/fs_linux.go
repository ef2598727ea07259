package wal

import "syscall"

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
