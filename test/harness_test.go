// Package test drives the real kvs binary from outside: it builds it once,
// starts it as separate processes on free ports, talks to it over real
// sockets (go-redis and raw RESP), kills and restarts it, and compares it
// with a real redis-server where one is installed.
//
// The package imports nothing of kvs on purpose: everything it checks is
// what a client or an operator can observe.
//
// Run it from the module root:
//
//	go test ./test/                                  # everything
//	go test ./test/ -run Differential -v -args -seed=42 -diff.ops=5000
//	go test ./test/ -args -kvs.bin=/path/to/kvs      # skip the build
//	go test ./test/ -args -keep                      # keep every node's dir
//
// A failed test keeps its nodes' directories (data and a log of each
// process's stderr) and prints their paths.
package test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	flagKVSBin = flag.String("kvs.bin", "", "use this kvs binary instead of building ./cmd/kvs")
	flagKeep   = flag.Bool("keep", false, "keep node directories even when tests pass")
	flagSeed   = flag.Int64("seed", 0, "seed for randomised tests (0: from KVS_TEST_SEED or the clock)")
	// info by default: per-command debug logging would slow the crash and
	// differential loads and bury the lines that explain a failure.
	flagLogLevel = flag.String("kvs.log-level", "info", "--log-level for kvs nodes")
)

// Deadlines for process lifecycle steps. They are generous because a loaded
// 2-core CI machine may run several tests' processes at once; they bound how
// long a broken binary can hang a test, nothing more.
const (
	startTimeout = 20 * time.Second
	stopTimeout  = 20 * time.Second
)

var (
	kvsBin      string // path of the binary under test
	kvsBuildErr error  // why it could not be built; kvs tests fail with it
)

func TestMain(m *testing.M) {
	flag.Parse()
	tmp, err := os.MkdirTemp("", "kvs-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *flagKVSBin != "" {
		kvsBin = *flagKVSBin
	} else {
		kvsBin, kvsBuildErr = buildKVS(tmp)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// buildKVS builds kvs/cmd/kvs from the module root. A failed build does not
// stop the package: tests that need only redis-server still run, and every
// kvs test fails with the build output.
func buildKVS(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "kvs")
	build := exec.Command("go", "build", "-o", bin, "kvs/cmd/kvs")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build kvs/cmd/kvs in %s: %w\n%s", root, err, out)
	}
	return bin, nil
}

// requireKVS returns the binary under test or fails t with the reason it is
// missing.
func requireKVS(t testing.TB) string {
	t.Helper()
	if kvsBuildErr != nil {
		t.Fatalf("kvs binary unavailable: %v", kvsBuildErr)
	}
	return kvsBin
}

// requireRedis returns the path of redis-server or skips t.
func requireRedis(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed: apt-get install redis-server to run the differential tests")
	}
	return p
}

// testSeed returns the seed for t's randomness and logs how to reproduce it.
func testSeed(t testing.TB) int64 {
	t.Helper()
	seed := *flagSeed
	if seed == 0 {
		if s := os.Getenv("KVS_TEST_SEED"); s != "" {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("KVS_TEST_SEED=%q: %v", s, err)
			}
			seed = v
		}
	}
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (reproduce with -args -seed=%d or KVS_TEST_SEED=%d)", seed, seed, seed)
	return seed
}

// testDirs maps each running test to its directory, so that all of a
// test's nodes share one.
var testDirs sync.Map

// testDir returns the directory for t's nodes that, unlike t.TempDir, survives
// a failed test so its data and logs can be inspected.
func testDir(t testing.TB) string {
	t.Helper()
	if d, ok := testDirs.Load(t); ok {
		return d.(string)
	}
	name := strings.NewReplacer("/", "_", " ", "_", ":", "_").Replace(t.Name())
	dir, err := os.MkdirTemp("", "kvs-test-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	testDirs.Store(t, dir)
	t.Cleanup(func() {
		testDirs.Delete(t)
		if t.Failed() || *flagKeep {
			t.Logf("kept node directory %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago
// and that no other test of this process was given. The port is below the
// kernel's ephemeral range (32768 and up on Linux): a node restarted on
// its address must find it free, and while it was down any process's
// outgoing connection could have been given a port from that range (a
// restart after a power cut failed with "address already in use" so).
func freeAddr(t testing.TB) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := minTestPort + rand.Intn(maxTestPort-minTestPort)
		if portsGiven[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		portsGiven[port] = true
		return addr
	}
	t.Fatalf("no free port in [%d, %d)", minTestPort, maxTestPort)
	return ""
}

const minTestPort, maxTestPort = 20000, 32768

var (
	portsMu    sync.Mutex // guards portsGiven
	portsGiven = map[int]bool{}
)

// A Node is one server process, kvs or redis-server, that can be stopped,
// killed and started again on the same address and directory. Cluster tests
// build on it: each member is a Node whose Args carry its node id and Raft
// address.
type Node struct {
	t    testing.TB
	Name string // for messages and the log file's name
	Dir  string // working directory; holds the log and, for kvs, data/
	Addr string // client (RESP) address
	// TLSAddr and AdminTLS are set for a node of a --tls-cluster cluster:
	// its TLS client address, which it advertises, and the client
	// configuration (a certificate the cluster's CA signed) that node
	// commands such as KVS.JOIN need.
	TLSAddr  string
	AdminTLS *tls.Config
	Bin      string
	// Args returns the command line for a start; it is called for each
	// start so that restarts see the same flags.
	Args func(n *Node) []string
	// Password, when set, is sent with AUTH before the harness's own
	// requests (KVS.STATUS) to a node that requires one.
	Password string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has been waited for
	waitErr error         // cmd.Wait's result, valid after exited is closed
	logFile *os.File
}

// KVSOptions choose how a kvs node is started.
type KVSOptions struct {
	Durable bool     // with --data-dir (Dir/data); memory mode otherwise
	Fsync   string   // --fsync value; empty leaves the default
	Extra   []string // further flags
}

// DataDir is where a durable kvs node keeps its log and snapshots.
func (n *Node) DataDir() string { return filepath.Join(n.Dir, "data") }

// LogPath is the file that collects the process's stderr (and stdout)
// across every start.
func (n *Node) LogPath() string { return filepath.Join(n.Dir, n.Name+".log") }

// newKVS prepares (without starting) a kvs node in a fresh directory.
func newKVS(t testing.TB, name string, opts KVSOptions) *Node {
	t.Helper()
	bin := requireKVS(t)
	n := &Node{t: t, Name: name, Bin: bin, Addr: freeAddr(t)}
	n.Dir = filepath.Join(testDir(t), name)
	n.Args = func(n *Node) []string {
		args := []string{"serve", "--addr", n.Addr, "--log-level", *flagLogLevel}
		if opts.Durable {
			args = append(args, "--data-dir", n.DataDir())
		}
		if opts.Fsync != "" {
			args = append(args, "--fsync", opts.Fsync)
		}
		return append(args, opts.Extra...)
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return n
}

// startKVS starts a kvs node and waits until it answers PING.
func startKVS(t testing.TB, opts KVSOptions) *Node {
	t.Helper()
	name := "kvs-memory"
	if opts.Durable {
		name = "kvs-durable"
	}
	n := newKVS(t, name, opts)
	n.Start()
	return n
}

// startRedis starts a redis-server with persistence off, as the reference
// for differential tests, or skips t when none is installed.
func startRedis(t testing.TB) *Node {
	t.Helper()
	n := newRedis(t, "redis")
	n.Start()
	return n
}

// newRedis prepares (without starting) a redis-server named name with
// persistence off and the extra flags, or skips t when none is installed.
func newRedis(t testing.TB, name string, extra ...string) *Node {
	t.Helper()
	bin := requireRedis(t)
	n := &Node{t: t, Name: name, Bin: bin, Addr: freeAddr(t)}
	n.Dir = filepath.Join(testDir(t), n.Name)
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.Args = func(n *Node) []string {
		_, port, _ := net.SplitHostPort(n.Addr)
		return append([]string{
			"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", n.Dir, "--daemonize", "no", "--logfile", "",
		}, extra...)
	}
	return n
}

// Start runs the process and waits until it answers PING. On the first
// start it registers a cleanup that stops the process gracefully and fails
// the test if it did not exit 0.
func (n *Node) Start() {
	n.t.Helper()
	n.StartWithin(startTimeout)
}

// StartWithin is Start for a process that may take up to ready to answer
// (a replay known to be long).
func (n *Node) StartWithin(ready time.Duration) {
	n.t.Helper()
	n.mu.Lock()
	if n.cmd != nil && !n.isExited() {
		n.mu.Unlock()
		n.t.Fatalf("%s: Start while running", n.Name)
	}
	first := n.cmd == nil
	n.mu.Unlock()

	logf, err := os.OpenFile(n.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	args := n.Args(n)
	fmt.Fprintf(logf, "==== %s start: %s %s\n", time.Now().Format(time.RFC3339Nano), n.Bin, strings.Join(args, " "))
	cmd := exec.Command(n.Bin, args...)
	cmd.Dir = n.Dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		n.t.Fatalf("%s: start: %v", n.Name, err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.exited, n.waitErr, n.logFile = cmd, exited, nil, logf
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.waitErr = err
		n.mu.Unlock()
		logf.Close()
		close(exited)
	}()
	if first {
		n.t.Cleanup(n.cleanup)
	}
	if err := n.waitReady(ready); err != nil {
		n.t.Fatalf("%s: not ready: %v\n%s", n.Name, err, n.LogTail(40))
	}
}

func (n *Node) isExited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// waitReady polls with PING until the node answers, the process exits or
// the deadline passes.
func (n *Node) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if n.isExited() {
			return fmt.Errorf("process exited: %v", n.exitErr())
		}
		if last = ping(n.Addr); last == nil {
			return nil
		}
		select {
		case <-n.exited:
		case <-time.After(20 * time.Millisecond): // poll interval
		}
	}
	return fmt.Errorf("no PONG within %v: %v", timeout, last)
}

// ping sends one RESP PING on a fresh connection.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" && !strings.HasPrefix(line, "-NOAUTH ") { // up, with a password
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

func (n *Node) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.waitErr
}

// signal sends sig to the running process and waits for it to exit,
// returning cmd.Wait's error (nil for exit status 0).
func (n *Node) signal(sig syscall.Signal) error {
	n.t.Helper()
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		n.t.Fatalf("%s: never started", n.Name)
	}
	select {
	case <-exited:
		return fmt.Errorf("%s had already exited: %v", n.Name, n.exitErr())
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return err
	}
	select {
	case <-exited:
		return n.exitErr()
	case <-time.After(stopTimeout):
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s did not exit within %v of %v; killed", n.Name, stopTimeout, sig)
	}
}

// Stop sends SIGTERM and requires a clean exit with status 0.
func (n *Node) Stop() {
	n.t.Helper()
	if err := n.signal(syscall.SIGTERM); err != nil {
		n.t.Fatalf("%s: SIGTERM: %v\n%s", n.Name, err, n.LogTail(40))
	}
}

// Kill sends SIGKILL: the process gets no chance to flush anything.
func (n *Node) Kill() {
	n.t.Helper()
	err := n.signal(syscall.SIGKILL)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		n.t.Fatalf("%s: kill -9: unexpected result %v", n.Name, err)
	}
}

// Restart stops the node gracefully and starts it again on the same
// address and directory.
func (n *Node) Restart() {
	n.t.Helper()
	n.Stop()
	n.Start()
}

// cleanup stops a node left running at the end of a test. A graceful stop
// that fails is a bug in the server, so it fails the test.
func (n *Node) cleanup() {
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	select {
	case <-exited:
		return
	default:
	}
	if err := n.signal(syscall.SIGTERM); err != nil {
		n.t.Errorf("%s: stop at end of test: %v\n%s", n.Name, err, n.LogTail(40))
	}
}

// LogTail returns the last lines of the node's log, for failure messages.
func (n *Node) LogTail(lines int) string {
	b, err := os.ReadFile(n.LogPath())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return fmt.Sprintf("--- last %d lines of %s:\n%s", len(all), n.LogPath(), bytes.Join(all, []byte("\n")))
}

// runKVS runs a one-shot kvs invocation (a subcommand such as `join`, or a
// `serve` expected to fail) and returns its combined output and exit code.
// It fails t if the process does not end within the deadline.
func runKVS(t testing.TB, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	return runBin(t, requireKVS(t), timeout, args...)
}

// runBin is runKVS for the kvs binary bin (an older one, say).
func runBin(t testing.TB, bin string, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("kvs %v: %v", args, err)
		}
		return out.String(), 0
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("kvs %v still running after %v; output:\n%s", args, timeout, out.String())
		return "", -1
	}
}

// Advertised is the client address the node gives the cluster: its TLS
// address in a --tls-cluster cluster, its plain one otherwise.
func (n *Node) Advertised() string {
	if n.TLSAddr != "" {
		return n.TLSAddr
	}
	return n.Addr
}

// livePid is the node's process id, or 0 when it was never started; it is
// safe to call from any goroutine.
func (n *Node) livePid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}
