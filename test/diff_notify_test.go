package test

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var flagNotifyOps = flag.Int("notify.ops", 3000, "commands per mode in TestDifferentialNotify")

// TestDifferentialNotify compares keyspace notifications with redis-server's:
// the differential test's generator (every type's commands over shared keys)
// runs on one connection of each server with notify-keyspace-events set to
// every class, and a second connection, subscribed to the pattern
// __key*__:*, must receive the same frames, in the same order, for each
// command. After each command the first connection publishes a marker to
// a channel the subscriber also listens on: both servers publish a
// command's events before its reply (kvs from apply, before the write is
// acknowledged), so the frames between two markers are that command's.
//
// A command whose reply differs is TestDifferential's business: the run
// flushes both servers and goes on, without comparing that command's
// events. Commands whose events legitimately differ are not generated (see
// notifySkip).
func TestDifferentialNotify(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	seed := testSeed(t)
	modes := []struct {
		name    string
		proto   int // the subscriber's
		classes string
		opts    KVSOptions
		cluster bool // the leader of a three-node cluster
	}{
		{"resp2-memory", 2, "KEA", KVSOptions{}, false},
		{"resp3-memory-new-miss", 3, "KEAnm", KVSOptions{}, false},
		{"resp3-durable", 3, "KEA", KVSOptions{Durable: true, Fsync: "always"}, false},
		{"resp2-cluster-leader", 2, "KEAn", KVSOptions{}, true},
	}
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			ref := startRedis(t)
			var kvs *Node
			if m.cluster {
				nodes := startCluster(t, 3)
				kvs = waitLeader(t, nodes)
			} else {
				kvs = newKVS(t, "kvs", m.opts)
				kvs.Start()
			}
			nd := &notifyDiffer{t: t, gen: newCmdGen(seed + int64(i))}
			nd.ref = newNotifySide(t, ref, m.proto, m.classes)
			nd.kvs = newNotifySide(t, kvs, m.proto, m.classes)
			nd.run(*flagNotifyOps)
			t.Logf("%d commands compared, %d events (%d kinds), %d skipped after a reply differed",
				nd.compared, nd.events, len(nd.kinds), nd.replyDiffs)
		})
	}
}

// notifySkip matches the generated commands (upper case) whose events kvs
// does not emit as Redis does, by design, documented in compatibility.md:
//   - reads of a key that expired: kvs announces its "expired" after a
//     transaction's or a script's other events, and after the read in
//     durable mode and on a cluster (the generator makes no such key
//     anyway: its expiries are long or at once;
//     TestDifferentialPassiveExpiry compares them).
//
// SCAN is left out too: its cursors differ by design (TestDifferential
// compares whole iterations), and it announces nothing.
var notifySkip = regexp.MustCompile(`^SCAN `)

// notifySide is one server: a connection that runs commands and one that
// receives its keyspace notifications.
type notifySide struct {
	t        testing.TB
	name     string
	cmd, sub *rawConn
	mark     int
}

func newNotifySide(t testing.TB, n *Node, proto int, classes string) *notifySide {
	t.Helper()
	s := &notifySide{t: t, name: n.Name, cmd: dialRaw(t, n.Addr), sub: dialRaw(t, n.Addr)}
	if v := s.cmd.DoRetry("CONFIG", "SET", "notify-keyspace-events", classes); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("%s: CONFIG SET notify-keyspace-events %s: %s", n.Name, classes, v)
	}
	if proto == 3 {
		if v := s.sub.Do("HELLO", "3"); v.Kind != '%' {
			t.Fatalf("%s: HELLO 3: %s", n.Name, v)
		}
	}
	s.sub.send("PSUBSCRIBE", "__key*__:*")
	s.sub.send("SUBSCRIBE", "notify-mark")
	for range 2 {
		if v := s.sub.Read(); v.Kind != '*' && v.Kind != '>' {
			t.Fatalf("%s: subscribe confirmation: %s", n.Name, v)
		}
	}
	return s
}

// do runs cmd and returns its reply and the notifications it caused, each
// frame as raw bytes.
func (s *notifySide) do(cmd []string) (reply string, events []string) {
	s.t.Helper()
	v, err := s.cmd.do(cmd...)
	if err != nil {
		s.t.Fatalf("%s: %s: %v", s.name, showCommand(cmd), err)
	}
	s.mark++
	mark := strconv.Itoa(s.mark)
	if v := s.cmd.DoRetry("PUBLISH", "notify-mark", mark); v.Kind != ':' {
		s.t.Fatalf("%s: PUBLISH: %s", s.name, v)
	}
	for {
		f := s.sub.Read()
		if len(f.Elems) == 3 && f.Elems[0].Str == "message" && f.Elems[1].Str == "notify-mark" {
			if f.Elems[2].Str != mark {
				s.t.Fatalf("%s: marker %s, want %s", s.name, f.Elems[2].Str, mark)
			}
			return string(v.Raw), events
		}
		events = append(events, string(f.Raw))
	}
}

type notifyDiffer struct {
	t          *testing.T
	gen        *cmdGen
	ref, kvs   *notifySide
	history    []string // commands since the last flush, with their events
	compared   int
	events     int
	kinds      map[string]bool
	replyDiffs int
	divergence int
}

func (d *notifyDiffer) run(ops int) {
	d.kinds = map[string]bool{}
	for range ops {
		cmd := d.gen.next()
		if notifySkip.MatchString(strings.ToUpper(strings.Join(cmd, " "))) {
			continue
		}
		rr, re := d.ref.do(cmd)
		kr, ke := d.kvs.do(cmd)
		// A command the reference refused for its version is not
		// compared either: kvs ran it, with its events.
		if !sameReply(cmd, rr, kr) || zrankRefusedBy70(cmd, rr) && rr != kr {
			d.replyDiffs++
			if d.replyDiffs <= 3 {
				d.t.Logf("reply differs, not compared (TestDifferential's to judge): %s: redis %q, kvs %q",
					showCommand(cmd), rr, kr)
			}
			d.flush()
			continue
		}
		d.compared++
		d.events += len(re)
		for _, e := range re {
			d.kinds[eventName(e)] = true
		}
		d.history = append(d.history, fmt.Sprintf("  > %s\n    %q", showCommand(cmd), re))
		if !slices.Equal(re, ke) && !(sortByPattern(cmd) && sameMultiset(re, ke)) {
			d.divergence++
			d.t.Errorf("events differ after %d commands since the last flush:\n%s\n    kvs: %q",
				len(d.history), strings.Join(lastN(d.history, 30), "\n"), ke)
			if d.divergence >= *flagDiffMax {
				d.t.Fatalf("stopping after %d divergences", d.divergence)
			}
			d.flush()
		}
	}
}

// flush empties both keyspaces; FLUSHALL announces nothing.
func (d *notifyDiffer) flush() {
	for _, s := range []*notifySide{d.ref, d.kvs} {
		if _, ev := s.do([]string{"FLUSHALL"}); len(ev) > 0 {
			d.t.Fatalf("%s: FLUSHALL announced %q", s.name, ev)
		}
	}
	d.history = nil
}

// eventName is the event of a __keyevent@0__: frame, or "" for another.
func eventName(raw string) string {
	v, err := parseValue(raw)
	if err != nil || len(v.Elems) != 4 {
		return ""
	}
	if ev, ok := strings.CutPrefix(v.Elems[2].Str, "__keyevent@0__:"); ok {
		return ev
	}
	return ""
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// sortByPattern reports whether cmd is a SORT or SORT_RO with BY or GET
// patterns. Its keymiss events follow the sorted key's elements: for a set,
// Redis visits them in its dict's order and kvs in its own (SMEMBERS'
// orders differ likewise), so the events are compared as a multiset.
func sortByPattern(cmd []string) bool {
	if !strings.EqualFold(cmd[0], "SORT") && !strings.EqualFold(cmd[0], "SORT_RO") {
		return false
	}
	for _, a := range cmd[1:] {
		if strings.EqualFold(a, "BY") || strings.EqualFold(a, "GET") {
			return true
		}
	}
	return false
}

func sameMultiset(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
