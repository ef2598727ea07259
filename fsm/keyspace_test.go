package fsm

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// check verifies every invariant of the keyspace's trees: items in strict
// (hash, key) order within and across shards, each in its shard, every
// separator a lower bound of its child and above the child before, node
// sizes within bounds, counts and earliest deadlines that are those of the
// children, the shard and keyspace totals, and the segment tree of
// deadlines.
func (ks *keyspace) check(t testing.TB) {
	t.Helper()
	var prev *item
	n, ttls := 0, 0
	for s := range ks.shards {
		r := &ks.shards[s]
		if r.inner != nil && r.leaf != nil {
			t.Fatalf("shard %d has two roots", s)
		}
		cnt, due := 0, int64(noExp)
		visit := func(it *item) {
			if shardOf(it.hash) != s {
				t.Fatalf("key %q (hash %x) in shard %d", it.key, it.hash, s)
			}
			if prev != nil && !itemLess(*prev, *it) {
				t.Fatalf("key %q (hash %x) after %q (hash %x)", it.key, it.hash, prev.key, prev.hash)
			}
			prev = it
			cnt++
			if it.exp != 0 {
				ttls++
				due = min(due, it.exp)
			}
		}
		switch {
		case r.inner != nil:
			if r.inner.n < 2 {
				t.Fatalf("shard %d: inner root with %d children", s, r.inner.n)
			}
			checkInner(t, r.inner, visit, true, true)
		case r.leaf != nil:
			if r.leaf.n == 0 {
				t.Fatalf("shard %d: empty leaf root", s)
			}
			checkLeaf(t, r.leaf, visit, true, true)
		}
		if cnt != r.n {
			t.Fatalf("shard %d holds %d items, counts %d", s, cnt, r.n)
		}
		if got := r.min(); got != due {
			t.Fatalf("shard %d: earliest deadline %d, tree says %d", s, due, got)
		}
		if ks.due != nil && ks.due[keyShards+s] != due {
			t.Fatalf("shard %d: earliest deadline %d, segment tree says %d", s, due, ks.due[keyShards+s])
		}
		n += cnt
	}
	if n != ks.n || ttls != ks.ttls {
		t.Fatalf("%d items (%d with deadlines), counted %d (%d)", n, ttls, ks.n, ks.ttls)
	}
	if ks.due != nil {
		for j := keyShards - 1; j >= 1; j-- {
			if ks.due[j] != min(ks.due[2*j], ks.due[2*j+1]) {
				t.Fatalf("segment tree node %d: %d, children %d and %d", j, ks.due[j], ks.due[2*j], ks.due[2*j+1])
			}
		}
	}
}

// A node below its minimum size is allowed only at the root, or as the
// last of its level, which appends in order split off.
func checkLeaf(t testing.TB, l *ktLeaf, visit func(*item), root, rightmost bool) (first, last *item) {
	t.Helper()
	if l.n > ktLeafMax || l.n == 0 || (!root && !rightmost && l.n < ktLeafMin) {
		t.Fatalf("leaf with %d items", l.n)
	}
	for i := l.n; i < len(l.it); i++ {
		if it := &l.it[i]; it.key != "" || it.val != nil || it.obj != nil || it.hash != 0 || it.exp != 0 {
			t.Fatalf("leaf slot %d past its %d items is not cleared", i, l.n)
		}
	}
	for i := range l.n {
		if l.hash[i] != l.it[i].hash {
			t.Fatalf("leaf slot %d: hash %x, item's %x", i, l.hash[i], l.it[i].hash)
		}
		visit(&l.it[i])
	}
	for i := l.n; i < len(l.hash); i++ {
		if l.hash[i] != 0 {
			t.Fatalf("leaf hash %d past its %d items is not cleared", i, l.n)
		}
	}
	return &l.it[0], &l.it[l.n-1]
}

func checkInner(t testing.TB, x *ktInner, visit func(*item), root, rightmost bool) (first, last *item) {
	t.Helper()
	if x.n > ktInnerMax || x.n == 0 || (!root && !rightmost && x.n < ktInnerMin) {
		t.Fatalf("inner node with %d children", x.n)
	}
	for j := range x.n {
		if (x.e[j].leaf != nil) != x.leafKids || (x.e[j].inner != nil) == x.leafKids {
			t.Fatalf("inner node child %d of the wrong kind", j)
		}
		var f, l *item
		var cnt int
		if x.leafKids {
			f, l = checkLeaf(t, x.e[j].leaf, visit, false, rightmost && j == x.n-1)
			cnt = x.e[j].leaf.n
		} else {
			f, l = checkInner(t, x.e[j].inner, visit, false, rightmost && j == x.n-1)
			c := x.e[j].inner
			for _, k := range c.cnt[:c.n] {
				cnt += k
			}
		}
		if x.cnt[j] != cnt {
			t.Fatalf("child %d holds %d items, counted %d", j, cnt, x.cnt[j])
		}
		if got := x.childMin(j); x.minExp[j] != got {
			t.Fatalf("child %d: earliest deadline %d, recorded %d", j, got, x.minExp[j])
		}
		if j > 0 {
			sep := item{hash: x.e[j].hash, key: x.sepKey[j]}
			if itemLess(*f, sep) || !itemLess(*last, sep) {
				t.Fatalf("separator %x/%q of child %d: first item %x/%q, previous child's last %x/%q",
					sep.hash, sep.key, j, f.hash, f.key, last.hash, last.key)
			}
		}
		if j == 0 {
			first = f
		}
		last = l
	}
	for j := x.n; j < len(x.e); j++ {
		if x.e[j] != (ktEdge{}) || x.sepKey[j] != "" || x.cnt[j] != 0 {
			t.Fatalf("inner slot %d past its %d children is not cleared", j, x.n)
		}
	}
	return first, last
}

// ksModel is what the keyspace should hold: items by key.
type ksModel map[string]item

// itemCmp is itemLess as a three-way comparison, for slices' sorts and
// searches.
func itemCmp(a, b item) int {
	switch {
	case itemLess(a, b):
		return -1
	case itemLess(b, a):
		return 1
	}
	return 0
}

func (m ksModel) sorted() []item {
	out := make([]item, 0, len(m))
	for _, it := range m {
		out = append(out, it)
	}
	slices.SortFunc(out, itemCmp)
	return out
}

func ksItems(ks *keyspace) []item {
	var out []item
	ks.Scan(func(it item) bool { out = append(out, it); return true })
	return out
}

func sameItems(a, b []item) bool {
	return slices.EqualFunc(a, b, func(x, y item) bool {
		return x.hash == y.hash && x.key == y.key && x.exp == y.exp && string(x.val) == string(y.val)
	})
}

// TestKeyspaceModel runs random inserts, replaces, deadline changes and
// deletes against a map, with hashes drawn from a small set so that runs
// of equal hashes (keyHash collisions) cross leaf boundaries, and checks
// the tree's invariants, lookups, ranks, ascents from random pivots, the
// expired scans, and that views taken along the way never change.
func TestKeyspaceModel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hashes   int // distinct hashes per shard used (0: one per key)
		shards   int
		keys     int
		steps    int
		delRate  int  // percent of steps that delete
		ordered  bool // keys come in hash order for the first third, as a restore's do
		backward bool // drained from the last key back, so full left neighbours give to the right
	}{
		{"collisions", 3, 1, 400, 6000, 40, false, false},
		{"one shard deep", 0, 1, 20000, 60000, 45, false, false},
		{"many shards", 0, keyShards, 5000, 20000, 50, false, false},
		{"grow then drain", 0, 4, 6000, 30000, 70, false, false},
		{"loaded in order", 0, 2, 30000, 60000, 40, true, false},
		{"three levels", 0, 1, 20000, 30000, 20, false, false},
		{"full, drained backwards", 0, 1, 20000, 20000, 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			ks := newKeys()
			model := ksModel{}
			hashOf := func(k int) uint64 {
				shard := uint64(k % tc.shards)
				var low uint64
				switch {
				case tc.ordered:
					low = uint64(k/tc.shards)*64 + 1
				case tc.hashes > 0:
					low = uint64(k%tc.hashes)*2 + 1
				default:
					low = (uint64(k)*0x9E3779B97F4A7C15)>>(keyShardBits+2) | 1
				}
				return shard<<(63-keyShardBits) | low&(1<<(63-keyShardBits)-1)
			}
			type view struct {
				ks   *keyspace
				want []item
			}
			var views []view
			for step := range tc.steps {
				k := rng.IntN(tc.keys)
				if tc.backward || ((tc.ordered || tc.name == "grow then drain") && step < tc.steps/3) {
					k = step % tc.keys
				}
				key := "k" + strconv.Itoa(k)
				h := hashOf(k)
				if rng.IntN(10) == 0 { // a change in place, as INCR makes
					p := ks.findForWrite(h, key)
					want, wok := model[key]
					if (p != nil) != wok {
						t.Fatalf("step %d: findForWrite(%s) found %v, want %v", step, key, p != nil, wok)
					}
					if p != nil {
						p.val = []byte("in place " + strconv.Itoa(step))
						ks.written(p)
						want.val = p.val
						model[key] = want
					}
				} else if rng.IntN(100) < tc.delRate {
					prev, ok := ks.Delete(item{hash: h, key: key})
					want, wok := model[key]
					if ok != wok || (ok && string(prev.val) != string(want.val)) {
						t.Fatalf("step %d: Delete(%s) = %q %v, want %q %v", step, key, prev.val, ok, want.val, wok)
					}
					delete(model, key)
				} else {
					var exp int64
					if rng.IntN(3) == 0 {
						exp = 1 + rng.Int64N(1000)
					}
					it := item{hash: h, key: key, val: []byte(strconv.Itoa(step)), exp: exp, kind: kindString}
					prev, replaced := ks.Set(it)
					want, wok := model[key]
					if replaced != wok || (replaced && string(prev.val) != string(want.val)) {
						t.Fatalf("step %d: Set(%s) replaced %q %v, want %q %v", step, key, prev.val, replaced, want.val, wok)
					}
					model[key] = it
				}
				if got, ok := ks.Get(item{hash: h, key: key}); ok != (model[key].key != "") || (ok && string(got.val) != string(model[key].val)) {
					t.Fatalf("step %d: Get(%s) = %q %v", step, key, got.val, ok)
				}
				if step%(tc.steps/20) == 0 {
					ks.check(t)
					views = append(views, view{ks.Copy(), model.sorted()})
				}
			}
			ks.check(t)
			if tc.name == "three levels" || tc.backward {
				depth := 1
				for x := ks.shards[0].inner; x != nil; x = x.e[0].inner {
					depth++
				}
				if depth < 3 {
					t.Fatalf("the tree is %d levels deep, want 3 to test inner nodes' merges", depth)
				}
			}
			want := model.sorted()
			if got := ksItems(ks); !sameItems(got, want) {
				t.Fatalf("Scan: %d items, want %d", len(got), len(want))
			}
			for _, v := range views {
				v.ks.check(t)
				if got := ksItems(v.ks); !sameItems(got, v.want) {
					t.Fatalf("a view changed after it was taken: %d items, want %d", len(got), len(v.want))
				}
			}
			// Ranks, rank queries and ascents from pivots that are
			// items, and pivots between them.
			for range 200 {
				if len(want) == 0 {
					break
				}
				i := rng.IntN(len(want))
				if got, ok := ks.GetAt(i); !ok || got.key != want[i].key {
					t.Fatalf("GetAt(%d) = %q, want %q", i, got.key, want[i].key)
				}
				pivot := want[i]
				if rng.IntN(2) == 0 {
					pivot = item{hash: pivot.hash, key: pivot.key + "\x00"}
				}
				var got []item
				ks.Ascend(pivot, func(it item) bool { got = append(got, it); return len(got) < 50 })
				j, _ := slices.BinarySearchFunc(want, pivot, itemCmp)
				if exp := want[j:min(j+50, len(want))]; !sameItems(got, exp) {
					t.Fatalf("Ascend from %q: %d items, want %d", pivot.key, len(got), len(exp))
				}
				s := shardOf(pivot.hash)
				rank := 0
				for _, it := range want {
					if shardOf(it.hash) == s && it.hash < pivot.hash {
						rank++
					}
				}
				if got := ks.rankInShard(s, pivot.hash); got != rank {
					t.Fatalf("rankInShard(%d, %x) = %d, want %d", s, pivot.hash, got, rank)
				}
			}
			// Expiry: the count, the scan, and the earliest-first order.
			for _, now := range []int64{0, 1, 250, 500, 999, 1000, 2000} {
				var due []item
				for _, it := range want {
					if it.expired(now) {
						due = append(due, it)
					}
				}
				if got := ks.countExpired(now); got != len(due) {
					t.Fatalf("countExpired(%d) = %d, want %d", now, got, len(due))
				}
				seen := 0
				ks.scanExpired(now, func(it *item) bool {
					if !it.expired(now) {
						t.Fatalf("scanExpired(%d) gave %q due at %d", now, it.key, it.exp)
					}
					seen++
					return true
				})
				if seen != len(due) {
					t.Fatalf("scanExpired(%d) saw %d, want %d", now, seen, len(due))
				}
				var order []item
				ks.earliest(now, func(it *item) bool { order = append(order, *it); return true })
				slices.SortStableFunc(due, func(a, b item) int {
					if a.exp != b.exp {
						return int(a.exp - b.exp)
					}
					if a.key < b.key {
						return -1
					}
					return 1
				})
				if !sameItems(order, due) {
					t.Fatalf("earliest(%d): %d items in the wrong order or missing (want %d)", now, len(order), len(due))
				}
			}
			// Drain everything, in random order, checking the trees
			// as their inner nodes merge and share: the shards end
			// empty.
			order := rng.Perm(len(want))
			if tc.backward {
				for i := range order {
					order[i] = len(want) - 1 - i
				}
			}
			for n, i := range order {
				if _, ok := ks.Delete(want[i]); !ok {
					t.Fatalf("Delete(%q) found nothing", want[i].key)
				}
				if n%500 == 0 {
					ks.check(t)
				}
			}
			ks.check(t)
			if ks.Len() != 0 || ks.nextDue() != noExp {
				t.Fatalf("after draining: %d items, next deadline %d", ks.Len(), ks.nextDue())
			}
			for _, v := range views {
				if got := ksItems(v.ks); !sameItems(got, v.want) {
					t.Fatalf("a view changed when the keyspace was drained")
				}
			}
		})
	}
}

// TestSearchNearMatchesSearch checks that the interpolating searches give
// the binary searches' answers on leaves and inner nodes whose hashes are
// spread evenly, bunched at one end, or all equal, for hashes inside and
// at the edges of the node's range.
func TestSearchNearMatchesSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 3000 {
		lo := rng.Uint64N(1 << 40)
		hi := lo + 1 + rng.Uint64N(1<<40)
		n := 1 + rng.IntN(ktLeafMax)
		hashes := make([]uint64, n)
		for i := range hashes {
			switch round % 3 {
			case 0: // even
				hashes[i] = lo + rng.Uint64N(hi-lo)
			case 1: // bunched near lo
				hashes[i] = lo + rng.Uint64N(min(hi-lo, 50))
			default: // few distinct
				hashes[i] = lo + uint64(rng.IntN(3))%(hi-lo)
			}
		}
		slices.Sort(hashes)
		l := &ktLeaf{n: n}
		x := &ktInner{n: n}
		for i, h := range hashes {
			key := "k" + strconv.Itoa(i)
			l.hash[i], l.it[i] = h, item{hash: h, key: key}
			if i > 0 {
				x.e[i].hash = h
				if h == hashes[i-1] {
					x.sepKey[i] = key
				}
			}
		}
		for range 20 {
			h := lo + rng.Uint64N(hi-lo)
			if rng.IntN(4) == 0 {
				h = hashes[rng.IntN(n)]
			}
			key := "k" + strconv.Itoa(rng.IntN(n+2))
			i1, ok1 := l.search(h, key)
			i2, ok2 := l.searchNear(h, key, lo, hi)
			if i1 != i2 || ok1 != ok2 {
				t.Fatalf("leaf %v: searchNear(%d, %q) = %d %v, search %d %v", hashes, h, key, i2, ok2, i1, ok1)
			}
			if c1, c2 := x.child(h, key), x.childNear(h, key, lo, hi); c1 != c2 {
				t.Fatalf("inner %v: childNear(%d, %q) = %d, child %d", hashes, h, key, c2, c1)
			}
		}
	}
}
