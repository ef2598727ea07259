package fsm

import (
	"strconv"
	"testing"
)

// Set benchmarks: the main writes and reads on a small (packed) set and on
// a large one (100k members, the B-tree).

func benchSetStore(b *testing.B, members int) *Store {
	s := NewStore()
	args := []string{"s"}
	for i := range members {
		args = append(args, "member:"+strconv.Itoa(i))
		if len(args) == 1001 || i == members-1 {
			s.Apply(0, t0, []Command{c(OpSAdd, args...)})
			args = args[:1]
		}
	}
	return s
}

func benchSetSizes(b *testing.B, fn func(b *testing.B, s *Store, n int)) {
	for _, n := range []int{16, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := benchSetStore(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			fn(b, s, n)
		})
	}
}

// BenchmarkSetAddRem adds a member and removes it again: two writes.
func BenchmarkSetAddRem(b *testing.B) {
	benchSetSizes(b, func(b *testing.B, s *Store, n int) {
		add := []Command{c(OpSAdd, "s", "new member")}
		rem := []Command{c(OpSRem, "s", "new member")}
		for range b.N {
			s.Apply(0, t0, add)
			s.Apply(0, t0, rem)
		}
	})
}

// BenchmarkSetAddNew adds a fresh member each time to a set of its own
// per 100 iterations (redis-benchmark's SADD shape: small sets growing).
func BenchmarkSetAddNew(b *testing.B) {
	s := NewStore()
	b.ReportAllocs()
	for i := range b.N {
		s.Apply(0, t0, []Command{c(OpSAdd, "s"+strconv.Itoa(i/100), "m"+strconv.Itoa(i))})
	}
}

func BenchmarkSetIsMember(b *testing.B) {
	benchSetSizes(b, func(b *testing.B, s *Store, n int) {
		cmd := c(OpSIsMember, "s", "member:"+strconv.Itoa(n/2))
		for range b.N {
			if s.Read(t0, cmd).Int != 1 {
				b.Fatal("not a member")
			}
		}
	})
}

func BenchmarkSetPop(b *testing.B) {
	benchSetSizes(b, func(b *testing.B, s *Store, n int) {
		for i := range b.N {
			r := s.Apply(0, t0, []Command{c(OpSPop, "s").i2(int64(i))})[0]
			s.Apply(0, t0, []Command{c(OpSAdd, "s", string(r.Bulk))})
		}
	})
}

func BenchmarkSetMembers(b *testing.B) {
	benchSetSizes(b, func(b *testing.B, s *Store, n int) {
		if n > 1000 {
			b.Skip("SMEMBERS of 100k members measures the reply, not the set")
		}
		cmd := c(OpSMembers, "s")
		for range b.N {
			s.Read(t0, cmd)
		}
	})
}

func BenchmarkSetScan(b *testing.B) {
	benchSetSizes(b, func(b *testing.B, s *Store, n int) {
		cmd := c(OpSScan, "s", "").i2(10)
		for range b.N {
			s.Read(t0, cmd)
		}
	})
}

// BenchmarkSetInter intersects the set with a 16-member one.
func BenchmarkSetInter(b *testing.B) {
	benchSetSizes(b, func(b *testing.B, s *Store, n int) {
		args := []string{"small"}
		for i := range 16 {
			args = append(args, "member:"+strconv.Itoa(i*3))
		}
		s.Apply(0, t0, []Command{c(OpSAdd, args...)})
		cmd := c(OpSInter, "s", "small")
		for range b.N {
			s.Read(t0, cmd)
		}
	})
}

// BenchmarkSetSnapshot times Snapshot of a store holding the set and one
// write after it, which clones the large form.
func BenchmarkSetSnapshot(b *testing.B) {
	benchSetSizes(b, func(b *testing.B, s *Store, n int) {
		add := []Command{c(OpSAdd, "s", "x")}
		for range b.N {
			sn := s.Snapshot()
			s.Apply(0, t0, add)
			sn.Release()
		}
	})
}
