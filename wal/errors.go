package wal

import "errors"

var (
	// ErrClosed is returned by operations on a closed Log.
	ErrClosed = errors.New("wal: closed")
	// ErrCorrupt is wrapped by every error about bad bytes on disk; the
	// wrapping error names the file and offset.
	ErrCorrupt = errors.New("wal: corrupt log")
	// ErrRecordTooLarge is returned by Append for a record longer than
	// MaxRecordSize.
	ErrRecordTooLarge = errors.New("wal: record too large")
	// ErrNoSnapshot is returned by Compact when Options.Snapshot is nil.
	ErrNoSnapshot = errors.New("wal: no snapshot function configured")
	// ErrWriteFailed is wrapped by every error of a write or fsync of the
	// log that failed (the wrapping error names the file and the cause,
	// such as syscall.ENOSPC), and so by what Append, AppendFunc and Sync
	// return while the log is failed: from the failure until a background
	// retry has brought the log back to a known-good state (see "Write
	// failures" in the package doc).
	ErrWriteFailed = errors.New("wal: write failed")
)
