package fsm

import (
	"strconv"
	"testing"
)

// Hash benchmarks: writes and reads on small (packed, 10 fields, as in
// the memory target) and large (100k fields) hashes.

const benchHashFields = 100_000

var benchHashFieldNames = func() [][]byte {
	fs := make([][]byte, benchHashFields)
	for i := range fs {
		fs[i] = []byte("field:" + strconv.Itoa(i))
	}
	return fs
}()

// smallHashes is a store of benchKeys hashes of fields f0..f9.
func smallHashes(b *testing.B) *Store {
	s := NewStore()
	args := [][]byte{nil}
	for f := range 10 {
		args = append(args, []byte("f"+strconv.Itoa(f)), []byte("01234567"))
	}
	var k keyer
	for range benchKeys {
		args[0] = k.next()
		s.Apply(0, t0, []Command{{Op: OpHSet, Args: args}})
	}
	b.ResetTimer()
	return s
}

func largeHash(b *testing.B) *Store {
	s := NewStore()
	for _, f := range benchHashFieldNames {
		s.Apply(0, t0, []Command{{Op: OpHSet, Args: [][]byte{[]byte("big"), f, benchValue}}})
	}
	b.ResetTimer()
	return s
}

// BenchmarkHSetSmall replaces one field of a 10-field packed hash.
func BenchmarkHSetSmall(b *testing.B) {
	s := smallHashes(b)
	b.ReportAllocs()
	var k keyer
	cmds := []Command{{Op: OpHSet, Args: [][]byte{nil, []byte("f3"), []byte("76543210")}}}
	for b.Loop() {
		cmds[0].Args[0] = k.next()
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkHSetNew creates a one-field hash per key, as redis-benchmark's
// HSET test does on new keys.
func BenchmarkHSetNew(b *testing.B) {
	s := NewStore()
	b.ReportAllocs()
	var k keyer
	cmds := []Command{{Op: OpHSet, Args: [][]byte{nil, []byte("element"), benchValue}}}
	for b.Loop() {
		cmds[0].Args[0] = k.next()
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkHSetLarge replaces fields of a 100k-field hash.
func BenchmarkHSetLarge(b *testing.B) {
	s := largeHash(b)
	b.ReportAllocs()
	cmds := []Command{{Op: OpHSet, Args: [][]byte{[]byte("big"), nil, benchValue}}}
	i := 0
	for b.Loop() {
		i = (i + 7919) % benchHashFields
		cmds[0].Args[1] = benchHashFieldNames[i]
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkHSetLarge1K is BenchmarkHSetLarge with valkey's largest
// benchmark value, 1 KiB.
func BenchmarkHSetLarge1K(b *testing.B) {
	s := largeHash(b)
	b.ReportAllocs()
	cmds := []Command{{Op: OpHSet, Args: [][]byte{[]byte("big"), nil, make([]byte, 1024)}}}
	i := 0
	for b.Loop() {
		i = (i + 7919) % benchHashFields
		cmds[0].Args[1] = benchHashFieldNames[i]
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkHIncrBySmall increments a field of a packed hash.
func BenchmarkHIncrBySmall(b *testing.B) {
	s := smallHashes(b)
	b.ReportAllocs()
	var k keyer
	cmds := []Command{{Op: OpHIncrBy, Args: [][]byte{nil, []byte("n")}, Int: 1}}
	for b.Loop() {
		cmds[0].Args[0] = k.next()
		s.Apply(0, t0, cmds)
	}
}

func BenchmarkHGetSmall(b *testing.B) {
	s := smallHashes(b)
	b.ReportAllocs()
	var k keyer
	cmd := Command{Op: OpHGet, Args: [][]byte{nil, []byte("f7")}}
	for b.Loop() {
		cmd.Args[0] = k.next()
		if r := s.Read(t0, cmd); r.Kind != ReplyBulk {
			b.Fatal(r)
		}
	}
}

func BenchmarkHGetLarge(b *testing.B) {
	s := largeHash(b)
	b.ReportAllocs()
	cmd := Command{Op: OpHGet, Args: [][]byte{[]byte("big"), nil}}
	i := 0
	for b.Loop() {
		i = (i + 7919) % benchHashFields
		cmd.Args[1] = benchHashFieldNames[i]
		if r := s.Read(t0, cmd); r.Kind != ReplyBulk {
			b.Fatal(r)
		}
	}
}

func BenchmarkHGetAllSmall(b *testing.B) {
	s := smallHashes(b)
	b.ReportAllocs()
	var k keyer
	cmd := Command{Op: OpHGetAll, Args: [][]byte{nil}}
	for b.Loop() {
		cmd.Args[0] = k.next()
		if r := s.Read(t0, cmd); len(r.Array) != 20 {
			b.Fatal(r)
		}
	}
}

// BenchmarkHScanLarge pages through a 100k-field hash 10 fields a call.
func BenchmarkHScanLarge(b *testing.B) {
	s := largeHash(b)
	b.ReportAllocs()
	cmd := Command{Op: OpHScan, Args: [][]byte{[]byte("big"), nil}, Int2: 10}
	for b.Loop() {
		r := s.Read(t0, cmd)
		next, _ := strconv.ParseInt(string(r.Array[0].Bulk), 10, 64)
		cmd.Int = next
	}
}
