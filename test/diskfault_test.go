package test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Disk faults on the real binary: damage a stopped node's files the way a
// disk or a crash can, start it again, and check that it truncates what
// may be truncated (a torn final record), refuses clearly what may not (a
// damaged record before the tail, a truncated older segment, a damaged raft
// log entry), and never serves data that was not written.

// segments returns a durable node's log segments, oldest first.
func segments(t *testing.T, n *Node) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(n.DataDir(), "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no log segments in %s: %v", n.DataDir(), err)
	}
	sort.Strings(segs)
	return segs
}

// writeKeys SETs key:i = value-i for i in [0, count), one request each, so
// each is its own log record.
func writeKeys(t *testing.T, n *Node, count int) {
	t.Helper()
	rc := dialRaw(t, n.Addr)
	for i := 0; i < count; i++ {
		if v := rc.Do("SET", fmt.Sprintf("key:%03d", i), fmt.Sprintf("value-%03d", i)); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("SET key:%03d: %s", i, v)
		}
	}
}

// presentKeys returns, for each i in [0, count), whether key:i holds
// value-i; a key holding anything else fails t.
func presentKeys(t *testing.T, n *Node, count int) []bool {
	t.Helper()
	rc := dialRaw(t, n.Addr)
	out := make([]bool, count)
	for i := range out {
		v := rc.Do("GET", fmt.Sprintf("key:%03d", i))
		switch {
		case v.Null:
		case v.Str == fmt.Sprintf("value-%03d", i):
			out[i] = true
		default:
			t.Fatalf("key:%03d = %s: a value never written", i, v)
		}
	}
	return out
}

// flipIn flips one bit of the first occurrence of needle in the file and
// returns the byte offset, failing t if needle is absent.
func flipIn(t *testing.T, path, needle string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(needle))
	if i < 0 {
		t.Fatalf("%q not found in %s", needle, path)
	}
	b[i+len(needle)-1] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return i
}

// refuses runs the node's command line once and requires it to exit
// non-zero with every one of wants in its output.
func refuses(t *testing.T, n *Node, wants ...string) string {
	t.Helper()
	out, code := runKVS(t, startTimeout, n.Args(n)...)
	if code == 0 {
		t.Fatalf("%s started on a damaged log; output:\n%s", n.Name, out)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s refused to start but its error does not say %q:\n%s", n.Name, w, out)
		}
	}
	return out
}

func TestDiskFaultsDurable(t *testing.T) {
	t.Run("torn final record", func(t *testing.T) {
		t.Parallel()
		n := startKVS(t, KVSOptions{Durable: true})
		writeKeys(t, n, 20)
		n.Stop()
		segs := segments(t, n)
		last := segs[len(segs)-1]
		st, err := os.Stat(last)
		if err != nil {
			t.Fatal(err)
		}
		// A crash mid-write leaves the last record cut short.
		if err := os.Truncate(last, st.Size()-3); err != nil {
			t.Fatal(err)
		}
		n.Start()
		got := presentKeys(t, n, 20)
		for i := 0; i < 19; i++ {
			if !got[i] {
				t.Errorf("key:%03d lost: only the torn last record may go", i)
			}
		}
		if got[19] {
			t.Errorf("key:%03d survived although its record was cut", 19)
		}
	})

	t.Run("damaged record before the tail", func(t *testing.T) {
		t.Parallel()
		repair := false
		n := newKVS(t, "kvs-durable", KVSOptions{Durable: true})
		base := n.Args
		n.Args = func(n *Node) []string {
			if repair {
				return append(base(n), "--repair")
			}
			return base(n)
		}
		n.Start()
		writeKeys(t, n, 20)
		n.Stop()
		seg := segments(t, n)[0]
		off := flipIn(t, seg, "value-005")
		refuses(t, n, filepath.Base(seg), "offset")
		t.Logf("flipped a bit at byte %d of %s; kvs refused to start", off, filepath.Base(seg))

		// --repair cuts the log at the damaged record, keeps the cut bytes
		// aside, and serves what came before it.
		repair = true
		n.Start()
		got := presentKeys(t, n, 20)
		for i := 0; i < 5; i++ {
			if !got[i] {
				t.Errorf("key:%03d, before the damaged record, lost by --repair", i)
			}
		}
		for i := 5; i < 20; i++ {
			if got[i] {
				t.Errorf("key:%03d, at or after the damaged record, still served after --repair", i)
			}
		}
		if broken, _ := filepath.Glob(filepath.Join(n.DataDir(), "*.broken")); len(broken) == 0 {
			t.Errorf("--repair kept no copy of the bytes it cut")
		}
	})

	t.Run("truncated older segment", func(t *testing.T) {
		t.Parallel()
		n := startKVS(t, KVSOptions{Durable: true, Extra: []string{"--wal-segment-bytes", "4096"}})
		writeKeys(t, n, 300)
		n.Stop()
		segs := segments(t, n)
		if len(segs) < 3 {
			t.Fatalf("%d segments; the test needs several", len(segs))
		}
		st, err := os.Stat(segs[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(segs[0], st.Size()/2); err != nil {
			t.Fatal(err)
		}
		refuses(t, n, filepath.Base(segs[0]))
	})
}

// TestDiskFaultCluster: a bit flipped in a raft log entry on one node's
// disk stops that node at start, when it checks its log, instead of letting
// it apply a write nobody made (were the damage to come later, the entry's
// seal stops it when it replays the entry); the other nodes keep serving.
func TestDiskFaultCluster(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	const value = "written-once-by-TestDiskFaultCluster"
	if v := dialRaw(t, leader.Addr).Do("SET", "victim", value); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("SET: %s", v)
	}
	// A write after it: damage to the log's final record is taken for a
	// torn write and cut off at start.
	if v := dialRaw(t, leader.Addr).Do("SET", "later", "1"); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("SET: %s", v)
	}
	f := followers(nodes, leader)[0]
	waitValue(t, f, "victim", value)
	waitValue(t, f, "later", "1")
	f.Stop()
	file := flipInRaftLog(t, filepath.Join(f.DataDir(), "raft"), value)

	// The start checks every entry of the log, so the node never serves
	// the damaged value: it refuses, naming the file.
	refuses(t, f, file, "corrupt", "add the node to the cluster again")
	// The others still have a majority and serve.
	if v := dialRaw(t, leader.Addr).Do("SET", "after", "1"); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("SET with one node down: %s", v)
	}
}

// getOnce is one GET on a fresh connection, for a node that may go away.
func getOnce(addr, key string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	rc := &rawConn{c: c, r: bufio.NewReader(c)}
	v, err := rc.do("GET", key)
	if err != nil {
		return "", err
	}
	return v.Str, nil
}

// flipInRaftLog flips the last byte of every copy of value in the raft log
// under raftDir (log/*.rlog, or raft.db for a node whose log bolt keeps)
// and returns the base name of the file it damaged.
func flipInRaftLog(t *testing.T, raftDir, value string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(raftDir, "log", "*.rlog"))
	files = append(files, filepath.Join(raftDir, "raft.db"))
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// Bolt copies pages on write, so an entry may sit in more than
		// one page; damage every copy.
		flips := 0
		for i := bytes.Index(b, []byte(value)); i >= 0; {
			b[i+len(value)-1] ^= 0x01
			flips++
			j := bytes.Index(b[i+1:], []byte(value))
			if j < 0 {
				break
			}
			i += 1 + j
		}
		if flips == 0 {
			continue
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return filepath.Base(path)
	}
	t.Fatalf("%q not found in the raft log under %s", value, raftDir)
	return ""
}
