package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Backups end to end: `kvs backup` of a live node under write load, `kvs
// restore` into an empty data dir, and a node started on it. What must
// hold: every write acknowledged before the backup began is in the
// restore with its value; a write made while it ran is there with its
// value or absent; nothing else is there.

// backupUnderLoad runs writers against nodes, takes a backup of from
// once some writes are acknowledged, and returns the writes acknowledged
// before the backup began and every write attempted (the load's values
// follow from the keys: runClusterLoad writes v<w>.<i> to w<w>:<i>).
func backupUnderLoad(t *testing.T, nodes []*Node, from *Node, file string) (before map[string]string) {
	t.Helper()
	stop := make(chan struct{})
	load, wg := runClusterLoad(nodes, 4, stop)
	defer func() {
		close(stop)
		wg.Wait()
		load.mu.Lock()
		t.Logf("load: %d attempts, %d acknowledged, errors %v", load.attempts, len(load.acked), load.errors)
		load.mu.Unlock()
	}()
	waitFor(t, "acknowledged writes before the backup", func() error {
		load.mu.Lock()
		defer load.mu.Unlock()
		if len(load.acked) < 2000 {
			return fmt.Errorf("%d so far", len(load.acked))
		}
		return nil
	})
	load.mu.Lock()
	before = make(map[string]string, len(load.acked))
	for k, v := range load.acked {
		before[k] = v
	}
	load.mu.Unlock()
	out, code := runKVS(t, clusterWait, "backup", from.Addr, file)
	if code != 0 {
		t.Fatalf("kvs backup %s: exit %d\n%s", from.Addr, code, out)
	}
	t.Logf("kvs backup: %s", strings.TrimSpace(out))
	if strings.Contains(out, "warning") {
		t.Errorf("backup warned: %s", out)
	}
	// Writes go on a while after the backup, so some land after it.
	load.mu.Lock()
	n := len(load.acked)
	load.mu.Unlock()
	waitFor(t, "writes after the backup", func() error {
		load.mu.Lock()
		defer load.mu.Unlock()
		if len(load.acked) < n+200 {
			return fmt.Errorf("%d so far", len(load.acked)-n)
		}
		return nil
	})
	return before
}

// loadValue is the value runClusterLoad writes to key.
func loadValue(key string) (string, bool) {
	var w, i int
	if _, err := fmt.Sscanf(key, "w%02d:%06d", &w, &i); err != nil {
		return "", false
	}
	return fmt.Sprintf("v%d.%d", w, i), true
}

// checkRestored checks n's whole keyspace against the backup's promise.
func checkRestored(t *testing.T, n *Node, before map[string]string) {
	t.Helper()
	rc := dialRaw(t, n.Addr)
	keys := rc.Do("KEYS", "*")
	if keys.Kind != '*' {
		t.Fatalf("KEYS on %s: %s", n.Name, keys)
	}
	present := map[string]bool{}
	for i := 0; i < len(keys.Elems); i += 500 {
		part := keys.Elems[i:min(i+500, len(keys.Elems))]
		args := []string{"MGET"}
		for _, k := range part {
			args = append(args, k.Str)
		}
		vals := rc.Do(args...)
		for j, k := range part {
			if k.Str == "after-restore" { // the test's own write
				continue
			}
			want, ok := loadValue(k.Str)
			if !ok || vals.Elems[j].Str != want {
				t.Errorf("%s on %s = %q: never written", k.Str, n.Name, vals.Elems[j].Str)
			}
			present[k.Str] = true
		}
	}
	missing := 0
	for k := range before {
		if !present[k] {
			missing++
			if missing <= 5 {
				t.Errorf("%s, acknowledged before the backup began, is missing on %s", k, n.Name)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d writes acknowledged before the backup are missing on %s", missing, len(before), n.Name)
	}
	t.Logf("%s holds %d keys: all %d acknowledged before the backup, and %d written during it",
		n.Name, len(present), len(before), len(present)-len(before))
}

// TestBackupRestoreDurable backs up a memory and a durable node under load
// and restores each into a new durable node, which then takes writes and
// keeps them over a restart.
func TestBackupRestoreDurable(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		name := map[bool]string{false: "memory", true: "durable"}[durable]
		t.Run(name, func(t *testing.T) {
			src := startKVS(t, KVSOptions{Durable: durable})
			file := filepath.Join(testDir(t), "backup.kvsb")
			before := backupUnderLoad(t, []*Node{src}, src, file)

			dst := newKVS(t, "restored", KVSOptions{Durable: true})
			out, code := runKVS(t, clusterWait, "restore", file, "--data-dir", dst.DataDir())
			if code != 0 {
				t.Fatalf("kvs restore: exit %d\n%s", code, out)
			}
			t.Logf("kvs restore: %s", strings.TrimSpace(out))
			dst.Start()
			checkRestored(t, dst, before)
			if v := dialRaw(t, dst.Addr).Do("SET", "after-restore", "1"); string(v.Raw) != "+OK\r\n" {
				t.Fatalf("SET on the restored node: %s", v)
			}
			dst.Restart()
			checkRestored(t, dst, before)
			waitValue(t, dst, "after-restore", "1")

			out, code = runKVS(t, clusterWait, "restore", file, "--data-dir", dst.DataDir())
			if code == 0 || !strings.Contains(out, "not empty") {
				t.Errorf("restore into a data dir in use or with data: exit %d, %s", code, out)
			}
		})
	}
}

// TestBackupRestoreCluster backs up a follower of a three-node cluster
// under load, restores it as the first node of a new cluster, joins two
// fresh nodes, and finds the data on all three.
func TestBackupRestoreCluster(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	file := filepath.Join(testDir(t), "backup.kvsb")
	before := backupUnderLoad(t, nodes, followers(nodes, leader)[0], file)

	raftAddr := freeAddr(t)
	first := newKVS(t, "r1", KVSOptions{Durable: true, Extra: []string{"--node-id", "r1", "--raft-addr", raftAddr}})
	out, code := runKVS(t, clusterWait, "restore", file, "--data-dir", first.DataDir(), "--node-id", "r1", "--raft-addr", raftAddr)
	if code != 0 {
		t.Fatalf("kvs restore: exit %d\n%s", code, out)
	}
	first.Start()
	restored := []*Node{first}
	for _, id := range []string{"r2", "r3"} {
		n := newClusterNode(t, id, "--join", first.Addr)
		n.Start()
		restored = append(restored, n)
	}
	waitMembers(t, restored, 3)
	if l := waitLeader(t, restored); l != first {
		t.Errorf("%s leads the restored cluster, want r1", l.Name)
	}
	if v := dialRaw(t, restored[2].Addr).Do("SET", "after-restore", "1"); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("SET through a joined node: %s", v)
	}
	for _, n := range restored {
		waitValue(t, n, "after-restore", "1") // the joined nodes have caught up
		checkRestored(t, n, before)
	}

	// A follower with no leader to sync with still backs up what it has,
	// and says so.
	restored[0].Kill()
	restored[1].Kill()
	out, code = runKVS(t, clusterWait, "backup", restored[2].Addr, filepath.Join(testDir(t), "unsynced.kvsb"))
	if code != 0 || !strings.Contains(out, "warning: the node is a follower that could not reach a leader") {
		t.Errorf("backup of a follower without a leader: exit %d, %s", code, out)
	}
}

// TestRestoreRefusesDamagedBackup: a backup with one byte flipped in the
// middle, or cut short, is refused with an error naming the damage, and
// the data dir is not created.
func TestRestoreRefusesDamagedBackup(t *testing.T) {
	t.Parallel()
	src := startKVS(t, KVSOptions{})
	rc := dialRaw(t, src.Addr)
	for i := range 1000 {
		rc.Do("SET", fmt.Sprintf("key:%d", i), strings.Repeat("x", 50))
	}
	file := filepath.Join(testDir(t), "backup.kvsb")
	if out, code := runKVS(t, clusterWait, "backup", src.Addr, file); code != 0 {
		t.Fatalf("kvs backup: exit %d\n%s", code, out)
	}
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x01
	for _, c := range []struct {
		name, want string
		data       []byte
	}{
		{"flipped", "checksum mismatch", flipped},
		{"truncated", "truncated", good[:len(good)-100]},
		{"header only", "truncated", good[:20]},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := filepath.Join(testDir(t), c.name+".kvsb")
			if err := os.WriteFile(bad, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(testDir(t), c.name+"-data")
			out, code := runKVS(t, clusterWait, "restore", bad, "--data-dir", dir)
			if code != 1 || !strings.Contains(out, c.want) || !strings.Contains(out, "nothing was written") {
				t.Errorf("restore of a %s backup: exit %d, %q; want exit 1 naming %q", c.name, code, out, c.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s exists after a refused restore (%v)", dir, err)
			}
		})
	}
}

// TestSaveCommands: SAVE, BGSAVE and LASTSAVE answer as redis-server does
// and take a snapshot where kvs keeps its state: a wal compaction in
// durable mode, a raft snapshot in cluster mode; in memory mode they write
// nothing and succeed.
func TestSaveCommands(t *testing.T) {
	t.Parallel()
	saveAndCheck := func(t *testing.T, n *Node, snapshotted func() error) {
		t.Helper()
		rc := dialRaw(t, n.Addr)
		for i := range 100 {
			rc.Do("SET", fmt.Sprintf("save:%d", i), "v")
		}
		start := rc.Do("LASTSAVE")
		if start.Kind != ':' {
			t.Fatalf("LASTSAVE: %s", start)
		}
		if v := rc.Do("SAVE"); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("SAVE: %s", v)
		}
		if err := snapshotted(); err != nil {
			t.Fatalf("after SAVE: %v", err)
		}
		if v := rc.Do("LASTSAVE"); v.Kind != ':' || atoi(t, v.Str) < atoi(t, start.Str) {
			t.Errorf("LASTSAVE after SAVE: %s, before %s", v, start)
		}
		rc.Do("SET", "save:more", "v")
		if v := rc.Do("BGSAVE"); string(v.Raw) != "+Background saving started\r\n" {
			t.Fatalf("BGSAVE: %s", v)
		}
		waitFor(t, "BGSAVE to finish", func() error {
			info := rc.Do("INFO", "persistence").Str
			if !strings.Contains(info, "rdb_bgsave_in_progress:0\r\n") || !strings.Contains(info, "rdb_last_bgsave_status:ok\r\n") {
				return fmt.Errorf("INFO persistence:\n%s", info)
			}
			return nil
		})
	}
	t.Run("memory", func(t *testing.T) {
		// Nothing to write: the saves succeed, and LASTSAVE moves.
		saveAndCheck(t, startKVS(t, KVSOptions{}), func() error { return nil })
	})
	t.Run("durable", func(t *testing.T) {
		n := startKVS(t, KVSOptions{Durable: true})
		saveAndCheck(t, n, func() error {
			info := dialRaw(t, n.Addr).Do("INFO", "persistence").Str
			if !strings.Contains(info, "wal_compactions:1\r\n") || strings.Contains(info, "wal_snapshot_index:0\r\n") {
				return fmt.Errorf("no compaction in INFO persistence:\n%s", info)
			}
			return nil
		})
	})
	t.Run("cluster", func(t *testing.T) {
		nodes := startCluster(t, 1)
		saveAndCheck(t, nodes[0], func() error {
			entries, err := os.ReadDir(filepath.Join(nodes[0].DataDir(), "raft", "snapshots"))
			if err != nil || len(entries) == 0 {
				return fmt.Errorf("no raft snapshot: %d entries, %v", len(entries), err)
			}
			return nil
		})
	})
	t.Run("redis", func(t *testing.T) {
		r := startRedis(t)
		rc := dialRaw(t, r.Addr)
		if v := rc.Do("SAVE"); string(v.Raw) != "+OK\r\n" {
			t.Errorf("redis-server SAVE: %s", v)
		}
		if v := rc.Do("BGSAVE"); string(v.Raw) != "+Background saving started\r\n" {
			t.Errorf("redis-server BGSAVE: %s", v)
		}
		if v := rc.Do("BGSAVE", "NOW"); v.Str != "ERR syntax error" {
			t.Errorf("redis-server BGSAVE NOW: %s", v)
		}
	})
}

func atoi(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestBackupWithPassword: kvs backup logs in with --user/--password (or
// $REDISCLI_AUTH) to a node with a password, and says why when it cannot.
func TestBackupWithPassword(t *testing.T) {
	t.Parallel()
	n := startKVS(t, KVSOptions{Extra: []string{"--requirepass", "s3cret"}})
	c := dialRaw(t, n.Addr)
	if v := c.Do("AUTH", "s3cret"); v.Str != "OK" {
		t.Fatalf("AUTH: %s", v)
	}
	c.Do("SET", "k", "v")
	file := filepath.Join(testDir(t), "auth.kvsb")
	out, code := runKVS(t, clusterWait, "backup", n.Addr, file)
	if code == 0 || !strings.Contains(out, "NOAUTH") {
		t.Fatalf("backup without a password: exit %d, %q; want NOAUTH", code, out)
	}
	out, code = runKVS(t, clusterWait, "backup", "--password", "wrong", n.Addr, file)
	if code == 0 || !strings.Contains(out, "refused AUTH: WRONGPASS") {
		t.Fatalf("backup with a wrong password: exit %d, %q", code, out)
	}
	if out, code = runKVS(t, clusterWait, "backup", "--password", "s3cret", n.Addr, file); code != 0 {
		t.Fatalf("backup with the password: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
}
