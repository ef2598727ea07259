package powercut

import (
	"maps"
	"slices"
	"time"
)

// pageSize is the unit of copy-on-write between a file's live and durable
// contents: a write after an fsync copies only the pages it touches.
const pageSize = 32 << 10

type page = [pageSize]byte

// node is a file or a directory of the model. A file has live contents
// (what reads see) and durable contents (as of its last fsync); a directory
// has live entries and durable entries (as of its last fsync). A node is
// durable at all only while a durable entry of a durable directory names
// it: the rules of the wal's strict in-memory file system, over FUSE.
type node struct {
	ino  uint64
	dir  bool
	mode uint32 // permission bits
	// mtime is the last change of the live state; it is not durable state
	// of its own (it comes back with whatever a power cut leaves).
	mtime time.Time

	// File contents: pages (nil reads as zeros) and size, live and as of the
	// last fsync. A page pointer shared by both is copied before a write.
	pages       []*page
	size        int64
	syncedPages []*page
	syncedSize  int64

	// Directory entries, live and as of the last fsync of the directory.
	live   map[string]*node
	synced map[string]*node
}

func newFile(ino uint64, mode uint32) *node {
	return &node{ino: ino, mode: mode, mtime: time.Now()}
}

func newDir(ino uint64, mode uint32) *node {
	return &node{ino: ino, dir: true, mode: mode, mtime: time.Now(),
		live: map[string]*node{}, synced: map[string]*node{}}
}

// read copies the live bytes at off into dest and returns how many.
func (n *node) read(dest []byte, off int64) int {
	if off >= n.size {
		return 0
	}
	end := min(n.size, off+int64(len(dest)))
	done := 0
	for pos := off; pos < end; {
		i, o := pos/pageSize, pos%pageSize
		m := min(int64(pageSize)-o, end-pos)
		if p := n.pages[i]; p != nil {
			copy(dest[done:done+int(m)], p[o:o+m])
		} else {
			clear(dest[done : done+int(m)])
		}
		done += int(m)
		pos += m
	}
	return done
}

// writable returns page i, ready to change: allocated, and not shared with
// the durable contents.
func (n *node) writable(i int64) *page {
	p := n.pages[i]
	switch {
	case p == nil:
		p = new(page)
	case i < int64(len(n.syncedPages)) && n.syncedPages[i] == p:
		c := *p
		p = &c
	default:
		return p
	}
	n.pages[i] = p
	return p
}

// grow extends the page table to cover size bytes (new pages read as
// zeros) without changing n.size.
func (n *node) grow(size int64) {
	if need := int((size + pageSize - 1) / pageSize); need > len(n.pages) {
		n.pages = append(n.pages, make([]*page, need-len(n.pages))...)
	}
}

// write puts data at off, extending the file (a gap reads as zeros).
func (n *node) write(data []byte, off int64) {
	end := off + int64(len(data))
	n.grow(end)
	for pos := off; pos < end; {
		i, o := pos/pageSize, pos%pageSize
		m := min(int64(pageSize)-o, end-pos)
		p := n.writable(i)
		copy(p[o:o+m], data[pos-off:pos-off+m])
		pos += m
	}
	n.size = max(n.size, end)
	n.mtime = time.Now()
}

// truncate sets the live size; bytes past a shrunk end are zeroed so that
// growing the file again reads zeros there.
func (n *node) truncate(size int64) {
	if size < n.size {
		keep := (size + pageSize - 1) / pageSize
		clear(n.pages[keep:])
		n.pages = n.pages[:keep]
		if o := size % pageSize; o != 0 && n.pages[keep-1] != nil {
			p := n.writable(keep - 1)
			clear(p[o:])
		}
	} else {
		n.grow(size)
	}
	n.size = size
	n.mtime = time.Now()
}

// sync makes the file's live contents durable, or the directory's live
// entries.
func (n *node) sync() {
	if n.dir {
		n.synced = maps.Clone(n.live)
		return
	}
	n.syncedPages = slices.Clone(n.pages)
	n.syncedSize = n.size
}

// revert forgets everything not durable in the tree under n, as a power
// cut does. seen holds the nodes already reverted: after renames that were
// made durable in one directory and not in the other, a node can be
// reachable twice (even, for directories, in a cycle).
func (n *node) revert(seen map[*node]bool) {
	if seen[n] {
		return
	}
	seen[n] = true
	if !n.dir {
		n.pages = slices.Clone(n.syncedPages)
		n.size = n.syncedSize
		return
	}
	n.live = maps.Clone(n.synced)
	for _, c := range n.live {
		c.revert(seen)
	}
}
