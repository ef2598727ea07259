package fsm

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestListCommands(t *testing.T) {
	s := NewStore()
	nilArray := Reply{Kind: ReplyNilArray}
	run(t, s, []step{
		{t0, c(OpLPop, "l"), nilr},
		{t0, c(OpLPop, "l").fl(FlagListCount).i(2), nilArray},
		{t0, c(OpLLen, "l"), in(0)},
		{t0, c(OpLRange, "l").i(0).i2(-1), arr()},
		{t0, c(OpLPushX, "l", "a"), in(0)},
		{t0, c(OpLPush, "l", "a", "b", "c"), in(3)},
		{t0, c(OpRPush, "l", "d"), in(4)},
		{t0, c(OpLRange, "l").i(0).i2(-1), bulks("c", "b", "a", "d")},
		{t0, c(OpLRange, "l").i(-100).i2(1), bulks("c", "b")},
		{t0, c(OpLRange, "l").i(3).i2(1), arr()},
		{t0, c(OpLRange, "l").i(math.MinInt64).i2(math.MaxInt64), bulks("c", "b", "a", "d")},
		{t0, c(OpLIndex, "l").i(-1), bulk("d")},
		{t0, c(OpLIndex, "l").i(4), nilr},
		{t0, c(OpLIndex, "l").fl(FlagListBadIndex), errr(ErrNotInteger)},
		{t0, c(OpLIndex, "nokey").fl(FlagListBadIndex), nilr},
		{t0, c(OpLSet, "l", "B").i(1), ok},
		{t0, c(OpLSet, "l", "B").i(4), errr(ErrIndexOutOfRange)},
		{t0, c(OpLSet, "nokey", "B").i(0), errr(ErrNoSuchKey)},
		{t0, c(OpLInsert, "l", "a", "x").fl(FlagListAfter), in(5)},
		{t0, c(OpLInsert, "l", "zz", "x"), in(-1)},
		{t0, c(OpLInsert, "nokey", "a", "x"), in(0)},
		{t0, c(OpLRange, "l").i(0).i2(-1), bulks("c", "B", "a", "x", "d")},
		{t0, c(OpLPos, "l", "x").i(1), in(3)},
		{t0, c(OpLPos, "l", "x").i(-1), in(3)},
		{t0, c(OpLPos, "l", "x").i(2), nilr},
		{t0, c(OpLPos, "l", "x").fl(FlagListCount).i(1).i2(0), arr(in(3))},
		{t0, c(OpLPos, "l", "x").i(1).f(3), nilr},
		{t0, c(OpLPos, "nokey", "x").fl(FlagListCount).i(1), arr()},
		{t0, c(OpLPop, "l").fl(FlagListCount).i(0), arr()},
		{t0, c(OpRPop, "l").fl(FlagListCount).i(2), bulks("d", "x")},
		{t0, c(OpLMove, "l", "l").fl(FlagListRight), bulk("a")},
		{t0, c(OpLRange, "l").i(0).i2(-1), bulks("a", "c", "B")},
		{t0, c(OpLMove, "l", "m").fl(FlagListToRight), bulk("a")},
		{t0, c(OpLMove, "nokey", "m"), nilr},
		{t0, c(OpLMPop, "nokey", "m", "l").fl(FlagListCount).i(5), arr(bulk("m"), bulks("a"))},
		{t0, c(OpLLen, "m"), in(0)},
		{t0, c(OpLMPop, "nokey", "l").fl(FlagListBPop | FlagListRight), arr(bulk("l"), bulk("B"))},
		{t0, c(OpLMPop, "nokey"), nilArray},
		{t0, c(OpLRem, "l", "c").i(0), in(1)},
		{t0, c(OpLLen, "l"), in(0)},
		{t0, c(OpSet, "s", "v"), ok},
		{t0, c(OpLPush, "s", "a"), errr(ErrWrongType)},
		{t0, c(OpLPop, "s").fl(FlagListCount).i(0), errr(ErrWrongType)},
		{t0, c(OpLMPop, "nokey", "s"), errr(ErrWrongType)},
		{t0, c(OpRPush, "l", "a"), in(1)},
		{t0, c(OpLMove, "l", "s"), errr(ErrWrongType)},
		// A woken client's pop passes over a source of another type, not
		// over a destination of another type.
		{t0, c(OpLMPop, "s").fl(FlagListReady), nilArray},
		{t0, c(OpLMove, "s", "l").fl(FlagListReady), nilr},
		{t0, c(OpLMove, "l", "s").fl(FlagListReady), errr(ErrWrongType)},
		{t0, c(OpLTrim, "l").i(1).i2(0), ok},
		{t0, c(OpType, "l"), status("none")},
	})
}

// TestListRotationKeepsTTL: LMOVE from a one-element list to itself never
// empties it, so its TTL stays, as in Redis.
func TestListRotationKeepsTTL(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		{t0, c(OpRPush, "l", "a"), in(1)},
		{t0, c(OpExpireAt, "l").i(t0 + 10000), in(1)},
		{t0, c(OpLMove, "l", "l"), bulk("a")},
		{t0, c(OpPTTL, "l"), in(10000)},
	})
}

// TestListLPosMinRank: a rank of -2^63 stays negative when negated, as in
// Redis, where it then counts every match from the tail.
func TestListLPosMinRank(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		{t0, c(OpRPush, "l", "a", "b", "a", "c", "a"), in(5)},
		{t0, c(OpLPos, "l", "a").i(math.MinInt64), in(4)},
		{t0, c(OpLPos, "l", "a").i(math.MinInt64).fl(FlagListCount).i2(2), arr(in(4), in(2), in(0))},
	})
}

func TestListEncoding(t *testing.T) {
	s := NewStore()
	form := func(key string) string {
		s.mu.RLock()
		defer s.mu.RUnlock()
		it, _ := s.getLocked([]byte(key))
		if enc := kindTable[it.kind].encoding(&it); enc != "quicklist" {
			t.Fatalf("OBJECT ENCODING %s, want quicklist as Redis 7.0 answers", enc)
		}
		if it.obj != nil {
			return "large"
		}
		return "packed"
	}
	s.Apply(0, t0, []Command{c(OpRPush, "l", "a", "b")})
	if e := form("l"); e != "packed" {
		t.Fatalf("small list: %s", e)
	}
	big := strings.Repeat("x", 5000)
	s.Apply(0, t0, []Command{c(OpRPush, "l", big, big)})
	if e := form("l"); e != "large" {
		t.Fatalf("list of 10 KB: %s", e)
	}
	s.Apply(0, t0, []Command{c(OpRPop, "l"), c(OpRPop, "l")})
	if e := form("l"); e != "packed" {
		t.Fatalf("list shrunk to two small elements: %s", e)
	}
	s.SetLimits(Limits{ListMaxListpackSize: 3})
	s.Apply(0, t0, []Command{c(OpRPush, "l", "c", "d")})
	if e := form("l"); e != "large" {
		t.Fatalf("4 entries past a limit of 3: %s", e)
	}
	checkInvariants(t, s)
}

// listOps draws random list commands over a few keys, with elements of
// varied sizes so that large lists have many chunks.
func listOps(rng *rand.Rand, n int) [][]Command {
	keys := []string{"a", "b", "c", "s"}
	key := func() string { return keys[rng.IntN(len(keys))] }
	elem := func() string {
		if rng.IntN(4) == 0 {
			return strings.Repeat(string(rune('a'+rng.IntN(3))), rng.IntN(400))
		}
		return strconv.Itoa(rng.IntN(6))
	}
	idx := func() int64 { return int64(rng.IntN(80) - 40) }
	var out [][]Command
	for range n {
		var batch []Command
		for range 1 + rng.IntN(3) {
			var cmd Command
			switch rng.IntN(18) {
			case 0, 1, 2:
				cmd = c([]Op{OpLPush, OpRPush, OpLPushX, OpRPushX}[rng.IntN(4)], key())
				for range 1 + rng.IntN(12) {
					cmd.Args = append(cmd.Args, []byte(elem()))
				}
			case 3:
				cmd = c([]Op{OpLPop, OpRPop}[rng.IntN(2)], key())
				if rng.IntN(2) == 0 {
					cmd = cmd.fl(FlagListCount).i(int64(rng.IntN(8)))
				}
			case 4:
				cmd = c(OpLLen, key())
			case 5, 6:
				cmd = c(OpLRange, key()).i(idx()).i2(idx())
			case 7:
				cmd = c(OpLIndex, key()).i(idx())
			case 8:
				cmd = c(OpLSet, key(), elem()).i(idx())
			case 9:
				cmd = c(OpLInsert, key(), elem(), elem())
				if rng.IntN(2) == 0 {
					cmd = cmd.fl(FlagListAfter)
				}
			case 10:
				cmd = c(OpLRem, key(), elem()).i(int64(rng.IntN(7) - 3))
			case 11:
				cmd = c(OpLTrim, key()).i(idx()).i2(idx())
			case 12:
				cmd = c(OpLPos, key(), elem()).i([]int64{1, 2, -1, -3}[rng.IntN(4)]).f(float64(rng.IntN(3) * 7))
				if rng.IntN(2) == 0 {
					cmd = cmd.fl(FlagListCount).i2(int64(rng.IntN(3)))
				}
			case 13:
				cmd = c(OpLMove, key(), key()).fl(Flags(rng.IntN(4)))
			case 14:
				cmd = c(OpLMPop, key(), key()).fl(Flags(rng.IntN(2)))
				if rng.IntN(2) == 0 {
					cmd = cmd.fl(FlagListCount).i(int64(1 + rng.IntN(30)))
				}
			case 15:
				cmd = c(OpSet, "s", "string")
			case 16:
				cmd = c(OpDel, key())
			default:
				cmd = c(OpExpireAt, key()).i(t0 + 100000)
			}
			batch = append(batch, cmd)
		}
		out = append(out, batch)
	}
	return out
}

// applyOrRead runs a batch, reads one by one, writes as one entry each,
// numbered from *index on when index is not nil.
func applyOrRead(s *Store, index *uint64, batch []Command) []Reply {
	var out []Reply
	for _, cmd := range batch {
		if cmd.Op.IsWrite() {
			var i uint64
			if index != nil {
				*index++
				i = *index
			}
			out = append(out, s.Apply(i, t0, []Command{cmd})...)
		} else {
			out = append(out, s.Read(t0, cmd))
		}
	}
	return out
}

// TestListFormsAgree runs the same random commands on stores that keep
// lists packed (large limits), large (a limit of one entry) and as Redis's
// defaults decide, converting back and forth: every reply and every
// snapshot must be the same, since neither depends on the form.
func TestListFormsAgree(t *testing.T) {
	stores := []*Store{NewStore(), NewStore(), NewStore()}
	stores[0].SetLimits(Limits{ListMaxListpackSize: -5})
	stores[1].SetLimits(Limits{ListMaxListpackSize: 1})
	rng := rand.New(rand.NewPCG(1, 2))
	for i, batch := range listOps(rng, 2500) {
		var want []Reply
		for j, s := range stores {
			got := applyOrRead(s, nil, batch)
			if j == 0 {
				want = got
				continue
			}
			for k := range got {
				if got[k].String() != want[k].String() || got[k].Kind != want[k].Kind {
					t.Fatalf("batch %d, %v %q: store %d says %v, store 0 %v", i, batch[k].Op, batch[k].Args, j, got[k], want[k])
				}
			}
		}
		if i%500 == 499 {
			snap := snapshotBytes(t, stores[0])
			for j, s := range stores {
				checkInvariants(t, s)
				checkQuicklists(t, s)
				if j > 0 && !bytes.Equal(snapshotBytes(t, s), snap) {
					t.Fatalf("batch %d: store %d's snapshot differs from store 0's", i, j)
				}
			}
		}
	}
}

// TestListSnapshotWhileWriting: a snapshot of large lists taken while
// pushes, pops and edits go on shows the lists as they were.
func TestListSnapshotWhileWriting(t *testing.T) {
	s := NewStore()
	s.SetLimits(Limits{ListMaxListpackSize: 1})
	rng := rand.New(rand.NewPCG(3, 4))
	for _, batch := range listOps(rng, 2000) {
		applyOrRead(s, nil, batch)
	}
	want := snapshotBytes(t, s)
	sn := s.Snapshot()
	defer sn.Release()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, batch := range listOps(rng, 2000) {
			applyOrRead(s, nil, batch)
		}
	}()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	<-done
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("snapshot changed under concurrent list writes")
	}
	r := NewStore()
	if _, err := r.Restore(bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, r), want) {
		t.Fatal("restored lists do not round-trip")
	}
	checkInvariants(t, r)
	checkInvariants(t, s)
	checkQuicklists(t, r)
	checkQuicklists(t, s)
}

// TestListReplyAliases: a reply taken from a large list keeps its bytes
// however the list is written afterwards (replies alias the store).
func TestListReplyAliases(t *testing.T) {
	s := NewStore()
	s.SetLimits(Limits{ListMaxListpackSize: 1})
	s.Apply(0, t0, []Command{c(OpRPush, "l", "a1", "a2", "a3")})
	tail := s.Read(t0, c(OpLRange, "l").i(0).i2(-1))
	popped := s.Apply(0, t0, []Command{c(OpRPop, "l")})[0]
	s.Apply(0, t0, []Command{c(OpRPush, "l", "XX", "YY")})
	if got := tail.String(); got != `["a1" "a2" "a3"]` {
		t.Fatalf("LRANGE reply changed to %s", got)
	}
	if got := popped.String(); got != `"a3"` {
		t.Fatalf("RPOP reply changed to %s", got)
	}
}

// TestListDeterminism: the same entries give the same replies and
// byte-identical snapshots.
func TestListDeterminism(t *testing.T) {
	var snaps [][]byte
	var replies []string
	for range 2 {
		s := NewStore()
		rng := rand.New(rand.NewPCG(5, 6))
		var b strings.Builder
		var index uint64
		for _, batch := range listOps(rng, 1500) {
			for _, r := range applyOrRead(s, &index, batch) {
				b.WriteString(r.String())
			}
		}
		snaps = append(snaps, snapshotBytes(t, s))
		replies = append(replies, b.String())
	}
	if replies[0] != replies[1] || !bytes.Equal(snaps[0], snaps[1]) {
		t.Fatal("the same entries gave different replies or snapshots")
	}
}

// listSnapshot is a snapshot holding one list key, small or large.
func listSnapshot(t testing.TB, n int) []byte {
	s := NewStore()
	cmd := c(OpRPush, "l")
	for i := range n {
		cmd.Args = append(cmd.Args, []byte(strings.Repeat("v", i%50)))
	}
	s.Apply(0, t0, []Command{cmd, c(OpExpireAt, "l").i(t0 + 5000)})
	return snapshotBytes(t, s)
}

func TestListRestoreRejectsCorrupt(t *testing.T) {
	for _, n := range []int{3, 500} {
		good := listSnapshot(t, n)
		if _, err := NewStore().Restore(bytes.NewReader(good)); err != nil {
			t.Fatalf("%d elements: %v", n, err)
		}
		for cut := 1; cut < len(good); cut += 1 + len(good)/50 {
			if _, err := NewStore().Restore(bytes.NewReader(good[:cut])); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%d elements cut at %d: %v", n, cut, err)
			}
		}
		for i := range good {
			bad := bytes.Clone(good)
			bad[i] ^= 0x41
			if _, err := NewStore().Restore(bytes.NewReader(bad)); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%d elements, byte %d flipped: %v", n, i, err)
			}
		}
	}
}

// checkQuicklists checks the structure of every large list: each chunk's
// bounds (its room within its buffer), that its entries decode
// to exactly its count from either end, and the list's element count and
// byte estimate.
func checkQuicklists(t *testing.T, s *Store) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.keys.Scan(func(it item) bool {
		q, ok := it.obj.(*quicklist)
		if !ok {
			return true
		}
		n, bytes := int64(0), int64(listQuicklistCost)
		q.chunks.Scan(func(c *qchunk) bool {
			if !(0 <= c.headRoom && c.headRoom <= c.lo && c.lo <= c.hi && 0 <= c.tailRoom && c.hi+c.tailRoom <= len(c.buf)) || c.n == 0 {
				t.Fatalf("list %q: chunk %d has room %d, lo %d, hi %d, room %d, length %d, %d entries",
					it.key, c.seq, c.headRoom, c.lo, c.hi, c.tailRoom, len(c.buf), c.n)
			}
			fwd := len(c.entries(nil))
			back := 0
			for end := c.hi; end > c.lo; back++ {
				_, end = chunkPrev(c.buf, end)
			}
			if fwd != c.n || back != c.n {
				t.Fatalf("list %q: chunk %d says %d entries, holds %d forwards and %d backwards", it.key, c.seq, c.n, fwd, back)
			}
			n += int64(c.n)
			bytes += int64(len(c.buf)) + listChunkCost
			return true
		})
		if n != q.n || bytes != q.bytes {
			t.Fatalf("list %q: %d elements and %d bytes, counted %d and %d", it.key, q.n, q.bytes, n, bytes)
		}
		return true
	})
}

// TestListChunksCopyOnWrite: large lists that share chunks (through COPY
// and snapshots) are pushed, popped, set and trimmed at both ends at
// random. Each must stay what a plain slice says, every reply taken along
// the way must keep its bytes (replies alias chunks), and every snapshot
// must write what the store held when it was taken.
func TestListChunksCopyOnWrite(t *testing.T) {
	s := NewStore()
	s.SetLimits(Limits{ListMaxListpackSize: 1}) // large whatever the size
	rng := rand.New(rand.NewPCG(7, 8))
	keys := []string{"a", "b", "c"}
	model := map[string][]string{}
	elem := func() string {
		if rng.IntN(8) == 0 {
			return strings.Repeat("x", 100+rng.IntN(1200)) // some past a chunk's size
		}
		return strconv.Itoa(rng.IntN(1000))
	}
	type kept struct {
		r    Reply
		want string
	}
	var replies []kept
	type snap struct {
		sn   *Snapshot
		want []byte
	}
	var snaps []snap
	for range 4000 {
		k := keys[rng.IntN(len(keys))]
		l := model[k]
		switch op := rng.IntN(12); {
		case op < 3:
			e := elem()
			s.Apply(0, t0, []Command{c(OpLPush, k, e)})
			model[k] = append([]string{e}, l...)
		case op < 6:
			e := elem()
			s.Apply(0, t0, []Command{c(OpRPush, k, e)})
			model[k] = append(l, e)
		case op < 8 && len(l) > 0:
			head := op == 6
			cmd := c(OpRPop, k)
			if head {
				cmd.Op = OpLPop
			}
			r := s.Apply(0, t0, []Command{cmd})[0]
			if head {
				replies, model[k] = append(replies, kept{r, strconv.Quote(l[0])}), l[1:]
			} else {
				replies, model[k] = append(replies, kept{r, strconv.Quote(l[len(l)-1])}), l[:len(l)-1]
			}
		case op == 8 && len(l) > 0:
			i := rng.IntN(len(l))
			if rng.IntN(2) == 0 {
				i = min(i, 3) // near the ends, where pushes write
			} else {
				i = max(i, len(l)-4)
			}
			e := elem()
			s.Apply(0, t0, []Command{c(OpLSet, k, e).i(int64(i))})
			l[i] = e
		case op == 9 && len(l) > 2:
			s.Apply(0, t0, []Command{c(OpLTrim, k).i(1).i2(-2)})
			model[k] = l[1 : len(l)-1]
		case op == 10 && len(l) > 0:
			// Then pop both at one end (a change to a chunk they
			// share) and push onto both at the other: into the room of
			// a chunk they share, were it not copied first.
			dst := keys[(slices.Index(keys, k)+1)%len(keys)]
			head := rng.IntN(2) == 0
			push, pop := OpRPush, OpLPop
			if head {
				push, pop = OpLPush, OpRPop
			}
			e1, e2 := elem(), elem()
			s.Apply(0, t0, []Command{c(OpCopy, k, dst).fl(FlagReplace), c(pop, k), c(pop, dst), c(push, k, e1), c(push, dst, e2)})
			for key, e := range map[string]string{k: e1, dst: e2} {
				if head {
					model[key] = append([]string{e}, l[:len(l)-1]...)
				} else {
					model[key] = append(slices.Clone(l[1:]), e)
				}
			}
			checkListIs(t, s, dst, model[dst])
		default:
			snaps = append(snaps, snap{s.Snapshot(), snapshotBytes(t, s)})
		}
		if len(model[k]) == 0 {
			delete(model, k)
		}
		r := checkListIs(t, s, k, model[k])
		if rng.IntN(50) == 0 {
			replies = append(replies, kept{r, r.String()})
		}
	}
	checkQuicklists(t, s)
	checkInvariants(t, s)
	for i, kr := range replies {
		if got := kr.r.String(); got != kr.want {
			t.Fatalf("reply %d changed to %s, was %s", i, got, kr.want)
		}
	}
	for i, sn := range snaps {
		var buf bytes.Buffer
		if _, err := sn.sn.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		sn.sn.Release()
		if !bytes.Equal(buf.Bytes(), sn.want) {
			t.Fatalf("snapshot %d changed under later writes", i)
		}
	}
}

// checkListIs checks that key holds the list want and returns its
// LRANGE 0 -1.
func checkListIs(t *testing.T, s *Store, key string, want []string) Reply {
	t.Helper()
	r := s.Read(t0, c(OpLRange, key).i(0).i2(-1))
	var got []string
	for _, e := range r.Expanded().Array {
		got = append(got, string(e.Bulk))
	}
	if !slices.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("list %q has %d elements, want %d; they differ from index %d: %.20q, want %.20q", key, len(got), len(want), i, got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
	}
	return r
}
