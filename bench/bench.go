package bench

// kvs bench is a load generator shaped like memtier_benchmark, so that the
// reference workload (make memtier) runs where memtier is not installed and
// its numbers mean the same thing:
//
//   - threads × clients connections, each one TCP (or unix socket)
//     connection speaking RESP2 with its own hand-written encoder and parser,
//     so the generator costs a few hundred nanoseconds a request and is not
//     what a run measures;
//   - each client follows the SET:GET ratio exactly (1:10 is one SET, then
//     ten GETs, repeated) and keeps --pipeline requests in flight;
//   - a request's latency runs from when it is written to the connection's
//     buffer to when its reply has been read, queueing included, recorded in
//     an HDR histogram per client and command (merged at the end);
//   - --requests is per client, as in memtier; --test-time stops issuing
//     after that many seconds and then waits for the replies in flight.
//
// Threads map onto GOMAXPROCS for the run: Go schedules every client's
// goroutine on that many OS threads, the nearest thing to memtier's one
// event loop per thread.
//
// Files: bench.go (flags, configuration, running), client.go (one
// connection's hot path: encoder, workload, replies read with
// resp.SkipReply), report.go (statistics, the summary table and the JSON
// file). cmd/kvs runs it as its bench subcommand (Main); it needs nothing
// of the server.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// keyPattern is how a client picks the key of its next SET or GET.
type keyPattern byte

const (
	patternRandom     keyPattern = 'R' // uniform over [KeyMin, KeyMax]
	patternSequential keyPattern = 'S' // KeyMin, KeyMin+1, ... KeyMax, KeyMin, ...
)

// benchConfig is one run's configuration. Its zero value is not usable:
// defaultBenchConfig gives memtier's defaults and Validate checks a config
// before a run.
type benchConfig struct {
	Server     string // host; ignored when UnixSocket is set
	Port       int
	UnixSocket string // path of a unix socket; overrides Server and Port
	// Authenticate is memtier's --authenticate: PASSWORD or
	// USER:PASSWORD, sent with AUTH on each connection; "" sends none.
	Authenticate string

	Threads int // GOMAXPROCS during the run
	Clients int // connections per thread

	SetRatio, GetRatio int // each client sends SetRatio SETs, then GetRatio GETs, repeated

	KeyMin, KeyMax uint64 // inclusive key index range
	KeyPrefix      string
	SetPattern     keyPattern
	GetPattern     keyPattern

	DataSize int // SET value size in bytes
	Pipeline int // requests in flight per client

	TestTime time.Duration // run length; zero means Requests decides
	Requests int           // per client; used when TestTime is zero

	Prefill bool // write every key once, before the measured run

	JSONOut       string // path of the JSON result; empty writes none
	HideHistogram bool   // no latency distribution after the summary
	Quiet         bool   // no progress line
}

// defaultRequests is memtier's --requests when neither it nor --test-time
// is given.
const defaultRequests = 10000

func defaultBenchConfig() benchConfig {
	return benchConfig{
		Server: "127.0.0.1", Port: 6379,
		Threads: 4, Clients: 50,
		SetRatio: 1, GetRatio: 10,
		KeyMin: 0, KeyMax: 100000, KeyPrefix: "memtier-",
		SetPattern: patternRandom, GetPattern: patternRandom,
		DataSize: 32, Pipeline: 1,
	}
}

// Validate reports the first setting a run cannot use.
func (c *benchConfig) Validate() error {
	switch {
	case c.UnixSocket == "" && (c.Port <= 0 || c.Port > 65535):
		return fmt.Errorf("bench: --port %d out of range", c.Port)
	case c.Threads < 1:
		return errors.New("bench: --threads must be at least 1")
	case c.Clients < 1:
		return errors.New("bench: --clients must be at least 1")
	case c.SetRatio < 0 || c.GetRatio < 0 || c.SetRatio+c.GetRatio == 0:
		return errors.New("bench: --ratio needs SET:GET counts, not both zero")
	case c.KeyMin > c.KeyMax:
		return fmt.Errorf("bench: --key-minimum %d above --key-maximum %d", c.KeyMin, c.KeyMax)
	case c.DataSize < 1:
		return errors.New("bench: --data-size must be at least 1")
	case c.Pipeline < 1:
		return errors.New("bench: --pipeline must be at least 1")
	case c.TestTime < 0:
		return errors.New("bench: --test-time must not be negative")
	case c.TestTime == 0 && c.Requests < 1:
		return errors.New("bench: --requests must be at least 1")
	}
	return nil
}

// connections is the number of clients in the run.
func (c *benchConfig) connections() int { return c.Threads * c.Clients }

// network returns the dial arguments for the server.
func (c *benchConfig) network() (string, string) {
	if c.UnixSocket != "" {
		return "unix", c.UnixSocket
	}
	return "tcp", net.JoinHostPort(c.Server, strconv.Itoa(c.Port))
}

// parseRatio parses memtier's "SET:GET".
func parseRatio(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, ":")
	set, err1 := strconv.Atoi(a)
	get, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("bench: --ratio %q is not SET:GET", s)
	}
	return set, get, nil
}

// parseKeyPattern parses memtier's "SET:GET" patterns (R or S each) and the
// words random and sequential for both.
func parseKeyPattern(s string) (set, get keyPattern, err error) {
	switch strings.ToLower(s) {
	case "random":
		return patternRandom, patternRandom, nil
	case "sequential":
		return patternSequential, patternSequential, nil
	}
	one := func(p string) (keyPattern, bool) {
		switch strings.ToUpper(p) {
		case "R":
			return patternRandom, true
		case "S":
			return patternSequential, true
		}
		return 0, false
	}
	a, b, _ := strings.Cut(s, ":")
	set, ok1 := one(a)
	get, ok2 := one(b)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("bench: --key-pattern %q: want R:R, S:S, R:S, S:R, random or sequential", s)
	}
	return set, get, nil
}

func parseBenchFlags(args []string, stderr io.Writer) (benchConfig, error) {
	cfg := defaultBenchConfig()
	fs := flag.NewFlagSet("kvs bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: kvs bench [flags]\n\nA memtier_benchmark-shaped load: threads × clients connections sending SET and\nGET at a fixed ratio. Flags:")
		fs.PrintDefaults()
	}
	var (
		ratio    = fs.String("ratio", "1:10", "SET:GET ratio, followed exactly by each client")
		pattern  = fs.String("key-pattern", "R:R", "SET:GET key patterns: R (random) or S (sequential); or random, sequential")
		testTime = fs.Int("test-time", 0, "seconds to run (instead of --requests)")
		keyMin   = fs.Uint64("key-minimum", cfg.KeyMin, "smallest key index")
		keyMax   = fs.Uint64("key-maximum", cfg.KeyMax, "largest key index (inclusive)")
	)
	fs.StringVar(&cfg.Server, "server", cfg.Server, "server host")
	fs.IntVar(&cfg.Port, "port", cfg.Port, "server port")
	fs.StringVar(&cfg.UnixSocket, "unix-socket", "", "unix socket path (overrides --server and --port)")
	fs.StringVar(&cfg.Authenticate, "authenticate", "", "PASSWORD or USER:PASSWORD to AUTH each connection with, as memtier's (default: $REDISCLI_AUTH)")
	fs.IntVar(&cfg.Threads, "threads", cfg.Threads, "threads (GOMAXPROCS during the run)")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "connections per thread")
	fs.StringVar(&cfg.KeyPrefix, "key-prefix", cfg.KeyPrefix, "prefix of every key")
	fs.IntVar(&cfg.DataSize, "data-size", cfg.DataSize, "SET value size in bytes")
	fs.IntVar(&cfg.Pipeline, "pipeline", cfg.Pipeline, "requests in flight per client")
	fs.IntVar(&cfg.Requests, "requests", 0, fmt.Sprintf("requests per client (default %d when --test-time is not given)", defaultRequests))
	fs.BoolVar(&cfg.Prefill, "prefill", false, "write every key in [key-minimum, key-maximum] once before the run")
	fs.StringVar(&cfg.JSONOut, "json-out-file", "", "write the results as JSON to this file")
	fs.BoolVar(&cfg.HideHistogram, "hide-histogram", false, "do not print the latency distribution")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() != 0 {
		return cfg, fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.SetRatio, cfg.GetRatio, err = parseRatio(*ratio); err != nil {
		return cfg, err
	}
	if cfg.SetPattern, cfg.GetPattern, err = parseKeyPattern(*pattern); err != nil {
		return cfg, err
	}
	cfg.KeyMin, cfg.KeyMax = *keyMin, *keyMax
	// memtier_benchmark numbers keys from 0 by default but refuses an
	// explicit --key-minimum 0; so does kvs bench, so that a workload
	// written for one runs unchanged on the other.
	explicitMin := false
	fs.Visit(func(f *flag.Flag) { explicitMin = explicitMin || f.Name == "key-minimum" })
	if explicitMin && cfg.KeyMin == 0 {
		return cfg, errors.New("bench: --key-minimum must be greater than zero (as memtier_benchmark requires)")
	}
	if *testTime < 0 {
		return cfg, errors.New("bench: --test-time must not be negative")
	}
	cfg.TestTime = time.Duration(*testTime) * time.Second
	switch {
	case cfg.TestTime > 0 && cfg.Requests > 0:
		return cfg, errors.New("bench: --test-time and --requests exclude each other")
	case cfg.TestTime == 0 && cfg.Requests == 0:
		cfg.Requests = defaultRequests
	}
	return cfg, cfg.Validate()
}

// Main runs kvs bench with args (the flags after "bench"), reporting to
// stdout and stderr, and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseBenchFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "kvs %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := runBench(ctx, cfg, progressWriter(stderr, cfg.Quiet))
	if err != nil {
		fmt.Fprintf(stderr, "kvs bench: %v\n", err)
		return 1
	}
	res.writeSummary(stdout, !cfg.HideHistogram)
	if cfg.JSONOut != "" {
		if err := res.writeJSONFile(cfg.JSONOut); err != nil {
			fmt.Fprintf(stderr, "kvs bench: %v\n", err)
			return 1
		}
	}
	if n := res.errors(); n > 0 {
		fmt.Fprintf(stderr, "kvs bench: %d errors; the first: %s\n", n, res.FirstError)
		return 1
	}
	return 0
}

// progressWriter returns where the once-a-second progress line goes, or nil
// for none. On a terminal the line rewrites itself; elsewhere (a log file)
// each second is a line of its own.
func progressWriter(stderr io.Writer, quiet bool) *progress {
	if quiet {
		return nil
	}
	p := &progress{w: stderr, end: "\n"}
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.end = "\r"
		}
	}
	return p
}

type progress struct {
	w   io.Writer
	end string // "\r" to overwrite the line, "\n" to keep each
}

// runBench connects every client, prefills if asked, runs the measured load
// and returns its results. It fails only when the run could not start (a
// refused connection, a failed prefill); errors during the run are counted
// in the result.
func runBench(ctx context.Context, cfg benchConfig, prog *progress) (*benchResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cfg.Threads))

	clients, err := dialClients(&cfg)
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	if err != nil {
		return nil, err
	}
	if cfg.Prefill {
		if err := prefill(ctx, &cfg, clients, prog); err != nil {
			return nil, err
		}
	}
	for _, c := range clients {
		c.startRun()
	}

	var stopping atomic.Bool
	res := &benchResult{Config: cfg, Start: time.Now()}
	done := runClients(clients, &stopping)

	// Step by step: tick once a second for the progress line; stop issuing
	// when the test time is up or on a signal; then wait for every client to
	// read its replies in flight.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var deadline <-chan time.Time
	if cfg.TestTime > 0 {
		t := time.NewTimer(cfg.TestTime)
		defer t.Stop()
		deadline = t.C
	}
	last := liveTotals{at: res.Start}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		case <-deadline:
			stopping.Store(true)
		case <-ctx.Done():
			stopping.Store(true)
		case now := <-tick.C:
			last = prog.report(&cfg, clients, res.Start, now, last)
		}
	}
	res.Finish = time.Now()
	if prog != nil && prog.end == "\r" {
		fmt.Fprintln(prog.w)
	}
	res.collect(clients)
	return res, nil
}

// dialClients opens one connection per client. On failure it returns the
// clients opened so far, for the caller to close.
func dialClients(cfg *benchConfig) ([]*benchClient, error) {
	network, addr := cfg.network()
	clients := make([]*benchClient, 0, cfg.connections())
	for i := 0; i < cfg.connections(); i++ {
		conn, err := net.DialTimeout(network, addr, 5*time.Second)
		if err != nil {
			return clients, fmt.Errorf("connecting client %d to %s: %w", i, addr, err)
		}
		if err := benchAuth(conn, cfg.Authenticate); err != nil {
			conn.Close()
			return clients, fmt.Errorf("client %d: %w", i, err)
		}
		clients = append(clients, newBenchClient(cfg, conn, uint64(i)))
	}
	return clients, nil
}

// runClients runs every client's loop on its own goroutine and closes the
// returned channel once all have returned.
func runClients(clients []*benchClient, stopping *atomic.Bool) <-chan struct{} {
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(stopping)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// prefillDepth is the pipeline depth of the prefill, deep enough that a
// round trip is not what limits it.
const prefillDepth = 64

// prefill writes every key in [KeyMin, KeyMax] once, the range split into
// one contiguous slice per client, all clients at once.
func prefill(ctx context.Context, cfg *benchConfig, clients []*benchClient, prog *progress) error {
	start := time.Now()
	keys := cfg.KeyMax - cfg.KeyMin + 1
	n := uint64(len(clients))
	for i, c := range clients {
		lo := cfg.KeyMin + keys*uint64(i)/n
		hi := cfg.KeyMin + keys*uint64(i+1)/n // exclusive
		c.startPrefill(lo, hi)
	}
	var stopping atomic.Bool
	done := runClients(clients, &stopping)
	select {
	case <-done:
	case <-ctx.Done():
		stopping.Store(true)
		<-done
		return ctx.Err()
	}
	var errs int64
	first := ""
	for _, c := range clients {
		errs += c.errorCount()
		if first == "" {
			first = c.firstErr
		}
	}
	if errs > 0 {
		return fmt.Errorf("prefill: %d errors; the first: %s", errs, first)
	}
	if prog != nil {
		d := time.Since(start)
		fmt.Fprintf(prog.w, "prefill: wrote %d keys in %.1f secs (%.0f ops/sec)\n", keys, d.Seconds(), float64(keys)/d.Seconds())
	}
	return nil
}

// liveTotals is the sum of every client's live counters at one moment,
// for the progress line's rates since the previous second.
type liveTotals struct {
	at                time.Time
	ops, latNs, bytes int64
}

// report prints memtier's progress line: ops so far, this second's and the
// average rates, and this second's and the average latency.
func (p *progress) report(cfg *benchConfig, clients []*benchClient, start, now time.Time, last liveTotals) liveTotals {
	cur := liveTotals{at: now}
	for _, c := range clients {
		cur.ops += c.live.ops.Load()
		cur.latNs += c.live.latNs.Load()
		cur.bytes += c.live.bytes.Load()
	}
	if p == nil {
		return cur
	}
	elapsed := now.Sub(start).Seconds()
	var pct float64
	if cfg.TestTime > 0 {
		pct = 100 * elapsed / cfg.TestTime.Seconds()
	} else {
		pct = 100 * float64(cur.ops) / float64(cfg.Requests*cfg.connections())
	}
	dt := now.Sub(last.at).Seconds()
	dOps := cur.ops - last.ops
	lat, avgLat := 0.0, 0.0
	if dOps > 0 {
		lat = float64(cur.latNs-last.latNs) / float64(dOps) / 1e6
	}
	if cur.ops > 0 {
		avgLat = float64(cur.latNs) / float64(cur.ops) / 1e6
	}
	fmt.Fprintf(p.w, "[RUN #1 %3.0f%%, %3.0f secs] %2d threads: %11d ops, %7.0f (avg: %7.0f) ops/sec, %.2fMB/sec (avg: %.2fMB/sec), %5.2f (avg: %5.2f) msec latency%s",
		min(pct, 100), elapsed, cfg.Threads, cur.ops,
		float64(dOps)/dt, float64(cur.ops)/elapsed,
		float64(cur.bytes-last.bytes)/dt/(1<<20), float64(cur.bytes)/elapsed/(1<<20),
		lat, avgLat, p.end)
	return cur
}

// benchAuth sends AUTH on a new connection when auth (PASSWORD or
// USER:PASSWORD, else $REDISCLI_AUTH) is set, and checks the reply.
func benchAuth(conn net.Conn, auth string) error {
	if auth == "" {
		auth = os.Getenv("REDISCLI_AUTH")
	}
	if auth == "" {
		return nil
	}
	args := []string{"AUTH", auth}
	if user, pass, ok := strings.Cut(auth, ":"); ok {
		args = []string{"AUTH", user, pass}
	}
	req := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		req += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetDeadline(time.Time{})
	if _, err := conn.Write([]byte(req)); err != nil {
		return fmt.Errorf("AUTH: %w", err)
	}
	// Read byte by byte: the client's reader is made after this.
	var line []byte
	b := make([]byte, 1)
	for len(line) < 512 && (len(line) == 0 || line[len(line)-1] != '\n') {
		if _, err := conn.Read(b); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
		line = append(line, b[0])
	}
	if string(line) != "+OK\r\n" {
		return fmt.Errorf("AUTH: %s", strings.TrimSpace(string(line)))
	}
	return nil
}
