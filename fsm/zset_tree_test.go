package fsm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// zref is a ztree's model: its entries in order.
type zref struct{ ents []zrefEnt }

type zrefEnt struct {
	k, v uint64
	m    string
}

func (r *zref) index(k uint64, m string) (int, bool) {
	return slices.BinarySearchFunc(r.ents, zrefEnt{k: k, m: m}, func(a, b zrefEnt) int {
		switch {
		case zkeyLess(a.k, a.m, b.k, b.m):
			return -1
		case zkeyLess(b.k, b.m, a.k, a.m):
			return 1
		}
		return 0
	})
}

func (r *zref) set(k, v uint64, m string) bool {
	i, ok := r.index(k, m)
	if ok {
		r.ents[i].v = v
		return true
	}
	r.ents = slices.Insert(r.ents, i, zrefEnt{k, v, m})
	return false
}

func (r *zref) delete(k uint64, m string) bool {
	i, ok := r.index(k, m)
	if ok {
		r.ents = slices.Delete(r.ents, i, i+1)
	}
	return ok
}

// checkZTree checks t's structure (counts, order, separators bounding
// their children) and that it holds exactly want.
func checkZTree(t *testing.T, tr *ztree, want []zrefEnt) {
	t.Helper()
	var got []zrefEnt
	tr.walk(0, false, func(k, v uint64, m string) bool {
		got = append(got, zrefEnt{k, v, strings.Clone(m)})
		return true
	})
	if len(want) == 0 && len(got) == 0 {
		if tr.len() != 0 {
			t.Fatalf("empty tree has len %d", tr.len())
		}
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tree holds %d entries, want %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
	if tr.len() != len(want) {
		t.Fatalf("len %d, want %d", tr.len(), len(want))
	}
	var check func(n *znode, lo *zrefEnt) int
	check = func(n *znode, lo *zrefEnt) int {
		if n.n == 0 {
			t.Fatalf("empty node")
		}
		live := 0
		for i := range n.n {
			live += len(n.member(i))
		}
		if live != n.live {
			t.Fatalf("node says its members take %d bytes, they take %d", n.live, live)
		}
		if live > 2*ztreeMaxBytes+ztreeMaxMember || cap(n.mem) > 3*ztreeMaxBytes {
			t.Fatalf("node holds %d bytes in a buffer of %d (most: %d)", live, cap(n.mem), ztreeMaxBytes)
		}
		if n.kids == nil {
			for i := range n.n {
				if lo != nil && zkeyLess(n.k[i], n.member(i), lo.k, lo.m) {
					t.Fatalf("leaf entry below its separator")
				}
			}
			if n.count != n.n {
				t.Fatalf("leaf count %d, holds %d", n.count, n.n)
			}
			return n.n
		}
		total := 0
		for i := range n.n {
			b := lo
			if i > 0 {
				b = &zrefEnt{k: n.k[i], m: n.member(i)}
			}
			c := check(n.kids.node[i], b)
			if c != n.kids.count[i] {
				t.Fatalf("child count %d, holds %d", n.kids.count[i], c)
			}
			if i+1 < n.n {
				var last zrefEnt
				walkNode(n.kids.node[i], c-1, true, func(k, _ uint64, m string) bool { last = zrefEnt{k: k, m: m}; return false })
				if !zkeyLess(last.k, last.m, n.k[i+1], n.member(i+1)) {
					t.Fatalf("child %d reaches its right separator", i)
				}
			}
			total += c
		}
		if total != n.count {
			t.Fatalf("inner count %d, holds %d", n.count, total)
		}
		return total
	}
	check(tr.root, nil)
}

func firstDiff(a, b []zrefEnt) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestZTreeModel drives a ztree and a sorted slice with the same random
// writes, many keys equal so members decide the order, and compares them,
// with copies taken along the way that must keep their contents.
func TestZTreeModel(t *testing.T) {
	t.Run("values", func(t *testing.T) { testZTreeModel(t, true, false) })
	t.Run("bits", func(t *testing.T) { testZTreeModel(t, false, false) })
	// Nodes limited by bytes as by count, with a small limit.
	t.Run("long-members", func(t *testing.T) {
		defer func(b, m int) { ztreeMaxBytes, ztreeMaxMember = b, m }(ztreeMaxBytes, ztreeMaxMember)
		ztreeMaxBytes, ztreeMaxMember = 3000, 600
		testZTreeModel(t, true, true)
	})
}

func testZTreeModel(t *testing.T, withValues, long bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr, ref := newZTree(withValues), &zref{}
	type frozen struct {
		tr   *ztree
		want []zrefEnt
	}
	var copies []frozen
	member := func() string {
		m := fmt.Sprintf("m%d", rng.IntN(30000))
		if long {
			m += strings.Repeat("x", rng.IntN(ztreeMaxMember-len(m)))
		}
		return m
	}
	for step := range 60_000 {
		k := uint64(rng.IntN(50))
		m := member()
		switch op := rng.IntN(10); {
		case op < 6 || step < 20_000:
			v := rng.Uint64()
			if !withValues {
				v &= 1
			}
			if got, want := tr.set(k, v, m), ref.set(k, v, m); got != want {
				t.Fatalf("step %d: set replaced=%v, want %v", step, got, want)
			}
		case op < 9 && rng.IntN(4) == 0 && len(ref.ents) > 0:
			// By rank, as ZPOPMIN and ZREMRANGEBYRANK delete.
			i := rng.IntN(len(ref.ents))
			e := ref.ents[i]
			k, v, m := tr.deleteAt(i)
			if k != e.k || v != e.v || m != e.m {
				t.Fatalf("step %d: deleteAt(%d) = %d %d %q, want %v", step, i, k, v, m, e)
			}
			ref.delete(e.k, e.m)
		case op < 9:
			if rng.IntN(2) == 0 && len(ref.ents) > 0 {
				e := ref.ents[rng.IntN(len(ref.ents))]
				k, m = e.k, e.m
			}
			if got, want := tr.delete(k, m), ref.delete(k, m); got != want {
				t.Fatalf("step %d: delete=%v, want %v", step, got, want)
			}
		default:
			if len(ref.ents) == 0 {
				continue
			}
			i := rng.IntN(len(ref.ents))
			k, v, m := tr.at(i)
			if e := ref.ents[i]; e.k != k || e.v != v || e.m != m {
				t.Fatalf("step %d: at(%d) = %d %d %q, want %v", step, i, k, v, m, e)
			}
			if got, ok := tr.get(k, m); !ok || got != v {
				t.Fatalf("step %d: get %q = %d %v", step, m, got, ok)
			}
			r := tr.search(func(k2 uint64, m2 string) bool { return zkeyLess(k2, m2, k, m) })
			if r != i {
				t.Fatalf("step %d: search rank %d, want %d", step, r, i)
			}
		}
		if step%10_000 == 0 {
			checkZTree(t, tr, ref.ents)
			copies = append(copies, frozen{tr.copy(), slices.Clone(ref.ents)})
		}
		// Near the end, drain most of it so nodes merge and the root
		// shrinks.
		if step == 50_000 {
			for len(ref.ents) > 50 {
				i := rng.IntN(len(ref.ents))
				e := ref.ents[i]
				if rng.IntN(2) == 0 { // by rank, as ZPOPMIN from either end
					i = rng.IntN(2) * (len(ref.ents) - 1)
					e = ref.ents[i]
					if k, _, m := tr.deleteAt(i); k != e.k || m != e.m || !ref.delete(e.k, e.m) {
						t.Fatalf("drain: deleteAt(%d) = %d %q, want %v", i, k, m, e)
					}
					continue
				}
				if !tr.delete(e.k, e.m) || !ref.delete(e.k, e.m) {
					t.Fatalf("drain: %v missing", e)
				}
			}
			checkZTree(t, tr, ref.ents)
		}
	}
	checkZTree(t, tr, ref.ents)
	for _, c := range copies {
		checkZTree(t, c.tr, c.want)
	}
}

// TestZTreeWalkFrom checks walks from every rank, both ways, and that
// members handed out stay as they were after the tree changes.
func TestZTreeWalkFrom(t *testing.T) {
	tr, ref := newZTree(false), &zref{}
	for i := range 5000 {
		m := fmt.Sprintf("member-%05d", (i*7919)%5000)
		tr.set(uint64(i%7), uint64(i%2), m)
		ref.set(uint64(i%7), uint64(i%2), m)
	}
	held := make([]string, len(ref.ents))
	for i := range held {
		_, _, held[i] = tr.at(i)
	}
	for i := 0; i < len(ref.ents); i += 37 {
		var up, down []zrefEnt
		tr.walk(i, false, func(k, v uint64, m string) bool { up = append(up, zrefEnt{k, v, m}); return len(up) < 100 })
		tr.walk(i, true, func(k, v uint64, m string) bool { down = append(down, zrefEnt{k, v, m}); return len(down) < 100 })
		want := ref.ents[i:min(i+100, len(ref.ents))]
		if !slices.Equal(up, want) {
			t.Fatalf("walk up from %d differs", i)
		}
		wantDown := slices.Clone(ref.ents[max(0, i-99) : i+1])
		slices.Reverse(wantDown)
		if !slices.Equal(down, wantDown) {
			t.Fatalf("walk down from %d differs", i)
		}
	}
	for i, e := range ref.ents {
		if i%2 == 0 {
			tr.delete(e.k, e.m)
		}
	}
	for i := range 5000 {
		tr.set(99, 0, fmt.Sprintf("new-%d", i))
	}
	for i, e := range ref.ents {
		if held[i] != e.m {
			t.Fatalf("member %d handed out as %q now reads %q", i, e.m, held[i])
		}
	}
}

func TestScoreKeyOrder(t *testing.T) {
	inf := math.Inf(1)
	scores := []float64{-inf, -1e300, -2, -1, -1e-300, 0, 1e-300, 1, 2, 1e300, inf}
	for i := 1; i < len(scores); i++ {
		if scoreKey(scores[i-1]) >= scoreKey(scores[i]) {
			t.Fatalf("scoreKey(%g) >= scoreKey(%g)", scores[i-1], scores[i])
		}
	}
	for _, s := range scores {
		if keyScore(scoreKey(s)) != s {
			t.Fatalf("keyScore(scoreKey(%g)) = %g", s, keyScore(scoreKey(s)))
		}
	}
	negZero := -1 / inf
	if scoreKey(negZero) != scoreKey(0) {
		t.Fatalf("-0 and 0 have different keys")
	}
}

// TestZTreeCopiesDiverge writes different entries into a tree and its
// copy: neither may see the other's, though they share nodes (and those
// nodes' buffers) until each writes them.
func TestZTreeCopiesDiverge(t *testing.T) {
	a, ra := newZTree(true), &zref{}
	for i := range 3000 {
		m := fmt.Sprintf("base-%d", i)
		a.set(uint64(i%13), uint64(i), m)
		ra.set(uint64(i%13), uint64(i), m)
	}
	b, rb := a.copy(), &zref{ents: slices.Clone(ra.ents)}
	for i := range 3000 {
		k := uint64(i % 13)
		ma, mb := fmt.Sprintf("a-%d", i), fmt.Sprintf("b-%d", i)
		a.set(k, 1, ma)
		ra.set(k, 1, ma)
		b.set(k, 2, mb)
		rb.set(k, 2, mb)
		if i%3 == 0 {
			e := ra.ents[i]
			a.delete(e.k, e.m)
			ra.delete(e.k, e.m)
		}
	}
	checkZTree(t, a, ra.ents)
	checkZTree(t, b, rb.ents)
}

// TestZTreeNoSmallPointerFreeObjects checks that a tree allocates no
// pointer-free object of 512 bytes or less, the sizes whose live spans the
// runtime's heap reclaimer sweeps in one allocation after every
// collection (see zminAlloc): member buffers of short members in full
// and part-full nodes, leaves and inner nodes, after splits and merges.
func TestZTreeNoSmallPointerFreeObjects(t *testing.T) {
	const limit = 512
	if s := unsafe.Sizeof(zvals{}); s <= limit {
		t.Errorf("a leaf's values take %d bytes, want more than %d", s, limit)
	}
	for _, withValues := range []bool{true, false} {
		tr := newZTree(withValues)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 20000 {
			tr.set(uint64(rng.IntN(1000)), 1, fmt.Sprintf("%08d", i))
		}
		for i := range 15000 {
			k, _, m := tr.at(rng.IntN(20000 - i))
			tr.delete(k, m)
		}
		var check func(n *znode)
		check = func(n *znode) {
			if n.mem != nil && cap(n.mem) <= limit {
				t.Fatalf("withValues=%v: a node of %d entries has a member buffer of %d bytes, want more than %d", withValues, n.n, cap(n.mem), limit)
			}
			if n.kids != nil {
				for i := range n.n {
					check(n.kids.node[i])
				}
			}
		}
		check(tr.root)
	}
}
