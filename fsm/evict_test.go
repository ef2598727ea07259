package fsm

import (
	"slices"
	"sync"
	"testing"
)

// TestEvictionCandidates: each policy picks the keys it should, and
// OpEvict deletes them whatever their deadline, announcing "evicted".
func TestEvictionCandidates(t *testing.T) {
	const now = 1000
	s := NewStore()
	var cmds []Command
	for i := range 20 {
		cmds = append(cmds, c(OpSet, "plain"+itoa(i), "v"))
	}
	for i := range 10 {
		// ttl9 is due first, ttl0 last.
		cmds = append(cmds, c(OpSet, "ttl"+itoa(i), "v").i(int64(now+100000-1000*i)))
	}
	s.Apply(1, now, cmds)

	for _, tc := range []struct {
		policy EvictPolicy
		check  func(keys []string) bool
	}{
		{EvictVolatileTTL, func(keys []string) bool { return slices.Equal(keys, []string{"ttl9", "ttl8", "ttl7"}) }},
		{EvictVolatileRandom, func(keys []string) bool {
			return len(keys) == 3 && !slices.ContainsFunc(keys, func(k string) bool { return k[:3] != "ttl" })
		}},
		{EvictAllKeysRandom, func(keys []string) bool { return len(keys) == 3 }},
	} {
		got, freed := s.EvictionCandidates(tc.policy, 5, 3, 1<<30)
		var keys []string
		for _, k := range got {
			keys = append(keys, string(k))
		}
		if !tc.check(keys) || freed <= 0 {
			t.Errorf("policy %d: candidates %q (%d bytes)", tc.policy, keys, freed)
		}
	}
	// Few keys with a TTL among many: random probes of the keyspace
	// mostly miss them, and a pick still takes as many as asked, at
	// random rather than the ones due first.
	sparse := NewStore()
	cmds = nil
	for i := range 5000 {
		cmds = append(cmds, c(OpSet, "p"+itoa(i), "v"))
	}
	for i := range 50 {
		cmds = append(cmds, c(OpSet, "t"+itoa(i), "v").i(int64(now+100000+i)))
	}
	sparse.Apply(1, now, cmds)
	drawn := map[string]bool{}
	for range 20 {
		got, _ := sparse.EvictionCandidates(EvictVolatileRandom, 5, 10, 1<<30)
		var keys []string
		for _, k := range got {
			keys = append(keys, string(k))
			drawn[string(k)] = true
		}
		slices.Sort(keys)
		if len(slices.Compact(keys)) != 10 || slices.ContainsFunc(keys, func(k string) bool { return k[0] != 't' }) {
			t.Fatalf("volatile-random, 10 of 50 TTL keys among 5050: %q", keys)
		}
	}
	if len(drawn) <= 10 {
		t.Errorf("volatile-random drew only %d distinct keys in 20 picks of 10 of 50", len(drawn))
	}
	if keys, _ := s.EvictionCandidates(EvictVolatileTTL, 5, 100, 1); len(keys) != 1 {
		t.Errorf("asked to free 1 byte, got %d keys", len(keys))
	}

	var events []string
	s.SetNotifyClasses(NotifyAll | NotifyKeyevent)
	s.SetNotifyHook(func(evs []Event) {
		for _, e := range evs {
			events = append(events, e.Name+" "+e.Key)
		}
	})
	r := s.Apply(2, now, []Command{c(OpEvict, "ttl9", "plain0", "missing")})
	if r[0].String() != in(2).String() {
		t.Fatalf("OpEvict = %v, want :2", r[0])
	}
	if s.Evictable(EvictNone) || !s.Evictable(EvictVolatileTTL) {
		t.Error("Evictable")
	}
	run(t, s, []step{{now, c(OpExists, "ttl9", "plain0", "plain1"), in(1)}})
	if !slices.Equal(events, []string{"evicted ttl9", "evicted plain0"}) {
		t.Errorf("events %q, want evicted ttl9 and plain0", events)
	}
}

// TestEvictionLRULFU: with access records on, a key read constantly is
// never picked while colder keys remain, by recency (LRU) or frequency
// (LFU); with them off, lookups record nothing.
func TestEvictionLRULFU(t *testing.T) {
	for _, tc := range []struct {
		policy EvictPolicy
		name   string
	}{{EvictAllKeysLRU, "allkeys-lru"}, {EvictAllKeysLFU, "allkeys-lfu"}, {EvictVolatileLRU, "volatile-lru"}} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			s.SetAccessTracking(tc.policy.Tracks(), 0)
			var cmds []Command
			for i := range 100 {
				cmds = append(cmds, c(OpSet, "k"+itoa(i), "v").i(10_000_000))
			}
			cmds = append(cmds, c(OpSet, "hot", "v").i(10_000_000))
			s.Apply(1, 1000, cmds)
			for i := range 2000 {
				s.Read(int64(2000+i), c(OpGet, "hot"))
			}
			for range 20 {
				keys, _ := s.EvictionCandidates(tc.policy, 5, 50, 1<<30)
				if len(keys) < 40 {
					t.Fatalf("%d candidates, want about 50", len(keys))
				}
				for _, k := range keys {
					if string(k) == "hot" {
						t.Fatalf("the key read constantly is a candidate: %q", keys)
					}
				}
			}
		})
	}
	s := NewStore()
	s.SetAccessTracking(TrackLRU, 0)
	s.SetAccessTracking(TrackNone, 0)
	if s.keys.acc != nil {
		t.Fatal("records still kept with tracking off")
	}
}

// TestAccessTrackingConcurrent: readers record accesses under the shared
// lock while a writer applies, a snapshot is taken and the evictor samples
// (run with -race).
func TestAccessTrackingConcurrent(t *testing.T) {
	s := NewStore()
	s.SetAccessTracking(TrackLFU, 0)
	for i := range 200 {
		s.Apply(uint64(i+1), 1000, []Command{c(OpSet, "k"+itoa(i), "v")})
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				s.Read(int64(1000+i), c(OpGet, "k"+itoa((i*7+r)%200)))
			}
		}()
	}
	for i := range 200 {
		s.Apply(uint64(201+i), int64(2000+i), []Command{c(OpSet, "k"+itoa(i), "w")})
		if i%50 == 0 {
			s.EvictionCandidates(EvictAllKeysLFU, 5, 10, 1<<30)
		}
	}
	close(done)
	wg.Wait()
}

// BenchmarkGetTracked is BenchmarkGet with the LRU or LFU access records
// on, for the cost of keeping them on a read.
func BenchmarkGetTracked(b *testing.B) {
	for _, lfu := range []bool{false, true} {
		b.Run(map[bool]string{false: "lru", true: "lfu"}[lfu], func(b *testing.B) {
			s := loadedStore(b, benchKeys)
			s.SetAccessTracking(map[bool]AccessTracking{false: TrackLRU, true: TrackLFU}[lfu], 0)
			b.ReportAllocs()
			var k keyer
			cmd := Command{Op: OpGet, Args: [][]byte{nil}}
			now := int64(t0)
			for b.Loop() {
				cmd.Args[0] = k.next()
				now++
				if r := s.Read(now, cmd); r.Kind != ReplyBulk {
					b.Fatal(r)
				}
			}
		})
	}
}

// TestObjectIdleTime: a lookup that is an access of the key (a read, a
// write, TOUCH) makes it fresh; TTL, TYPE, EXISTS, OBJECT and MEMORY USAGE
// leave its idle time alone, as Redis's LOOKUP_NOTOUCH does.
func TestObjectIdleTime(t *testing.T) {
	s := NewStore()
	s.SetAccessTracking(EvictNone.Tracks(), 0)
	idle := c(OpObject, "k").i(ObjectIdleTime)
	run(t, s, []step{
		{10_000, c(OpSet, "k", "v"), status("OK")},
		{15_000, c(OpTTL, "k"), in(-1)},
		{15_000, c(OpPTTL, "k"), in(-1)},
		{15_000, c(OpType, "k"), status("string")},
		{15_000, c(OpExists, "k"), in(1)},
	})
	if r := s.Read(15_000, c(OpMemoryUsage, "k")); r.Kind != ReplyInt {
		t.Fatalf("MEMORY USAGE: %v", r)
	}
	run(t, s, []step{
		{15_000, idle, in(5)},
		{15_000, idle, in(5)},
		{15_000, c(OpExists, "k").fl(FlagTouch), in(1)},
		{15_000, idle, in(0)},
		{20_000, c(OpGet, "k"), bulk("v")},
		{22_000, idle, in(2)},
		{22_000, c(OpAppend, "k", "w"), in(2)},
		{22_000, idle, in(0)},
		{25_000, idle, in(3)},
	})
	// An LRU policy keeps milliseconds: idle times start over, and again
	// from frequency records back to recency ones.
	s.SetAccessTracking(EvictAllKeysLRU.Tracks(), 25_000)
	run(t, s, []step{{25_000, idle, in(0)}, {27_500, idle, in(2)}})
	s.SetAccessTracking(TrackLFU, 27_500)
	s.SetAccessTracking(TrackIdle, 28_000)
	run(t, s, []step{{28_000, idle, in(0)}, {30_000, idle, in(2)}})
}

// lfuDecayed is Redis's LFUDecrAndReturn: one less per lfu-decay-time
// minutes idle, none with 0, the minutes wrapping at 2^16 as Redis's do.
func TestLFUDecay(t *testing.T) {
	rec := func(ldt, counter uint32) uint32 { return ldt<<8 | counter }
	for _, tc := range []struct {
		v, mins uint32
		decay   int64
		want    uint8
	}{
		{rec(100, 5), 100, 1, 5},
		{rec(100, 5), 103, 1, 2},
		{rec(100, 5), 105, 1, 0},
		{rec(100, 5), 200, 1, 0},
		{rec(100, 5), 103, 2, 4},
		{rec(100, 5), 109, 2, 1},
		{rec(100, 5), 60000, 0, 5},
		{rec(65530, 20), 4, 1, 11}, // 65535-65530+4 = 9 minutes
		{0, 50, 1, 0},
	} {
		if got := lfuDecayed(tc.v, tc.mins, tc.decay); got != tc.want {
			t.Errorf("lfuDecayed(%d<<8|%d, %d, %d) = %d, want %d", tc.v>>8, tc.v&0xff, tc.mins, tc.decay, got, tc.want)
		}
	}
}

// OBJECT FREQ follows lfu-log-factor: with 0 every access counts.
func TestObjectFreqLogFactor(t *testing.T) {
	s := NewStore()
	s.SetAccessTracking(TrackLFU, 1000)
	s.SetLFUParams(0, 1)
	s.Apply(0, 1000, []Command{{Op: OpSet, Args: [][]byte{[]byte("k"), []byte("v")}}})
	freq := func() int64 {
		return s.Read(1000, Command{Op: OpObject, Args: [][]byte{[]byte("k")}, Int: ObjectFreq}).Int
	}
	if got := freq(); got != lfuInit {
		t.Fatalf("OBJECT FREQ of a new key: %d, want %d", got, lfuInit)
	}
	for range 3 {
		s.Read(1000, Command{Op: OpGet, Args: [][]byte{[]byte("k")}})
	}
	if got := freq(); got != lfuInit+3 {
		t.Fatalf("OBJECT FREQ after 3 reads with lfu-log-factor 0: %d, want %d", got, lfuInit+3)
	}
	// Four minutes idle, a decay time of 2: two less.
	s.SetLFUParams(0, 2)
	if got := s.Read(1000+4*60000, Command{Op: OpObject, Args: [][]byte{[]byte("k")}, Int: ObjectFreq}).Int; got != lfuInit+1 {
		t.Fatalf("OBJECT FREQ after 4 idle minutes, decay time 2: %d, want %d", got, lfuInit+1)
	}
}
