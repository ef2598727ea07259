package fsm

import (
	"strconv"
	"testing"
)

// List benchmarks: the main writes and reads on small (packed) lists and
// on a large list of a million 8-byte elements.

var benchElem = []byte("elem0008")

const benchLargeList = 1_000_000

// largeListStore holds one list "big" of benchLargeList elements.
func largeListStore(b *testing.B) *Store {
	s := NewStore()
	cmd := Command{Op: OpRPush, Args: [][]byte{[]byte("big")}}
	for range 1000 {
		cmd.Args = append(cmd.Args, benchElem)
	}
	for range benchLargeList / 1000 {
		s.Apply(0, t0, []Command{cmd})
	}
	b.ReportAllocs()
	b.ResetTimer()
	return s
}

// smallListStore holds 10k lists of 10 elements each.
func smallListStore(b *testing.B) *Store {
	s := NewStore()
	for i := range 10_000 {
		cmd := Command{Op: OpRPush, Args: [][]byte{[]byte("l:" + strconv.Itoa(i))}}
		for range 10 {
			cmd.Args = append(cmd.Args, benchElem)
		}
		s.Apply(0, t0, []Command{cmd})
	}
	b.ReportAllocs()
	b.ResetTimer()
	return s
}

func smallKey(i int) []byte { return []byte("l:" + strconv.Itoa(i*7919%10_000)) }

// BenchmarkListPushPopSmall: RPUSH then LPOP on 10-element packed lists.
func BenchmarkListPushPopSmall(b *testing.B) {
	s := smallListStore(b)
	i := 0
	for b.Loop() {
		k := smallKey(i)
		i++
		s.Apply(0, t0, []Command{{Op: OpRPush, Args: [][]byte{k, benchElem}}, {Op: OpLPop, Args: [][]byte{k}}})
	}
}

func BenchmarkListRPushLarge(b *testing.B) {
	s := largeListStore(b)
	cmds := []Command{{Op: OpRPush, Args: [][]byte{[]byte("big"), benchElem}}}
	for b.Loop() {
		s.Apply(0, t0, cmds)
	}
}

func BenchmarkListLPushLarge(b *testing.B) {
	s := largeListStore(b)
	cmds := []Command{{Op: OpLPush, Args: [][]byte{[]byte("big"), benchElem}}}
	for b.Loop() {
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkListPopLarge: LPOP and RPOP in turn, pushing back what they
// take so the list stays large.
func BenchmarkListPopLarge(b *testing.B) {
	s := largeListStore(b)
	key := []byte("big")
	cmds := []Command{{Op: OpLPop, Args: [][]byte{key}}, {Op: OpRPop, Args: [][]byte{key}},
		{Op: OpRPush, Args: [][]byte{key, benchElem, benchElem}}}
	for b.Loop() {
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkListLPopLarge and BenchmarkListRPopLarge: a pop at one end,
// pushing back at the other so the list stays large.
func BenchmarkListLPopLarge(b *testing.B) {
	s := largeListStore(b)
	key := []byte("big")
	cmds := []Command{{Op: OpLPop, Args: [][]byte{key}}, {Op: OpRPush, Args: [][]byte{key, benchElem}}}
	for b.Loop() {
		s.Apply(0, t0, cmds)
	}
}

func BenchmarkListRPopLarge(b *testing.B) {
	s := largeListStore(b)
	key := []byte("big")
	cmds := []Command{{Op: OpRPop, Args: [][]byte{key}}, {Op: OpLPush, Args: [][]byte{key, benchElem}}}
	for b.Loop() {
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkListIndexLarge: LINDEX near both ends.
func BenchmarkListIndexLarge(b *testing.B) {
	s := largeListStore(b)
	key := []byte("big")
	i := int64(0)
	for b.Loop() {
		s.Read(t0, Command{Op: OpLIndex, Args: [][]byte{key}, Int: i%200 - 100})
		i++
	}
}

// BenchmarkListSetLarge: LSET near both ends.
func BenchmarkListSetLarge(b *testing.B) {
	s := largeListStore(b)
	key := []byte("big")
	i := int64(0)
	for b.Loop() {
		s.Apply(0, t0, []Command{{Op: OpLSet, Args: [][]byte{key, benchElem}, Int: i%200 - 100}})
		i++
	}
}

// BenchmarkListRange100Large: LRANGE of 100 elements at the head, and
// from the middle of the list (a walk over half the chunks, as Redis
// walks half its quicklist).
func BenchmarkListRange100Large(b *testing.B) {
	for _, start := range []int64{0, benchLargeList / 2} {
		b.Run("start="+strconv.FormatInt(start, 10), func(b *testing.B) {
			s := largeListStore(b)
			cmd := Command{Op: OpLRange, Args: [][]byte{[]byte("big")}, Int: start, Int2: start + 99}
			for b.Loop() {
				s.Read(t0, cmd)
			}
		})
	}
}

// BenchmarkListRange600Large: LRANGE 0 599, redis-benchmark's
// LRANGE_600.
func BenchmarkListRange600Large(b *testing.B) {
	s := largeListStore(b)
	cmd := Command{Op: OpLRange, Args: [][]byte{[]byte("big")}, Int: 0, Int2: 599}
	for b.Loop() {
		s.Read(t0, cmd)
	}
}

func BenchmarkListRangeSmall(b *testing.B) {
	s := smallListStore(b)
	i := 0
	for b.Loop() {
		s.Read(t0, Command{Op: OpLRange, Args: [][]byte{smallKey(i)}, Int: 0, Int2: -1})
		i++
	}
}
