package fsm

import (
	"io"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// zsetMember8 is an 8-byte member, as in the memory comparison.
func zsetMember8(dst []byte, i int) []byte {
	dst = append(dst[:0], "m0000000"...)
	s := strconv.Itoa(i)
	copy(dst[8-len(s):], s)
	return dst
}

// loadZSet fills key with n members of pseudo-random scores, in batches.
func loadZSet(s *Store, key string, n int) {
	const batch = 1000
	x := uint64(1)
	for i := 0; i < n; i += batch {
		cmd := Command{Op: OpZAdd, Args: [][]byte{[]byte(key)}}
		for j := i; j < min(i+batch, n); j++ {
			x = x*6364136223846793005 + 1442695040888963407
			cmd.Args = append(cmd.Args, ScoreArg(float64(x>>40)), zsetMember8(nil, j))
		}
		s.Apply(0, t0, []Command{cmd})
	}
}

func benchZAdd(b *testing.B, members int) {
	s := NewStore()
	loadZSet(s, "z", members)
	b.ReportAllocs()
	cmds := []Command{{Op: OpZAdd, Args: [][]byte{[]byte("z"), nil, nil}}}
	var m []byte
	i := 0
	for b.Loop() {
		i++
		m = zsetMember8(m, i%members)
		cmds[0].Args[1], cmds[0].Args[2] = ScoreArg(float64(i%1000)), m
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkZAddSmall updates members of a 100-member (packed) set.
func BenchmarkZAddSmall(b *testing.B) { benchZAdd(b, 100) }

// BenchmarkZAddLarge updates members of a 1M-member set.
func BenchmarkZAddLarge(b *testing.B) { benchZAdd(b, 1_000_000) }

func benchZRead(b *testing.B, members int, cmd func(i int, m []byte) Command) {
	s := NewStore()
	loadZSet(s, "z", members)
	b.ReportAllocs()
	var m []byte
	i := 0
	for b.Loop() {
		i++
		m = zsetMember8(m, (i*7919)%members)
		s.Read(t0, cmd(i, m))
	}
}

func BenchmarkZScoreSmall(b *testing.B) {
	benchZRead(b, 100, func(i int, m []byte) Command { return Command{Op: OpZScore, Args: [][]byte{[]byte("z"), m}} })
}

func BenchmarkZScoreLarge(b *testing.B) {
	benchZRead(b, 1_000_000, func(i int, m []byte) Command { return Command{Op: OpZScore, Args: [][]byte{[]byte("z"), m}} })
}

func BenchmarkZRankLarge(b *testing.B) {
	benchZRead(b, 1_000_000, func(i int, m []byte) Command { return Command{Op: OpZRank, Args: [][]byte{[]byte("z"), m}} })
}

// BenchmarkZRangeLarge reads 100 members with scores from the middle of a
// 1M-member set.
func BenchmarkZRangeLarge(b *testing.B) {
	benchZRead(b, 1_000_000, func(i int, m []byte) Command {
		return Command{Op: OpZRange, Flags: FlagZWithScores, Args: [][]byte{[]byte("z")}, Int: 500_000, Int2: 500_099}
	})
}

func BenchmarkZRangeSmall(b *testing.B) {
	benchZRead(b, 100, func(i int, m []byte) Command {
		return Command{Op: OpZRange, Flags: FlagZWithScores, Args: [][]byte{[]byte("z")}, Int: 0, Int2: -1}
	})
}

// BenchmarkZAddUnchanged is redis-benchmark's ZADD: "ZADD myzset 0
// element:__rand_int__" without -r, the same member at the same score
// into a one-member set, so nothing changes.
func BenchmarkZAddUnchanged(b *testing.B) {
	s := NewStore()
	cmds := []Command{{Op: OpZAdd, Args: [][]byte{[]byte("myzset"), ScoreArg(0), []byte("element:__rand_int__")}}}
	s.Apply(0, t0, cmds)
	b.ReportAllocs()
	for b.Loop() {
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkZPopMinMissing is redis-benchmark's ZPOPMIN once its set is
// empty: a pop from a missing key.
func BenchmarkZPopMinMissing(b *testing.B) {
	s := NewStore()
	cmds := []Command{{Op: OpZPop, Args: [][]byte{[]byte("myzset")}}}
	b.ReportAllocs()
	for b.Loop() {
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkZAddSmallNew adds a member to, and removes it from, a
// 10-member (packed) set.
func BenchmarkZAddSmallNew(b *testing.B) {
	s := NewStore()
	loadZSet(s, "z", 10)
	add := []Command{{Op: OpZAdd, Args: [][]byte{[]byte("z"), ScoreArg(5), []byte("new")}}}
	rem := []Command{{Op: OpZRem, Args: [][]byte{[]byte("z"), []byte("new")}}}
	b.ReportAllocs()
	for b.Loop() {
		s.Apply(0, t0, add)
		s.Apply(0, t0, rem)
	}
}

func BenchmarkParseScore(b *testing.B) {
	b.ReportAllocs()
	for _, in := range []string{"0", "1234", "1.5", "-inf"} {
		b.Run(in, func(b *testing.B) {
			for b.Loop() {
				ParseScore([]byte(in))
			}
		})
	}
}

// BenchmarkZPopMinLarge pops from a 1M-member set, refilling it.
func BenchmarkZPopMinLarge(b *testing.B) {
	s := NewStore()
	loadZSet(s, "z", 1_000_000)
	b.ReportAllocs()
	pop := []Command{{Op: OpZPop, Args: [][]byte{[]byte("z")}}}
	add := []Command{{Op: OpZAdd, Args: [][]byte{[]byte("z"), nil, nil}}}
	i := 0
	for b.Loop() {
		r := s.Apply(0, t0, pop)[0]
		i++
		add[0].Args[1], add[0].Args[2] = ScoreArg(float64(i)), r.Array[0].Bulk
		s.Apply(0, t0, add)
	}
}

// BenchmarkZSetSnapshotStall measures the longest single Apply (a ZADD to
// the big set, or to a small one) while a snapshot of a store holding one
// sorted set of KVS_ZSET_STALL_MEMBERS members (default 1M; the issue's
// figure is 10M) is taken and written out. It reports
//
//   - max-apply-ns: the stall writers see (a Snapshot holding the lock
//     would show there too);
//   - max-quiet-apply-ns: the longest Apply in as long a run of the same
//     writes with no snapshot, right after: the floor that the machine's
//     other load and Go's scheduler set, for comparison;
//   - max-apply-cpu-ns: the most CPU one Apply used on its thread during
//     the snapshot (Linux), mark assists included: unlike the wall-clock
//     figures, the machine's other load does not move it;
//   - max-snapshot-ns: the longest Snapshot call, waiting for the lock
//     included.
//
// Snapshot copies the set in O(1); WriteTo streams it without the lock. A
// garbage collection is started with each snapshot, so that a full mark
// of the heap always falls inside the window measured: under load one
// would anyway, and tracing the set is where a stall would come from. The
// test binary runs at its GOGC (100 unless set); kvs serve runs a large
// heap at about GOGC=25 (cmd/kvs/gctune.go).
func BenchmarkZSetSnapshotStall(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("KVS_ZSET_STALL_MEMBERS")); err == nil && v > 0 {
		n = v
	}
	s := NewStore()
	loadZSet(s, "big", n)
	runtime.GC()
	b.ResetTimer()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var worst, worstQuiet, worstSnap time.Duration
	var worstCPU, longestCPU int64
	i := 0
	// write applies ZADDs until stop reports true, returning the longest;
	// longestCPU is the most thread CPU time one took.
	write := func(stop func() bool) time.Duration {
		var longest time.Duration
		longestCPU = 0
		var m []byte
		for ; !stop(); i++ {
			m = zsetMember8(m, (i*7919)%n)
			key := "big"
			if i%2 == 1 {
				key = "small" + strconv.Itoa(i%100)
			}
			cmds := []Command{{Op: OpZAdd, Args: [][]byte{[]byte(key), ScoreArg(float64(i)), m}}}
			start, cpu := time.Now(), threadCPU()
			s.Apply(0, t0, cmds)
			longestCPU = max(longestCPU, threadCPU()-cpu)
			longest = max(longest, time.Since(start))
		}
		return longest
	}
	for b.Loop() {
		done := make(chan error, 2)
		var snapTook time.Duration
		go func() {
			runtime.GC()
			done <- nil
		}()
		go func() {
			start := time.Now()
			sn := s.Snapshot()
			snapTook = time.Since(start)
			_, err := sn.WriteTo(io.Discard)
			sn.Release()
			done <- err
		}()
		start := time.Now()
		pending := 2
		worst = max(worst, write(func() bool {
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				pending--
			default:
			}
			return pending == 0
		}))
		worstSnap = max(worstSnap, snapTook)
		worstCPU = max(worstCPU, longestCPU)
		until := time.Now().Add(time.Since(start))
		worstQuiet = max(worstQuiet, write(func() bool { return !time.Now().Before(until) }))
	}
	b.ReportMetric(float64(worst.Nanoseconds()), "max-apply-ns")
	b.ReportMetric(float64(worstQuiet.Nanoseconds()), "max-quiet-apply-ns")
	b.ReportMetric(float64(worstCPU), "max-apply-cpu-ns")
	b.ReportMetric(float64(worstSnap.Nanoseconds()), "max-snapshot-ns")
}
