package server

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"kvs/fsm"
)

// expiredKeysOf returns INFO stats' expired_keys as rc's server reports it.
func expiredKeysOf(t *testing.T, rc *rawConn) int {
	t.Helper()
	info := rc.do("INFO", "stats")
	_, v, ok := strings.Cut(info, "expired_keys:")
	if !ok {
		t.Fatalf("INFO stats has no expired_keys: %q", info)
	}
	v, _, _ = strings.Cut(v, "\r\n")
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("expired_keys:%s", v)
	}
	return n
}

// setExpired stores key with a deadline already past (Redis keeps such a
// key until its expiry deletes it).
func setExpired(t *testing.T, rc *rawConn, key string) {
	t.Helper()
	if got := rc.do("SET", key, "v", "PXAT", "1"); got != "+OK\r\n" {
		t.Fatalf("SET %s PXAT 1: %q", key, got)
	}
}

// TestPassiveExpiry: in memory mode a read that finds its key expired
// deletes it before the connection's next command runs, as Redis's lookups
// do: INFO's expired_keys has grown by one, and the store no longer holds
// the key. Active expiry is off, so nothing else deletes it.
func TestPassiveExpiry(t *testing.T) {
	st := fsm.NewStore()
	s := startServer(t, Config{Store: st, DisableActiveExpiry: true})
	rc := dialRaw(t, s)
	if got := rc.do("SCRIPT", "LOAD", "return 1"); !strings.HasPrefix(got, "$40\r\n") {
		t.Fatalf("SCRIPT LOAD: %q", got)
	}
	reads := [][][]string{
		{{"GET", "k"}},
		{{"MGET", "x", "k"}},
		{{"EXISTS", "k"}},
		{{"TYPE", "k"}},
		{{"TTL", "k"}},
		{{"STRLEN", "k"}},
		{{"OBJECT", "ENCODING", "k"}},
		{{"SCAN", "0"}},
		{{"RANDOMKEY"}},
		{{"MULTI"}, {"GET", "k"}, {"EXEC"}},
		{{"EVAL", "return redis.call('get', KEYS[1])", "1", "k"}},
		{{"EVAL_RO", "return redis.call('exists', KEYS[1])", "1", "k"}},
	}
	want := 0
	for _, cmds := range reads {
		setExpired(t, rc, "k")
		for _, cmd := range cmds {
			rc.do(cmd...)
		}
		want++
		if got := expiredKeysOf(t, rc); got != want {
			t.Fatalf("after %q: expired_keys %d, want %d", cmds, got, want)
		}
		if keys := st.ExpiredKeys(1<<62, 10); len(keys) != 0 {
			t.Fatalf("after %q: the store still holds %q", cmds, keys)
		}
	}
	// KEYS and DBSIZE delete nothing, in Redis as here.
	setExpired(t, rc, "k")
	rc.do("KEYS", "*")
	rc.do("DBSIZE")
	if got := expiredKeysOf(t, rc); got != want {
		t.Fatalf("KEYS and DBSIZE expired a key: expired_keys %d, want %d", got, want)
	}
}

// TestPassiveExpiryPaused: while clients are paused nothing expires, not
// even a key a read finds expired (it is only hidden); the first read
// after the pause deletes it. Redis's unit/pause test checks the same.
func TestPassiveExpiryPaused(t *testing.T) {
	st := fsm.NewStore()
	s := startServer(t, Config{Store: st})
	rc := dialRaw(t, s)
	rc.do("MULTI")
	rc.do("SET", "foo", "v", "PXAT", "1")
	rc.do("SET", "bar", "v", "PXAT", "1")
	rc.do("CLIENT", "PAUSE", "100000", "WRITE")
	if got := rc.do("EXEC"); got != "*3\r\n+OK\r\n+OK\r\n+OK\r\n" {
		t.Fatalf("EXEC: %q", got)
	}
	for _, k := range []string{"foo", "bar"} {
		if got := rc.do("GET", k); got != "$-1\r\n" {
			t.Fatalf("GET %s: %q", k, got)
		}
	}
	if got := expiredKeysOf(t, rc); got != 0 {
		t.Fatalf("expired_keys during the pause: %d", got)
	}
	if keys := st.ExpiredKeys(1<<62, 10); len(keys) != 2 {
		t.Fatalf("during the pause the store holds %q, want both keys", keys)
	}
	rc.do("CLIENT", "UNPAUSE")
	rc.do("GET", "foo")
	rc.do("GET", "bar")
	if got := expiredKeysOf(t, rc); got != 2 {
		t.Fatalf("expired_keys after the pause: %d, want 2", got)
	}
}

// gateProposer applies through a MemoryProposer, but holds each
// OpDelExpired batch until the gate opens, and records them.
type gateProposer struct {
	inner Proposer
	open  chan struct{}

	mu      sync.Mutex
	held    int        // OpDelExpired batches waiting at the gate
	deleted [][]string // the keys of each OpDelExpired batch
}

func (p *gateProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	if len(cmds) == 1 && cmds[0].Op == fsm.OpDelExpired {
		var keys []string
		for _, k := range cmds[0].Args {
			keys = append(keys, string(k))
		}
		p.mu.Lock()
		p.deleted = append(p.deleted, keys)
		p.held++
		p.mu.Unlock()
		<-p.open
		p.mu.Lock()
		p.held--
		p.mu.Unlock()
	}
	return p.inner.Propose(cmds)
}

func (p *gateProposer) state() (held int, deleted [][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held, append([][]string(nil), p.deleted...)
}

// TestPassiveExpiryDoesNotWait: where a proposal waits (a log's fsync, a
// consensus round), a read that finds its key expired answers without
// waiting for the deletion, which follows; a key read again meanwhile is
// deleted once.
func TestPassiveExpiryDoesNotWait(t *testing.T) {
	st := fsm.NewStore()
	p := &gateProposer{inner: MemoryProposer{Store: st}, open: make(chan struct{})}
	s := startServer(t, Config{Store: st, Proposer: p, DisableActiveExpiry: true})
	rc := dialRaw(t, s)
	setExpired(t, rc, "k")
	if got := rc.do("GET", "k"); got != "$-1\r\n" {
		t.Fatalf("GET: %q", got)
	}
	eventually(t, "the deletion to be proposed", func() bool {
		held, _ := p.state()
		return held == 1
	})
	for range 5 {
		if got := rc.do("GET", "k"); got != "$-1\r\n" {
			t.Fatalf("GET while the deletion waits: %q", got)
		}
	}
	if got := expiredKeysOf(t, rc); got != 0 {
		t.Fatalf("expired_keys before the deletion is done: %d", got)
	}
	close(p.open)
	eventually(t, "expired_keys to count the deletion", func() bool { return expiredKeysOf(t, rc) == 1 })
	if _, deleted := p.state(); len(deleted) != 1 || len(deleted[0]) != 1 || deleted[0][0] != "k" {
		t.Fatalf("deletions proposed: %q, want k once", deleted)
	}
	if keys := st.ExpiredKeys(1<<62, 10); len(keys) != 0 {
		t.Fatalf("the store still holds %q", keys)
	}
}

// TestPassiveExpiryFollower: a cluster follower only hides the expired
// keys its reads find (its proposer fails the test if asked); the leader's
// reads delete them, through its proposer, on every replica.
func TestPassiveExpiryFollower(t *testing.T) {
	p := startPair(t, false, true)
	l, f := dialRaw(t, p.leader), dialRaw(t, p.follower)
	setExpired(t, l, "k")
	if got := f.do("GET", "k"); got != "$-1\r\n" {
		t.Fatalf("GET on the follower: %q", got)
	}
	eventually(t, "the follower to drop what its read met", func() bool {
		p.follower.passive.mu.Lock()
		defer p.follower.passive.mu.Unlock()
		return len(p.follower.passive.queued) == 0
	})
	if keys := p.followerStore.ExpiredKeys(1<<62, 10); len(keys) != 1 {
		t.Fatalf("the follower's store holds %q, want k", keys)
	}
	if got := l.do("GET", "k"); got != "$-1\r\n" {
		t.Fatalf("GET on the leader: %q", got)
	}
	eventually(t, "the leader's read to delete k everywhere", func() bool {
		return len(p.followerStore.ExpiredKeys(1<<62, 10)) == 0 && len(p.leaderStore.ExpiredKeys(1<<62, 10)) == 0
	})
	if got := expiredKeysOf(t, l); got != 1 {
		t.Fatalf("the leader's expired_keys: %d", got)
	}
	if got := expiredKeysOf(t, f); got != 0 {
		t.Fatalf("the follower's expired_keys: %d", got)
	}
}

// TestPassiveExpiryNotifies: the deletion of a key that reads find
// expired is announced once, however many reads found it, before the miss
// of the read that deleted it, as in Redis.
func TestPassiveExpiryNotifies(t *testing.T) {
	s := startServer(t, Config{DisableActiveExpiry: true})
	rc, sub := dialRaw(t, s), dialRaw(t, s)
	rc.do("CONFIG", "SET", "notify-keyspace-events", "Exm")
	sub.do("SUBSCRIBE", "__keyevent@0__:expired", "__keyevent@0__:keymiss")
	sub.reply()
	setExpired(t, rc, "k")
	rc.do("GET", "k")
	rc.do("GET", "k")
	want := []string{
		"*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:expired\r\n$1\r\nk\r\n",
		"*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:keymiss\r\n$1\r\nk\r\n",
		"*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:keymiss\r\n$1\r\nk\r\n",
	}
	for i, w := range want {
		if got := sub.reply(); got != w {
			t.Fatalf("message %d: %q, want %q", i, got, w)
		}
	}
}
