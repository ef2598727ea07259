package test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Corruption of every kind of file kvs keeps, flipped one bit at a time at
// several places: the start names the damaged file, a damaged newest
// snapshot falls back to the older one and the log after it without losing
// an acknowledged key, and --repair loses no more than it announced.

// flipAt flips one bit of the byte at off in the file (negative off: from
// the end).
func flipAt(t *testing.T, path string, off int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += len(b)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// walSnapshots returns a durable node's snapshot files, oldest first.
func walSnapshots(t *testing.T, n *Node) []string {
	t.Helper()
	snaps, _ := filepath.Glob(filepath.Join(n.DataDir(), "snapshot-*.snap"))
	sort.Strings(snaps)
	return snaps
}

// repairable is a durable node whose next start may add --repair and
// --repair-allow-empty.
type repairable struct {
	*Node
	repair, allowEmpty bool
}

func newRepairable(t *testing.T, extra ...string) *repairable {
	r := &repairable{Node: newKVS(t, "kvs-durable", KVSOptions{Durable: true, Extra: extra})}
	base := r.Args
	r.Args = func(n *Node) []string {
		args := base(n)
		if r.repair {
			args = append(args, "--repair")
		}
		if r.allowEmpty {
			args = append(args, "--repair-allow-empty")
		}
		return args
	}
	return r
}

// announcement is what a repair said it will cut.
type announcement struct {
	records, unreadable int
	keys                map[string]bool
	notListed           int // keys the announcement counted but did not list
}

var announceRe = regexp.MustCompile(`msg="wal: repair will cut these records"[^\n]*`)

// field returns the integer value of name=N in an slog text line.
func field(line, name string) int {
	m := regexp.MustCompile(` ` + name + `=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// announced parses the last repair announcement in the node's log.
func announced(t *testing.T, n *Node) announcement {
	t.Helper()
	b, _ := os.ReadFile(n.LogPath())
	m := announceRe.FindAllString(string(b), -1)
	if len(m) == 0 {
		t.Fatalf("--repair announced nothing before cutting:\n%s", n.LogTail(30))
	}
	line := m[len(m)-1]
	a := announcement{keys: map[string]bool{}, records: field(line, "records"),
		unreadable: field(line, "unreadable_records"), notListed: field(line, "keys_not_listed")}
	if k := regexp.MustCompile(` keys="?([^"]*)"?`).FindStringSubmatch(line); k != nil {
		for _, key := range strings.Fields(k[1]) {
			a.keys[key] = true
		}
	}
	return a
}

// checkLoss requires that the keys lost are within what was announced: no
// more keys than records cut, and none outside the announced keys beyond
// the records whose keys could not be read (and the keys counted but not
// listed).
func checkLoss(t *testing.T, a announcement, present []bool) {
	t.Helper()
	var lost []string
	unannounced := 0
	for i, ok := range present {
		if ok {
			continue
		}
		k := fmt.Sprintf("key:%03d", i)
		lost = append(lost, k)
		if !a.keys[k] {
			unannounced++
		}
	}
	if len(lost) > a.records {
		t.Errorf("--repair announced %d records but %d keys were lost: %v", a.records, len(lost), lost)
	}
	if unannounced > a.unreadable+a.notListed {
		t.Errorf("%d lost keys were not announced (%d records were unreadable, %d keys not listed); lost %v, announced %v",
			unannounced, a.unreadable, a.notListed, lost, a.keys)
	}
	t.Logf("announced %d records (%d unreadable, %d keys listed, %d more); lost %d keys",
		a.records, a.unreadable, len(a.keys), a.notListed, len(lost))
}

func TestCorruptionWALSegments(t *testing.T) {
	const keys = 120
	for _, tc := range []struct {
		name string
		seg  int // index into the segments, negative from the end
		off  int // byte to damage; negative from the end
	}{
		{"record header of an older segment", 2, 1},
		{"record payload of an older segment", 2, 70},
		{"last record of an older segment", 2, -2},
		{"first segment", 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newRepairable(t, "--wal-segment-bytes", "1024")
			n.Start()
			writeKeys(t, n.Node, keys)
			n.Stop()
			segs := segments(t, n.Node)
			if len(segs) < 4 {
				t.Fatalf("%d segments; the test needs several", len(segs))
			}
			seg := segs[tc.seg]
			flipAt(t, seg, tc.off)
			out := refuses(t, n.Node, filepath.Base(seg), "offset", "a repair would cut")
			if !strings.Contains(out, "repair would cut these records") {
				t.Errorf("the refusal does not say what --repair would cut:\n%s", out)
			}

			n.repair = true
			if tc.seg == 0 && tc.off < 40 {
				// The first record is damaged: nothing would be left.
				refuses(t, n.Node, "--repair-allow-empty", filepath.Base(seg))
				n.allowEmpty = true
			}
			n.Start()
			present := presentKeys(t, n.Node, keys)
			checkLoss(t, announced(t, n.Node), present)
			if broken, _ := filepath.Glob(filepath.Join(n.DataDir(), "*.broken")); len(broken) == 0 {
				t.Errorf("--repair kept no copy of what it cut")
			}
		})
	}

	t.Run("last record of the newest segment", func(t *testing.T) {
		t.Parallel()
		n := newRepairable(t, "--wal-segment-bytes", "1024")
		n.Start()
		writeKeys(t, n.Node, keys)
		n.Stop()
		segs := segments(t, n.Node)
		last := segs[len(segs)-1]
		flipAt(t, last, -2)
		// Indistinguishable from a torn write: cut, and said so.
		n.Start()
		present := presentKeys(t, n.Node, keys)
		for i := 0; i < keys-1; i++ {
			if !present[i] {
				t.Errorf("key:%03d lost: only the damaged last record may go", i)
			}
		}
		if b, _ := os.ReadFile(n.LogPath()); !strings.Contains(string(b), filepath.Base(last)) || !strings.Contains(string(b), "torn tail") {
			t.Errorf("the cut of the last record does not name %s:\n%s", last, n.LogTail(20))
		}
	})
}

func TestCorruptionWALSnapshots(t *testing.T) {
	const keys = 300
	// writeSnapshotted leaves a stopped node with at least two snapshots.
	writeSnapshotted := func(t *testing.T) *repairable {
		n := newRepairable(t, "--wal-segment-bytes", "1024", "--wal-compact-bytes", "2048")
		n.Start()
		writeKeys(t, n.Node, keys)
		n.Stop()
		if s := walSnapshots(t, n.Node); len(s) < 2 {
			t.Fatalf("%d snapshots; the test needs two", len(s))
		}
		return n
	}
	for _, tc := range []struct {
		where string
		off   int
	}{
		{"header", 9}, {"body", 100}, {"trailer", -3},
	} {
		t.Run("newest damaged in its "+tc.where, func(t *testing.T) {
			t.Parallel()
			n := writeSnapshotted(t)
			snaps := walSnapshots(t, n.Node)
			newest := snaps[len(snaps)-1]
			flipAt(t, newest, tc.off)
			n.Start()
			for i, ok := range presentKeys(t, n.Node, keys) {
				if !ok {
					t.Errorf("key:%03d lost: the older snapshot and the log after it hold it", i)
				}
			}
			b, _ := os.ReadFile(n.LogPath())
			for _, want := range []string{"level=ERROR", filepath.Base(newest), "offset", "fell back"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("the start does not say %q:\n%s", want, n.LogTail(20))
				}
			}
		})
	}

	// The case: the only snapshot is damaged and the log it
	// covered is gone (as an older kvs compacted). The start names the
	// snapshot; --repair refuses to serve an empty store unless told.
	t.Run("only snapshot damaged", func(t *testing.T) {
		t.Parallel()
		n := writeSnapshotted(t)
		snaps := walSnapshots(t, n.Node)
		newest := snaps[len(snaps)-1]
		for _, s := range snaps[:len(snaps)-1] {
			os.Remove(s)
		}
		idx, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(newest), "snapshot-"), ".snap"), 10, 64)
		segs := segments(t, n.Node)
		for i := 0; i+1 < len(segs); i++ {
			next, _ := strconv.ParseUint(strings.TrimSuffix(filepath.Base(segs[i+1]), ".wal"), 10, 64)
			if next-1 <= idx {
				os.Remove(segs[i])
			}
		}
		flipAt(t, newest, 100)
		refuses(t, n.Node, filepath.Base(newest), "checksum")
		n.repair = true
		refuses(t, n.Node, "--repair-allow-empty", filepath.Base(newest))
		if s := walSnapshots(t, n.Node); len(s) != 1 {
			t.Fatalf("a refused repair moved the snapshot: %v", s)
		}
		n.allowEmpty = true
		n.Start()
		if v := dialRaw(t, n.Addr).Do("DBSIZE"); v.Str != "0" && string(v.Raw) != ":0\r\n" {
			t.Errorf("DBSIZE after --repair --repair-allow-empty = %s, want 0", v)
		}
		if _, err := os.Stat(newest + ".broken"); err != nil {
			t.Errorf("the damaged snapshot was not kept as .broken: %v", err)
		}
	})
}

// copyTree copies the directory src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCorruptionCluster damages one stopped follower's raft files, one
// kind at a time, restoring them in between: a damaged newest raft
// snapshot (state.bin or meta.json) falls back to the older one and the
// log after it and loses nothing; a damaged raft.db stops the start with a
// message naming it and what to do, and --repair --repair-allow-empty
// moves the state aside so the node is caught up by the others.
func TestCorruptionCluster(t *testing.T) {
	t.Parallel()
	small := []string{"--raft-snapshot-entries", "64", "--raft-trailing-logs", "16", "--raft-snapshot-interval", "100ms"}
	nodes := startCluster(t, 3, small...)
	leader := waitLeader(t, nodes)
	f := followers(nodes, leader)[0]
	repair, allowEmpty := false, false
	base := f.Args
	f.Args = func(n *Node) []string {
		args := base(n)
		if repair {
			args = append(args, "--repair")
		}
		if allowEmpty {
			args = append(args, "--repair-allow-empty")
		}
		return args
	}
	const keys = 600
	writeKeys(t, leader, keys)
	last := fmt.Sprintf("key:%03d", keys-1)
	waitValue(t, f, last, fmt.Sprintf("value-%03d", keys-1))
	raftDir := filepath.Join(f.DataDir(), "raft")
	waitFor(t, "two raft snapshots on "+f.Name, func() error {
		if s, _ := filepath.Glob(filepath.Join(raftDir, "snapshots", "*", "state.bin")); len(s) < 2 {
			return fmt.Errorf("%d snapshots", len(s))
		}
		return nil
	})
	f.Stop()
	backup := filepath.Join(f.Dir, "raft-backup")
	copyTree(t, raftDir, backup)
	restore := func(t *testing.T) {
		t.Helper()
		if err := os.RemoveAll(raftDir); err != nil {
			t.Fatal(err)
		}
		copyTree(t, backup, raftDir)
	}
	newestSnap := func() string {
		s, _ := filepath.Glob(filepath.Join(raftDir, "snapshots", "*"))
		var dirs []string
		for _, d := range s {
			if st, err := os.Stat(d); err == nil && st.IsDir() && !strings.HasSuffix(d, ".tmp") {
				dirs = append(dirs, d)
			}
		}
		if len(dirs) < 2 {
			t.Fatalf("snapshots: %v", dirs)
		}
		// IDs are term-index-msec: compare numerically by term, then index.
		sort.Slice(dirs, func(i, j int) bool {
			a, b := strings.Split(filepath.Base(dirs[i]), "-"), strings.Split(filepath.Base(dirs[j]), "-")
			for k := 0; k < 2; k++ {
				x, _ := strconv.ParseUint(a[k], 10, 64)
				y, _ := strconv.ParseUint(b[k], 10, 64)
				if x != y {
					return x < y
				}
			}
			return dirs[i] < dirs[j]
		})
		return dirs[len(dirs)-1]
	}
	fallsBack := func(t *testing.T, damaged string) {
		t.Helper()
		mark := logSize(f)
		f.Start()
		for i, ok := range presentKeysEventually(t, f, keys) {
			if !ok {
				t.Errorf("key:%03d lost after falling back from %s", i, damaged)
			}
		}
		out := logSince(f, mark)
		if !strings.Contains(out, filepath.Base(filepath.Dir(damaged))) || !strings.Contains(out, "falling back") {
			t.Errorf("the start does not name the damaged %s or say it fell back:\n%s", damaged, out)
		}
		f.Stop()
		restore(t)
	}

	t.Run("state.bin", func(t *testing.T) {
		state := filepath.Join(newestSnap(), "state.bin")
		flipAt(t, state, 100)
		fallsBack(t, state)
	})
	for i, needle := range []string{`"Index":`, `"CRC":"`} {
		t.Run("meta.json "+strconv.Itoa(i), func(t *testing.T) {
			meta := filepath.Join(newestSnap(), "meta.json")
			b, _ := os.ReadFile(meta)
			j := strings.Index(string(b), needle)
			if j < 0 {
				t.Fatalf("%s not in %s", needle, meta)
			}
			flipAt(t, meta, j+len(needle)+1)
			fallsBack(t, meta)
		})
	}
	t.Run("raft.db meta pages", func(t *testing.T) {
		db := filepath.Join(raftDir, "raft.db")
		// bbolt keeps two meta pages; damage the magic of both.
		st, _ := os.Stat(db)
		page := 4096
		if st.Size() < int64(2*page) {
			t.Fatalf("raft.db is %d bytes", st.Size())
		}
		flipAt(t, db, 16)
		flipAt(t, db, page+16)
		refuses(t, f, "raft.db", "add the node to the cluster again")
		restore(t)
	})
	t.Run("raft log entry, then --repair", func(t *testing.T) {
		// An entry with others after it: damage to the final record of
		// the log is a torn write, cut off at start.
		file := flipInRaftLog(t, raftDir, fmt.Sprintf("value-%03d", keys/2))
		refuses(t, f, file, "corrupt", "add the node to the cluster again")
		value := fmt.Sprintf("value-%03d", keys-1)
		repair = true
		refuses(t, f, "--repair-allow-empty", raftDir)
		allowEmpty = true
		f.Start()
		waitValue(t, f, last, value)
		for i, ok := range presentKeysEventually(t, f, keys) {
			if !ok {
				t.Errorf("key:%03d missing after the repaired node caught up", i)
			}
		}
		if _, err := os.Stat(raftDir + ".broken"); err != nil {
			t.Errorf("the damaged raft state was not kept: %v", err)
		}
	})
}

// logSize and logSince read what a node logged after a point.
func logSize(n *Node) int64 {
	st, err := os.Stat(n.LogPath())
	if err != nil {
		return 0
	}
	return st.Size()
}

func logSince(n *Node, off int64) string {
	b, _ := os.ReadFile(n.LogPath())
	if int64(len(b)) < off {
		return string(b)
	}
	return string(b[off:])
}

// presentKeysEventually waits until a cluster node serves reads (a
// restarted follower refuses them until it has caught up), then reads.
func presentKeysEventually(t *testing.T, n *Node, count int) []bool {
	t.Helper()
	last := fmt.Sprintf("key:%03d", count-1)
	waitValue(t, n, last, fmt.Sprintf("value-%03d", count-1))
	return presentKeys(t, n, count)
}
