package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

const benchKeys = 100_000

var benchValue = []byte("0123456789abcdef0123456789abcdef") // 32 bytes

// benchSets returns one single-command SET batch per key, for loading.
func benchSets(n int) [][]Command {
	batches := make([][]Command, n)
	for i := range batches {
		batches[i] = []Command{{Op: OpSet, Args: [][]byte{benchKey(nil, i), benchValue}}}
	}
	return batches
}

func benchKey(dst []byte, i int) []byte {
	return strconv.AppendInt(append(dst[:0], "key:"...), int64(i), 10)
}

// keyer yields keys spread over the keyspace in a buffer it reuses, as the
// server hands the store keys it has just parsed (hot in cache).
type keyer struct {
	i   int
	buf []byte
}

func (k *keyer) next() []byte {
	k.i = (k.i + 7919) % benchKeys // a prime stride: every key, no pattern
	k.buf = benchKey(k.buf, k.i)
	return k.buf
}

func loadedStore(b *testing.B, n int) *Store {
	s := NewStore()
	for _, cmds := range benchSets(n) {
		s.Apply(0, t0, cmds)
	}
	b.ResetTimer()
	return s
}

// BenchmarkPut is Apply of one SET of a 32-byte value over 100k keys.
func BenchmarkPut(b *testing.B) {
	s := loadedStore(b, benchKeys)
	b.ReportAllocs()
	var k keyer
	cmds := []Command{{Op: OpSet, Args: [][]byte{nil, benchValue}}}
	for b.Loop() {
		cmds[0].Args[0] = k.next()
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkPut1K is BenchmarkPut with 1 KiB values.
func BenchmarkPut1K(b *testing.B) {
	s := loadedStore(b, benchKeys)
	b.ReportAllocs()
	var k keyer
	cmds := []Command{{Op: OpSet, Args: [][]byte{nil, make([]byte, 1024)}}}
	for b.Loop() {
		cmds[0].Args[0] = k.next()
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkPutApplyTo is BenchmarkPut with the reply slice reused, which
// shows the store's own cost: the one allocation holding key and value.
func BenchmarkPutApplyTo(b *testing.B) {
	s := loadedStore(b, benchKeys)
	b.ReportAllocs()
	var k keyer
	cmds := []Command{{Op: OpSet, Args: [][]byte{nil, benchValue}}}
	replies := make([]Reply, 0, 1)
	for b.Loop() {
		cmds[0].Args[0] = k.next()
		replies = s.ApplyTo(replies[:0], 0, t0, cmds)
	}
}

func BenchmarkPutParallel(b *testing.B) {
	s := loadedStore(b, benchKeys)
	b.ReportAllocs()
	var seed atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		k := keyer{i: int(seed.Add(1))}
		cmds := []Command{{Op: OpSet, Args: [][]byte{nil, benchValue}}}
		for pb.Next() {
			cmds[0].Args[0] = k.next()
			s.Apply(0, t0, cmds)
		}
	})
}

func BenchmarkGet(b *testing.B) {
	s := loadedStore(b, benchKeys)
	b.ReportAllocs()
	var k keyer
	cmd := Command{Op: OpGet, Args: [][]byte{nil}}
	for b.Loop() {
		cmd.Args[0] = k.next()
		if r := s.Read(t0, cmd); r.Kind != ReplyBulk {
			b.Fatal(r)
		}
	}
}

func BenchmarkGetParallel(b *testing.B) {
	s := loadedStore(b, benchKeys)
	b.ReportAllocs()
	var seed atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		k := keyer{i: int(seed.Add(1))}
		cmd := Command{Op: OpGet, Args: [][]byte{nil}}
		for pb.Next() {
			cmd.Args[0] = k.next()
			s.Read(t0, cmd)
		}
	})
}

// BenchmarkSnapshotStall measures what a snapshot of 1M keys costs writers:
// the time Snapshot holds the lock, and the latency of Puts issued while
// WriteTo streams the snapshot (they pay for copying the tree nodes they
// touch). It reports the worst and the 99th percentile Put.
func BenchmarkSnapshotStall(b *testing.B) {
	const n = 1_000_000
	s := loadedStore(b, n)
	cmds := []Command{{Op: OpSet, Args: [][]byte{nil, benchValue}}}
	var key []byte
	for b.Loop() {
		// Baseline: the same Puts with no snapshot running.
		var base []time.Duration
		for i := range 100_000 {
			key = benchKey(key, (i*7919)%n)
			cmds[0].Args[0] = key
			t := time.Now()
			s.Apply(0, t0, cmds)
			base = append(base, time.Since(t))
		}
		slices.Sort(base)
		b.ReportMetric(float64(base[len(base)*99/100].Nanoseconds()), "base-p99-ns")
		b.ReportMetric(float64(base[len(base)-1].Nanoseconds()), "base-max-ns")

		start := time.Now()
		sn := s.Snapshot()
		take := time.Since(start)
		done := make(chan error)
		go func() {
			_, err := sn.WriteTo(io.Discard)
			done <- err
		}()
		var lat []time.Duration
		i := 0
	loop:
		for {
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				break loop
			default:
			}
			key = benchKey(key, (i*7919)%n)
			cmds[0].Args[0] = key
			t := time.Now()
			s.Apply(0, t0, cmds)
			lat = append(lat, time.Since(t))
			i++
		}
		writeTime := time.Since(start)
		sn.Release()
		slices.Sort(lat)
		b.ReportMetric(float64(take.Nanoseconds()), "snapshot-ns")
		b.ReportMetric(float64(writeTime.Milliseconds()), "writeto-ms")
		b.ReportMetric(float64(len(lat)), "puts-during")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "put-p99-ns")
		b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "put-max-ns")
	}
}

// BenchmarkRestore1M restores a snapshot of 1M keys with 32-byte values.
func BenchmarkRestore1M(b *testing.B) {
	s := loadedStore(b, 1_000_000)
	var buf bytes.Buffer
	sn := s.Snapshot()
	if _, err := sn.WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	sn.Release()
	b.ReportMetric(float64(buf.Len()), "snapshot-bytes")
	b.ResetTimer()
	for b.Loop() {
		if _, err := NewStore().Restore(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIncr is Apply of INCR on one key, as redis-benchmark's INCR
// test sends it: a read, an integer parse and format, and a write.
func BenchmarkIncr(b *testing.B) {
	s := NewStore()
	b.ReportAllocs()
	cmds := []Command{{Op: OpIncrBy, Args: [][]byte{[]byte("counter:__rand_int__")}, Int: 1}}
	replies := make([]Reply, 0, 1)
	for b.Loop() {
		replies = s.ApplyTo(replies[:0], 0, t0, cmds)
	}
}

// BenchmarkSetOneKey is SET of a 3-byte value on one key, redis-benchmark's
// SET test, beside BenchmarkIncr.
func BenchmarkSetOneKey(b *testing.B) {
	s := NewStore()
	b.ReportAllocs()
	cmds := []Command{{Op: OpSet, Args: [][]byte{[]byte("key:__rand_int__"), []byte("xxx")}}}
	replies := make([]Reply, 0, 1)
	for b.Loop() {
		replies = s.ApplyTo(replies[:0], 0, t0, cmds)
	}
}

// BenchmarkExec is Apply of an OpExec of 3 SETs of 32-byte values over
// 100k keys, reusing the reply slice: the transaction's own cost beside
// BenchmarkPutApplyTo's.
func BenchmarkExec(b *testing.B) {
	var k keyer
	execs := make([]Command, 4096)
	for i := range execs {
		subs := make([]Command, 3)
		for j := range subs {
			subs[j] = Command{Op: OpSet, Args: [][]byte{slices.Clone(k.next()), benchValue}}
		}
		execs[i] = ExecCommand(nil, nil, subs)
	}
	s := loadedStore(b, benchKeys)
	b.ReportAllocs()
	cmds := make([]Command, 1)
	replies := make([]Reply, 0, 1)
	for i := 0; b.Loop(); i++ {
		cmds[0] = execs[i%len(execs)]
		replies = s.ApplyTo(replies[:0], 0, t0, cmds)
	}
}

// benchKeysWorkload applies one command per iteration to a random key of
// n keys already holding integers, as redis-benchmark -r n does: the
// keyspace's lookups and writes when the tree does not fit in a cache.
func benchKeysWorkload(b *testing.B, n int, mk func(key []byte, i int) Command) {
	s := NewStore()
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("counter:%012d", i))
		s.Apply(0, t0, []Command{{Op: OpSet, Args: [][]byte{keys[i], []byte("1")}}})
	}
	order := rand.New(rand.NewPCG(1, 2)).Perm(n)
	cmds := make([]Command, 1)
	replies := make([]Reply, 0, 1)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		cmds[0] = mk(keys[order[i%n]], i)
		replies = s.ApplyTo(replies[:0], 0, t0, cmds)
		i++
	}
}

// BenchmarkKeysIncr is INCR of a random one of 100k or 1M keys.
func BenchmarkKeysIncr(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			benchKeysWorkload(b, n, func(k []byte, _ int) Command {
				return Command{Op: OpIncrBy, Args: [][]byte{k}, Int: 1}
			})
		})
	}
}

// BenchmarkKeysSet is SET of a random one of 100k or 1M keys.
func BenchmarkKeysSet(b *testing.B) {
	val := []byte("xxx")
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			benchKeysWorkload(b, n, func(k []byte, _ int) Command {
				return Command{Op: OpSet, Args: [][]byte{k, val}}
			})
		})
	}
}

// BenchmarkKeysExpire is EXPIRE of a random one of 100k or 1M keys to a
// deadline that moves on each time: the TTL index's cost, which a rate
// limiter pays on every call.
func BenchmarkKeysExpire(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			benchKeysWorkload(b, n, func(k []byte, i int) Command {
				return Command{Op: OpExpireAt, Args: [][]byte{k}, Int: t0 + 60_000 + int64(i)}
			})
		})
	}
}
