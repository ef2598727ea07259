package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

func init() {
	entrySeeds = append(entrySeeds,
		[]Command{execOf(nil, c(OpSet, "a", "1"), c(OpIncrBy, "a").i(2), c(OpGet, "a"))},
		[]Command{ExecCommand([][]byte{[]byte("w")}, []KeyVersion{{Live: true, Ver: 7, At: 9}},
			[]Command{c(OpDel, "w"), c(OpFlushAll)})},
	)
	restoreSeeds = append(restoreSeeds, func(t testing.TB) []byte {
		s := NewStore()
		s.Apply(1, t0, []Command{c(OpMSet, "a", "1", "b", "2", "c", "3"), c(OpDel, "b"),
			c(OpExpireAt, "c").i(t0 + 5)})
		return snapshotBytes(t, s)
	})
}

// execOf is the OpExec of cmds watching the keys in w (what the store saw
// of them is filled in by watch).
func execOf(w map[string]KeyVersion, cmds ...Command) Command {
	var keys [][]byte
	var seen []KeyVersion
	for k, v := range w {
		keys = append(keys, []byte(k))
		seen = append(seen, v)
	}
	return ExecCommand(keys, seen, cmds)
}

func applyOne(s *Store, now int64, cmd Command) Reply { return s.Apply(0, now, []Command{cmd})[0] }

func TestExecRunsInOrder(t *testing.T) {
	s := NewStore()
	r := applyOne(s, t0, execOf(nil,
		c(OpSet, "k", "1"),
		c(OpIncrBy, "k").i(5),
		c(OpGet, "k"), // a read sees the transaction's earlier writes
		c(OpHSet, "k", "f", "v"),
		c(OpExists, "k", "k"),
	))
	want := arr(ok, in(6), bulk("6"), errr(ErrWrongType), in(2))
	if r.String() != want.String() {
		t.Fatalf("EXEC = %v, want %v", r, want)
	}
	if got := s.Read(t0, c(OpGet, "k")); got.String() != bulk("6").String() {
		t.Fatalf("after EXEC, GET k = %v", got)
	}
	if r := applyOne(s, t0, execOf(nil)); r.Kind != ReplyArray || len(r.Array) != 0 {
		t.Fatalf("empty EXEC = %v", r)
	}
}

// watchCase: set up the store, WATCH key, change things, EXEC: did the
// transaction run?
type watchCase struct {
	name    string
	setup   []Command
	watchAt int64 // the watching node's clock (default t0)
	between []Command
	// betweenAt and execAt are the clocks of the entries between and of
	// the EXEC (default t0).
	betweenAt, execAt int64
	runs              bool
}

var watchCases = []watchCase{
	{name: "untouched", setup: []Command{c(OpSet, "k", "1")}, runs: true},
	{name: "missing, untouched", runs: true},
	{name: "other key written", setup: []Command{c(OpSet, "k", "1")}, between: []Command{c(OpSet, "other", "x")}, runs: true},
	{name: "set", setup: []Command{c(OpSet, "k", "1")}, between: []Command{c(OpSet, "k", "1")}},
	{name: "failed SET NX is no change", setup: []Command{c(OpSet, "k", "1")}, between: []Command{c(OpSet, "k", "2").fl(FlagNX)}, runs: true},
	{name: "deleted", setup: []Command{c(OpSet, "k", "1")}, between: []Command{c(OpDel, "k")}},
	{name: "expire set", setup: []Command{c(OpSet, "k", "1")}, between: []Command{c(OpExpireAt, "k").i(t0 + 1000)}},
	{name: "hash field added", setup: []Command{c(OpHSet, "k", "f", "v")}, between: []Command{c(OpHSet, "k", "g", "v")}},
	{name: "list popped empty", setup: []Command{c(OpRPush, "k", "a")}, between: []Command{c(OpLPop, "k")}},
	{name: "renamed over", setup: []Command{c(OpSet, "k", "1"), c(OpSet, "src", "2")}, between: []Command{c(OpRename, "src", "k")}},
	{name: "renamed away", setup: []Command{c(OpSet, "k", "1")}, between: []Command{c(OpRename, "k", "dst")}},
	{name: "flushall", setup: []Command{c(OpSet, "k", "1")}, between: []Command{c(OpFlushAll)}},
	{name: "missing, flushall", setup: []Command{c(OpSet, "other", "1")}, between: []Command{c(OpFlushAll)}, runs: true},
	{name: "missing, flushall after a write", between: []Command{c(OpSet, "k", "1"), c(OpFlushAll)}},
	{name: "expired at WATCH, then flushed", setup: []Command{c(OpSet, "k", "1").i(t0 + 5)}, watchAt: t0 + 10,
		between: []Command{c(OpFlushAll)}, betweenAt: t0 + 10, execAt: t0 + 10, runs: true},
	{name: "missing, created", between: []Command{c(OpSet, "k", "1")}},
	{name: "missing, created and deleted", between: []Command{c(OpSet, "k", "1"), c(OpDel, "k")}},
	{name: "missing, created and expired", between: []Command{c(OpSet, "k", "1").i(t0 + 5)}, execAt: t0 + 10},
	{name: "missing, created, expired, deleted", between: []Command{c(OpSet, "k", "1").i(t0 + 5), c(OpDelExpired, "k")}, betweenAt: t0 + 3, execAt: t0 + 10},
	{name: "expires before EXEC", setup: []Command{c(OpSet, "k", "1").i(t0 + 5)}, execAt: t0 + 10},
	{name: "expired at WATCH, still there", setup: []Command{c(OpSet, "k", "1").i(t0 + 5)}, watchAt: t0 + 10, execAt: t0 + 10, runs: true},
	{name: "expired at WATCH, then deleted", setup: []Command{c(OpSet, "k", "1").i(t0 + 5)}, watchAt: t0 + 10,
		between: []Command{c(OpDelExpired, "k")}, betweenAt: t0 + 10, execAt: t0 + 10, runs: true},
	{name: "expired at WATCH, then rewritten", setup: []Command{c(OpSet, "k", "1").i(t0 + 5)}, watchAt: t0 + 10,
		between: []Command{c(OpSet, "k", "2")}, betweenAt: t0 + 10, execAt: t0 + 10},
}

func TestExecWatch(t *testing.T) {
	for _, tc := range watchCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, restore := range []bool{false, true} {
				if got := runWatchCase(t, tc, restore); got != tc.runs {
					t.Errorf("restore %v: EXEC ran %v, want %v", restore, got, tc.runs)
				}
			}
		})
	}
}

// runWatchCase plays tc; with restore the store is snapshotted and
// restored into a new one between WATCH and EXEC, as a replica that
// installs a snapshot is: the outcome must be the same.
func runWatchCase(t *testing.T, tc watchCase, restore bool) bool {
	t.Helper()
	at := func(n int64) int64 {
		if n == 0 {
			return t0
		}
		return n
	}
	s := NewStore()
	idx := uint64(0)
	apply := func(now int64, cmds ...Command) []Reply {
		idx++
		return s.Apply(idx, now, cmds)
	}
	for _, cmd := range tc.setup {
		apply(t0, cmd)
	}
	seen := s.WatchKey(at(tc.watchAt), []byte("k"))
	for _, cmd := range tc.between {
		apply(at(tc.betweenAt), cmd)
	}
	if restore {
		r := NewStore()
		if _, err := r.Restore(bytes.NewReader(snapshotBytes(t, s))); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(snapshotBytes(t, r), snapshotBytes(t, s)) {
			t.Fatal("a restored store's snapshot differs")
		}
		s = r
	}
	r := apply(at(tc.execAt), execOf(map[string]KeyVersion{"k": seen}, c(OpSet, "ran", "1")))[0]
	switch r.Kind {
	case ReplyNilArray:
		if s.Read(at(tc.execAt), c(OpExists, "ran")).Int != 0 {
			t.Fatal("an aborted EXEC ran its commands")
		}
		return false
	case ReplyArray:
		return true
	}
	t.Fatalf("EXEC = %v", r)
	return false
}

// TestExecWatchOtherBucket: a key WATCHed while absent is not aborted by
// deletions in other buckets, and the deletion record is copied, not
// shared, once a snapshot holds it.
func TestExecWatchOtherBucket(t *testing.T) {
	s := NewStore()
	seen := s.WatchKey(t0, []byte("k"))
	var other string
	for i := 0; ; i++ {
		other = fmt.Sprint("o", i)
		if bucketOf(keyHash(other)) != bucketOf(keyHash("k")) {
			break
		}
	}
	applyOne(s, t0, c(OpSet, other, "1"))
	snap := s.Snapshot()
	defer snap.Release()
	applyOne(s, t0, c(OpDel, other))
	if snap.keys.vers.gone.t != nil {
		t.Fatal("a delete after the snapshot changed the snapshot's deletion record")
	}
	if r := applyOne(s, t0, execOf(map[string]KeyVersion{"k": seen})); r.Kind != ReplyArray {
		t.Fatalf("EXEC after a delete in another bucket = %v", r)
	}
}

// versionsOf describes what WATCH depends on in s: the counter, the
// deletion record, and each key's version.
func versionsOf(s *Store) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := s.keys.vers
	out := fmt.Sprintf("now %d", v.now)
	for i, bs := range []*buckets{&v.gone, &v.written} {
		name := []string{"gone", "written"}[i]
		if bs.t != nil {
			for b, g := range bs.t {
				if g != 0 {
					out += fmt.Sprintf(" %s[%d]=%d", name, b, g)
				}
			}
		}
	}
	s.keys.Scan(func(it item) bool {
		out += fmt.Sprintf(" %s=%d", it.key, it.version())
		return true
	})
	return out
}

// TestExecDeterministic: the same random entries, transactions with
// WATCHes among them, give the same replies and byte-identical snapshots
// on stores with other encodings and on a store restored midway.
func TestExecDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	stores := []*Store{NewStore(), NewStore(), NewStore()}
	stores[1].SetLimits(Limits{ListMaxListpackSize: 1, HashMaxListpackEntries: 1, SetMaxIntsetEntries: 1, SetMaxListpackEntries: 1, ZSetMaxListpackEntries: 1})
	keys := []string{"a", "b", "c", "d"}
	key := func() string { return keys[rng.IntN(len(keys))] }
	randomCmd := func() Command {
		switch rng.IntN(8) {
		case 0:
			return c(OpSet, key(), fmt.Sprint(rng.IntN(10))).i(t0 + int64(rng.IntN(200)))
		case 1:
			return c(OpDel, key())
		case 2:
			return c(OpRPush, key(), "x")
		case 3:
			return c(OpLPop, key())
		case 4:
			return c(OpHSet, key(), fmt.Sprint(rng.IntN(3)), "v")
		case 5:
			return c(OpIncrBy, key()).i(1)
		case 6:
			return c(OpGet, key())
		}
		return c(OpDelExpired, key())
	}
	now := int64(t0)
	for i := 1; i <= 3000; i++ {
		now += int64(rng.IntN(3))
		var cmd Command
		if rng.IntN(3) == 0 {
			w := map[string]KeyVersion{}
			for range rng.IntN(3) {
				k := key()
				w[k] = stores[0].WatchKey(now-int64(rng.IntN(20)), []byte(k))
			}
			// The same WATCH on every store: they must agree on it.
			for _, s := range stores[1:] {
				for k, v := range w {
					if got := s.WatchKey(now, []byte(k)); got.At != v.At || (got.Live && v.Live && got.Ver != v.Ver) {
						t.Fatalf("entry %d: stores disagree on WATCH %s: %+v, %+v", i, k, got, v)
					}
				}
			}
			var subs []Command
			for range 1 + rng.IntN(3) {
				subs = append(subs, randomCmd())
			}
			cmd = execOf(w, subs...)
		} else if cmd = randomCmd(); !cmd.Op.IsWrite() {
			continue
		}
		var want Reply
		for j, s := range stores {
			got := s.Apply(uint64(i), now, []Command{cmd})[0]
			if j == 0 {
				want = got
			} else if got.String() != want.String() || got.Kind != want.Kind {
				t.Fatalf("entry %d (%v): store %d says %v, store 0 %v", i, cmd.Op, j, got, want)
			}
		}
		if i%1000 == 0 {
			snap := snapshotBytes(t, stores[0])
			for j, s := range stores[1:] {
				// Store 1 keeps other encodings, which hash and set
				// records name: its versions must still agree.
				if j == 0 && versionsOf(s) != versionsOf(stores[0]) {
					t.Fatalf("entry %d: store 1's versions differ from store 0's:\n%s\n%s", i, versionsOf(s), versionsOf(stores[0]))
				}
				if j == 1 && !bytes.Equal(snapshotBytes(t, s), snap) {
					t.Fatalf("entry %d: the restored store's snapshot differs from store 0's", i)
				}
			}
			// The last store goes on from a restore.
			r := NewStore()
			if _, err := r.Restore(bytes.NewReader(snap)); err != nil {
				t.Fatal(err)
			}
			stores[2] = r
		}
	}
}

func TestExecValidate(t *testing.T) {
	good := execOf(nil, c(OpSet, "a", "1"))
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]Command{
		"nested":     execOf(nil, good),
		"bad sub":    {Op: OpExec, Args: [][]byte{good.Args[0], AppendCommands(nil, []Command{{Op: OpSet}})}},
		"bad watch":  {Op: OpExec, Args: [][]byte{{1, 1, 'k', 2, 0, 0}, good.Args[1]}},
		"trailing":   {Op: OpExec, Args: [][]byte{{0, 0}, good.Args[1]}},
		"watch cut":  {Op: OpExec, Args: [][]byte{{1, 5, 'k'}, good.Args[1]}},
		"no args":    {Op: OpExec},
		"sub cut":    {Op: OpExec, Args: [][]byte{{0}, good.Args[1][:len(good.Args[1])-1]}},
		"three args": {Op: OpExec, Args: [][]byte{{0}, good.Args[1], nil}},
	}
	for name, cmd := range bad {
		if err := cmd.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
		if _, _, err := DecodeEntry(EncodeEntry(nil, t0, []Command{cmd})); err == nil {
			t.Errorf("%s: DecodeEntry accepted it", name)
		}
	}
	keys, all := execOf(nil, c(OpSet, "a", "1"), c(OpGet, "b"), c(OpDel, "c", "d")).Keys()
	if all || len(keys) != 3 || string(keys[0]) != "a" || string(keys[2]) != "d" {
		t.Errorf("Keys = %q, %v", keys, all)
	}
	if _, all := execOf(nil, c(OpFlushAll)).Keys(); !all {
		t.Error("an EXEC holding FLUSHALL does not touch every key")
	}
}

// TestSnapshotVersionsRoundTrip: the counter, the flush mark, the deletion
// record and every item's version survive a snapshot, and corrupt ones are
// refused.
func TestSnapshotVersionsRoundTrip(t *testing.T) {
	s := NewStore()
	s.Apply(1, t0, []Command{c(OpSet, "a", "1"), c(OpFlushAll), c(OpMSet, "a", "1", "b", "2", "c", "3"), c(OpDel, "b"), c(OpHSet, "h", "f", "v")})
	b := snapshotBytes(t, s)
	r := NewStore()
	if _, err := r.Restore(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	rv, sv := r.keys.vers, s.keys.vers
	if rv.now != sv.now || rv.gone.at(keyHash("b")) != 4 || *rv.gone.t != *sv.gone.t || *rv.written.t != *sv.written.t {
		t.Fatalf("restored versions %s, want %s", versionsOf(r), versionsOf(s))
	}
	for _, k := range []string{"a", "c", "h"} {
		if got, want := r.WatchKey(t0, []byte(k)), s.WatchKey(t0, []byte(k)); got != want {
			t.Errorf("%s: restored WATCH %+v, want %+v", k, got, want)
		}
	}
	// Versions section of a version 5 snapshot: index 1, no metadata, no
	// ACL users, then the counter, the deleted and the written buckets.
	head := []byte{snapshotVersionV5, 1, 0, 0, 0}
	for name, vers := range map[string][]byte{
		"deleted after the counter":   {1, 1, 5, 2, 1, 5, 2},
		"deleted after written":       {9, 1, 5, 3, 1, 5, 2},
		"deleted, never written":      {9, 1, 5, 3, 0},
		"buckets out of order":        {9, 0, 2, 5, 1, 4, 1},
		"bucket out of range":         {9, 0, 1, 0xff, 0xff, 0x7f, 1},
		"zero version":                {9, 0, 1, 5, 0},
		"more buckets than there are": {9, 0xff, 0xff, 0x7f},
		"item version over 48 bits":   nil,
	} {
		var b []byte
		if vers == nil {
			// One string whose version is 2^48.
			b = append(append([]byte{}, head...), 1, 0, 0, 1, byte(kindString), 1, 'k', 0)
			b = append(b, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 1, 'v')
		} else {
			b = append(append(append([]byte{}, head...), vers...), 0)
		}
		if _, err := NewStore().Restore(bytes.NewReader(appendCRC(b))); err == nil {
			t.Errorf("%s: Restore accepted it", name)
		}
	}
	good := append(append([]byte{}, head...), 9, 1, 5, 2, 2, 5, 2, 7, 9, 0)
	if _, err := NewStore().Restore(bytes.NewReader(appendCRC(good))); err != nil {
		t.Errorf("well-formed versions: %v", err)
	}
}

// TestExecBuilder: an OpExec built in an ExecBuilder is ExecCommand's,
// and stays so while the builder builds more (its buffer outgrown) until
// Reset; after Reset it builds the same again in the memory it kept.
func TestExecBuilder(t *testing.T) {
	var b ExecBuilder
	for round := range 2 {
		var built, want []Command
		for i := range 200 {
			key := []byte(fmt.Sprintf("k%d", i))
			keys := [][]byte{key}
			seen := []KeyVersion{{Live: i%2 == 0, Ver: uint64(i), At: uint64(i + 1)}}
			subs := []Command{c(OpSet, string(key), string(bytes.Repeat([]byte{'v'}, i))), c(OpIncrBy, "n").i(int64(i))}
			built = append(built, b.Build(keys, seen, subs))
			want = append(want, ExecCommand(keys, seen, subs))
		}
		for i := range built {
			if err := built[i].Validate(); err != nil {
				t.Fatalf("round %d, OpExec %d: %v", round, i, err)
			}
			if len(built[i].Args) != 2 || !bytes.Equal(built[i].Args[0], want[i].Args[0]) || !bytes.Equal(built[i].Args[1], want[i].Args[1]) {
				t.Fatalf("round %d, OpExec %d differs from ExecCommand's", round, i)
			}
		}
		b.Reset()
	}
}

// TestExecValidateAllocates: validating an OpExec, as every apply and
// every decoded entry does, reuses its decoding memory.
func TestExecValidateAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop entries")
	}
	cmd := execOf(map[string]KeyVersion{"w": {Live: true, Ver: 3, At: 4}},
		c(OpSet, "a", "1"), c(OpIncrBy, "a").i(2), c(OpGet, "a"))
	if n := testing.AllocsPerRun(100, func() {
		if err := cmd.Validate(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Validate of an OpExec: %v allocations, want 0", n)
	}
}
