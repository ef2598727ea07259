package fsm

import (
	"slices"
	"sync"
	"testing"
)

// metLog collects what a store's expired hook receives, one call a row.
type metLog struct {
	mu    sync.Mutex
	calls [][]string
}

func (l *metLog) hook(keys [][]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var row []string
	for _, k := range keys {
		row = append(row, string(k))
	}
	l.calls = append(l.calls, row)
}

// take returns the keys of every call since the last take, in order.
func (l *metLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, row := range l.calls {
		out = append(out, row...)
	}
	l.calls = nil
	return out
}

// expiringStore holds live and expired (at t0+1) keys of every type; its
// expired hook logs.
func expiringStore(t *testing.T) (*Store, *metLog) {
	t.Helper()
	s, l := newScriptStore(), &metLog{}
	s.SetExpiredHook(l.hook)
	dead := int64(t0 + 1)
	s.Apply(0, t0, []Command{
		c(OpSet, "a", "1"),
		c(OpSet, "dead", "x").i(dead),
		c(OpSet, "dead2", "x").i(dead),
		c(OpHSet, "h", "f", "v"),
		c(OpHSet, "hdead", "f", "v"),
		c(OpExpireAt, "hdead").i(dead),
		c(OpSAdd, "s", "m"),
		c(OpSAdd, "sdead", "m"),
		c(OpExpireAt, "sdead").i(dead),
	})
	if got := l.take(); got != nil {
		t.Fatalf("writes reported %q", got)
	}
	return s, l
}

// TestExpiredHookReads: a read reports the expired keys Redis's lookups
// of it would delete, and only those; nothing while no key is due.
func TestExpiredHookReads(t *testing.T) {
	s, l := expiringStore(t)
	now := int64(t0 + 1)
	scan := c(OpScan).i2(100)
	scanMatch := c(OpScan, "d*").fl(FlagScanMatch).i2(100)
	scanType := c(OpScan, "*", "hash").fl(FlagScanMatch).i2(100)
	cases := []struct {
		cmd  Command
		want []string
	}{
		{c(OpGet, "dead"), []string{"dead"}},
		{c(OpGet, "a"), nil},
		{c(OpGet, "missing"), nil},
		{c(OpGet, "hdead"), []string{"hdead"}},
		{c(OpMGet, "a", "dead", "missing", "dead2"), []string{"dead", "dead2"}},
		{c(OpExists, "dead", "a", "hdead"), []string{"dead", "hdead"}},
		{c(OpType, "dead"), []string{"dead"}},
		{c(OpTTL, "dead"), []string{"dead"}},
		{c(OpPTTL, "hdead"), []string{"hdead"}},
		{c(OpStrLen, "dead"), []string{"dead"}},
		{c(OpObject, "dead").i(ObjectEncoding), []string{"dead"}},
		{c(OpHGet, "hdead", "f"), []string{"hdead"}},
		{c(OpHGet, "h", "f"), nil},
		{c(OpSMembers, "sdead"), []string{"sdead"}},
		// SINTER stops looking at a key of the wrong type, as Redis does.
		{c(OpSInter, "sdead", "a", "dead"), []string{"sdead"}},
		{c(OpLCS, "dead", "a"), []string{"dead"}},
		// Redis's SCAN deletes the expired keys it visits that match.
		{scan, []string{"dead", "dead2", "hdead", "sdead"}},
		{scanMatch, []string{"dead", "dead2"}},
		{scanType, []string{"dead", "dead2", "hdead", "sdead"}},
		// KEYS, DBSIZE and MEMORY USAGE delete nothing in Redis.
		{c(OpKeys, "*"), nil},
		{c(OpDBSize), nil},
		{c(OpMemoryUsage, "dead"), nil},
	}
	for _, tc := range cases {
		s.Read(now, tc.cmd)
		got := l.take()
		if tc.cmd.Op == OpScan {
			slices.Sort(got) // keyspace order
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v %q reported %q, want %q", tc.cmd.Op, tc.cmd.Args, got, tc.want)
		}
		// Before the deadline nothing is due: nothing reported.
		s.Read(t0, tc.cmd)
		if got := l.take(); got != nil {
			t.Errorf("%v %q before the deadline reported %q", tc.cmd.Op, tc.cmd.Args, got)
		}
	}
	// The store only reports: the keys are still there for OpDelExpired.
	if _, ok := s.getLocked([]byte("dead")); !ok {
		t.Fatal("a read deleted an expired key")
	}
}

// TestExpiredHookRandomKey: RANDOMKEY reports the expired keys it
// sampled, as Redis's deletes them.
func TestExpiredHookRandomKey(t *testing.T) {
	s, l := NewStore(), &metLog{}
	s.SetExpiredHook(l.hook)
	s.Apply(0, t0, []Command{c(OpSet, "d1", "x").i(t0 + 1), c(OpSet, "d2", "x").i(t0 + 1)})
	if r := s.Read(t0+1, c(OpRandomKey)); r.Kind != ReplyNil {
		t.Fatalf("RANDOMKEY of expired keys = %v", r)
	}
	got := l.take()
	if len(got) == 0 {
		t.Fatal("RANDOMKEY reported no expired key")
	}
	for _, k := range got {
		if k != "d1" && k != "d2" {
			t.Fatalf("RANDOMKEY reported %q", got)
		}
	}
}

// TestExpiredHookInsideExecAndScripts: reads inside a transaction and a
// script report at their entry's clock, once the entry is applied; a
// read-only script's reads report through Read.
func TestExpiredHookInsideExecAndScripts(t *testing.T) {
	s, l := expiringStore(t)
	now := int64(t0 + 1)
	exec := ExecCommand(nil, nil, []Command{c(OpGet, "dead"), c(OpSet, "b", "2"), c(OpHGet, "hdead", "f")})
	r := applyOne(s, now, exec)
	if r.Kind != ReplyArray || r.Array[0].Kind != ReplyNil || r.Array[2].Kind != ReplyNil {
		t.Fatalf("EXEC = %v", r)
	}
	if got, want := l.take(), []string{"dead", "hdead"}; !slices.Equal(got, want) {
		t.Fatalf("EXEC reported %q, want %q", got, want)
	}
	get := `return redis.call('get', KEYS[1])`
	if r := applyOne(s, now, eval(get, 1, 0, "dead2").i(1)); r.Kind != ReplyNil {
		t.Fatalf("EVAL = %v", r)
	}
	if got, want := l.take(), []string{"dead2"}; !slices.Equal(got, want) {
		t.Fatalf("EVAL reported %q, want %q", got, want)
	}
	ro := eval(get, 1, 0, "dead").i(1)
	ro.Op = OpEvalRO
	if r := s.Read(now, ro); r.Kind != ReplyNil {
		t.Fatalf("EVAL_RO = %v", r)
	}
	if got, want := l.take(), []string{"dead"}; !slices.Equal(got, want) {
		t.Fatalf("EVAL_RO reported %q, want %q", got, want)
	}
	// A read-only script inside a transaction reports with it.
	applyOne(s, now, ExecCommand(nil, nil, []Command{ro}))
	if got, want := l.take(), []string{"dead"}; !slices.Equal(got, want) {
		t.Fatalf("EVAL_RO in EXEC reported %q, want %q", got, want)
	}
	// The script's clock is its entry's: at t0 nothing has expired.
	applyOne(s, t0, eval(get, 1, 0, "dead2").i(1))
	if got := l.take(); got != nil {
		t.Fatalf("EVAL before the deadline reported %q", got)
	}
}

// TestExpiredHookMayWrite: the hook runs outside the store's lock, so it
// may apply the deletion at once, as memory mode does; OpDelExpired then
// deletes and announces each key once.
func TestExpiredHookMayWrite(t *testing.T) {
	s, events := notifyingStore(NotifyAll | NotifyKeyMiss)
	s.SetCommandParser(testParser)
	now := int64(t0 + 1)
	var deleted int64
	s.SetExpiredHook(func(keys [][]byte) {
		deleted += s.Apply(0, now, []Command{{Op: OpDelExpired, Args: keys}})[0].Int
	})
	s.Apply(0, t0, []Command{c(OpSet, "k", "v").i(now), c(OpSet, "j", "v").i(now)})
	events.take()
	if r := s.Read(now, c(OpGet, "k")); r.Kind != ReplyNil {
		t.Fatalf("GET = %v", r)
	}
	// Redis announces the expiry before the miss.
	if got, want := events.take(), []string{"expired:k", "keymiss:k"}; !slices.Equal(got, want) {
		t.Fatalf("GET of an expired key announced %q, want %q", got, want)
	}
	s.Read(now, c(OpMGet, "k", "j", "j"))
	applyOne(s, now, ExecCommand(nil, nil, []Command{c(OpGet, "j")}))
	if got, want := events.take(), []string{"expired:j", "keymiss:k", "keymiss:j", "keymiss:j", "keymiss:j"}; !slices.Equal(got, want) {
		t.Fatalf("then announced %q, want %q", got, want)
	}
	if deleted != 2 {
		t.Fatalf("deleted %d keys, want 2", deleted)
	}
	if s.keys.Len() != 0 {
		t.Fatalf("%d keys left", s.keys.Len())
	}
}

// TestSetDeadlinePast: SET with a deadline already past stores the key
// expired, as Redis does ("new", "set", "expire"), and its expiry deletes
// it and announces "expired" later, as any other's.
func TestSetDeadlinePast(t *testing.T) {
	s, events := notifyingStore(NotifyAll | NotifyNew)
	for _, cmd := range []Command{c(OpSet, "k", "v").i(t0 - 1), c(OpSet, "x", "v").i(t0 - 1).fl(FlagNX)} {
		if r := applyOne(s, t0, cmd); r.Kind != ReplyStatus {
			t.Fatalf("SET = %v", r)
		}
		key := string(cmd.Args[0])
		if got, want := events.take(), []string{"new:" + key, "set:" + key, "expire:" + key}; !slices.Equal(got, want) {
			t.Fatalf("SET PXAT in the past announced %q, want %q", got, want)
		}
		if r := s.Read(t0, c(OpGet, key)); r.Kind != ReplyNil {
			t.Fatalf("GET = %v", r)
		}
	}
	if got := s.ExpiredKeys(t0, 10); len(got) != 2 {
		t.Fatalf("ExpiredKeys = %q", got)
	}
	if r := applyOne(s, t0, c(OpDelExpired, "k", "x")); r.Int != 2 {
		t.Fatalf("DELEXPIRED = %v", r)
	}
	if got, want := events.take(), []string{"expired:k", "expired:x"}; !slices.Equal(got, want) {
		t.Fatalf("deletion announced %q, want %q", got, want)
	}
}

// TestExpiredHookCostsNothing: with the hook set, a read allocates nothing
// more while no key is due, nor a GET of a live key while one is.
func TestExpiredHookCostsNothing(t *testing.T) {
	s, l := expiringStore(t)
	get, exists := c(OpGet, "a"), c(OpExists, "a", "missing")
	for _, tc := range []struct {
		name string
		now  int64
		cmd  *Command
	}{
		{"GET, none due", t0, &get},
		{"GET, some due", t0 + 1, &get},
		{"EXISTS, none due", t0, &exists},
	} {
		if n := testing.AllocsPerRun(100, func() { s.ReadRef(tc.now, tc.cmd) }); n != 0 {
			t.Errorf("%s: %v allocations per read", tc.name, n)
		}
	}
	if got := l.take(); got != nil {
		t.Fatalf("reported %q", got)
	}
}
