package fsm

import (
	"math/rand/v2"
	"strconv"
)

// HRANDFIELD and HSCAN: the hash reads that pick or page.

const errHScanSyntax = "ERR syntax error"

var replyEmptyScan = Reply{Kind: ReplyArray, Array: []Reply{BulkReply([]byte("0")), {Kind: ReplyArray, Array: []Reply{}}}}

// hashPicker returns the i-th field and value of a hash, for random picks:
// a packed hash is decoded once, a large one indexed by rank (the tree
// keeps subtree counts), so a pick is O(log n).
func hashPicker(it *item) func(i int) (f, v []byte) {
	if it.obj != nil {
		t := it.obj.(*hashObj).tree
		return func(i int) ([]byte, []byte) {
			e, _ := t.GetAt(i)
			return e.split()
		}
	}
	ps := make([]hpair, 0, packedLen(it.val))
	packedEach(it.val, func(f, v []byte) bool {
		ps = append(ps, hpair{f: f, v: v})
		return true
	})
	return func(i int) ([]byte, []byte) { return ps[i].f, ps[i].v }
}

// readHRandField answers HRANDFIELD as Redis does: without a count one
// field or nil; a negative count that many picks, repeats allowed; a count
// at least the size the whole hash; otherwise that many distinct fields.
// Random choice is a read, so it need not be deterministic.
func readHRandField(s *Store, now int64, c *Command) Reply {
	if c.Flags&FlagHashCount == 0 {
		it, r, done := hashRead(s, now, c.Args[0], replyNil)
		if done {
			return r
		}
		f, _ := hashPicker(&it)(rand.IntN(hashLen(&it)))
		return BulkReply(f)
	}
	empty := Reply{Kind: ReplyArray, Array: []Reply{}}
	it, r, done := hashRead(s, now, c.Args[0], empty)
	if done {
		return r
	}
	count, n := c.Int, hashLen(&it)
	withValues := c.Flags&FlagHashWithValues != 0
	var idx []int
	switch {
	case count == 0:
		return empty
	case count < -MaxHRandFieldRepeats:
		return ErrorReply(errOutOfRange)
	case count < 0:
		idx = make([]int, -count)
		for i := range idx {
			idx[i] = rand.IntN(n)
		}
	case count >= int64(n):
		idx = make([]int, n)
		for i := range idx {
			idx[i] = i
		}
	default:
		idx = distinctPicks(n, int(count))
	}
	at := hashPicker(&it)
	if !withValues {
		out := make([]Reply, len(idx))
		for i, j := range idx {
			f, _ := at(j)
			out[i] = BulkReply(f)
		}
		return Reply{Kind: ReplyArray, Array: out}
	}
	flat := make([]Reply, 2*len(idx))
	out := make([]Reply, len(idx))
	for i, j := range idx {
		f, v := at(j)
		flat[2*i], flat[2*i+1] = BulkReply(f), BulkReply(v)
		out[i] = Reply{Kind: ReplyArray, Array: flat[2*i : 2*i+2 : 2*i+2]}
	}
	return Reply{Kind: ReplyPairs, Array: out}
}

// distinctPicks returns m distinct indices below n (m < n), by Floyd's
// sampling: O(m) whatever n is.
func distinctPicks(n, m int) []int {
	chosen := make(map[int]bool, m)
	out := make([]int, 0, m)
	for j := n - m; j < n; j++ {
		t := rand.IntN(j + 1)
		if chosen[t] {
			t = j
		}
		chosen[t] = true
		out = append(out, t)
	}
	rand.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// readHScan answers HSCAN. A packed hash is returned whole with cursor 0,
// whatever the cursor, as Redis returns a listpack. A large one is paged
// like SCAN: about Int2 fields from the cursor on, never ending a page
// inside a run of equal hashes, and the next cursor is the hash of the
// first field not visited.
func readHScan(s *Store, now int64, c *Command) Reply {
	it, r, done := hashRead(s, now, c.Args[0], replyEmptyScan)
	if done {
		return r
	}
	switch {
	case c.Flags&FlagHScanSyntax != 0:
		return ErrorReply(errHScanSyntax)
	case c.Flags&FlagHScanNotInteger != 0:
		return ErrorReply(ErrNotInteger)
	}
	pattern := string(c.Args[1])
	usePattern := c.Flags&FlagHScanMatch != 0 && pattern != "*"
	out := []Reply{}
	add := func(f, v []byte) {
		if !usePattern || matchGlob(pattern, unsafeString(f)) {
			out = append(out, BulkReply(f), BulkReply(v))
		}
	}
	var next uint64
	switch {
	case it.obj == nil:
		packedEach(it.val, func(f, v []byte) bool { add(f, v); return true })
	case c.Int >= 0:
		count := c.Int2
		if count <= 0 {
			count = 10
		}
		var visited int64
		var last uint64
		it.obj.(*hashObj).tree.Ascend(hentry{hash: uint64(c.Int) &^ 1}, func(e hentry) bool {
			if visited >= count && e.hash != last {
				next = e.hash
				return false
			}
			visited++
			last = e.hash
			add(e.split())
			return true
		})
	}
	cursor := strconv.AppendUint(nil, next, 10)
	return Reply{Kind: ReplyArray, Array: []Reply{BulkReply(cursor), {Kind: ReplyArray, Array: out}}}
}
