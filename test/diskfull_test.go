package test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// A full disk under a running node: each test gives a node's data dir a
// small tmpfs of its own (which needs root; the tests skip without it),
// fills it with a ballast file, and checks what clients and operators see
// while it is full and after the ballast is removed: writes refused with
// Redis's MISCONF reply (durable mode), reads served, /healthz, INFO and
// the metrics truthful, writes accepted again without a restart, and every
// acknowledged write still there after one.

// mountTmpfs mounts a tmpfs of size at dir, or skips t where mounting is
// not permitted. It is unmounted when t ends, after the nodes started
// later have been stopped (cleanups run last registered first).
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fillDisk writes a ballast file in dir until the file system is full and
// returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return path
		}
	}
}

// infoField returns one field of INFO persistence on addr.
func infoField(t *testing.T, addr, name string) string {
	t.Helper()
	v := dialRaw(t, addr).Do("INFO", "persistence")
	for _, line := range strings.Split(v.Str, "\r\n") {
		if k, val, ok := strings.Cut(line, ":"); ok && k == name {
			return val
		}
	}
	t.Fatalf("INFO persistence on %s has no %s:\n%s", addr, name, v.Str)
	return ""
}

// logHealth is what a node says about its log writes.
type logHealth struct {
	status, errText string // INFO aof_last_write_status, kvs_log_write_error
	code            int    // /healthz status
	body            string
	failed          float64 // kvs_log_write_failed
}

func readLogHealth(t *testing.T, addr, maddr string) logHealth {
	t.Helper()
	h := logHealth{status: infoField(t, addr, "aof_last_write_status"), errText: infoField(t, addr, "kvs_log_write_error")}
	var err error
	if h.code, h.body, err = healthz(maddr); err != nil {
		t.Fatalf("/healthz: %v", err)
	}
	h.failed = sample(t, scrape(t, maddr), "kvs_log_write_failed")
	return h
}

// failing reports whether every source says the log cannot be written,
// naming ENOSPC; healthy whether every one says it can.
func (h logHealth) failing() bool {
	return h.status == "err" && strings.Contains(h.errText, "no space left on device") &&
		h.code == http.StatusServiceUnavailable && strings.Contains(h.body, "no space left on device") && h.failed == 1
}

func (h logHealth) healthy() bool {
	return h.status == "ok" && h.errText == "" && h.code == http.StatusOK && h.body == "ok" && h.failed == 0
}

const misconfENOSPC = "-MISCONF Errors writing to the AOF file: No space left on device\r\n"

func TestDiskFullDurable(t *testing.T) {
	maddr := freeAddr(t)
	n := newKVS(t, "kvs-durable", KVSOptions{Durable: true, Extra: []string{"--metrics-addr", maddr}})
	mountTmpfs(t, n.DataDir(), "8m")
	n.Start()
	rc := dialRaw(t, n.Addr)
	value := strings.Repeat("v", 32<<10)
	var acked []string
	set := func(key string) Value {
		v := rc.Do("SET", key, value)
		if string(v.Raw) == "+OK\r\n" {
			acked = append(acked, key)
		}
		return v
	}
	for i := range 20 {
		if v := set(fmt.Sprintf("before:%d", i)); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("SET before the disk is full: %s", v)
		}
	}
	if h := readLogHealth(t, n.Addr, maddr); !h.healthy() {
		t.Fatalf("before the disk is full: %+v", h)
	}

	ballast := fillDisk(t, n.DataDir())
	// Writes go on into space the log preallocated, then fail.
	var refused []string
	for i := 0; len(refused) == 0; i++ {
		if i > 1000 {
			t.Fatal("no write failed on a full disk")
		}
		key := fmt.Sprintf("full:%d", i)
		if v := set(key); string(v.Raw) != "+OK\r\n" {
			if string(v.Raw) != misconfENOSPC {
				t.Fatalf("first failed SET = %s, want %q", v, misconfENOSPC)
			}
			refused = append(refused, key)
		}
	}
	// While full: writes refused with MISCONF, through repeated repair
	// attempts; reads, PING and INFO served; every source says why.
	waitFor(t, "health to report the full disk", func() error {
		if h := readLogHealth(t, n.Addr, maddr); !h.failing() {
			return fmt.Errorf("%+v", h)
		}
		return nil
	})
	for i := range 5 {
		key := fmt.Sprintf("refused:%d", i)
		if v := set(key); string(v.Raw) != misconfENOSPC {
			t.Fatalf("SET while full = %s, want %q", v, misconfENOSPC)
		}
		refused = append(refused, key)
		if v := rc.Do("GET", acked[i]); v.Str != value {
			t.Fatalf("GET %s while full = %.40s", acked[i], v)
		}
		if v := rc.Do("PING"); string(v.Raw) != "+PONG\r\n" {
			t.Fatalf("PING while full = %s", v)
		}
	}
	// Inside MULTI a write is refused as it is queued, and so is the
	// EXEC that follows, as Redis refuses them while its AOF fails.
	tx := doPipeline(t, rc, [][]string{{"MULTI"}, {"SET", "tx", "1"}, {"GET", "tx"}, {"EXEC"}})
	if want := []string{"+OK\r\n", misconfENOSPC, "+QUEUED\r\n", "-EXECABORT Transaction discarded because of previous errors.\r\n"}; !slices.Equal(tx, want) {
		t.Fatalf("MULTI while full = %q, want %q", tx, want)
	}
	if h := readLogHealth(t, n.Addr, maddr); !h.failing() {
		t.Fatalf("still full, health says %+v", h)
	}

	// Room again: writes accepted without a restart.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "writes accepted again", func() error {
		if v := set(fmt.Sprintf("after:%d", len(acked))); string(v.Raw) != "+OK\r\n" {
			return fmt.Errorf("SET = %s", v)
		}
		return nil
	})
	for i := range 10 {
		if v := set(fmt.Sprintf("after2:%d", i)); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("SET after the disk has room = %s", v)
		}
	}
	if h := readLogHealth(t, n.Addr, maddr); !h.healthy() {
		t.Fatalf("after the disk has room: %+v", h)
	}
	if got := infoField(t, n.Addr, "kvs_log_write_failures"); got != "1" {
		t.Fatalf("kvs_log_write_failures = %s, want 1", got)
	}

	// A stop while full exits non-zero, naming the cause.
	ballast = fillDisk(t, n.DataDir())
	waitFor(t, "a write to fail again", func() error {
		if v := set(fmt.Sprintf("again:%d", len(acked))); string(v.Raw) != misconfENOSPC {
			return fmt.Errorf("SET = %s", v)
		}
		return nil
	})
	err := n.signal(syscall.SIGTERM)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("SIGTERM while the disk is full: %v, want exit status 1", err)
	}
	if tail := n.LogTail(5); !strings.Contains(tail, "stopped while the append log could not be written") ||
		!strings.Contains(tail, "no space left on device") {
		t.Fatalf("the exit does not name the cause:\n%s", tail)
	}

	// Every acknowledged write survives a restart; no refused one appears.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	n.Start()
	rc = dialRaw(t, n.Addr)
	for _, key := range acked {
		if v := rc.Do("GET", key); v.Str != value {
			t.Fatalf("acknowledged %s lost after restart: %.40s", key, v)
		}
	}
	for _, key := range refused {
		if v := rc.Do("GET", key); !v.Null {
			t.Fatalf("refused %s present after restart", key)
		}
	}
	t.Logf("%d writes acknowledged, %d refused", len(acked), len(refused))
}

// TestDiskFullCluster fills the disk of one node of three, the bootstrap
// node (the leader, unless an election moved leadership): it cannot store
// raft entries, so it steps down if it leads, and reports why while the
// two others go on committing writes, which it forwards. Once it has room
// it takes the entries again by itself and, after a restart, holds every
// acknowledged write.
func TestDiskFullCluster(t *testing.T) {
	maddr := freeAddr(t)
	n1 := newClusterNode(t, "n1", "--bootstrap", "--metrics-addr", maddr)
	mountTmpfs(t, n1.DataDir(), "16m")
	n1.Start()
	nodes := []*Node{n1}
	for i := 2; i <= 3; i++ {
		n := newClusterNode(t, fmt.Sprintf("n%d", i))
		n.Start()
		if out, code := runKVS(t, clusterWait, "join", n1.Addr, n.Addr); code != 0 {
			t.Fatalf("kvs join: exit %d\n%s", code, out)
		}
		nodes = append(nodes, n)
	}
	waitMembers(t, nodes, 3)
	leader := waitLeader(t, nodes)
	t.Logf("leader before the disk fills: %s", leader.Name)

	value := strings.Repeat("v", 16<<10)
	var acked []string
	set := func(n *Node, key string) Value {
		v := dialRaw(t, n.Addr).Do("SET", key, value)
		if string(v.Raw) == "+OK\r\n" {
			acked = append(acked, key)
		}
		return v
	}
	for i := range 20 {
		if v := set(n1, fmt.Sprintf("before:%d", i)); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("SET before the disk is full: %s", v)
		}
	}
	if h := readLogHealth(t, n1.Addr, maddr); !h.healthy() {
		t.Fatalf("before the disk is full: %+v", h)
	}

	ballast := fillDisk(t, n1.DataDir())
	// Writes through n1 (led or forwarded by it) until it reports that it
	// cannot write its log. A write that reached its full log as leader
	// may get UNCERTAIN; none is acknowledged without a commit.
	i := 0
	waitFor(t, "n1 to report its full disk", func() error {
		i++
		if v := set(n1, fmt.Sprintf("full:%d", i)); v.IsError() && !strings.HasPrefix(v.Str, "UNCERTAIN") &&
			!strings.HasPrefix(v.Str, "TRYAGAIN") && !strings.HasPrefix(v.Str, "CLUSTERDOWN") {
			t.Fatalf("SET through n1 while its disk is full = %s", v)
		}
		if h := readLogHealth(t, n1.Addr, maddr); !h.failing() {
			return fmt.Errorf("%+v", h)
		}
		return nil
	})
	// The others lead and commit; n1 serves reads and forwards writes.
	// n1 may win an election again, with logs all as long as its own, and
	// lead while no write needs more room than its log has left (raft's
	// small no-op may fit): writes go on, so that a leading n1 fails to
	// store one and steps down again, until a node that can store them
	// leads and n1's log falls behind.
	others := nodes[1:]
	waitFor(t, "a leader other than n1", func() error {
		i++
		if v := set(n1, fmt.Sprintf("full:%d", i)); v.IsError() && !strings.HasPrefix(v.Str, "UNCERTAIN") &&
			!strings.HasPrefix(v.Str, "TRYAGAIN") && !strings.HasPrefix(v.Str, "CLUSTERDOWN") {
			t.Fatalf("SET through n1 while its disk is full = %s", v)
		}
		l, err := leaderNow(others)
		if err == nil && l == n1 {
			err = errors.New("n1 still leads")
		}
		return err
	})
	for i := range 10 {
		waitFor(t, "a write through n1 to commit", func() error {
			if v := set(n1, fmt.Sprintf("during:%d", i)); string(v.Raw) != "+OK\r\n" {
				return fmt.Errorf("SET = %s", v)
			}
			return nil
		})
	}
	if v := dialRaw(t, n1.Addr).Do("GET", acked[0]); v.Str != value {
		t.Fatalf("GET on n1 while its disk is full = %.40s", v)
	}
	if h := readLogHealth(t, n1.Addr, maddr); !h.failing() {
		t.Fatalf("n1 still full, health says %+v", h)
	}

	// Room again: n1 takes the entries it missed, by itself.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "n1 to write its log again", func() error {
		set(others[0], fmt.Sprintf("after:%d", len(acked)))
		if h := readLogHealth(t, n1.Addr, maddr); !h.healthy() {
			return fmt.Errorf("%+v", h)
		}
		return nil
	})
	waitValue(t, n1, acked[len(acked)-1], value)
	n1.Stop() // recovered: exit 0
	n1.Start()
	for _, key := range acked {
		waitValue(t, n1, key, value)
	}
	t.Logf("%d writes acknowledged", len(acked))
}
