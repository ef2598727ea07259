package test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Redis's RDB files in and out of kvs, with real redis-servers: a file
// redis-server SAVEs, holding every type in each of its encodings, with
// deadlines and a function library, restored by kvs restore --rdb into a
// durable node and a one-node cluster, which then hold exactly what
// redis-server held; the old files of Redis's own tests (RDB versions 3
// to 10: zipmaps, ziplists, intsets, linked lists) the same way; and
// files kvs writes (SAVE with --save-rdb, SYNC, redis-cli --rdb), which a
// redis-server loads to hold exactly what kvs held.

// fillEveryEncoding writes, on c, each type in each encoding Redis 7.0
// keeps it in, some with deadlines, and a function library.
func fillEveryEncoding(t *testing.T, c *rawConn) {
	t.Helper()
	do := func(args ...string) {
		t.Helper()
		if v := c.Do(args...); v.IsError() {
			t.Fatalf("%s: %s", strings.Join(args, " "), v.Str)
		}
	}
	deadline := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	do("SET", "str:short", "hello")
	do("SET", "str:int", "12345")
	do("SET", "str:neg", "-9000000000")
	do("SET", "str:long", strings.Repeat("compressible ", 200))
	do("SET", "str:bin", "\x00\x01\xff\r\n")
	do("SET", "str:ttl", "v", "PXAT", deadline)
	do("RPUSH", "list:small", "a", "b", "1", "-2", "3000000000")
	do("RPUSH", "list:plain", strings.Repeat("x", 10000), "y") // a plain node
	args := []string{"RPUSH", "list:big"}
	for i := range 2000 {
		args = append(args, fmt.Sprintf("element-%d", i))
	}
	do(args...)
	do("PEXPIREAT", "list:big", deadline)
	do("SADD", "set:intset", "1", "-5", "70000", "5000000000")
	do("SADD", "set:small", "a", "b", "c")
	sargs, iargs := []string{"SADD", "set:big"}, []string{"SADD", "set:bigint"}
	hargs, zargs := []string{"HSET", "hash:big"}, []string{"ZADD", "zset:big"}
	for i := range 600 {
		sargs = append(sargs, fmt.Sprintf("m%d", i))
		iargs = append(iargs, strconv.Itoa(i*7))
		hargs = append(hargs, fmt.Sprintf("f%d", i), fmt.Sprintf("v%d", i))
		zargs = append(zargs, strconv.FormatFloat(float64(i)/3, 'g', -1, 64), fmt.Sprintf("z%d", i))
	}
	do(sargs...)
	do(iargs...)
	do(hargs...)
	do(zargs...)
	do("HSET", "hash:small", "f", "v", "n", "1")
	do("HSET", "hash:longval", "f", strings.Repeat("v", 100)) // hashtable by value length
	do("PEXPIREAT", "hash:small", deadline)
	do("ZADD", "zset:small", "1", "a", "2.5", "b", "-inf", "c", "1e300", "d")
	do("ZADD", "zset:longmember", "1", strings.Repeat("m", 100))
	do("FUNCTION", "LOAD", "#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return 'hi' end)")
}

// keyspaceOf is every key of c with its type, value, deadline and
// encoding, and the function libraries' code.
func keyspaceOf(t *testing.T, c *rawConn) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range c.Do("KEYS", "*").Elems {
		key := k.Str
		typ := c.Do("TYPE", key).Str
		var val []string
		switch typ {
		case "string":
			val = []string{c.Do("GET", key).Str}
		case "list":
			for _, e := range c.Do("LRANGE", key, "0", "-1").Elems {
				val = append(val, e.Str)
			}
		case "set":
			for _, e := range c.Do("SMEMBERS", key).Elems {
				val = append(val, e.Str)
			}
			sort.Strings(val)
		case "zset":
			for _, e := range c.Do("ZRANGE", key, "0", "-1", "WITHSCORES").Elems {
				val = append(val, e.Str)
			}
		case "stream":
			val = []string{streamState(c, key)}
		case "hash":
			els := c.Do("HGETALL", key).Elems
			for i := 0; i+1 < len(els); i += 2 {
				val = append(val, els[i].Str+"="+els[i+1].Str)
			}
			sort.Strings(val)
		}
		out[key] = fmt.Sprintf("%s %q deadline %s encoding %s", typ, val,
			c.Do("PEXPIRETIME", key).Str, c.Do("OBJECT", "ENCODING", key).Str)
	}
	for _, lib := range c.Do("FUNCTION", "LIST", "WITHCODE").Elems {
		for i := 0; i+1 < len(lib.Elems); i += 2 {
			if lib.Elems[i].Str == "library_code" {
				out["function library"] += lib.Elems[i+1].Str
			}
		}
	}
	return out
}

func sameKeyspace(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s is %.200s, want %.200s", what, k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %s is there, and should not be", what, k)
		}
	}
}

// redisOn starts a redis-server loading file (its dir and dbfilename).
func redisOn(t *testing.T, name, file string) *Node {
	t.Helper()
	n := newRedis(t, name, "--dbfilename", filepath.Base(file))
	n.Args = func(n *Node) []string {
		_, port, _ := strings.Cut(n.Addr, ":")
		return []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", filepath.Dir(file), "--dbfilename", filepath.Base(file), "--daemonize", "no", "--logfile", ""}
	}
	n.Start()
	return n
}

var restoredLine = regexp.MustCompile(`restored (\d+) keys in db 0 \((\d+) with an expiry\)`)

func TestRDBFromRedis(t *testing.T) {
	requireKVS(t)
	t.Parallel()
	src := newRedis(t, "redis-src", "--enable-debug-command", "yes")
	src.Start()
	rc := dialRaw(t, src.Addr)
	fillEveryEncoding(t, rc)
	// A key whose deadline passes before the SAVE, which redis-server
	// still writes (its active expiry is off): the restore leaves it out.
	rc.Do("DEBUG", "SET-ACTIVE-EXPIRE", "0")
	rc.Do("SET", "gone", "v", "PX", "1")
	time.Sleep(20 * time.Millisecond) // past its deadline; nothing reads it
	if v := rc.Do("SAVE"); v.Str != "OK" {
		t.Fatalf("SAVE: %s", v)
	}
	want := keyspaceOf(t, rc)
	if len(want) < 20 {
		t.Fatalf("only %d keys", len(want))
	}
	file := filepath.Join(src.Dir, "dump.rdb")

	t.Run("durable", func(t *testing.T) {
		dst := newKVS(t, "restored", KVSOptions{Durable: true})
		out, code := runKVS(t, clusterWait, "restore", "--rdb", file, "--data-dir", dst.DataDir())
		if code != 0 {
			t.Fatalf("kvs restore --rdb: exit %d\n%s", code, out)
		}
		t.Logf("kvs restore --rdb: %s", strings.TrimSpace(out))
		m := restoredLine.FindStringSubmatch(out)
		if m == nil || m[1] != strconv.Itoa(len(want)-1) || m[2] != "3" ||
			!strings.Contains(out, "1 expired key skipped") || !strings.Contains(out, "1 function library") ||
			!strings.Contains(out, "RDB version 10, written by Redis 7.0") {
			t.Errorf("the restore says %q; want %d keys, 3 with an expiry, 1 expired, 1 function library", out, len(want)-1)
		}
		dst.Start()
		sameKeyspace(t, "restored", want, keyspaceOf(t, dialRaw(t, dst.Addr)))
		if v := dialRaw(t, dst.Addr).Do("FCALL", "myfunc", "0"); v.Str != "hi" {
			t.Errorf("FCALL myfunc: %s", v)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		raftAddr := freeAddr(t)
		dst := newKVS(t, "r1", KVSOptions{Durable: true, Extra: []string{"--node-id", "r1", "--raft-addr", raftAddr}})
		out, code := runKVS(t, clusterWait, "restore", "--rdb", file, "--data-dir", dst.DataDir(), "--node-id", "r1", "--raft-addr", raftAddr)
		if code != 0 || !strings.Contains(out, "one-node cluster") {
			t.Fatalf("kvs restore --rdb: exit %d\n%s", code, out)
		}
		dst.Start()
		waitFor(t, "the restored cluster to serve", func() error {
			if v := dialRaw(t, dst.Addr).Do("DBSIZE"); v.Str != strconv.Itoa(len(want)-1) {
				return fmt.Errorf("DBSIZE %s", v)
			}
			return nil
		})
		sameKeyspace(t, "restored cluster", want, keyspaceOf(t, dialRaw(t, dst.Addr)))
		// And out again, from the cluster node (a goroutine per connection).
		out2 := filepath.Join(testDir(t), "again", "dump.rdb")
		syncFile(t, dst.Addr, []string{"SYNC"}, out2)
		ref := redisOn(t, "redis-again", out2)
		sameKeyspace(t, "redis-server on the cluster node's SYNC", want, keyspaceOf(t, dialRaw(t, ref.Addr)))
	})
	t.Run("damaged", func(t *testing.T) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		cut := filepath.Join(testDir(t), "cut.rdb")
		os.WriteFile(cut, b[:len(b)/2], 0o644)
		flipped := filepath.Join(testDir(t), "flipped.rdb")
		b[len(b)/3] ^= 0x40
		os.WriteFile(flipped, b, 0o644)
		for _, f := range []string{cut, flipped} {
			dir := filepath.Join(testDir(t), "data-"+filepath.Base(f))
			out, code := runKVS(t, clusterWait, "restore", "--rdb", f, "--data-dir", dir)
			if code != 1 || !strings.Contains(out, "at offset ") || !strings.Contains(out, "nothing was written") {
				t.Errorf("restore of %s: exit %d, %s", filepath.Base(f), code, out)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("restore of %s left %d entries in the data dir", filepath.Base(f), len(ents))
			}
		}
	})
}

// TestRDBAssets: the files of Redis's own tests, which redis-server 7.0
// loads, kvs restores to the same keys.
func TestRDBAssets(t *testing.T) {
	requireKVS(t)
	requireRedis(t)
	t.Parallel()
	for _, name := range []string{"encodings", "hash-zipmap", "hash-ziplist", "list-quicklist", "zset-ziplist"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "rdb", "testdata", name+".rdb"))
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(testDir(t), name+".rdb")
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			ref := redisOn(t, "redis", file)
			want := keyspaceOf(t, dialRaw(t, ref.Addr))
			dst := newKVS(t, "restored", KVSOptions{Durable: true})
			out, code := runKVS(t, clusterWait, "restore", "--rdb", file, "--data-dir", dst.DataDir())
			if code != 0 {
				t.Fatalf("kvs restore --rdb: exit %d\n%s", code, out)
			}
			dst.Start()
			sameKeyspace(t, name, want, keyspaceOf(t, dialRaw(t, dst.Addr)))
		})
	}
}

// TestRDBToRedis: what kvs writes, redis-server loads.
func TestRDBToRedis(t *testing.T) {
	requireKVS(t)
	requireRedis(t)
	t.Parallel()
	rdbFile := filepath.Join(testDir(t), "out", "kvs.rdb")
	os.MkdirAll(filepath.Dir(rdbFile), 0o755)
	src := startKVS(t, KVSOptions{Durable: true, Extra: []string{"--save-rdb", rdbFile}})
	kc := dialRaw(t, src.Addr)
	fillEveryEncoding(t, kc)
	kc.Do("SET", "short-lived", "v", "PX", "1") // gone by the save
	want := keyspaceOf(t, kc)
	delete(want, "short-lived")

	t.Run("bgsave", func(t *testing.T) {
		if v := kc.Do("BGSAVE"); v.Str != "Background saving started" {
			t.Fatalf("BGSAVE: %s", v)
		}
		waitFor(t, "BGSAVE to finish", func() error {
			info := kc.Do("INFO", "persistence").Str
			if !strings.Contains(info, "rdb_bgsave_in_progress:0\r\n") || !strings.Contains(info, "rdb_last_bgsave_status:ok\r\n") {
				return fmt.Errorf("not yet")
			}
			if _, err := os.Stat(rdbFile); err != nil {
				return err
			}
			return nil
		})
		ref := redisOn(t, "redis-bgsave", rdbFile)
		sameKeyspace(t, "redis-server on BGSAVE's file", want, keyspaceOf(t, dialRaw(t, ref.Addr)))
	})
	t.Run("sync", func(t *testing.T) {
		for _, cmd := range [][]string{{"SYNC"}, {"PSYNC", "?", "-1"}} {
			file := filepath.Join(testDir(t), strings.ToLower(cmd[0]), "dump.rdb")
			syncFile(t, src.Addr, cmd, file)
			ref := redisOn(t, "redis-"+strings.ToLower(cmd[0]), file)
			sameKeyspace(t, "redis-server on "+cmd[0]+"'s file", want, keyspaceOf(t, dialRaw(t, ref.Addr)))
		}
	})
	t.Run("functions-only", func(t *testing.T) {
		// A replica's REPLCONF rdb-filter-only functions, in the EOF-mark
		// form: the libraries, no keys.
		c := dialRaw(t, src.Addr)
		for _, args := range [][]string{{"REPLCONF", "capa", "eof"}, {"REPLCONF", "rdb-filter-only", "functions"}} {
			if v := c.Do(args...); v.Str != "OK" {
				t.Fatalf("%v: %s", args, v)
			}
		}
		c.Write("SYNC\r\n")
		c.c.SetReadDeadline(time.Now().Add(ioTimeout))
		line, err := c.r.ReadString('\n')
		if err != nil || !regexp.MustCompile(`^\$EOF:[0-9a-f]{40}\r\n$`).MatchString(line) {
			t.Fatalf("SYNC: %q %v", line, err)
		}
		mark := line[5:45]
		b, err := io.ReadAll(c.r)
		if err != nil || !strings.HasSuffix(string(b), mark) {
			t.Fatalf("the file does not end with the mark: %v", err)
		}
		file := filepath.Join(testDir(t), "functions", "dump.rdb")
		os.MkdirAll(filepath.Dir(file), 0o755)
		os.WriteFile(file, b[:len(b)-len(mark)], 0o644)
		ref := redisOn(t, "redis-functions", file)
		sameKeyspace(t, "redis-server on the functions alone", map[string]string{"function library": want["function library"]},
			keyspaceOf(t, dialRaw(t, ref.Addr)))
	})
	t.Run("redis-cli", func(t *testing.T) {
		cli, err := exec.LookPath("redis-cli")
		if err != nil {
			t.Skip("no redis-cli")
		}
		file := filepath.Join(testDir(t), "cli", "dump.rdb")
		os.MkdirAll(filepath.Dir(file), 0o755)
		host, port, _ := strings.Cut(src.Addr, ":")
		out, err := exec.Command(cli, "-h", host, "-p", port, "--rdb", file).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Transfer finished with success") {
			t.Fatalf("redis-cli --rdb: %v\n%s", err, out)
		}
		ref := redisOn(t, "redis-cli", file)
		sameKeyspace(t, "redis-server on redis-cli --rdb's file", want, keyspaceOf(t, dialRaw(t, ref.Addr)))
	})
}

// TestDifferentialReplconf: REPLCONF's options and refusals, and SYNC's
// and PSYNC's refusals, as redis-server answers them.
func TestDifferentialReplconf(t *testing.T) {
	requireKVS(t)
	t.Parallel()
	ref := startRedis(t)
	kvs := startKVS(t, KVSOptions{})
	for _, proto := range []int{2, 3} {
		p := newOpsPair(t, ref, kvs, proto)
		for _, args := range [][]string{
			{"REPLCONF"}, {"REPLCONF", "capa"}, {"REPLCONF", "foo", "bar"},
			{"REPLCONF", "listening-port", "6380"}, {"REPLCONF", "listening-port", "x"},
			{"REPLCONF", "ip-address", "10.0.0.1"}, {"REPLCONF", "ip-address", strings.Repeat("a", 255)}, {"REPLCONF", "ip-address", strings.Repeat("a", 256)},
			{"REPLCONF", "capa", "eof", "capa", "psync2", "capa", "other"},
			{"REPLCONF", "rdb-only", "1"}, {"REPLCONF", "rdb-only", "0"}, {"REPLCONF", "rdb-only", "2"}, {"REPLCONF", "rdb-only", "x"},
			{"REPLCONF", "rdb-filter-only", "x"}, {"REPLCONF", "listening-port", "1", "nosuch", "1"},
			{"PSYNC", "?"}, {"PSYNC", "?", "x"}, {"PSYNC", "id", "1", "FAILOVER"}, {"SYNC", "x"},
			{"MULTI"}, {"SYNC"}, {"PSYNC", "?", "-1"}, {"DISCARD"},
		} {
			p.same(args...)
		}
	}
}

// TestRDBShutdownSaveMemory: in memory mode with --save-rdb, SHUTDOWN SAVE
// writes the RDB file, which redis-server loads.
func TestRDBShutdownSaveMemory(t *testing.T) {
	requireKVS(t)
	requireRedis(t)
	t.Parallel()
	rdbFile := filepath.Join(testDir(t), "out", "dump.rdb")
	os.MkdirAll(filepath.Dir(rdbFile), 0o755)
	n := startKVS(t, KVSOptions{Extra: []string{"--save-rdb", rdbFile}})
	c := dialRaw(t, n.Addr)
	fillEveryEncoding(t, c)
	want := keyspaceOf(t, c)
	if r, err := c.do("SHUTDOWN", "SAVE"); err == nil {
		t.Fatalf("SHUTDOWN SAVE answered %q", r.Raw)
	}
	select {
	case <-n.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("still running after SHUTDOWN SAVE")
	}
	if err := n.exitErr(); err != nil {
		t.Fatalf("exit: %v\n%s", err, n.LogTail(20))
	}
	ref := redisOn(t, "redis", rdbFile)
	sameKeyspace(t, "redis-server on SHUTDOWN SAVE's file", want, keyspaceOf(t, dialRaw(t, ref.Addr)))
}

// syncFile sends cmd (SYNC or PSYNC) to addr and writes the RDB file it
// answers to path.
func syncFile(t *testing.T, addr string, cmd []string, path string) {
	t.Helper()
	c := dialRaw(t, addr)
	c.Write(string(encodeCommand(cmd...)))
	c.c.SetReadDeadline(time.Now().Add(ioTimeout))
	if cmd[0] == "PSYNC" {
		line, err := c.r.ReadString('\n')
		if err != nil || !regexp.MustCompile(`^\+FULLRESYNC [0-9a-f]{40} 0\r\n$`).MatchString(line) {
			t.Fatalf("PSYNC: %q %v", line, err)
		}
	}
	line, err := c.r.ReadString('\n')
	n, perr := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, "$"), "\r\n"))
	if err != nil || perr != nil {
		t.Fatalf("%s: %q %v", cmd[0], line, err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.r, b); err != nil {
		t.Fatalf("%s: the file's %d bytes: %v", cmd[0], n, err)
	}
	if rest, err := c.r.ReadByte(); err == nil {
		t.Fatalf("%s: a byte %q after the file; want the connection closed", cmd[0], rest)
	}
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
