package group

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kvs/fsm"
	"kvs/wal"
)

// openDurable returns a store and the durable proposer over a fresh log in
// a temporary directory on the real file system, fsync always.
func openDurable(tb testing.TB) (*fsm.Store, *durableProposer) {
	tb.Helper()
	store := fsm.NewStore()
	g, err := OpenDurable(store, DurableOptions{Dir: tb.TempDir(), Fsync: wal.FsyncAlways})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return store, g.proposer.(*durableProposer)
}

func setCmd(key, value []byte) []fsm.Command {
	return []fsm.Command{{Op: fsm.OpSet, Args: [][]byte{key, value}}}
}

// TestDurableProposerRecovers checks the wiring end to end: replies come
// back through the log, and a reopened log restores the same store.
func TestDurableProposerRecovers(t *testing.T) {
	store, dir := fsm.NewStore(), t.TempDir()
	g, err := OpenDurable(store, DurableOptions{Dir: dir, Fsync: wal.FsyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	p := g.Proposer()
	for i := range 100 {
		replies, err := p.Propose(append(setCmd([]byte("k"+strconv.Itoa(i)), []byte("v")),
			fsm.Command{Op: fsm.OpIncrBy, Args: [][]byte{[]byte("n")}, Int: 1}))
		if err != nil {
			t.Fatal(err)
		}
		if len(replies) != 2 || replies[0].Kind != fsm.ReplyStatus || replies[1].Int != int64(i+1) {
			t.Fatalf("batch %d: replies %+v", i, replies)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	again := fsm.NewStore()
	g, err = OpenDurable(again, DurableOptions{Dir: dir, Fsync: wal.FsyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r := again.Read(0, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte("n")}})
	if string(r.Bulk) != "100" {
		t.Fatalf("counter after replay = %q, want 100", r.Bulk)
	}
	if n := again.Read(0, fsm.Command{Op: fsm.OpDBSize}).Int; n != 101 {
		t.Fatalf("keys after replay = %d, want 101", n)
	}
}

var benchValue = []byte("0123456789abcdef0123456789abcdef")

// BenchmarkPutDurable is one writer: every SET waits for its own fsync.
func BenchmarkPutDurable(b *testing.B) {
	_, p := openDurable(b)
	b.ReportAllocs()
	key := make([]byte, 0, 32)
	i := 0
	for b.Loop() {
		key = strconv.AppendInt(append(key[:0], "key:"...), int64(i%100_000), 10)
		i++
		if _, err := p.Propose(setCmd(key, benchValue)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutDurableParallel is many concurrent writers sharing fsyncs
// (group commit); records/fsync says how many writes each fsync carried.
func BenchmarkPutDurableParallel(b *testing.B) {
	_, p := openDurable(b)
	b.ReportAllocs()
	b.SetParallelism(64) // 64 writers per core, as many connections would be
	var next atomic.Int64
	before := p.log.Stats()
	b.RunParallel(func(pb *testing.PB) {
		key := make([]byte, 0, 32)
		for pb.Next() {
			i := next.Add(1)
			key = strconv.AppendInt(append(key[:0], "key:"...), i%100_000, 10)
			if _, err := p.Propose(setCmd(key, benchValue)); err != nil {
				panic(fmt.Sprint(err)) // b.Fatal is not for RunParallel's goroutines
			}
		}
	})
	after := p.log.Stats()
	if fsyncs := after.Fsyncs - before.Fsyncs; fsyncs > 0 {
		b.ReportMetric(float64(after.RecordsFsynced-before.RecordsFsynced)/float64(fsyncs), "records/fsync")
	}
}

// TestDurableProposerRounds: batches handed to Enqueue are answered after
// Kick, in order and with the store's replies; a batch the log refuses is
// answered at once with the error.
func TestDurableProposerRounds(t *testing.T) {
	store, p := openDurable(t)
	var mu sync.Mutex
	var got []int64
	for i := range 10 {
		p.Enqueue([]fsm.Command{{Op: fsm.OpIncrBy, Args: [][]byte{[]byte("n")}, Int: 1}}, func(r []fsm.Reply, err error) {
			if err != nil || len(r) != 1 {
				t.Errorf("batch %d: %v, %v", i, r, err)
				return
			}
			mu.Lock()
			got = append(got, r[0].Int)
			mu.Unlock()
		})
	}
	mu.Lock()
	if len(got) != 0 {
		t.Fatalf("answered before Kick: %v", got)
	}
	mu.Unlock()
	p.Kick()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Fatalf("after Kick: %v", got)
	}
	if r := store.Read(0, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte("n")}}); string(r.Bulk) != "10" {
		t.Fatalf("GET n = %+v", r)
	}

	p.log.Close()
	var refused error
	p.Enqueue(setCmd([]byte("k"), []byte("v")), func(_ []fsm.Reply, err error) { refused = err })
	if !errors.Is(refused, wal.ErrClosed) {
		t.Fatalf("Enqueue on a closed log answered %v", refused)
	}
}

func TestRecordKeys(t *testing.T) {
	rec := fsm.EncodeEntry(nil, 1, []fsm.Command{
		{Op: fsm.OpMSet, Args: [][]byte{[]byte("a"), []byte("1"), []byte("b"), []byte("2")}},
		{Op: fsm.OpDel, Args: [][]byte{[]byte("c")}},
	})
	keys, err := recordKeys(rec)
	if err != nil || strings.Join(keys, " ") != "a b c" {
		t.Fatalf("recordKeys = %q, %v; want a b c", keys, err)
	}
}
