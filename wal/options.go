package wal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Policy says when appended records are fsynced, and so when they are applied.
type Policy int

const (
	// FsyncAlways fsyncs before Append returns; a record is applied only
	// once it is durable. The zero value.
	FsyncAlways Policy = iota
	// FsyncEverySec applies a record at once in Append; the flush goroutine
	// writes promptly and fsyncs about once a second.
	FsyncEverySec
	// FsyncNo applies at once and writes to the OS promptly, but fsyncs only
	// when a segment is closed, on Sync and on Close.
	FsyncNo
)

// ParsePolicy parses "always", "everysec" or "no", the names Redis uses for
// appendfsync.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "always":
		return FsyncAlways, nil
	case "everysec":
		return FsyncEverySec, nil
	case "no":
		return FsyncNo, nil
	}
	return 0, fmt.Errorf("wal: unknown fsync policy %q (want always, everysec or no)", s)
}

// String returns the name ParsePolicy accepts.
func (p Policy) String() string {
	switch p {
	case FsyncAlways:
		return "always"
	case FsyncEverySec:
		return "everysec"
	case FsyncNo:
		return "no"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

const (
	defaultSegmentSize  = 64 << 20
	defaultCompactBytes = 64 << 20
	defaultSyncDepth    = 1
	maxSyncDepth        = 64
	// defaultPrealloc is how far the active segment is extended with
	// written zeros at a time under FsyncAlways (see "Group commit" in the
	// package doc). Each extension is one write and one fdatasync in the
	// flush goroutine, a pause the appenders see once per chunk. On the
	// disk kvs was measured on, writing and fdatasyncing 1 MiB of zeros
	// took about 0.9 ms (a few batch fsyncs, once per thousands of them),
	// 4 MiB about 17 ms, a visible stall.
	defaultPrealloc = 1 << 20
	// After a write failure the log retries its repair after
	// defaultRetryMin, doubling the wait after each failed attempt up to
	// defaultRetryMax: a full disk that gets room again is noticed within
	// about a second, as redis-server retries its append-only file once a
	// second, without a busy loop while it stays full.
	defaultRetryMin = 50 * time.Millisecond
	defaultRetryMax = time.Second
)

// Options configure a Log. Open calls Validate and fills in defaults.
type Options struct {
	// Dir holds the segments and snapshots. Required; created if missing.
	Dir string
	// FS is the file system. nil: the OS file system.
	FS FS
	// Fsync is the fsync policy. Zero value: FsyncAlways.
	Fsync Policy
	// SyncDepth is how many fsyncs of the active segment may run at once:
	// the next batch is written and its fsync started while up to
	// SyncDepth-1 earlier ones are still running (see "Group commit" in the
	// package doc). 1: one batch at a time, each written only after the
	// previous fsync returned. 0: 1. At most 64. Overlapping fsyncs split
	// the waiting records into smaller batches; on the disk kvs was
	// measured on, depth 1 served single-command clients best and depth 2
	// no better for pipelined ones (docs/performance-notes.md).
	SyncDepth int
	// SegmentSize: a segment is closed (fsynced) and a new one started once
	// it passes this many bytes. 0: 64 MiB.
	SegmentSize int64
	// Repair makes Open cut the log at the first corrupt record instead of
	// failing, keeping a copy of what it cuts (see the package doc). Before
	// it cuts anything it logs, at error level, exactly what it will cut.
	Repair bool
	// RepairAllowEmpty lets a repair go ahead when it would leave nothing:
	// no usable snapshot and no record kept, in a directory that held data.
	// Without it such a repair fails with ErrRepairEmpty and cuts nothing.
	// Ignored without Repair.
	RepairAllowEmpty bool
	// RecordKeys, when set, names the keys a record touches, so that
	// recovery can say which keys the records it cuts (or would cut)
	// affected. It sees only payloads that passed their checksum; an error
	// means the keys are unknown. nil: records are named by index only.
	RecordKeys func(rec []byte) ([]string, error)
	// Apply is called with each durable record, in log order, exactly once
	// per record per process: on replay during Open and on the live path.
	// Its result is returned to the Append that wrote the record (results
	// on replay are discarded). Required.
	Apply func(index uint64, rec []byte) any
	// Restore loads a snapshot written through Snapshot; called during Open,
	// before replay, when a snapshot exists. On error it must leave the
	// state as it was: Open then tries the previous snapshot. Required if
	// Snapshot is set.
	Restore func(r io.Reader) error
	// Snapshot captures the applied state cheaply (point in time, under the
	// caller's own lock) and returns the index it covers and a function that
	// writes it out; the log calls write in the background and it may be
	// slow. write is called exactly once; when the log abandons the snapshot
	// (nothing new since the last one, or the log failed) every Write
	// fails at once, so write can still release what it holds.
	// nil: never compact.
	Snapshot func() (index uint64, write func(io.Writer) error, err error)
	// CompactBytes: compact once this many log bytes were written since the
	// last snapshot. 0: 64 MiB. Ignored when Snapshot is nil.
	CompactBytes int64
	// Logger receives recovery and compaction events. nil: slog.Default().
	Logger *slog.Logger

	// OnFsync, when set, is told of every successful fsync of the log: how
	// long it took and how many records it made durable (for latency and
	// batch-size histograms). It runs on the flush goroutine, between one
	// fsync and the next, so it must be quick. nil: not called.
	OnFsync func(d time.Duration, records int)

	// prealloc is the preallocation chunk; 0: defaultPrealloc, negative:
	// none. Tests set it small so that a short run crosses many chunks,
	// or turn it off to count only the fsyncs of batches.
	prealloc int64
	// retryMin and retryMax bound the wait between repair attempts after
	// a write failure; 0: the defaults. Tests make them short, or long so
	// that the log stays failed while they look at it.
	retryMin, retryMax time.Duration
}

// Validate reports whether o can open a log.
func (o *Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("Dir is required"))
	}
	if o.Apply == nil {
		errs = append(errs, errors.New("Apply is required"))
	}
	if o.Snapshot != nil && o.Restore == nil {
		errs = append(errs, errors.New("Restore is required when Snapshot is set"))
	}
	if o.Fsync < FsyncAlways || o.Fsync > FsyncNo {
		errs = append(errs, fmt.Errorf("unknown fsync policy %d", int(o.Fsync)))
	}
	if o.SegmentSize < 0 {
		errs = append(errs, fmt.Errorf("SegmentSize %d is negative", o.SegmentSize))
	}
	if o.SyncDepth < 0 || o.SyncDepth > maxSyncDepth {
		errs = append(errs, fmt.Errorf("SyncDepth %d is out of range 0..%d", o.SyncDepth, maxSyncDepth))
	}
	if o.CompactBytes < 0 {
		errs = append(errs, fmt.Errorf("CompactBytes %d is negative", o.CompactBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("wal: invalid options: %w", err)
	}
	return nil
}

// withDefaults returns o with zero values replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = OSFS{}
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = defaultSegmentSize
	}
	if o.CompactBytes == 0 {
		o.CompactBytes = defaultCompactBytes
	}
	if o.SyncDepth == 0 {
		o.SyncDepth = defaultSyncDepth
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.prealloc == 0 {
		o.prealloc = defaultPrealloc
	}
	if o.retryMin == 0 {
		o.retryMin = defaultRetryMin
	}
	if o.retryMax == 0 {
		o.retryMax = max(defaultRetryMax, o.retryMin)
	}
	return o
}
