package fsm

import (
	"sync/atomic"
	"unsafe"
)

// ztree is the B+tree behind a large sorted set: entries (k, v, member)
// ordered by (k, member bytes), each node counting the entries below it
// so that ranks cost O(log n). The score order and the member index are
// both ztrees (see zsetObj). A tree made withValues keeps a uint64 v per
// entry; one made without keeps one bit (v is 0 or 1), in the spare top
// bit of the member's length.
//
// It exists for the garbage collector. A tree of Go strings costs the GC
// one object to mark per member, and a store holding a 10M-member set
// made every GC cycle trace tens of millions of pointers, drafting writers
// into mark assists for tens of milliseconds. Here a node holds its keys,
// values and member offsets in fixed arrays and its members' bytes in one
// pointer-free buffer, so a node of up to ztreeFan entries is two objects
// with three pointers between them.
//
// Copy-on-write: every node carries the id of the tree that may change
// it in place; copy gives both trees fresh ids, so each copies a shared
// node (O(ztreeFan)) before its first change to it, as tidwall/btree's Copy
// does. A node's member buffer is append-only: bytes below its length are
// never written again (a change appends, or builds a new buffer), and a
// node's copy clips the buffer's capacity, so members handed out (replies
// alias them) stay valid and a snapshot never sees a later write.
//
// Every pointer-free object a tree allocates (a node's member buffer, a
// leaf's values) is larger than 512 bytes: see zminAlloc.
//
// Inner nodes hold, for each child i > 0, a separator s_i with every entry
// of child i-1 below s_i and every entry of child i at or above it. A
// separator need not be an entry still in the tree.
type ztree struct {
	root   *znode
	cow    uint64
	values bool
}

// ztreeFan is the most entries (or children) a node holds: chosen so a
// node fills its 1024-byte size class. A node also splits before its
// members pass ztreeMaxBytes, which keeps its buffer (at most about
// 2*ztreeMaxBytes plus a member, with slack) within the 32-bit offsets.
const ztreeFan = 59

// The node's size class; the build fails if the node outgrows it.
var _ [1024 - unsafe.Sizeof(znode{})]byte

// ztreeMaxBytes and ztreeMaxMember (the longest member) are variables so
// that a test can make them small.
var (
	ztreeMaxBytes  = 1 << 30
	ztreeMaxMember = MaxStringLen
)

// zminAlloc is the least size of the pointer-free objects of a tree, the
// smallest of Go's size classes above 512 bytes. It is there for the
// runtime's heap reclaimer (Go 1.26, whose collector is Green Tea). An
// object of 16 to 512 bytes has its mark bits inside its span, and
// marking one without pointers does not set the arena's page mark that
// tells the reclaimer its span holds live objects. After each collection,
// the first allocation that needs a fresh span before sweeping is done
// runs runtime.(*mheap).reclaim, which sweeps every in-use span without
// a page mark until it frees enough pages; with no garbage to find it
// sweeps them all, inside that one allocation. Member buffers and value
// arrays of 448 and 480 bytes made every live span of a 10M-member set
// such a span (some 40,000), and one write in each GC cycle took about
// 20 ms of CPU doing it. Objects above 512 bytes have their marks in the
// span structure and set the page mark, so the reclaimer skips them.
const zminAlloc = 576

// zvals is a leaf's values: ztreeFan of them, padded to zminAlloc.
type zvals [zminAlloc / 8]uint64

var (
	_ [unsafe.Sizeof(zvals{}) - zminAlloc]byte // the padding holds
	_ [len(zvals{}) - ztreeFan]byte            // and so do the values
)

type znode struct {
	mem   []byte // member bytes, append-only below len (see ztree)
	kids  *zkids // nil for a leaf
	vals  *zvals // a leaf's values, in a tree withValues
	cow   uint64 // the id of the tree that owns this node
	n     int    // entries (leaf) or children (inner)
	count int    // entries in the subtree
	live  int    // bytes of the slots' members
	k     [ztreeFan]uint64
	off   [ztreeFan]uint32 // member i is mem[off[i]:][:ln[i]&zlenMask]
	ln    [ztreeFan]uint32 // and the one-bit value of a tree without values
}

// Members are at most MaxStringLen bytes, so a length leaves its top bit
// free.
const zlenMask = 1<<31 - 1

type zkids struct {
	node  [ztreeFan]*znode
	count [ztreeFan]int
}

var ztreeIDs atomic.Uint64

func newZTree(withValues bool) *ztree {
	return &ztree{cow: ztreeIDs.Add(1), values: withValues}
}

// newLeaf returns an empty leaf owned by t.
func (t *ztree) newLeaf() *znode {
	n := &znode{cow: t.cow}
	if t.values {
		n.vals = new(zvals)
	}
	return n
}

func (t *ztree) len() int {
	if t.root == nil {
		return 0
	}
	return t.root.count
}

// copy returns a tree with the same entries, in O(1).
func (t *ztree) copy() *ztree {
	t.cow = ztreeIDs.Add(1)
	return &ztree{root: t.root, cow: ztreeIDs.Add(1), values: t.values}
}

// member returns entry (or separator) i's bytes, aliasing the node.
func (n *znode) member(i int) string {
	l := n.ln[i] & zlenMask
	if l == 0 {
		return ""
	}
	return unsafe.String(&n.mem[n.off[i]], int(l))
}

// value returns entry i's value.
func (n *znode) value(i int) uint64 {
	if n.vals != nil {
		return n.vals[i]
	}
	return uint64(n.ln[i] >> 31)
}

func (n *znode) setValue(i int, v uint64) {
	if n.vals != nil {
		n.vals[i] = v
		return
	}
	n.ln[i] = n.ln[i]&zlenMask | uint32(v&1)<<31
}

// setSlot fills slot i, empty or to be overwritten, with (k, v, m), m's
// bytes appended to n's buffer.
func (n *znode) setSlot(i int, k, v uint64, m string) {
	n.live -= int(n.ln[i] & zlenMask)
	n.k[i], n.ln[i] = k, 0
	n.off[i] = n.putMem(m)
	n.ln[i] = uint32(len(m))
	n.live += len(m)
	if n.kids == nil {
		n.setValue(i, v)
	}
}

func zkeyLess(ak uint64, am string, bk uint64, bm string) bool {
	if ak != bk {
		return ak < bk
	}
	return am < bm
}

// find returns the first entry of leaf n not below (k, m), and whether it
// is (k, m).
func (n *znode) find(k uint64, m string) (int, bool) {
	lo, hi := 0, n.n
	// The member is read only on equal keys: for the member index, whose
	// keys are hashes, that is once, at the entry itself.
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if mk := n.k[mid]; mk < k || (mk == k && n.member(mid) < m) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < n.n && n.k[lo] == k && n.member(lo) == m
}

// child returns the child of inner node n whose range holds (k, m).
func (n *znode) child(k uint64, m string) int {
	lo, hi := 1, n.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if mk := n.k[mid]; k < mk || (k == mk && m < n.member(mid)) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo - 1
}

// mut returns n if t owns it, else t's copy of it.
func (t *ztree) mut(n *znode) *znode {
	if n.cow == t.cow {
		return n
	}
	c := *n
	c.cow = t.cow
	c.mem = c.mem[:len(c.mem):len(c.mem)]
	if n.kids != nil {
		kids := *n.kids
		c.kids = &kids
	}
	if n.vals != nil {
		vals := *n.vals
		c.vals = &vals
	}
	return &c
}

// putMem appends m's bytes to n's buffer, building a compact new buffer
// when it is full, and returns their offset.
func (n *znode) putMem(m string) uint32 {
	if len(m) == 0 {
		return 0
	}
	if len(n.mem)+len(m) > cap(n.mem) {
		n.compact(len(m))
	}
	off := len(n.mem)
	n.mem = append(n.mem, m...)
	return uint32(off)
}

// compact moves n's members into a new buffer with room for extra more
// bytes, and at least zminAlloc in all; the old buffer stays as it is for
// whoever aliases it.
func (n *znode) compact(extra int) {
	need := n.live + extra
	b := make([]byte, 0, max(need+need/4+8, zminAlloc))
	for i := range n.n {
		m := n.member(i)
		n.off[i] = uint32(len(b))
		b = append(b, m...)
	}
	n.mem = b
}

// insertAt makes room at slot i of n and puts (k, v, m) there.
func (n *znode) insertAt(i int, k, v uint64, m string) {
	copy(n.k[i+1:n.n+1], n.k[i:n.n])
	copy(n.off[i+1:n.n+1], n.off[i:n.n])
	copy(n.ln[i+1:n.n+1], n.ln[i:n.n])
	if n.vals != nil {
		copy(n.vals[i+1:n.n+1], n.vals[i:n.n])
	}
	if n.kids != nil {
		copy(n.kids.node[i+1:n.n+1], n.kids.node[i:n.n])
		copy(n.kids.count[i+1:n.n+1], n.kids.count[i:n.n])
	}
	n.n++
	n.ln[i] = 0
	n.setSlot(i, k, v, m)
}

// removeAt removes slot i of n; its bytes stay in the buffer until the
// next compaction.
func (n *znode) removeAt(i int) {
	n.live -= int(n.ln[i] & zlenMask)
	copy(n.k[i:], n.k[i+1:n.n])
	copy(n.off[i:], n.off[i+1:n.n])
	copy(n.ln[i:], n.ln[i+1:n.n])
	if n.vals != nil {
		copy(n.vals[i:], n.vals[i+1:n.n])
	}
	if n.kids != nil {
		copy(n.kids.node[i:], n.kids.node[i+1:n.n])
		copy(n.kids.count[i:], n.kids.count[i+1:n.n])
		n.kids.node[n.n-1] = nil
	}
	n.n--
	n.ln[n.n] = 0
}

// split moves the slots of n from at on into a new node, returning it
// and the separator between the two.
func (t *ztree) split(n *znode, at int) (right *znode, sk uint64, sm string) {
	if n.kids != nil {
		right = &znode{cow: t.cow, kids: &zkids{}}
	} else {
		right = t.newLeaf()
	}
	for i := at; i < n.n; i++ {
		right.appendSlot(n, i)
	}
	sk, sm = n.k[at], n.member(at)
	if n.kids != nil {
		// The right node's first child needs no separator.
		right.live -= int(right.ln[0])
		right.ln[0], right.off[0], right.k[0] = 0, 0, 0
	}
	for i := n.n - 1; i >= at; i-- {
		n.removeAt(i)
	}
	n.count -= right.count
	n.compact(0)
	return right, sk, sm
}

// appendSlot appends slot i of src to n.
func (n *znode) appendSlot(src *znode, i int) {
	j := n.n
	n.n++
	n.setSlot(j, src.k[i], src.value(i), src.member(i))
	if src.kids != nil {
		n.kids.node[j], n.kids.count[j] = src.kids.node[i], src.kids.count[i]
		n.count += src.kids.count[i]
	} else {
		n.count++
	}
}

// after reports whether (k, m) sorts after every entry or separator of n.
func (n *znode) after(k uint64, m string) bool {
	i := n.n - 1
	if n.kids != nil && i == 0 {
		return true
	}
	return zkeyLess(n.k[i], n.member(i), k, m)
}

// full reports whether n must split before m goes into it or under it.
// A node that is full by its bytes has at least two members.
func (n *znode) full(m string) bool {
	return n.n == ztreeFan || n.live+len(m) > ztreeMaxBytes
}

// splitPoint is where a full node splits before (k, m) goes into it: in
// the middle, or near the end when (k, m) goes past its end, so a set
// built in order fills its nodes; by bytes when its bytes filled it.
func splitPoint(n *znode, k uint64, m string, rightmost bool) int {
	switch {
	case n.n < ztreeFan:
		half := 0
		for i := range n.n - 1 {
			if half += int(n.ln[i] & zlenMask); half >= n.live/2 {
				return max(i, 1)
			}
		}
		return n.n - 1
	case rightmost && n.after(k, m):
		return n.n - 1
	}
	return n.n / 2
}

// set puts (k, v, m) in the tree, replacing the value of an entry (k, m)
// already there, which it reports.
func (t *ztree) set(k, v uint64, m string) (replaced bool) {
	if t.root == nil {
		t.root = t.newLeaf()
	}
	t.root = t.mut(t.root)
	if t.root.full(m) {
		left := t.root
		right, sk, sm := t.split(left, splitPoint(left, k, m, true))
		root := &znode{cow: t.cow, kids: &zkids{}, n: 2, count: left.count + right.count}
		root.kids.node[0], root.kids.count[0] = left, left.count
		root.kids.node[1], root.kids.count[1] = right, right.count
		root.setSlot(1, sk, 0, sm)
		t.root = root
	}
	return t.setIn(t.root, k, v, m)
}

// setIn puts (k, v, m) under n, which t owns and which is not full.
func (t *ztree) setIn(n *znode, k, v uint64, m string) bool {
	if n.kids == nil {
		i, found := n.find(k, m)
		if found {
			n.setValue(i, v)
			return true
		}
		n.insertAt(i, k, v, m)
		n.count++
		return false
	}
	i := n.child(k, m)
	c := t.mut(n.kids.node[i])
	n.kids.node[i] = c
	if c.full(m) {
		right, sk, sm := t.split(c, splitPoint(c, k, m, i == n.n-1))
		n.insertAt(i+1, sk, 0, sm)
		n.kids.node[i+1], n.kids.count[i+1] = right, right.count
		n.kids.count[i] = c.count
		if !zkeyLess(k, m, sk, sm) {
			i, c = i+1, right
		}
	}
	replaced := t.setIn(c, k, v, m)
	if !replaced {
		n.kids.count[i]++
		n.count++
	}
	return replaced
}

// get returns the value of entry (k, m).
func (t *ztree) get(k uint64, m string) (uint64, bool) {
	n := t.root
	if n == nil {
		return 0, false
	}
	for n.kids != nil {
		n = n.kids.node[n.child(k, m)]
	}
	if i, ok := n.find(k, m); ok {
		return n.value(i), true
	}
	return 0, false
}

// delete removes entry (k, m), reporting whether it was there.
func (t *ztree) delete(k uint64, m string) bool {
	if _, ok := t.get(k, m); !ok {
		return false
	}
	t.deletePresent(k, m)
	return true
}

// deletePresent is delete of an entry known to be there (its member's
// score was just read from the other tree): one descent, not two.
func (t *ztree) deletePresent(k uint64, m string) {
	t.root = t.mut(t.root)
	t.deleteIn(t.root, k, m)
	t.shrinkRoot()
}

// deleteAt removes the entry of rank i, which is there, and returns it:
// ZPOPMIN and the rank and range removals, which know the rank, descend
// by the counts and compare no member. The member aliases a node's
// buffer, which stays valid (buffers are append-only).
func (t *ztree) deleteAt(i int) (k, v uint64, m string) {
	t.root = t.mut(t.root)
	k, v, m = t.deleteAtIn(t.root, i)
	t.shrinkRoot()
	return k, v, m
}

// shrinkRoot drops a root a delete left empty, or with one child.
func (t *ztree) shrinkRoot() {
	switch {
	case t.root.n == 0:
		t.root = nil
	case t.root.kids != nil && t.root.n == 1:
		t.root = t.root.kids.node[0]
	}
}

func (t *ztree) deleteAtIn(n *znode, i int) (k, v uint64, m string) {
	n.count--
	if n.kids == nil {
		k, v, m = n.k[i], n.value(i), n.member(i)
		n.removeAt(i)
		return k, v, m
	}
	j := 0
	for i >= n.kids.count[j] {
		i -= n.kids.count[j]
		j++
	}
	c := t.mut(n.kids.node[j])
	n.kids.node[j] = c
	k, v, m = t.deleteAtIn(c, i)
	n.kids.count[j]--
	t.rebalance(n, j)
	return k, v, m
}

// deleteIn removes (k, m), which is there, from under n, which t owns.
func (t *ztree) deleteIn(n *znode, k uint64, m string) {
	n.count--
	if n.kids == nil {
		i, _ := n.find(k, m)
		n.removeAt(i)
		return
	}
	i := n.child(k, m)
	c := t.mut(n.kids.node[i])
	n.kids.node[i] = c
	t.deleteIn(c, k, m)
	n.kids.count[i]--
	t.rebalance(n, i)
}

// rebalance drops child i of n if it is empty, or merges it into a
// neighbour when it is under a quarter full and the two fit in one node.
// Nodes are never refilled from a neighbour: a node and its neighbour are
// then together over three quarters full, which keeps the tree's height
// logarithmic.
func (t *ztree) rebalance(n *znode, i int) {
	c := n.kids.node[i]
	switch {
	case c.n == 0:
		n.removeAt(i)
	case c.n >= ztreeFan/4:
	case i > 0 && fitTogether(n.kids.node[i-1], c):
		t.merge(n, i-1)
	case i+1 < n.n && fitTogether(c, n.kids.node[i+1]):
		t.merge(n, i)
	}
}

// fitTogether reports whether neighbours a and b fit in one node, with a
// separator between them.
func fitTogether(a, b *znode) bool {
	return a.n+b.n <= ztreeFan && a.live+b.live <= ztreeMaxBytes-ztreeMaxMember
}

// merge moves child i+1 of n into child i.
func (t *ztree) merge(n *znode, i int) {
	left := t.mut(n.kids.node[i])
	right := n.kids.node[i+1]
	start := left.n
	for j := range right.n {
		left.appendSlot(right, j)
	}
	if left.kids != nil {
		// Right's first child is now bounded below by n's separator.
		left.setSlot(start, n.k[i+1], 0, n.member(i+1))
	}
	left.compact(0)
	n.kids.node[i], n.kids.count[i] = left, left.count
	n.removeAt(i + 1)
}

// at returns entry i (0 <= i < len).
func (t *ztree) at(i int) (k, v uint64, m string) {
	n := t.root
	for n.kids != nil {
		j := 0
		for i >= n.kids.count[j] {
			i -= n.kids.count[j]
			j++
		}
		n = n.kids.node[j]
	}
	return n.k[i], n.value(i), n.member(i)
}

// search returns the number of entries for which before is true, before
// being true for a prefix of the order and false after it; O(log n).
func (t *ztree) search(before func(k uint64, m string) bool) int {
	n := t.root
	if n == nil {
		return 0
	}
	rank := 0
	for n.kids != nil {
		lo, hi := 1, n.n
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if before(n.k[mid], n.member(mid)) {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		for j := range lo - 1 {
			rank += n.kids.count[j]
		}
		n = n.kids.node[lo-1]
	}
	lo, hi := 0, n.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if before(n.k[mid], n.member(mid)) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return rank + lo
}

// walk calls fn for the entries from rank i on, upwards, or downwards
// when rev, until fn returns false.
func (t *ztree) walk(i int, rev bool, fn func(k, v uint64, m string) bool) {
	if t.root == nil || i < 0 || i >= t.root.count {
		return
	}
	walkNode(t.root, i, rev, fn)
}

func walkNode(n *znode, i int, rev bool, fn func(k, v uint64, m string) bool) bool {
	if n.kids == nil {
		if rev {
			for ; i >= 0; i-- {
				if !fn(n.k[i], n.value(i), n.member(i)) {
					return false
				}
			}
			return true
		}
		for ; i < n.n; i++ {
			if !fn(n.k[i], n.value(i), n.member(i)) {
				return false
			}
		}
		return true
	}
	j := 0
	for i >= n.kids.count[j] {
		i -= n.kids.count[j]
		j++
	}
	if !walkNode(n.kids.node[j], i, rev, fn) {
		return false
	}
	if rev {
		for j--; j >= 0; j-- {
			if !walkNode(n.kids.node[j], n.kids.count[j]-1, true, fn) {
				return false
			}
		}
		return true
	}
	for j++; j < n.n; j++ {
		if !walkNode(n.kids.node[j], 0, false, fn) {
			return false
		}
	}
	return true
}
