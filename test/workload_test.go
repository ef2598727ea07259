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
	surprises []string          // replies that are neither success nor a broken connection
}

func newAckLedger(writers int) *ackLedger {
	return &ackLedger{
		acked:    make(map[string]string),
		ctrAcked: make([]int64, writers),
		ctrSent:  make([]int64, writers),
	}
}

func counterKey(w int) string { return fmt.Sprintf("ctr:%02d", w) }

// load runs one writer per ledger slot against addr until stop is closed or
// its connection breaks (as it does when the server is killed or stopped).
// Each writer alternates a SET of a key never used before with an INCR of
// its own counter and records each acknowledgement.
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
		for j := range keys {
			keys[j] = fmt.Sprintf("r%d:w%02d:%06d", round, w, i)
			vals[j] = fmt.Sprintf("v%d.%d.%d", round, w, i)
			i++
			req = append(req, encodeCommand("SET", keys[j], vals[j])...)
			req = append(req, encodeCommand("INCR", counterKey(w))...)
		}
		// Counted before sending: any of these may apply even if its
		// reply is lost.
		l.mu.Lock()
		l.attempted += depth
		l.ctrSent[w] += int64(depth)
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
	if v := rc.Do("DBSIZE"); v.Kind != ':' || atoi64(v.Str) > int64(l.attempted+len(l.ctrSent)) {
		t.Errorf("DBSIZE = %s, more than the %d keys ever written", v, l.attempted+len(l.ctrSent))
	}
}

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
