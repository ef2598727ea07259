package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRESP is a RESP server on a real loopback socket that records, per
// connection, every command it receives: SET stores the key, GET answers
// the stored value or nil.
type fakeRESP struct {
	ln net.Listener
	// batch > 1 makes each connection hold its replies until that many
	// commands are unanswered, so a client that keeps fewer in flight stalls
	// and one that sends more is seen doing it.
	batch int
	// fail answers every command with this error instead.
	fail string

	wg sync.WaitGroup

	mu    sync.Mutex // guards the fields below
	conns []*fakeConn
	keys  map[string]bool
}

// fakeConn is what one connection sent.
type fakeConn struct {
	cmds          []fakeCmd
	maxUnanswered int
	totalCommands int
}

type fakeCmd struct{ name, key string }

func startFakeRESP(t *testing.T, batch int, fail string) *fakeRESP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRESP{ln: ln, batch: batch, fail: fail, keys: map[string]bool{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(func() {
		ln.Close()
		f.wg.Wait()
	})
	return f
}

func (f *fakeRESP) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func (f *fakeRESP) accept() {
	defer f.wg.Done()
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		fc := &fakeConn{}
		f.mu.Lock()
		f.conns = append(f.conns, fc)
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer conn.Close()
			f.serve(conn, fc)
		}()
	}
}

// serve answers one connection until the client closes it.
func (f *fakeRESP) serve(conn net.Conn, fc *fakeConn) {
	r := bufio.NewReader(conn)
	w := bufio.NewWriter(conn)
	unanswered := 0
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		cmd := fakeCmd{name: strings.ToUpper(args[0])}
		if len(args) > 1 {
			cmd.key = args[1]
		}
		f.mu.Lock()
		fc.cmds = append(fc.cmds, cmd)
		unanswered++
		fc.maxUnanswered = max(fc.maxUnanswered, unanswered)
		var reply string
		switch {
		case f.fail != "":
			reply = "-" + f.fail + "\r\n"
		case cmd.name == "SET":
			f.keys[cmd.key] = true
			reply = "+OK\r\n"
		case cmd.name == "GET" && f.keys[cmd.key]:
			reply = "$5\r\nvalue\r\n"
		default:
			reply = "$-1\r\n"
		}
		f.mu.Unlock()
		w.WriteString(reply)
		if unanswered >= f.batch {
			if w.Flush() != nil {
				return
			}
			unanswered = 0
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if line[0] != '*' {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// recorded returns each connection's commands once the clients are gone.
func (f *fakeRESP) recorded() []*fakeConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeConn(nil), f.conns...)
}

// benchAgainst runs a bench with args against f and returns the result.
func benchAgainst(t *testing.T, f *fakeRESP, args ...string) *benchResult {
	t.Helper()
	var stderr bytes.Buffer
	cfg, err := parseBenchFlags(append([]string{"--port", strconv.Itoa(f.port())}, args...), &stderr)
	if err != nil {
		t.Fatalf("flags %v: %v\n%s", args, err, stderr.String())
	}
	res, err := runBench(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// keyIndex returns the number in "memtier-N".
func keyIndex(t *testing.T, key string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimPrefix(key, "memtier-"), 10, 64)
	if err != nil {
		t.Fatalf("key %q: %v", key, err)
	}
	return n
}

func TestBenchRatioSequencePerClient(t *testing.T) {
	f := startFakeRESP(t, 1, "")
	res := benchAgainst(t, f, "--threads", "1", "--clients", "3", "--requests", "22", "--ratio", "1:10")
	conns := f.recorded()
	if len(conns) != 3 {
		t.Fatalf("%d connections, want 3", len(conns))
	}
	for i, c := range conns {
		if len(c.cmds) != 22 {
			t.Fatalf("connection %d sent %d commands, want 22", i, len(c.cmds))
		}
		for j, cmd := range c.cmds {
			want := "GET"
			if j%11 == 0 {
				want = "SET"
			}
			if cmd.name != want {
				t.Fatalf("connection %d command %d is %s, want %s (1 SET then 10 GETs)", i, j, cmd.name, want)
			}
		}
	}
	if res.Sets.ops != 6 || res.Gets.ops != 60 {
		t.Fatalf("counted %d SETs and %d GETs, want 6 and 60", res.Sets.ops, res.Gets.ops)
	}
	if res.errors() != 0 {
		t.Fatalf("errors: %d (%s)", res.errors(), res.FirstError)
	}
}

func TestBenchRandomKeysCoverInclusiveRange(t *testing.T) {
	f := startFakeRESP(t, 1, "")
	benchAgainst(t, f, "--threads", "1", "--clients", "2", "--requests", "400", "--ratio", "1:1",
		"--key-minimum", "5", "--key-maximum", "9", "--key-pattern", "R:R")
	seen := map[uint64]int{}
	for _, c := range f.recorded() {
		for _, cmd := range c.cmds {
			k := keyIndex(t, cmd.key)
			if k < 5 || k > 9 {
				t.Fatalf("key %d outside [5, 9]", k)
			}
			seen[k]++
		}
	}
	for k := uint64(5); k <= 9; k++ {
		if seen[k] == 0 {
			t.Errorf("key %d never used in 800 random requests over [5, 9]", k)
		}
	}
}

func TestBenchSequentialKeysWrapInclusive(t *testing.T) {
	for _, pattern := range []string{"S:S", "sequential"} {
		t.Run(pattern, func(t *testing.T) {
			f := startFakeRESP(t, 1, "")
			benchAgainst(t, f, "--threads", "1", "--clients", "1", "--requests", "12", "--ratio", "1:1",
				"--key-minimum", "5", "--key-maximum", "9", "--key-pattern", pattern)
			var sets, gets []uint64
			for _, cmd := range f.recorded()[0].cmds {
				if cmd.name == "SET" {
					sets = append(sets, keyIndex(t, cmd.key))
				} else {
					gets = append(gets, keyIndex(t, cmd.key))
				}
			}
			want := "[5 6 7 8 9 5]"
			if fmt.Sprint(sets) != want || fmt.Sprint(gets) != want {
				t.Fatalf("SET keys %v, GET keys %v; want %s each", sets, gets, want)
			}
		})
	}
}

func TestBenchPipelineDepth(t *testing.T) {
	for _, depth := range []int{1, 4, 16} {
		t.Run(strconv.Itoa(depth), func(t *testing.T) {
			// The fake answers only once depth commands are waiting: a client
			// keeping fewer in flight would stall, one keeping more is caught.
			f := startFakeRESP(t, depth, "")
			requests := 8 * depth
			res := benchAgainst(t, f, "--threads", "1", "--clients", "2", "--requests", strconv.Itoa(requests),
				"--pipeline", strconv.Itoa(depth))
			for i, c := range f.recorded() {
				if c.maxUnanswered != depth {
					t.Errorf("connection %d had at most %d requests in flight, want %d", i, c.maxUnanswered, depth)
				}
				if len(c.cmds) != requests {
					t.Errorf("connection %d sent %d requests, want %d", i, len(c.cmds), requests)
				}
			}
			if got := res.Totals.ops; got != int64(2*requests) {
				t.Fatalf("counted %d replies, want %d", got, 2*requests)
			}
		})
	}
}

func TestBenchPrefillWritesEveryKeyOnce(t *testing.T) {
	f := startFakeRESP(t, 1, "")
	res := benchAgainst(t, f, "--threads", "1", "--clients", "3", "--requests", "11", "--ratio", "1:10",
		"--key-minimum", "1", "--key-maximum", "100", "--prefill")
	written := map[uint64]int{}
	sets := 0
	for _, c := range f.recorded() {
		for _, cmd := range c.cmds {
			if cmd.name == "SET" {
				written[keyIndex(t, cmd.key)]++
				sets++
			}
		}
	}
	// 100 prefill SETs plus one per client in the run.
	if sets != 103 {
		t.Fatalf("%d SETs, want 100 prefill + 3", sets)
	}
	for k := uint64(1); k <= 100; k++ {
		if written[k] == 0 {
			t.Fatalf("key %d never written by the prefill", k)
		}
	}
	// The prefill is not measured, and every GET after it hits.
	if res.Sets.ops != 3 || res.Gets.hits != 30 || res.Gets.misses != 0 {
		t.Fatalf("run counted %d SETs, %d hits, %d misses; want 3, 30, 0", res.Sets.ops, res.Gets.hits, res.Gets.misses)
	}
}

func TestBenchCountsMisses(t *testing.T) {
	f := startFakeRESP(t, 1, "")
	res := benchAgainst(t, f, "--threads", "1", "--clients", "2", "--requests", "50", "--ratio", "0:1")
	if res.Gets.misses != 100 || res.Gets.hits != 0 || res.Sets.ops != 0 {
		t.Fatalf("%d misses, %d hits, %d SETs; want 100, 0, 0", res.Gets.misses, res.Gets.hits, res.Sets.ops)
	}
}

func TestBenchErrorRepliesFailTheRun(t *testing.T) {
	f := startFakeRESP(t, 1, "ERR fake failure")
	var stdout, stderr bytes.Buffer
	code := Main([]string{"--port", strconv.Itoa(f.port()), "--threads", "1", "--clients", "2",
		"--requests", "5", "--quiet"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "10 errors; the first: ERR fake failure") {
		t.Fatalf("stderr does not report the errors:\n%s", stderr.String())
	}
}

func TestBenchRefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"--port", strconv.Itoa(port), "--requests", "1", "--quiet"}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d against a closed port, want 1\n%s", code, stderr.String())
	}
}

func TestBenchFlags(t *testing.T) {
	tests := []struct {
		args    []string
		check   func(benchConfig) bool
		wantErr bool
	}{
		{nil, func(c benchConfig) bool {
			return c.Threads == 4 && c.Clients == 50 && c.SetRatio == 1 && c.GetRatio == 10 &&
				c.KeyMax == 100000 && c.DataSize == 32 && c.Requests == defaultRequests && c.TestTime == 0
		}, false},
		{[]string{"--test-time", "60"}, func(c benchConfig) bool { return c.TestTime == time.Minute && c.Requests == 0 }, false},
		{[]string{"--key-pattern", "S:R"}, func(c benchConfig) bool {
			return c.SetPattern == patternSequential && c.GetPattern == patternRandom
		}, false},
		{[]string{"--key-pattern", "random"}, func(c benchConfig) bool {
			return c.SetPattern == patternRandom && c.GetPattern == patternRandom
		}, false},
		{[]string{"--unix-socket", "/tmp/s", "--port", "0"}, func(c benchConfig) bool {
			n, a := c.network()
			return n == "unix" && a == "/tmp/s"
		}, false},
		{[]string{"--test-time", "5", "--requests", "5"}, nil, true},
		{[]string{"--ratio", "0:0"}, nil, true},
		{[]string{"--ratio", "1-10"}, nil, true},
		{[]string{"--key-pattern", "G:G"}, nil, true},
		{[]string{"--key-minimum", "10", "--key-maximum", "9"}, nil, true},
		{[]string{"--key-minimum", "0"}, nil, true},
		{[]string{"--key-maximum", "9"}, func(c benchConfig) bool { return c.KeyMin == 0 && c.KeyMax == 9 }, false},
		{[]string{"--pipeline", "0"}, nil, true},
	}
	for _, tt := range tests {
		cfg, err := parseBenchFlags(tt.args, io.Discard)
		if (err != nil) != tt.wantErr {
			t.Errorf("%v: error %v, want error %v", tt.args, err, tt.wantErr)
			continue
		}
		if err == nil && !tt.check(cfg) {
			t.Errorf("%v: config %+v", tt.args, cfg)
		}
	}
}

func TestBenchHistogramPercentiles(t *testing.T) {
	c := newBenchClient(&benchConfig{KeyPrefix: "k", DataSize: 1, Pipeline: 1}, nil, 1)
	s := &c.stats[opGet]
	// 1..100000 µs once each: percentile p is p% of 100 ms.
	for v := int64(1); v <= 100000; v++ {
		s.hist.RecordValue(v)
		s.ops++
	}
	ts := newTypeStats(true)
	ts.add(s)
	for _, tt := range []struct{ p, wantMs float64 }{
		{50, 50}, {99, 99}, {99.9, 99.9}, {100, 100}, {0, 0.001},
	} {
		got := ts.percentileMs(tt.p)
		if rel := (got - tt.wantMs) / tt.wantMs; rel < -0.001 || rel > 0.001 {
			t.Errorf("p%v = %v ms, want %v within 0.1%%", tt.p, got, tt.wantMs)
		}
	}
}

func TestBenchJSONFields(t *testing.T) {
	f := startFakeRESP(t, 1, "")
	res := benchAgainst(t, f, "--threads", "2", "--clients", "2", "--requests", "33", "--prefill", "--key-maximum", "50")
	var buf bytes.Buffer
	if err := res.writeJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	path := func(keys ...string) any {
		var v any = doc
		for _, k := range keys {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: %q is not under an object", keys, k)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("no %q in %v\n%s", k, keys, buf.String())
			}
		}
		return v
	}
	for _, typ := range []string{"Sets", "Gets", "Totals"} {
		for _, field := range []string{"Count", "Ops/sec", "Hits/sec", "Misses/sec", "Latency", "Average Latency", "KB/sec", "Errors"} {
			path("ALL STATS", typ, field)
		}
		for _, p := range []string{"p50.00", "p99.00", "p99.90"} {
			if v := path("ALL STATS", typ, "Percentile Latencies", p).(float64); v <= 0 {
				t.Errorf("%s %s = %v, want a positive latency", typ, p, v)
			}
		}
	}
	for _, field := range []string{"Start time", "Finish time", "Total duration"} {
		path("ALL STATS", "Runtime", field)
	}
	if n := path("ALL STATS", "Totals", "Count").(float64); n != 4*33 {
		t.Errorf("Totals Count %v, want %d", n, 4*33)
	}
	if g := path("ALL STATS", "Gets", "Count").(float64); g != 4*30 {
		t.Errorf("Gets Count %v, want 120", g)
	}
	if path("configuration", "ratio") != "1:10" || path("configuration", "threads").(float64) != 2 {
		t.Errorf("configuration not recorded: %v", doc["configuration"])
	}
	if path("Errors").(float64) != 0 {
		t.Errorf("Errors = %v", doc["Errors"])
	}
}

// repeatReader returns the same reply forever.
type repeatReader struct{ reply []byte }

func (r repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n+len(r.reply) <= len(p) {
		n += copy(p[n:], r.reply)
	}
	if n == 0 {
		return 0, errors.New("buffer smaller than a reply")
	}
	return n, nil
}

// TestBenchClientAllocs holds the hot path, encoding a request and parsing
// and recording its reply, to zero allocations.
func TestBenchClientAllocs(t *testing.T) {
	cfg := defaultBenchConfig()
	cfg.SetRatio, cfg.GetRatio, cfg.TestTime = 1, 1, time.Second
	for _, reply := range []string{"+OK\r\n", "$5\r\nvalue\r\n", "$-1\r\n"} {
		c := newBenchClient(&cfg, nil, 1)
		c.startRun()
		c.r = bufio.NewReaderSize(repeatReader{[]byte(reply)}, benchBufSize)
		c.w = bufio.NewWriterSize(io.Discard, benchBufSize)
		allocs := testing.AllocsPerRun(10000, func() {
			if !c.issue() {
				t.Fatal("workload ended")
			}
			if err := c.complete(); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("reply %q: %v allocations per request, want 0", reply, allocs)
		}
	}
}

// BenchmarkBenchClientRequest is the generator's own cost per request,
// without a network.
func BenchmarkBenchClientRequest(b *testing.B) {
	cfg := defaultBenchConfig()
	cfg.TestTime = time.Second
	c := newBenchClient(&cfg, nil, 1)
	c.startRun()
	c.r = bufio.NewReaderSize(repeatReader{[]byte("$32\r\n0123456789abcdef0123456789abcdef\r\n")}, benchBufSize)
	c.w = bufio.NewWriterSize(io.Discard, benchBufSize)
	b.ReportAllocs()
	for b.Loop() {
		c.issue()
		c.complete()
	}
}
