package wal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// ErrNotEmpty is returned by Seed for a directory that already holds a log
// or a snapshot.
var ErrNotEmpty = errors.New("wal: directory already holds a log")

// Seed starts a log in dir, which must hold no segment and no snapshot,
// from a snapshot covering index: write writes the snapshot's body (the
// bytes Options.Restore reads), exactly as compaction would have written
// them. The file is written as compaction writes one (temp file, fsync,
// rename, directory fsync) and read back before Seed returns. A log opened
// on dir then restores that snapshot and appends from index+1. fsys nil
// means the operating system's file system.
func Seed(fsys FS, dir string, index uint64, write func(io.Writer) error) error {
	if fsys == nil {
		fsys = OSFS{}
	}
	if err := MkdirDurable(fsys, dir); err != nil {
		abandon(write)
		return err
	}
	c, err := listDir(fsys, dir)
	if err != nil {
		abandon(write)
		return err
	}
	if len(c.segments) > 0 || len(c.snapshots) > 0 {
		abandon(write)
		return fmt.Errorf("%w: %s holds %d segments and %d snapshots", ErrNotEmpty, dir, len(c.segments), len(c.snapshots))
	}
	l := &Log{
		opts:   Options{Dir: dir},
		fs:     fsys,
		logger: slog.Default().With("component", "wal", "dir", dir),
	}
	_, err = l.writeSnapshot(index, write)
	return err
}
