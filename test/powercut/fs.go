// Package powercut is a FUSE file system for power-cut tests of the real
// kvs binary: everything a process writes through it stays volatile until
// it is fsynced, and PowerCut throws away whatever was not, as losing power
// would.
//
// The durability rules are those of the wal's strict in-memory file system
// (wal.MemFS), applied to every file and directory of the mount:
//
//   - A file's data and size are durable as of its last fsync or fdatasync
//     (bytes written over synced bytes and not synced come back as they
//     were; a truncation not synced is undone).
//   - A directory's entries are durable as of its last fsync: a created,
//     renamed, removed or made (mkdir) name is volatile until its directory
//     is fsynced. A file fsynced under a name its directory never synced is
//     lost with that name.
//   - The mount's root directory is durable.
//
// Reads always see the latest (volatile) state. Both states live in the
// test process's memory; nothing is written to a disk. A mount is served
// by the test process itself, so the processes under test are ordinary
// children doing ordinary system calls: open, pwrite, fdatasync, rename,
// mmap (bbolt maps its file), flock (handled by the kernel), statfs.
//
// The test process must not touch a mount through mmap itself: a page
// fault blocks a thread the Go runtime cannot preempt, and a stop-the-world
// then waits for it while the goroutines that would answer the fault are
// stopped. Processes under test (and system calls of the test process, such
// as reads and writes) are fine.
//
// Mounting needs root and /dev/fuse (mount(2) is called directly; no
// fusermount helper is used). Available reports why a mount cannot work
// here, so tests can skip.
package powercut

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is one simulated disk: a tree of files and directories with their
// volatile and durable states, and the mount that serves it, if any.
type FS struct {
	mu      sync.Mutex // guards everything below and every node
	root    *node
	nextIno uint64
	// off is set by PowerCut: every operation fails with EIO until the
	// next Mount, as a machine without power answers nothing.
	off bool
	// fsyncs and dirSyncs count fsync requests served (files and
	// directories), so tests can show the process under test synced
	// through this file system.
	fsyncs, dirSyncs int

	dir    string // mount point while mounted
	server *fuse.Server
}

// New returns an empty file system, not mounted.
func New() *FS {
	f := &FS{nextIno: 2}
	f.root = newDir(1, 0o755)
	return f
}

// Available returns nil if FUSE file systems can be mounted here, or why
// not: mounting needs root (mount(2) is called directly) and /dev/fuse.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("powercut: mounting a FUSE file system without fusermount needs root")
	}
	fd, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("powercut: no usable /dev/fuse: %w", err)
	}
	fd.Close()
	return nil
}

// Mount serves the file system on dir (an existing empty directory), with
// power on: operations work again after a PowerCut.
func (f *FS) Mount(dir string) error {
	f.mu.Lock()
	if f.server != nil {
		f.mu.Unlock()
		return fmt.Errorf("powercut: already mounted on %s", f.dir)
	}
	f.off = false
	f.mu.Unlock()
	zero := time.Duration(0)
	opts := &fs.Options{
		// No kernel caching of names or attributes: every lookup and stat
		// asks the model, so nothing stale survives a change.
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName:        "powercut",
			Name:          "powercut",
			DirectMount:   true,
			DisableXAttrs: true,
			// Writes go through to the model one by one (no writeback
			// cache), so the model sees exactly what the process wrote,
			// and flock stays with the kernel.
		},
	}
	server, err := fs.Mount(dir, &fnode{fs: f, n: f.root}, opts)
	if err != nil {
		return fmt.Errorf("powercut: mount %s: %w", dir, err)
	}
	f.mu.Lock()
	f.dir, f.server = dir, server
	f.mu.Unlock()
	return nil
}

// PowerCut cuts the power: from now on every operation on the mount fails
// with EIO, and everything not durable is forgotten. Stop the processes
// using the mount before (kill -9 is the point) or after, then Unmount and
// Mount again to boot: the files show only what was fsynced.
func (f *FS) PowerCut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off = true
	f.root.revert(map[*node]bool{})
}

// Unmount detaches the mount. No process may have files open on it; if the
// kernel still thinks one does, the mount is detached lazily.
func (f *FS) Unmount() error {
	f.mu.Lock()
	server, dir := f.server, f.dir
	f.mu.Unlock()
	if server == nil {
		return nil
	}
	if err := server.Unmount(); err != nil {
		// Busy: detach it now; the kernel ends the connection (and the
		// serving loop) once the last reference goes.
		if derr := syscall.Unmount(dir, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("powercut: unmount %s: %v; lazy unmount: %w", dir, err, derr)
		}
		done := make(chan struct{})
		go func() { server.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("powercut: %s lazily unmounted but still served after 10s", dir)
		}
	}
	f.mu.Lock()
	f.server, f.dir = nil, ""
	f.mu.Unlock()
	return nil
}

// Syncs returns how many file and directory fsyncs the mount has served.
func (f *FS) Syncs() (files, dirs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fsyncs, f.dirSyncs
}

// fnode is the FUSE side of a model node.
type fnode struct {
	fs.Inode
	fs *FS
	n  *node
}

var (
	_ fs.NodeLookuper  = (*fnode)(nil)
	_ fs.NodeGetattrer = (*fnode)(nil)
	_ fs.NodeSetattrer = (*fnode)(nil)
	_ fs.NodeOpener    = (*fnode)(nil)
	_ fs.NodeReader    = (*fnode)(nil)
	_ fs.NodeWriter    = (*fnode)(nil)
	_ fs.NodeFlusher   = (*fnode)(nil)
	_ fs.NodeFsyncer   = (*fnode)(nil)
	_ fs.NodeAllocater = (*fnode)(nil)
	_ fs.NodeCreater   = (*fnode)(nil)
	_ fs.NodeMkdirer   = (*fnode)(nil)
	_ fs.NodeUnlinker  = (*fnode)(nil)
	_ fs.NodeRmdirer   = (*fnode)(nil)
	_ fs.NodeRenamer   = (*fnode)(nil)
	_ fs.NodeReaddirer = (*fnode)(nil)
	_ fs.NodeStatfser  = (*fnode)(nil)
	_ fs.NodeOpendirer = (*fnode)(nil)
	_ fs.NodeReleaser  = (*fnode)(nil)
	_ fs.NodeAccesser  = (*fnode)(nil)
)

// lock takes the model's lock and reports EIO while the power is off.
func (f *fnode) lock() syscall.Errno {
	f.fs.mu.Lock()
	if f.fs.off {
		f.fs.mu.Unlock()
		return syscall.EIO
	}
	return 0
}

func (f *fnode) unlock() { f.fs.mu.Unlock() }

func (n *node) fill(a *fuse.Attr) {
	a.Ino = n.ino
	a.Nlink = 1
	a.Blksize = 4096
	if n.dir {
		a.Mode = syscall.S_IFDIR | n.mode
		a.Nlink = 2
		a.Size = 4096
	} else {
		a.Mode = syscall.S_IFREG | n.mode
		a.Size = uint64(n.size)
	}
	a.Blocks = (a.Size + 511) / 512
	a.SetTimes(&n.mtime, &n.mtime, &n.mtime)
}

func (n *node) stable() fs.StableAttr {
	if n.dir {
		return fs.StableAttr{Mode: syscall.S_IFDIR, Ino: n.ino}
	}
	return fs.StableAttr{Mode: syscall.S_IFREG, Ino: n.ino}
}

// child returns the inode for model node c, named in f.
func (f *fnode) child(ctx context.Context, c *node, out *fuse.EntryOut) *fs.Inode {
	c.fill(&out.Attr)
	return f.NewInode(ctx, &fnode{fs: f.fs, n: c}, c.stable())
}

func (f *fnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, e
	}
	defer f.unlock()
	if !f.n.dir {
		return nil, syscall.ENOTDIR
	}
	c := f.n.live[name]
	if c == nil {
		return nil, syscall.ENOENT
	}
	return f.child(ctx, c, out), 0
}

func (f *fnode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	f.n.fill(&out.Attr)
	return 0
}

func (f *fnode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	if size, ok := in.GetSize(); ok {
		if f.n.dir {
			return syscall.EISDIR
		}
		f.n.truncate(int64(size))
	}
	if mode, ok := in.GetMode(); ok {
		f.n.mode = mode & 0o7777
	}
	f.n.fill(&out.Attr)
	return 0
}

func (f *fnode) Access(ctx context.Context, mask uint32) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	f.unlock()
	return 0
}

func (f *fnode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, 0, e
	}
	defer f.unlock()
	if f.n.dir {
		return nil, 0, syscall.EISDIR
	}
	if flags&syscall.O_TRUNC != 0 {
		f.n.truncate(0)
	}
	return nil, 0, 0
}

func (f *fnode) Release(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

func (f *fnode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

func (f *fnode) Opendir(ctx context.Context) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	if !f.n.dir {
		return syscall.ENOTDIR
	}
	return 0
}

func (f *fnode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, e
	}
	defer f.unlock()
	n := f.n.read(dest, off)
	return fuse.ReadResultData(dest[:n]), 0
}

func (f *fnode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return 0, e
	}
	defer f.unlock()
	if off < 0 {
		return 0, syscall.EINVAL
	}
	f.n.write(data, off)
	return uint32(len(data)), 0
}

// Allocate implements fallocate: mode 0 extends the file with zeros,
// volatile like any other change; KEEP_SIZE changes nothing visible.
func (f *fnode) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	const keepSize = 0x01
	switch {
	case mode == 0:
		if end := int64(off + size); end > f.n.size {
			f.n.truncate(end)
		}
		return 0
	case mode == keepSize:
		return 0
	default:
		return syscall.EOPNOTSUPP
	}
}

// Fsync serves fsync and fdatasync of files and fsync of directories: it
// makes the node's live state durable.
func (f *fnode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	f.n.sync()
	if f.n.dir {
		f.fs.dirSyncs++
	} else {
		f.fs.fsyncs++
	}
	return 0
}

func (f *fnode) newNode(dir bool, mode uint32) *node {
	ino := f.fs.nextIno
	f.fs.nextIno++
	if dir {
		return newDir(ino, mode&0o7777)
	}
	return newFile(ino, mode&0o7777)
}

func (f *fnode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, nil, 0, e
	}
	defer f.unlock()
	c := f.n.live[name]
	switch {
	case c != nil && flags&syscall.O_EXCL != 0:
		return nil, nil, 0, syscall.EEXIST
	case c != nil && c.dir:
		return nil, nil, 0, syscall.EISDIR
	case c != nil:
		if flags&syscall.O_TRUNC != 0 {
			c.truncate(0)
		}
	default:
		c = f.newNode(false, mode)
		f.n.live[name] = c
		f.n.mtime = time.Now()
	}
	return f.child(ctx, c, out), nil, 0, 0
}

func (f *fnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, e
	}
	defer f.unlock()
	if f.n.live[name] != nil {
		return nil, syscall.EEXIST
	}
	c := f.newNode(true, mode)
	f.n.live[name] = c
	f.n.mtime = time.Now()
	return f.child(ctx, c, out), 0
}

func (f *fnode) Unlink(ctx context.Context, name string) syscall.Errno {
	return f.remove(name, false)
}

func (f *fnode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return f.remove(name, true)
}

// remove takes name out of the directory's live entries: a file for
// Unlink, an empty directory for Rmdir. Like any entry change it is
// durable only once the directory is fsynced.
func (f *fnode) remove(name string, dir bool) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	c := f.n.live[name]
	switch {
	case c == nil:
		return syscall.ENOENT
	case c.dir && !dir:
		return syscall.EISDIR
	case !c.dir && dir:
		return syscall.ENOTDIR
	case dir && len(c.live) > 0:
		return syscall.ENOTEMPTY
	}
	delete(f.n.live, name)
	f.n.mtime = time.Now()
	return 0
}

func (f *fnode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	const noReplace = 0x1 // RENAME_NOREPLACE; RENAME_EXCHANGE and others are not supported
	if flags&^noReplace != 0 {
		return syscall.EINVAL
	}
	np, ok := newParent.(*fnode)
	if !ok || !np.n.dir {
		return syscall.EXDEV
	}
	c := f.n.live[name]
	if c == nil {
		return syscall.ENOENT
	}
	if old := np.n.live[newName]; old != nil {
		switch {
		case old == c:
			return 0
		case flags&noReplace != 0:
			return syscall.EEXIST
		case old.dir && !c.dir:
			return syscall.EISDIR
		case !old.dir && c.dir:
			return syscall.ENOTDIR
		case old.dir && len(old.live) > 0:
			return syscall.ENOTEMPTY
		}
	}
	delete(f.n.live, name)
	np.n.live[newName] = c
	now := time.Now()
	f.n.mtime, np.n.mtime = now, now
	return 0
}

func (f *fnode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if e := f.lock(); e != 0 {
		return nil, e
	}
	defer f.unlock()
	ents := make([]fuse.DirEntry, 0, len(f.n.live))
	for name, c := range f.n.live {
		ents = append(ents, fuse.DirEntry{Name: name, Ino: c.ino, Mode: c.stable().Mode})
	}
	return fs.NewListDirStream(ents), 0
}

// Statfs reports a roomy disk with 4 KiB blocks.
func (f *fnode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if e := f.lock(); e != 0 {
		return e
	}
	defer f.unlock()
	const blocks = 64 << 30 / 4096
	out.Bsize = 4096
	out.Frsize = 4096
	out.Blocks = blocks
	out.Bfree = blocks
	out.Bavail = blocks
	out.Files = 1 << 20
	out.Ffree = 1 << 20
	out.NameLen = 255
	return 0
}
