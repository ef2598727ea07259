package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// rdbDBs are the databases the RDB tests of several databases fill.
var rdbDBs = []int{0, 3, 9}

// fillDBs writes keys of every type, some with a deadline, into each of
// rdbDBs, a key of the same name in each with a value of its own.
func fillDBs(t *testing.T, c *rawConn) {
	t.Helper()
	for _, db := range rdbDBs {
		d := strconv.Itoa(db)
		do := func(args ...string) {
			if v := c.Do(args...); v.Kind == '-' {
				t.Fatalf("%v: %s", args, v)
			}
		}
		do("SELECT", d)
		do("SET", "same", "in db "+d)
		do("SET", "str:"+d, "v", "PXAT", "4102444800000") // a fixed deadline: the same in every server
		do("RPUSH", "list:"+d, "a", "b", d)
		do("HSET", "hash:"+d, "f", d)
		do("SADD", "set:"+d, "x", d)
		do("ZADD", "zset:"+d, d, "m")
		// A stream with a group, a consumer's pending entry (its
		// delivery time fixed, so that every server has the same) and a
		// consumer without.
		do("XADD", "stream:"+d, "1-1", "f", d)
		do("XADD", "stream:"+d, "2-1", "f", "v", "g", d)
		do("XGROUP", "CREATE", "stream:"+d, "g", "0")
		do("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "stream:"+d, ">")
		do("XCLAIM", "stream:"+d, "g", "alice", "0", "1-1", "TIME", "1700000000000", "RETRYCOUNT", "3")
		do("XGROUP", "CREATECONSUMER", "stream:"+d, "g", "bob")
		for i := 0; i < 20*(db+1); i++ {
			do("SET", fmt.Sprintf("k:%d:%d", db, i), strconv.Itoa(i))
		}
	}
	c.Do("SELECT", "0")
}

// dbsKeyspace is keyspaceOf of each database 0 to 15, by database; the
// connection is left in database 0.
func dbsKeyspace(t *testing.T, c *rawConn) map[int]map[string]string {
	t.Helper()
	out := map[int]map[string]string{}
	for db := 0; db < 16; db++ {
		if v := c.Do("SELECT", strconv.Itoa(db)); v.Str != "OK" {
			t.Fatalf("SELECT %d: %s", db, v)
		}
		if m := keyspaceOf(t, c); len(m) > 0 {
			out[db] = m
		}
	}
	c.Do("SELECT", "0")
	return out
}

func sameDBs(t *testing.T, what string, want, got map[int]map[string]string) {
	t.Helper()
	for db, m := range want {
		sameKeyspace(t, fmt.Sprintf("%s, db %d", what, db), m, got[db])
	}
	for db := range got {
		if _, ok := want[db]; !ok {
			t.Errorf("%s: db %d has %d keys, and should have none", what, db, len(got[db]))
		}
	}
}

// TestRDBDatabases: a redis-server file with keys in databases 0, 3 and 9
// restores each key into its database, says what it loaded per database,
// and is refused by a restore for fewer databases; and the files kvs
// writes (SYNC, PSYNC, redis-cli --rdb, --save-rdb) carry every database,
// which redis-server loads into the same databases.
func TestRDBDatabases(t *testing.T) {
	requireKVS(t)
	requireRedis(t)
	t.Parallel()
	src := newRedis(t, "redis-dbs")
	src.Start()
	rc := dialRaw(t, src.Addr)
	fillDBs(t, rc)
	if v := rc.Do("SAVE"); v.Str != "OK" {
		t.Fatalf("SAVE: %s", v)
	}
	want := dbsKeyspace(t, rc)
	if len(want) != len(rdbDBs) {
		t.Fatalf("redis-server has keys in %d databases", len(want))
	}
	if st := want[3]["stream:3"]; !strings.Contains(st, "1-1 alice 1700000000000 3") || !strings.Contains(st, "name bob") {
		t.Fatalf("the stream of db 3 lacks its PEL or consumer: %s", st)
	}
	file := filepath.Join(src.Dir, "dump.rdb")

	t.Run("restore", func(t *testing.T) {
		dst := newKVS(t, "restored-dbs", KVSOptions{Durable: true})
		out, code := runKVS(t, clusterWait, "restore", "--rdb", file, "--data-dir", dst.DataDir())
		if code != 0 {
			t.Fatalf("kvs restore --rdb: exit %d\n%s", code, out)
		}
		for _, db := range rdbDBs {
			line := fmt.Sprintf("%d keys in db %d (1 with an expiry)", len(want[db]), db)
			if !strings.Contains(out, line) {
				t.Errorf("the restore says %q; want %q", out, line)
			}
		}
		dst.Start()
		sameDBs(t, "restored", want, dbsKeyspace(t, dialRaw(t, dst.Addr)))
	})
	t.Run("too-few-databases", func(t *testing.T) {
		dir := filepath.Join(testDir(t), "data-few")
		out, code := runKVS(t, clusterWait, "restore", "--rdb", file, "--data-dir", dir, "--databases", "9")
		if code != 1 || !strings.Contains(out, "is in db 9") || !strings.Contains(out, "more databases than the 9") ||
			!strings.Contains(out, "nothing was written") {
			t.Errorf("restore with --databases 9: exit %d, %s", code, out)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("the refused restore left %d entries in the data dir", len(ents))
		}
	})
	t.Run("skip-other-dbs", func(t *testing.T) {
		dst := newKVS(t, "restored-db0", KVSOptions{Durable: true})
		out, code := runKVS(t, clusterWait, "restore", "--rdb", file, "--data-dir", dst.DataDir(), "--skip-other-dbs")
		if code != 0 || !strings.Contains(out, fmt.Sprintf("%d keys of db 9 skipped", len(want[9]))) {
			t.Fatalf("kvs restore --rdb --skip-other-dbs: exit %d\n%s", code, out)
		}
		dst.Start()
		sameDBs(t, "restored db 0", map[int]map[string]string{0: want[0]}, dbsKeyspace(t, dialRaw(t, dst.Addr)))
	})

	t.Run("export", func(t *testing.T) {
		rdbFile := filepath.Join(testDir(t), "out", "kvs.rdb")
		os.MkdirAll(filepath.Dir(rdbFile), 0o755)
		kv := startKVS(t, KVSOptions{Durable: true, Extra: []string{"--save-rdb", rdbFile}})
		kc := dialRaw(t, kv.Addr)
		fillDBs(t, kc)
		sameDBs(t, "kvs", want, dbsKeyspace(t, kc))
		if v := kc.Do("SAVE"); v.Str != "OK" {
			t.Fatalf("SAVE: %s", v)
		}
		ref := redisOn(t, "redis-save-dbs", rdbFile)
		sameDBs(t, "redis-server on SAVE's file", want, dbsKeyspace(t, dialRaw(t, ref.Addr)))
		for _, cmd := range [][]string{{"SYNC"}, {"PSYNC", "?", "-1"}} {
			f := filepath.Join(testDir(t), strings.ToLower(cmd[0])+"-dbs", "dump.rdb")
			syncFile(t, kv.Addr, cmd, f)
			ref := redisOn(t, "redis-dbs-"+strings.ToLower(cmd[0]), f)
			sameDBs(t, "redis-server on "+cmd[0]+"'s file", want, dbsKeyspace(t, dialRaw(t, ref.Addr)))
		}
		if cli, err := exec.LookPath("redis-cli"); err == nil {
			f := filepath.Join(testDir(t), "cli-dbs", "dump.rdb")
			os.MkdirAll(filepath.Dir(f), 0o755)
			host, port, _ := strings.Cut(kv.Addr, ":")
			out, err := exec.Command(cli, "-h", host, "-p", port, "--rdb", f).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Transfer finished with success") {
				t.Fatalf("redis-cli --rdb: %v\n%s", err, out)
			}
			ref := redisOn(t, "redis-dbs-cli", f)
			sameDBs(t, "redis-server on redis-cli --rdb's file", want, dbsKeyspace(t, dialRaw(t, ref.Addr)))
		}
	})
}
