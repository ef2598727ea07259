package test

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ackLedger records what a server acknowledged across the rounds of a
// crash or restart test: the writes it promised to keep. Writes whose reply
// never arrived are only counted as attempted; they may or may not survive.
type ackLedger struct {
	mu        sync.Mutex
	acked     map[string]string // unique key -> value, SET acknowledged with +OK
	attempted int               // SETs sent, acknowledged or not
	ctrAcked  []int64           // per writer: highest INCR reply received
	ctrSent   []int64           // per writer: INCRs sent, acknowledged or not
	// Collections: each writer also adds unique members to a hash, a
	// list, a set and a sorted set of its own (collKeys), one of them per
	// SET, in turn. collAcked holds the members acknowledged, collSent
	// every member sent, per writer and type.
	collAcked [][collTypes]map[string]bool
	collSent  [][collTypes]map[string]bool
	surprises []string // replies that are neither success nor a broken connection
}

// The collection types every writer writes, and the command that adds a
// member to each.
const (
	collHash = iota
	collList
	collSet
	collZSet
	collTypes
)

func collKey(w, typ int) string {
	return fmt.Sprintf("%s:%02d", [collTypes]string{"hash", "list", "set", "zset"}[typ], w)
}

// collAdd is the command adding member m to writer w's collection of typ,
// and the reply that acknowledges it.
func collAdd(w, typ int, m string) ([]byte, func(Value) bool) {
	key := collKey(w, typ)
	isOne := func(v Value) bool { return string(v.Raw) == ":1\r\n" }
	switch typ {
	case collHash:
		return encodeCommand("HSET", key, m, "v"+m), isOne
	case collList:
		// RPUSH answers the new length.
		return encodeCommand("RPUSH", key, m), func(v Value) bool { return v.Kind == ':' && atoi64(v.Str) > 0 }
	case collSet:
		return encodeCommand("SADD", key, m), isOne
	}
	return encodeCommand("ZADD", key, "1", m), isOne
}

func newAckLedger(writers int) *ackLedger {
	l := &ackLedger{
		acked:     make(map[string]string),
		ctrAcked:  make([]int64, writers),
		ctrSent:   make([]int64, writers),
		collAcked: make([][collTypes]map[string]bool, writers),
		collSent:  make([][collTypes]map[string]bool, writers),
	}
	for w := range writers {
		for typ := range collTypes {
			l.collAcked[w][typ] = make(map[string]bool)
			l.collSent[w][typ] = make(map[string]bool)
		}
	}
	return l
}

func counterKey(w int) string { return fmt.Sprintf("ctr:%02d", w) }

// load runs one writer per ledger slot against addr until stop is closed or
// its connection breaks (as it does when the server is killed or stopped).
// Each writer alternates a SET of a key never used before with an INCR of
// its own counter and the addition of a new member to one of its
// collections (a hash, a list, a set, a sorted set in turn), and records
// each acknowledgement.
// load returns once every writer has returned.
func (l *ackLedger) load(t testing.TB, addr string, round int, stop <-chan struct{}) {
	t.Helper()
	conns := make([]net.Conn, len(l.ctrSent))
	for w := range conns {
		c, err := net.DialTimeout("tcp", addr, ioTimeout)
		if err != nil {
			t.Fatalf("writer %d: dial: %v", w, err)
		}
		conns[w] = c
	}
	var wg sync.WaitGroup
	for w, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			l.write(c, w, round, stop)
		}()
	}
	wg.Wait()
}

// write is one writer's loop. Even writers send one command at a time;
// odd writers pipeline eight SET+INCR pairs per write, which the server
// proposes as one batch.
func (l *ackLedger) write(c net.Conn, w, round int, stop <-chan struct{}) {
	depth := 1
	if w%2 == 1 {
		depth = 8
	}
	r := bufio.NewReader(c)
	for i := 0; ; {
		select {
		case <-stop:
			return
		default:
		}
		var req []byte
		keys := make([]string, depth)
		vals := make([]string, depth)
		members := make([]string, depth)
		acks := make([]func(Value) bool, depth)
		types := make([]int, depth)
		for j := range keys {
			keys[j] = fmt.Sprintf("r%d:w%02d:%06d", round, w, i)
			vals[j] = fmt.Sprintf("v%d.%d.%d", round, w, i)
			// Zero-padded, so a writer's list members ascend.
			members[j] = fmt.Sprintf("%03d.%07d", round, i)
			i++
			req = append(req, encodeCommand("SET", keys[j], vals[j])...)
			req = append(req, encodeCommand("INCR", counterKey(w))...)
			types[j] = i % collTypes
			var add []byte
			add, acks[j] = collAdd(w, types[j], members[j])
			req = append(req, add...)
		}
		// Counted before sending: any of these may apply even if its
		// reply is lost.
		l.mu.Lock()
		l.attempted += depth
		l.ctrSent[w] += int64(depth)
		for j := range keys {
			l.collSent[w][types[j]][members[j]] = true
		}
		l.mu.Unlock()
		c.SetDeadline(time.Now().Add(ioTimeout))
		if _, err := c.Write(req); err != nil {
			return
		}
		for j := range keys {
			set, err := readValue(r)
			if err != nil {
				return
			}
			l.recordSet(keys[j], vals[j], set)
			incr, err := readValue(r)
			if err != nil {
				return
			}
			l.recordIncr(w, incr)
			add, err := readValue(r)
			if err != nil {
				return
			}
			l.recordAdd(w, types[j], members[j], add, acks[j])
		}
	}
}

func (l *ackLedger) recordSet(key, val string, v Value) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if string(v.Raw) == "+OK\r\n" {
		l.acked[key] = val
		return
	}
	l.surprises = append(l.surprises, fmt.Sprintf("SET %s: %q", key, v.Raw))
}

// collAckedCount is the number of collection members acknowledged.
func (l *ackLedger) collAckedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for w := range l.collAcked {
		for typ := range collTypes {
			n += len(l.collAcked[w][typ])
		}
	}
	return n
}

func (l *ackLedger) recordAdd(w, typ int, m string, v Value, ok func(Value) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok(v) {
		l.collAcked[w][typ][m] = true
		return
	}
	l.surprises = append(l.surprises, fmt.Sprintf("adding %s to %s: %q", m, collKey(w, typ), v.Raw))
}

func (l *ackLedger) recordIncr(w int, v Value) {
	n, err := strconv.ParseInt(v.Str, 10, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	if v.Kind == ':' && err == nil {
		l.ctrAcked[w] = max(l.ctrAcked[w], n)
		return
	}
	l.surprises = append(l.surprises, fmt.Sprintf("INCR %s: %q", counterKey(w), v.Raw))
}

// verify checks that n holds every acknowledged write. With strict false
// (no durability promise) it checks only what must hold whatever was lost:
// nothing is invented, no counter runs ahead of the INCRs sent.
func (l *ackLedger) verify(t testing.TB, n *Node, strict bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.surprises {
		t.Errorf("unexpected reply under load: %s", s)
	}
	rc := dialRaw(t, n.Addr)
	keys := make([]string, 0, len(l.acked))
	for k := range l.acked {
		keys = append(keys, k)
	}
	var missing, wrong []string
	const batch = 500
	for i := 0; i < len(keys); i += batch {
		part := keys[i:min(i+batch, len(keys))]
		v := rc.Do(append([]string{"MGET"}, part...)...)
		if v.Kind != '*' || len(v.Elems) != len(part) {
			t.Fatalf("MGET of %d keys: %s", len(part), v)
		}
		for j, e := range v.Elems {
			switch {
			case e.Null:
				missing = append(missing, part[j])
			case e.Str != l.acked[part[j]]:
				wrong = append(wrong, fmt.Sprintf("%s=%q want %q", part[j], e.Str, l.acked[part[j]]))
			}
		}
	}
	if strict && len(missing) > 0 {
		t.Errorf("%d of %d acknowledged SETs lost, e.g. %v", len(missing), len(keys), missing[:min(10, len(missing))])
	}
	if len(wrong) > 0 {
		t.Errorf("%d keys hold values never written, e.g. %v", len(wrong), wrong[:min(10, len(wrong))])
	}
	for w := range l.ctrSent {
		v := rc.Do("GET", counterKey(w))
		var got int64
		if !v.Null {
			var err error
			if got, err = strconv.ParseInt(v.Str, 10, 64); err != nil {
				t.Errorf("%s = %s, not a number", counterKey(w), v)
				continue
			}
		}
		if strict && got < l.ctrAcked[w] {
			t.Errorf("%s = %d, below its last acknowledged value %d", counterKey(w), got, l.ctrAcked[w])
		}
		if got > l.ctrSent[w] {
			t.Errorf("%s = %d, more than the %d INCRs ever sent", counterKey(w), got, l.ctrSent[w])
		}
	}
	for w := range l.collSent {
		for typ := range collTypes {
			l.verifyCollection(t, rc, w, typ, strict)
		}
	}
	written := l.attempted + len(l.ctrSent)*(1+collTypes)
	if v := rc.Do("DBSIZE"); v.Kind != ':' || atoi64(v.Str) > int64(written) {
		t.Errorf("DBSIZE = %s, more than the %d keys ever written", v, written)
	}
}

// verifyCollection checks one writer's collection of typ: every member
// acknowledged is there (strict), nothing is there that was never sent, a
// hash field holds its value, and a list holds its members in the order
// they were pushed.
func (l *ackLedger) verifyCollection(t testing.TB, rc *rawConn, w, typ int, strict bool) {
	t.Helper()
	key := collKey(w, typ)
	var v Value
	switch typ {
	case collHash:
		v = rc.Do("HGETALL", key)
	case collList:
		v = rc.Do("LRANGE", key, "0", "-1")
	case collSet:
		v = rc.Do("SMEMBERS", key)
	default:
		v = rc.Do("ZRANGE", key, "0", "-1")
	}
	if v.Kind != '*' && v.Kind != '%' && v.Kind != '~' {
		t.Errorf("reading %s: %s", key, v)
		return
	}
	present := map[string]bool{}
	step := 1
	if typ == collHash {
		step = 2
	}
	prev := ""
	for i := 0; i+step-1 < len(v.Elems); i += step {
		m := v.Elems[i].Str
		present[m] = true
		if !l.collSent[w][typ][m] {
			t.Errorf("%s holds %q, never sent", key, m)
		}
		if typ == collHash && v.Elems[i+1].Str != "v"+m {
			t.Errorf("%s field %q = %q, want %q", key, m, v.Elems[i+1].Str, "v"+m)
		}
		if typ == collList && m <= prev {
			t.Errorf("%s holds %q after %q: out of push order", key, m, prev)
		}
		prev = m
	}
	if !strict {
		return
	}
	var lost []string
	for m := range l.collAcked[w][typ] {
		if !present[m] {
			lost = append(lost, m)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%s lost %d of %d acknowledged members, e.g. %v", key, len(lost), len(l.collAcked[w][typ]), lost[:min(5, len(lost))])
	}
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
