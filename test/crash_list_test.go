package test

import (
	"bufio"
	"fmt"
	"math/rand"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCrashKill9Lists: writers push to and pop from lists on a durable node
// (fsync always) killed with SIGKILL at a random moment; after the restart
// every list holds exactly what its acknowledged commands left, plus at
// most the one command each writer had sent when the node died.
func TestCrashKill9Lists(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	n := newKVS(t, "kvs-lists", KVSOptions{Durable: true, Fsync: "always",
		Extra: []string{"--wal-segment-bytes", "65536", "--wal-compact-bytes", "262144"}})
	n.Start()
	const writers = 8
	ws := make([]*listWriter, writers)
	for i := range ws {
		ws[i] = &listWriter{key: fmt.Sprintf("list%d", i), id: i}
	}
	for round := range 4 {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.run(n.Addr, round, stop)
			}()
		}
		time.Sleep(time.Duration(200+rng.Intn(600)) * time.Millisecond) // load for a random while; not synchronisation
		n.Kill()
		close(stop)
		wg.Wait()
		n.Start()
		rc := dialRaw(t, n.Addr)
		for _, w := range ws {
			w.check(t, rc)
		}
		if t.Failed() {
			t.Fatalf("round %d lost acknowledged list writes\n%s", round, n.LogTail(30))
		}
		total := 0
		for _, w := range ws {
			total += len(w.model)
		}
		t.Logf("round %d: %d elements in %d lists", round, total, len(ws))
	}
}

// listWriter owns one list: it pushes numbered values at the tail and now
// and then pops the head, one command at a time, keeping the list it
// expects from the acknowledged commands and the one in flight.
type listWriter struct {
	key    string
	id     int
	next   int
	model  []string // the list after every acknowledged command
	flight []string // the command sent and not acknowledged, if any
}

func (w *listWriter) run(addr string, round int, stop <-chan struct{}) {
	c, err := dialQuiet(addr)
	if err != nil {
		return
	}
	defer c.c.Close()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		cmd := []string{"RPUSH", w.key, fmt.Sprintf("w%d-r%d-%d-%s", w.id, round, w.next, strings.Repeat("v", w.next%40))}
		if i%7 == 6 {
			cmd = []string{"LPOP", w.key, "2"}
		}
		w.flight = cmd
		v, err := c.do(cmd...)
		if err != nil || v.IsError() {
			return
		}
		w.model = applyListCmd(w.model, cmd)
		w.flight = nil
		if cmd[0] == "RPUSH" {
			w.next++
		}
	}
}

// applyListCmd is the model of RPUSH and LPOP with a count.
func applyListCmd(list []string, cmd []string) []string {
	if cmd[0] == "RPUSH" {
		return append(slices.Clone(list), cmd[2:]...)
	}
	return list[min(2, len(list)):]
}

func (w *listWriter) check(t *testing.T, rc *rawConn) {
	t.Helper()
	v := rc.Do("LRANGE", w.key, "0", "-1")
	got := make([]string, len(v.Elems))
	for i, e := range v.Elems {
		got[i] = e.Str
	}
	switch {
	case slices.Equal(got, w.model):
	case w.flight != nil && slices.Equal(got, applyListCmd(w.model, w.flight)):
		// The command in flight was applied: it is part of the list now.
		w.model = got
		if w.flight[0] == "RPUSH" {
			w.next++
		}
	default:
		i := 0
		for i < len(got) && i < len(w.model) && got[i] == w.model[i] {
			i++
		}
		t.Errorf("%s after restart holds %d elements, want %d (or with %v applied); they differ from element %d on",
			w.key, len(got), len(w.model), w.flight[:min(len(w.flight), 2)], i)
	}
	w.flight = nil
}

// TestClusterListReplicas: list writes through the leader, small lists and
// large ones, leave every follower with the same lists.
func TestClusterListReplicas(t *testing.T) {
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	lc := dialRaw(t, leader.Addr)
	big := make([]string, 0, 3000)
	for i := range 3000 {
		big = append(big, fmt.Sprintf("e%d-%s", i, strings.Repeat("x", i%30)))
	}
	for _, cmd := range [][]string{
		append([]string{"RPUSH", "big"}, big...),
		{"LPUSH", "big", "head"},
		{"LINSERT", "big", "AFTER", "e1500-", "mid"},
		{"LSET", "big", "-1", "tail"},
		{"LREM", "big", "0", "e7-xxxxxxx"},
		{"LTRIM", "big", "3", "-4"},
		{"RPOP", "big", "5"},
		{"RPUSH", "small", "a", "b", "c"},
		{"LMOVE", "small", "big", "LEFT", "RIGHT"},
		{"LMPOP", "2", "nothing", "small", "RIGHT", "COUNT", "1"},
	} {
		if v := lc.DoRetry(cmd...); v.IsError() {
			t.Fatalf("%v: %s", cmd[:2], v)
		}
	}
	want := map[string]string{}
	for _, k := range []string{"big", "small"} {
		want[k] = string(lc.DoRetry("LRANGE", k, "0", "-1").Raw)
	}
	for _, f := range followers(nodes, leader) {
		waitFor(t, "the lists on "+f.Name, func() error {
			fc := dialRaw(t, f.Addr)
			for k, w := range want {
				if got := string(fc.Do("LRANGE", k, "0", "-1").Raw); got != w {
					return fmt.Errorf("%s: %d bytes of LRANGE, leader %d", k, len(got), len(w))
				}
			}
			return nil
		})
	}
}

// dialQuiet dials addr for a writer goroutine, which must not fail the
// test from outside its goroutine.
func dialQuiet(addr string) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c, r: bufio.NewReader(c)}, nil
}
