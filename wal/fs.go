package wal

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// FS is the file system the log works through, so tests can substitute
// MemFS and inject faults. Names are full paths.
type FS interface {
	// Create creates name, or truncates it, open for writing.
	Create(name string) (File, error)
	// Open opens name for reading.
	Open(name string) (File, error)
	// OpenAppend opens an existing file for writing: Write appends at its
	// end, WriteAt writes anywhere.
	OpenAppend(name string) (File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	// ReadDir returns the names of dir's entries, sorted.
	ReadDir(dir string) ([]string, error)
	MkdirAll(dir string) error
	// SyncDir makes dir's entries (created, renamed, removed files) durable.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.Reader
	// ReadAt reads at an offset without moving the read position; the log
	// reads back the start of a page it rewrites after a write failure.
	io.ReaderAt
	io.Writer
	// WriteAt writes at an offset without moving the write position; the
	// log writes records this way into zeros it preallocated.
	io.WriterAt
	io.Closer
	// Sync makes the file's data and size durable.
	Sync() error
	// Truncate changes the file's size; durable after Sync.
	Truncate(size int64) error
	// Size returns the file's current size.
	Size() (int64, error)
}

// OSFS is the operating system's file system.
type OSFS struct{}

var _ FS = OSFS{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Create implements FS.
func (OSFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Open implements FS.
func (OSFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// OpenAppend implements FS. The file is not opened with O_APPEND, under
// which Linux's pwrite ignores the offset (and os.File.WriteAt refuses);
// Write appends because the position starts at the end and only Write
// moves it.
func (OSFS) OpenAppend(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	return osFile{f}, nil
}

// Rename implements FS.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// ReadDir implements FS.
func (OSFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	slices.Sort(names)
	return names, nil
}

// MkdirAll implements FS.
func (OSFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// errNotExist is what a missing file's error wraps, on every FS.
var errNotExist = fs.ErrNotExist
