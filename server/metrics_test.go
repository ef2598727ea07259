package server

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestLatencyBucket(t *testing.T) {
	last := len(latencyBounds)
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{time.Nanosecond, 0},
		{5 * time.Microsecond, 0}, // bounds are inclusive, as Prometheus's le
		{5*time.Microsecond + 1, 1},
		{10 * time.Microsecond, 1},
		{30 * time.Microsecond, 3},
		{time.Millisecond, 7},
		{time.Millisecond + 1, 8},
		{10 * time.Second, last - 1},
		{10*time.Second + 1, last},
		{time.Hour, last},
	} {
		if got := latencyBucket(tc.d); got != tc.want {
			t.Errorf("latencyBucket(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	for i := 1; i < len(latencyBounds); i++ {
		if latencyBounds[i] <= latencyBounds[i-1] {
			t.Fatalf("latencyBounds not increasing at %d", i)
		}
	}
}

func TestRecordRun(t *testing.T) {
	s := startServer(t, Config{})
	st := s.commandStats()
	id := st.byName["get"].id

	// A run shares its time: 4 commands in 40µs are 10µs each.
	run := cmdRun{id: id}
	for range 3 {
		run.add(false, false)
	}
	run.add(true, true) // rejected: not failed as well
	st.record(&run, 40*time.Microsecond, false)
	// A batch's commands each took its time.
	run = cmdRun{id: id}
	run.add(false, true)
	run.add(false, false)
	st.record(&run, time.Millisecond, true)

	cs := statOf(t, s, "get")
	if cs.Calls != 5 || cs.Rejected != 1 || cs.Failed != 1 {
		t.Errorf("calls %d rejected %d failed %d, want 5 1 1", cs.Calls, cs.Rejected, cs.Failed)
	}
	if want := 40*time.Microsecond + 2*time.Millisecond; cs.Duration != want {
		t.Errorf("duration %v, want %v", cs.Duration, want)
	}
	if cs.Buckets[1] != 4 || cs.Buckets[7] != 2 || sum(cs.Buckets) != 6 {
		t.Errorf("buckets %v, want 4 in [1] (10µs) and 2 in [7] (1ms)", cs.Buckets)
	}
}

// TestCommandStats: a few commands, one at a time and pipelined, give exact
// counts; errors are counted as rejected (before execution) or failed, and
// unknown names under "unknown".
func TestCommandStats(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, args := range [][]string{
		{"SET", "a", "1"},
		{"set", "b", "x"},
		{"GET", "a"},
		{"GET"},                      // rejected: arity
		{"INCR", "b"},                // failed: not an integer (from the store)
		{"SET", "a", "1", "EX", "0"}, // failed: parse error
		{"NOSUCH", "x"},              // rejected: unknown
	} {
		rc.do(args...)
	}
	// One pipeline: writes batched, an error queued behind them, a read.
	var req []byte
	for _, args := range [][]string{
		{"SET", "c", "1"}, {"INCR", "c"}, {"GET"}, {"SET", "d", "2"}, {"GET", "c"}, {"FOO"},
	} {
		req = append(req, encodeCommand(args...)...)
	}
	rc.send(req)
	for range 6 {
		rc.reply()
	}

	want := map[string][3]int64{ // calls, rejected, failed
		"set":     {5, 0, 1},
		"get":     {2, 2, 0},
		"incr":    {2, 0, 1},
		"unknown": {0, 2, 0},
	}
	var total int64
	for _, cs := range s.CommandStats() {
		total += cs.Calls + cs.Rejected
		if got := sum(cs.Buckets); got != cs.Calls+cs.Rejected {
			t.Errorf("%s: %d in buckets, want %d", cs.Name, got, cs.Calls+cs.Rejected)
		}
		w, ok := want[cs.Name]
		if !ok {
			t.Errorf("unexpected command %q counted: %+v", cs.Name, cs)
			continue
		}
		delete(want, cs.Name)
		if got := [3]int64{cs.Calls, cs.Rejected, cs.Failed}; got != w {
			t.Errorf("%s: calls, rejected, failed = %v, want %v", cs.Name, got, w)
		}
	}
	for name := range want {
		t.Errorf("%s not counted", name)
	}
	st := s.Stats()
	if st.CommandsProcessed != total || total != 13 {
		t.Errorf("total_commands_processed %d, commands counted %d, want 13", st.CommandsProcessed, total)
	}
	// arity ×2, unknown ×2, not an integer, bad expire time: all ERR.
	if st.ErrorReplies != 6 {
		t.Errorf("error replies %d, want 6", st.ErrorReplies)
	}
	if es := s.ErrorStats(); len(es) != 1 || es[0] != (ErrorStat{"ERR", 6}) {
		t.Errorf("error stats %+v, want ERR 6", es)
	}
}

func TestInfoCommandStats(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	rc.do("SET", "k", "v")
	rc.do("SET", "k", "v")
	rc.do("GET")
	rc.do("SET", "k", "v", "NX", "XX")
	rc.do("NOSUCHCMD", "k", "v") // unknown: counted in errorstats, not listed

	info := rc.do("INFO", "commandstats")
	for _, re := range []string{
		`\r\n# Commandstats\r\n`,
		`\r\ncmdstat_set:calls=3,usec=\d+,usec_per_call=\d+\.\d\d,rejected_calls=0,failed_calls=1\r\n`,
		`\r\ncmdstat_get:calls=0,usec=\d+,usec_per_call=0\.00,rejected_calls=1,failed_calls=0\r\n`,
	} {
		if !regexp.MustCompile(re).MatchString(info) {
			t.Errorf("INFO commandstats does not match %q:\n%s", re, info)
		}
	}
	if strings.Contains(info, "unknown") || strings.Contains(info, "nosuchcmd") {
		t.Errorf("INFO commandstats lists an unknown command:\n%s", info)
	}
	if info := rc.do("INFO", "errorstats"); !strings.Contains(info, "\r\nerrorstat_ERR:count=3\r\n") {
		t.Errorf("INFO errorstats:\n%s", info)
	}
	if info := rc.do("INFO", "stats"); !strings.Contains(info, "\r\ntotal_error_replies:3\r\n") {
		t.Errorf("INFO stats has no total_error_replies:3:\n%s", info)
	}
	if info := rc.do("INFO"); strings.Contains(info, "cmdstat_") || strings.Contains(info, "errorstat_") {
		t.Errorf("a bare INFO shows commandstats or errorstats:\n%s", info)
	}
	if info := rc.do("INFO", "all"); !strings.Contains(info, "cmdstat_set:") || !strings.Contains(info, "errorstat_ERR:") {
		t.Errorf("INFO all lacks commandstats or errorstats:\n%s", info)
	}

	rc.do("CONFIG", "RESETSTAT")
	info = rc.do("INFO", "commandstats", "errorstats")
	if strings.Contains(info, "cmdstat_set") || strings.Contains(info, "errorstat_") {
		t.Errorf("after CONFIG RESETSTAT:\n%s", info)
	}
}

func statOf(t *testing.T, s *Server, name string) CommandStat {
	t.Helper()
	for _, cs := range s.CommandStats() {
		if cs.Name == name {
			return cs
		}
	}
	t.Fatalf("%s not counted", name)
	return CommandStat{}
}

func sum(v []int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}
