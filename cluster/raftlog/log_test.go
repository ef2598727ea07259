package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

func open(t testing.TB, dir string, size int64) *Log {
	t.Helper()
	l, err := Open(Options{Dir: dir, SegmentSize: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func entry(index uint64) *raft.Log {
	return &raft.Log{Index: index, Term: index/10 + 1, Type: raft.LogCommand,
		Data: []byte(fmt.Sprintf("data-%d", index)), AppendedAt: time.Unix(0, int64(index)*1000)}
}

func store(t testing.TB, l *Log, from, to uint64) {
	t.Helper()
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, entry(i))
	}
	if err := l.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs %d..%d: %v", from, to, err)
	}
}

// check verifies that l holds exactly first..last, each as stored.
func check(t testing.TB, l *Log, first, last uint64) {
	t.Helper()
	if f, _ := l.FirstIndex(); f != first {
		t.Fatalf("FirstIndex %d, want %d", f, first)
	}
	if la, _ := l.LastIndex(); la != last {
		t.Fatalf("LastIndex %d, want %d", la, last)
	}
	if last == 0 {
		return
	}
	for i := first; i <= last; i++ {
		var got raft.Log
		if err := l.GetLog(i, &got); err != nil {
			t.Fatalf("GetLog %d: %v", i, err)
		}
		want := entry(i)
		if got.Index != i || got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) ||
			!got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("GetLog %d = %+v, want %+v", i, got, *want)
		}
	}
	var none raft.Log
	for _, i := range []uint64{first - 1, last + 1} {
		if i == 0 {
			continue
		}
		if err := l.GetLog(i, &none); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog %d outside %d..%d: %v", i, first, last, err)
		}
	}
}

// TestStoreAndReopen: entries come back by index, across segments and
// across a reopen.
func TestStoreAndReopen(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 200)
	check(t, l, 0, 0)
	store(t, l, 1, 10)
	store(t, l, 11, 11)
	store(t, l, 12, 40)
	check(t, l, 1, 40)
	if l.segsLen() < 3 {
		t.Fatalf("%d segments for 40 entries of 200 bytes each", l.segsLen())
	}
	if err := l.StoreLogs([]*raft.Log{entry(40)}); err == nil {
		t.Fatal("an entry stored again")
	}
	l.Close()
	l = open(t, dir, 200)
	check(t, l, 1, 40)
	// Past the end (raft installed a snapshot there): the log starts
	// again at the new index.
	store(t, l, 50, 55)
	check(t, l, 50, 55)
	l.Close()
	check(t, open(t, dir, 200), 50, 55)
}

// TestDeletePrefix: raft's compaction removes whole segments and keeps
// the one holding entries past max; the rest reads as before.
func TestDeletePrefix(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 200)
	store(t, l, 1, 40)
	before := l.segsLen()
	if err := l.DeleteRange(1, 25); err != nil {
		t.Fatal(err)
	}
	if l.segsLen() >= before {
		t.Fatalf("after DeleteRange(1, 25): %d of %d segments", l.segsLen(), before)
	}
	check(t, l, 26, 40)
	store(t, l, 41, 45)
	l.Close()
	// Reopened, it serves the rest of the segment that held 25 again.
	l = open(t, dir, 200)
	first, _ := l.FirstIndex()
	if first > 26 {
		t.Fatalf("reopened: first index %d", first)
	}
	check(t, l, first, 45)
}

// TestDeleteSuffix: a follower's conflicting entries are cut, in the
// middle of a segment and across segments, and new ones follow.
func TestDeleteSuffix(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 200)
	store(t, l, 1, 40)
	if err := l.DeleteRange(37, 40); err != nil {
		t.Fatal(err)
	}
	check(t, l, 1, 36)
	if err := l.DeleteRange(12, 36); err != nil {
		t.Fatal(err)
	}
	check(t, l, 1, 11)
	store(t, l, 12, 20)
	l.Close()
	l = open(t, dir, 200)
	check(t, l, 1, 20)
	if err := l.DeleteRange(5, 9); err == nil {
		t.Fatal("a range in the middle was deleted")
	}
}

// TestDeleteAll: after a snapshot install the log may be emptied and
// start again at any index.
func TestDeleteAll(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 200)
	store(t, l, 1, 30)
	if err := l.DeleteRange(1, 30); err != nil {
		t.Fatal(err)
	}
	check(t, l, 0, 0)
	store(t, l, 1000, 1010)
	check(t, l, 1000, 1010)
	l.Close()
	check(t, open(t, dir, 200), 1000, 1010)
}

// TestTornTail: a record cut short or garbled at the end of the last
// segment is cut off at open; the entries before it remain, and new ones
// follow them.
func TestTornTail(t *testing.T) {
	for _, tail := range []string{"cut", "garbled"} {
		t.Run(tail, func(t *testing.T) {
			dir := t.TempDir()
			l := open(t, dir, 1<<20)
			store(t, l, 1, 10)
			l.Close()
			name := segName(dir, 1)
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			var end int // the offset after entry 10; zeros follow
			for i := uint64(1); i <= 10; i++ {
				end += len(appendEntry(nil, entry(i)))
			}
			switch tail {
			case "cut":
				rec := appendEntry(nil, entry(11))
				copy(b[end:], rec[:len(rec)-10]) // into the data: its end is not zeros
			case "garbled":
				b[end-2] ^= 0xff // entry 10's last byte but one
			}
			if err := os.WriteFile(name, b, 0o644); err != nil {
				t.Fatal(err)
			}
			l = open(t, dir, 1<<20)
			last := uint64(10)
			if tail == "garbled" {
				last = 9
			}
			check(t, l, 1, last)
			store(t, l, last+1, 15)
			l.Close()
			check(t, open(t, dir, 1<<20), 1, 15)
		})
	}
}

// TestCorruptMiddle: damage in a segment that is not the last, or before
// valid records in the last one, is not a torn write: Open refuses,
// naming the file and offset.
func TestCorruptMiddle(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 200)
	store(t, l, 1, 40)
	l.Close()
	name := segName(dir, 1)
	b, _ := os.ReadFile(name)
	b[headerSize+20] ^= 0xff
	os.WriteFile(name, b, 0o644)
	_, err := Open(Options{Dir: dir, SegmentSize: 200})
	if !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte(filepath.Base(name))) {
		t.Fatalf("Open on a corrupt middle segment: %v", err)
	}
}

// BenchmarkStoreLog is one entry per StoreLogs, each with its fdatasync,
// as a leader with one writer stores them; BenchmarkStoreLogBolt is the
// same on raft-boltdb, the store it would replace.
func BenchmarkStoreLog(b *testing.B) {
	l := open(b, b.TempDir(), 0)
	data := bytes.Repeat([]byte("x"), 100)
	i := uint64(0)
	for b.Loop() {
		i++
		if err := l.StoreLog(&raft.Log{Index: i, Term: 1, Data: data}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStoreLogBolt(b *testing.B) {
	s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(b.TempDir(), "raft.db"),
		BoltOptions: &bbolt.Options{NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := bytes.Repeat([]byte("x"), 100)
	i := uint64(0)
	for b.Loop() {
		i++
		if err := s.StoreLog(&raft.Log{Index: i, Term: 1, Data: data}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCorruptLastSegment(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 1<<20)
	store(t, l, 1, 20)
	l.Close()
	name := segName(dir, 1)
	b, _ := os.ReadFile(name)
	b[headerSize+20] ^= 0xff // entry 1, with 19 valid ones after it
	os.WriteFile(name, b, 0o644)
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with entry 1 of 20 damaged: %v", err)
	}
}
