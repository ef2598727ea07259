package fsm

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

func cmdLog(index uint64, now int64, cmds ...Command) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: EncodeEntry(nil, now, cmds)}
}

func TestRaftFSMApplyBatch(t *testing.T) {
	f := NewRaftFSM(NewStore())
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("not an entry")},
		cmdLog(2, t0, c(OpSet, "a", "1"), c(OpIncrBy, "a").i(2)),
		{Index: 3, Term: 1, Type: raft.LogNoop},
		cmdLog(4, t0, c(OpMetaSet, "node/a/resp", "127.0.0.1:7001"), c(OpGetSet, "a", "x")),
		{Index: 5, Term: 2, Type: raft.LogConfiguration},
	}
	resp := f.ApplyBatch(logs)
	if len(resp) != len(logs) {
		t.Fatalf("%d responses for %d logs", len(resp), len(logs))
	}
	for _, i := range []int{0, 2, 4} {
		if resp[i] != nil {
			t.Errorf("log %d (%v): response %v, want nil", logs[i].Index, logs[i].Type, resp[i])
		}
	}
	want := map[int]string{1: "[OK (integer) 3]", 3: `[OK "3"]`}
	for i, w := range want {
		replies, ok := resp[i].([]Reply)
		if !ok {
			t.Fatalf("log %d: response %T, want []Reply", logs[i].Index, resp[i])
		}
		if got := replyStrings(replies); got != w {
			t.Errorf("log %d: replies %s, want %s", logs[i].Index, got, w)
		}
	}
	// The last command log's index, not the trailing configuration's.
	if got := f.Store.AppliedIndex(); got != 4 {
		t.Errorf("AppliedIndex = %d, want 4", got)
	}
	// A batch with no command log changes nothing.
	if resp := f.ApplyBatch([]*raft.Log{{Index: 6, Type: raft.LogConfiguration}}); resp[0] != nil || f.Store.AppliedIndex() != 4 {
		t.Errorf("configuration-only batch: response %v, AppliedIndex %d", resp[0], f.Store.AppliedIndex())
	}
	// Apply is a batch of one.
	if r := f.Apply(cmdLog(7, t0, c(OpDel, "a"))).([]Reply); replyStrings(r) != "[(integer) 1]" || f.Store.AppliedIndex() != 7 {
		t.Errorf("Apply: %s, AppliedIndex %d", replyStrings(r), f.Store.AppliedIndex())
	}
}

func replyStrings(rs []Reply) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.String())
	}
	b.WriteByte(']')
	return b.String()
}

func TestRaftFSMCorruptCommandPanics(t *testing.T) {
	f := NewRaftFSM(NewStore())
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "log 9") {
			t.Fatalf("panic %v, want one naming log 9", r)
		}
		if f.Store.AppliedIndex() != 0 {
			t.Fatal("a batch with a corrupt entry was partly applied")
		}
	}()
	f.ApplyBatch([]*raft.Log{
		cmdLog(8, t0, c(OpSet, "a", "1")),
		{Index: 9, Type: raft.LogCommand, Data: []byte{0xff}},
	})
}

// memSink is a raft.SnapshotSink in memory; failAfter > 0 makes writes fail
// once that many bytes were written.
type memSink struct {
	bytes.Buffer
	failAfter         int
	closed, cancelled bool
}

func (s *memSink) Write(p []byte) (int, error) {
	if s.failAfter > 0 && s.Len()+len(p) > s.failAfter {
		return 0, errors.New("disk full")
	}
	return s.Buffer.Write(p)
}
func (s *memSink) ID() string            { return "mem" }
func (s *memSink) Close() error          { s.closed = true; return nil }
func (s *memSink) Cancel() error         { s.cancelled = true; return nil }
func (s *memSink) Reader() io.ReadCloser { return io.NopCloser(bytes.NewReader(s.Bytes())) }

func TestRaftFSMSnapshotRestore(t *testing.T) {
	nows, entries := randomEntries(5, 400)
	f := NewRaftFSM(NewStore())
	var logs []*raft.Log
	index := uint64(0)
	for i, cmds := range entries {
		index += 2 // gaps, as configuration entries leave
		logs = append(logs, cmdLog(index, nows[i], cmds...))
	}
	logs = append(logs, cmdLog(index+1, t0, c(OpMetaSet, "node/a/resp", "127.0.0.1:7001")))
	for len(logs) > 0 {
		n := min(len(logs), 37)
		f.ApplyBatch(logs[:n])
		logs = logs[n:]
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want, wantMeta := snapshotBytes(t, f.Store), f.Store.MetaAll()
	if len(wantMeta) < 2 {
		t.Fatalf("metadata %v: the workload should have set some", wantMeta)
	}
	// Writes after Snapshot do not show in what Persist writes.
	f.Apply(cmdLog(index+10, t0, c(OpFlushAll), c(OpMetaSet, "node/a/resp", "")))
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil || !sink.closed || sink.cancelled {
		t.Fatalf("Persist: %v (closed %v, cancelled %v)", err, sink.closed, sink.cancelled)
	}
	snap.Release()

	r := NewRaftFSM(NewStore())
	r.Apply(cmdLog(1, t0, c(OpSet, "stale", "x")))
	rc := &closeCounter{Reader: bytes.NewReader(sink.Bytes())}
	if err := r.Restore(rc); err != nil || rc.closes != 1 {
		t.Fatalf("Restore: %v, closed %d times", err, rc.closes)
	}
	if got := snapshotBytes(t, r.Store); !bytes.Equal(got, want) {
		t.Fatal("restored store differs from the snapshot's")
	}
	if got := r.Store.AppliedIndex(); got != index+1 {
		t.Errorf("restored AppliedIndex %d, want %d", got, index+1)
	}
	if m := r.Store.MetaAll(); !maps.Equal(m, wantMeta) {
		t.Errorf("restored metadata %v, want %v", m, wantMeta)
	}

	// A corrupt snapshot fails Restore, still closes the reader, and
	// leaves the store alone.
	rc = &closeCounter{Reader: bytes.NewReader(sink.Bytes()[:10])}
	if err := r.Restore(rc); !errors.Is(err, ErrCorrupt) || rc.closes != 1 {
		t.Fatalf("Restore of a truncated snapshot: %v, closed %d times", err, rc.closes)
	}
	if !bytes.Equal(snapshotBytes(t, r.Store), want) {
		t.Fatal("a failed Restore changed the store")
	}
}

func TestRaftFSMPersistCancelsOnError(t *testing.T) {
	s := NewStore()
	for i := range 2000 {
		s.Apply(0, t0, []Command{c(OpSet, "k"+itoa(i), strings.Repeat("v", 100))})
	}
	snap, err := NewRaftFSM(s).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{failAfter: 1000}
	if err := snap.Persist(sink); err == nil || !sink.cancelled || sink.closed {
		t.Fatalf("Persist to a failing sink: %v (cancelled %v, closed %v)", err, sink.cancelled, sink.closed)
	}
}

type closeCounter struct {
	io.Reader
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }
