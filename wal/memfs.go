package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"sync"
)

// MemFS is a strict in-memory FS for tests, modelled on pebble's strict
// vfs.MemFS. It remembers what was made durable: a file's data as of its
// last Sync, and a directory's entries as of its last SyncDir (a created,
// renamed or removed file is durable only once its directory is synced).
// ResetToSyncedState and CrashClone throw everything else away, as a power
// cut would.
//
// A file's size is durable only with its data: a power cut restores both as
// of the last Sync, so bytes written with WriteAt over synced bytes are lost
// too, and the old bytes come back.
//
// Simplifications: directories made by MkdirAll are durable at once, and a
// power cut never keeps part of an unsynced write.
//
// MemFS is safe for concurrent use, including a Sync of a file while
// another goroutine writes to it (the log's syncers do that): every
// operation takes one mutex, so a Sync makes durable exactly the bytes
// written before it, and a Write after it stays volatile until the next.
type MemFS struct {
	// mu guards dirs and every node and open file's state.
	mu   sync.Mutex
	dirs map[string]*memDir
	// gen counts resets; files opened before a reset fail afterwards, as
	// the process that held them would be gone.
	gen int
}

type memDir struct {
	live   map[string]*memNode
	synced map[string]*memNode
}

type memNode struct {
	data   []byte
	synced []byte
}

// NewMemFS returns an empty MemFS.
func NewMemFS() *MemFS {
	return &MemFS{dirs: map[string]*memDir{}}
}

var _ FS = (*MemFS)(nil)

var errPowerCut = errors.New("memfs: file handle from before a power cut")

func (m *MemFS) lookupDirLocked(name, op string) (*memDir, string, error) {
	dir, base := filepath.Split(filepath.Clean(name))
	d := m.dirs[filepath.Clean(dir)]
	if d == nil {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return d, base, nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupDirLocked(name, "create")
	if err != nil {
		return nil, err
	}
	n := d.live[base]
	if n == nil {
		n = &memNode{}
		d.live[base] = n
	}
	n.data = nil
	return &memFile{fs: m, gen: m.gen, node: n, name: name, write: true}, nil
}

func (m *MemFS) openLocked(name, op string) (*memNode, error) {
	d, base, err := m.lookupDirLocked(name, op)
	if err != nil {
		return nil, err
	}
	n := d.live[base]
	if n == nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.openLocked(name, "open")
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, gen: m.gen, node: n, name: name}, nil
}

// OpenAppend implements FS.
func (m *MemFS) OpenAppend(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.openLocked(name, "open")
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, gen: m.gen, node: n, name: name, write: true}, nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, obase, err := m.lookupDirLocked(oldname, "rename")
	if err != nil {
		return err
	}
	nd, nbase, err := m.lookupDirLocked(newname, "rename")
	if err != nil {
		return err
	}
	n := od.live[obase]
	if n == nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(od.live, obase)
	nd.live[nbase] = n
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupDirLocked(name, "remove")
	if err != nil {
		return err
	}
	if d.live[base] == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(d.live, base)
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dirs[filepath.Clean(dir)]
	if d == nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	return slices.Sorted(maps.Keys(d.live)), nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if m.dirs[p] == nil {
			m.dirs[p] = &memDir{live: map[string]*memNode{}, synced: map[string]*memNode{}}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dirs[filepath.Clean(dir)]
	if d == nil {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: fs.ErrNotExist}
	}
	d.synced = maps.Clone(d.live)
	return nil
}

// ResetToSyncedState simulates a power cut and reboot: every directory
// entry and every byte not made durable is forgotten, and files opened
// before the reset fail from now on.
func (m *MemFS) ResetToSyncedState() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	for _, d := range m.dirs {
		d.live = maps.Clone(d.synced)
		for _, n := range d.live {
			n.data = slices.Clone(n.synced)
		}
	}
}

// CrashClone returns a new MemFS holding only what m has made durable so
// far, as a power cut at this instant would leave it. m carries on
// unchanged, so a test can cut power while writers are running and recover
// from the clone.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS()
	nodes := map[*memNode]*memNode{}
	for p, d := range m.dirs {
		nd := &memDir{live: map[string]*memNode{}, synced: map[string]*memNode{}}
		for name, n := range d.synced {
			cn := nodes[n]
			if cn == nil {
				cn = &memNode{data: slices.Clone(n.synced), synced: slices.Clone(n.synced)}
				nodes[n] = cn
			}
			nd.live[name] = cn
			nd.synced[name] = cn
		}
		c.dirs[p] = nd
	}
	return c
}

// ReadFile returns the current (not necessarily durable) contents of name.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.openLocked(name, "read")
	if err != nil {
		return nil, err
	}
	return slices.Clone(n.data), nil
}

// WriteFile creates name with data, durable at once (file and directory
// entry): a test's way to lay out a log directory.
func (m *MemFS) WriteFile(name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupDirLocked(name, "write")
	if err != nil {
		return err
	}
	n := &memNode{data: slices.Clone(data), synced: slices.Clone(data)}
	d.live[base] = n
	d.synced[base] = n
	return nil
}

type memFile struct {
	fs    *MemFS
	gen   int
	node  *memNode
	name  string
	write bool
	// pos is the read offset; guarded by fs.mu.
	pos    int
	closed bool
}

func (f *memFile) checkLocked(op string) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	if f.gen != f.fs.gen {
		return &fs.PathError{Op: op, Path: f.name, Err: errPowerCut}
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("read"); err != nil {
		return 0, err
	}
	if f.pos >= len(f.node.data) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[f.pos:])
	f.pos += n
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("readat"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "readat", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("write"); err != nil {
		return 0, err
	}
	if !f.write {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrPermission}
	}
	f.node.data = append(f.node.data, p...)
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("writeat"); err != nil {
		return 0, err
	}
	if !f.write {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: fs.ErrPermission}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: fs.ErrInvalid}
	}
	n := f.node
	end := int(off) + len(p)
	// The synced copy shares data's array since the last Sync; bytes it
	// covers must not change under it.
	if int(off) < len(n.synced) && len(n.data) > 0 && &n.data[0] == &n.synced[0] {
		n.data = slices.Clone(n.data)
	}
	if end > len(n.data) {
		// Past the end, as pwrite does: the gap reads as zeros.
		n.data = append(n.data, make([]byte, end-len(n.data))...)
	}
	copy(n.data[off:], p)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("sync"); err != nil {
		return err
	}
	// Sharing the array is safe: Write appends past synced's capped
	// length, WriteAt copies the array before it changes a shared byte,
	// and Truncate caps the length and Create starts a new array.
	f.node.synced = f.node.data[:len(f.node.data):len(f.node.data)]
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("truncate"); err != nil {
		return err
	}
	if size < 0 || size > int64(len(f.node.data)) {
		return fmt.Errorf("memfs: truncate %s to %d: out of range", f.name, size)
	}
	f.node.data = f.node.data[:size:size]
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}
