package fsm

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

// eventLog collects a store's events as "name:key".
type eventLog struct {
	mu sync.Mutex
	ev []string
}

func (l *eventLog) hook(events []Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range events {
		l.ev = append(l.ev, e.Name+":"+e.Key)
	}
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.ev
	l.ev = nil
	return ev
}

func notifyingStore(classes NotifyClass) (*Store, *eventLog) {
	s, l := NewStore(), &eventLog{}
	s.SetNotifyHook(l.hook)
	s.SetNotifyClasses(NotifyKeyspace | classes)
	return s, l
}

// TestNotifyLazyExpiry: a write that meets a key expired at its entry's
// now deletes it and announces "expired" first, whether or not anyone
// listens, so that every replica's store is the same; a read only hides it.
func TestNotifyLazyExpiry(t *testing.T) {
	s, l := notifyingStore(NotifyAll | NotifyNew | NotifyKeyMiss)
	s.Apply(0, 1000, []Command{c(OpSet, "k", "v").i(1500), c(OpSet, "other", "v")})
	l.take()
	if r := s.Read(2000, c(OpGet, "k")); r.Kind != ReplyNil {
		t.Fatalf("GET of an expired key: %v", r)
	}
	if got := l.take(); !slices.Equal(got, []string{"keymiss:k"}) {
		t.Fatalf("a read of an expired key announced %q, want only its keymiss", got)
	}
	if _, ok := s.getLocked([]byte("k")); !ok {
		t.Fatal("a read deleted an expired key")
	}
	s.Apply(0, 2000, []Command{c(OpSet, "k", "w")})
	if got, want := l.take(), []string{"expired:k", "new:k", "set:k"}; !slices.Equal(got, want) {
		t.Fatalf("SET over an expired key announced %q, want %q", got, want)
	}
	// The active expiry that comes later finds nothing to announce.
	s.Apply(0, 2000, []Command{c(OpDelExpired, "k")})
	if got := l.take(); len(got) != 0 {
		t.Fatalf("DELEXPIRED after the lazy expiry announced %q", got)
	}

	// Without listeners the deletion happens all the same: two stores fed
	// the same entries, one listened to and one not, hold the same keys.
	quiet := NewStore()
	for _, st := range []*Store{s, quiet} {
		st.Apply(0, 3000, []Command{c(OpSet, "t", "v").i(3500)})
		st.Apply(0, 4000, []Command{c(OpDel, "t")})
	}
	for _, st := range []*Store{s, quiet} {
		if _, ok := st.getLocked([]byte("t")); ok {
			t.Fatal("DEL of an expired key left it in the store")
		}
	}
	if got := l.take(); !slices.Equal(got, []string{"new:t", "set:t", "expire:t", "expired:t"}) {
		t.Fatalf("events %q", got)
	}
}

// TestNotifyOrder: "new" comes just before the first event of the key it
// names, and events follow Redis's order for the multi-key writes.
func TestNotifyOrder(t *testing.T) {
	s, l := notifyingStore(NotifyAll | NotifyNew | NotifyKeyMiss)
	steps := []struct {
		cmd  Command
		want string
	}{
		{c(OpMSet, "a", "1", "b", "2", "a", "3"), "new:a set:a new:b set:b set:a"},
		{c(OpSAdd, "src", "m", "n"), "new:src sadd:src"},
		{c(OpSMove, "src", "dst", "m"), "srem:src new:dst sadd:dst"},
		{c(OpSMove, "src", "dst", "n"), "srem:src del:src sadd:dst"},
		{c(OpSMove, "dst", "dst", "n"), ""},
		{c(OpRename, "a", "b"), "new:b rename_from:a rename_to:b"},
		{c(OpRPush, "l", "x"), "new:l rpush:l"},
		{c(OpLMove, "l", "l2").fl(FlagListRight), "new:l2 lpush:l2 rpop:l del:l"},
		{c(OpSInterStore, "dst", "nosuch"), "keymiss:nosuch del:dst"},
		{c(OpSInterStore, "dst", "nosuch"), "keymiss:nosuch"},
		{c(OpLTrim, "nosuch").i(0).i2(1), ""},
		{zadd("z", 1, "m"), "new:z zadd:z"},
		{zadd("z", 1, "m"), ""},
		{zadd("nosuch", 1, "m").fl(FlagZXX), ""},
		{c(OpCopy, "z", "b").fl(FlagReplace), "new:b copy_to:b"},
	}
	for _, st := range steps {
		r := s.Apply(0, 1000, []Command{st.cmd})[0]
		if r.IsError() {
			t.Fatalf("%v: %v", st.cmd.Op, r)
		}
		if got := strings.Join(l.take(), " "); got != st.want {
			t.Errorf("%v %q: events %q, want %q", st.cmd.Op, st.cmd.Args, got, st.want)
		}
	}
}

// TestNotifyInsideExec: the commands of a transaction announce their own
// events, in order, and meet expired keys as single commands do; EXEC
// itself announces nothing.
func TestNotifyInsideExec(t *testing.T) {
	s, l := notifyingStore(NotifyAll | NotifyNew)
	s.Apply(0, 1000, []Command{c(OpSet, "k", "v").i(1500)})
	l.take()
	exec := ExecCommand(nil, nil, []Command{c(OpSet, "k", "w"), c(OpGet, "k"), c(OpRPush, "l", "x")})
	s.Apply(0, 2000, []Command{exec})
	if got, want := l.take(), []string{"expired:k", "new:k", "set:k", "new:l", "rpush:l"}; !slices.Equal(got, want) {
		t.Fatalf("EXEC announced %q, want %q", got, want)
	}
}

// TestNotifyReadInsideExec: a read inside a transaction announces its
// keymiss in its place among the transaction's events, as Redis does.
func TestNotifyReadInsideExec(t *testing.T) {
	s, l := notifyingStore(NotifyAll | NotifyKeyMiss)
	exec := ExecCommand(nil, nil, []Command{c(OpSet, "a", "1"), c(OpGet, "missing"), c(OpSet, "b", "2")})
	s.Apply(0, 1000, []Command{exec})
	if got, want := l.take(), []string{"set:a", "keymiss:missing", "set:b"}; !slices.Equal(got, want) {
		t.Fatalf("EXEC announced %q, want %q", got, want)
	}
}

// TestNotifyBitFieldChanges: BITFIELD announces setbit when one of its
// writes changed its field, as Redis counts changes per write, even when a
// later write puts the bytes back; not when no write changed anything.
func TestNotifyBitFieldChanges(t *testing.T) {
	s, l := notifyingStore(NotifyString)
	s.Apply(0, t0, []Command{c(OpSet, "bf", "a")})
	l.take()
	u8 := func(incr bool, v int64) string {
		return string(EncodeBitFieldOp(BitFieldOp{Write: true, Incr: incr, Bits: 8, Value: v}))
	}
	for _, tc := range []struct {
		name string
		ops  []string
		want []string
	}{
		{"changed and put back", []string{u8(true, 1), u8(false, 'a')}, []string{"setbit:bf"}},
		{"the same value set", []string{u8(false, 'a')}, nil},
		{"an increment of 0", []string{u8(true, 0)}, nil},
	} {
		s.Apply(0, t0, []Command{c(OpBitField, append([]string{"bf"}, tc.ops...)...)})
		if got := l.take(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: events %q, want %q", tc.name, got, tc.want)
		}
	}
}
