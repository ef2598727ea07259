package server

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kvs/backup"
	"kvs/fsm"
)

// TestBackupStream: KVS.BACKUP answers the pipeline's earlier commands,
// then streams a backup that verifies and restores to the store's keys,
// then closes the connection; on an event loop and on a goroutine.
func TestBackupStream(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run("goroutines="+strconv.FormatBool(goroutines), func(t *testing.T) {
			s := startServer(t, Config{ConnGoroutines: goroutines})
			rc := dialRaw(t, s)
			for i := range 3000 {
				rc.do("SET", "k"+itoa(i), strings.Repeat("v", 100)+itoa(i))
			}
			rc.send(append(encodeCommand("PING"), encodeCommand("KVS.BACKUP")...))
			if got := rc.reply(); got != "+PONG\r\n" {
				t.Fatalf("PING before the backup: %q", got)
			}
			rc.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			var file bytes.Buffer
			if _, err := backup.ReadStream(rc.br, &file); err != nil {
				t.Fatal(err)
			}
			h, off, n, err := backup.Verify(bytes.NewReader(file.Bytes()), int64(file.Len()))
			if err != nil {
				t.Fatal(err)
			}
			if h.Mode != backup.ModeMemory || h.Flags != 0 {
				t.Fatalf("header %+v", h)
			}
			st := fsm.NewStore()
			if _, err := st.Restore(bytes.NewReader(file.Bytes()[off : off+n])); err != nil {
				t.Fatal(err)
			}
			if k := st.Stats(time.Now().UnixMilli()).Keys; k != 3000 {
				t.Fatalf("restored %d keys, want 3000", k)
			}
			if rest, _ := rc.readEOF(); rest != "" {
				t.Fatalf("after the stream: %q, want the connection closed", rest)
			}
		})
	}
}

func TestBackupRefusedInMulti(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	rc.do("MULTI")
	if got := rc.do("KVS.BACKUP"); got != "-"+errNoMulti+"\r\n" {
		t.Fatalf("KVS.BACKUP in MULTI: %q", got)
	}
	if got := rc.do("EXEC"); !strings.HasPrefix(got, "-EXECABORT") {
		t.Fatalf("EXEC: %q", got)
	}
}

// fakeSaver counts saves; each waits for release when it is set.
type fakeSaver struct {
	mu      sync.Mutex
	n       int
	err     error
	release chan struct{}
}

func (f *fakeSaver) Save() error {
	if f.release != nil {
		<-f.release
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return f.err
}

func (f *fakeSaver) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func TestSaveCommands(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		// Nothing to write, and a success, with LASTSAVE its time.
		s := startServer(t, Config{})
		rc := dialRaw(t, s)
		before := time.Now().Unix()
		if got := rc.do("SAVE"); got != "+OK\r\n" {
			t.Errorf("SAVE: %q", got)
		}
		if got := rc.do("BGSAVE"); got != "+Background saving started\r\n" {
			t.Errorf("BGSAVE: %q", got)
		}
		eventually(t, "BGSAVE to end", func() bool {
			return strings.Contains(rc.do("INFO", "persistence"), "rdb_bgsave_in_progress:0\r\n")
		})
		got := rc.do("LASTSAVE")
		if n, err := strconv.ParseInt(strings.Trim(got, ":\r\n"), 10, 64); err != nil || n < before {
			t.Errorf("LASTSAVE: %q, want a time from %d on", got, before)
		}
	})
	t.Run("saver", func(t *testing.T) {
		f := &fakeSaver{release: make(chan struct{})}
		s := startServer(t, Config{Saver: f})
		rc := dialRaw(t, s)
		if got := rc.do("BGSAVE", "NOW"); got != "-ERR syntax error\r\n" {
			t.Errorf("BGSAVE NOW: %q", got)
		}
		if got := rc.do("BGSAVE"); got != "+Background saving started\r\n" {
			t.Fatalf("BGSAVE: %q", got)
		}
		if got := rc.do("BGSAVE"); got != "-"+errBgsaveInProgress+"\r\n" {
			t.Errorf("second BGSAVE: %q", got)
		}
		if got := rc.do("SAVE"); got != "-"+errBgsaveInProgress+"\r\n" {
			t.Errorf("SAVE during BGSAVE: %q", got)
		}
		if got := rc.do("BGSAVE", "SCHEDULE"); got != "+Background saving scheduled\r\n" {
			t.Errorf("BGSAVE SCHEDULE: %q", got)
		}
		if !strings.Contains(rc.do("INFO", "persistence"), "rdb_bgsave_in_progress:1") {
			t.Error("INFO persistence does not show the save in progress")
		}
		close(f.release)
		eventually(t, "both saves done", func() bool {
			return f.count() == 2 && strings.Contains(rc.do("INFO", "persistence"), "rdb_bgsave_in_progress:0")
		})
		if got := rc.do("SAVE"); got != "+OK\r\n" {
			t.Errorf("SAVE: %q", got)
		}
		f.mu.Lock()
		f.err = errors.New("disk on fire")
		f.mu.Unlock()
		before := rc.do("LASTSAVE")
		if got := rc.do("SAVE"); got != "-ERR disk on fire\r\n" {
			t.Errorf("failing SAVE: %q", got)
		}
		if got := rc.do("LASTSAVE"); got != before {
			t.Errorf("LASTSAVE moved on a failed save: %q, then %q", before, got)
		}
		if !strings.Contains(rc.do("INFO", "persistence"), "rdb_last_bgsave_status:err") {
			t.Error("INFO persistence does not report the failed save")
		}
	})
}

// readBackup sends KVS.BACKUP with args on a new connection to s and
// returns the verified backup's header and its groups' stores by id.
func readBackup(t *testing.T, s *Server, args ...string) (backup.Header, map[uint32]*fsm.Store) {
	t.Helper()
	rc := dialRaw(t, s)
	rc.send(encodeCommand(append([]string{"KVS.BACKUP"}, args...)...))
	rc.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var file bytes.Buffer
	if _, err := backup.ReadStream(rc.br, &file); err != nil {
		t.Fatalf("KVS.BACKUP %q: %v", args, err)
	}
	h, off, n, err := backup.Verify(bytes.NewReader(file.Bytes()), int64(file.Len()))
	if err != nil {
		t.Fatal(err)
	}
	stores := map[uint32]*fsm.Store{}
	err = backup.ReadParts(bytes.NewReader(file.Bytes()[off:off+n]), func(id uint32, index uint64, snap io.Reader) error {
		st := fsm.NewStore()
		_, err := st.Restore(snap)
		stores[id] = st
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, stores
}

// TestBackupGroups: on a node that holds some of the cluster's groups,
// KVS.BACKUP refuses, naming one it lacks, and KVS.BACKUP GROUPS streams
// the groups named, each its own part, in group order; names of no group,
// or of one the node lacks, are refused.
func TestBackupGroups(t *testing.T) {
	p := startSplitPair(t)
	k1, k2 := keyIn(0, 2, 0), keyIn(1, 2, 0) // of groups 1 and 2
	rc := dialRaw(t, p.n1)
	for _, k := range []string{k1, k2, "{" + k2 + "}b"} {
		if got := rc.do("SET", k, "v"); got != "+OK\r\n" {
			t.Fatalf("SET %s: %q", k, got)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "-ERR backup: this node holds no replica of group 2 (each group is on --replicas nodes): name the groups it holds with KVS.BACKUP GROUPS, as kvs backup does\r\n"},
		{[]string{"GROUPS", "0", "2"}, "-ERR backup: this node holds no replica of group 2 (each group is on --replicas nodes): name the groups it holds with KVS.BACKUP GROUPS, as kvs backup does\r\n"},
		{[]string{"GROUPS"}, "-ERR syntax error\r\n"},
		{[]string{"SOME", "1"}, "-ERR syntax error\r\n"},
		{[]string{"GROUPS", "3"}, "-ERR backup: no group 3 (the cluster's groups are 0 to 2)\r\n"},
		{[]string{"GROUPS", "-1"}, "-ERR backup: no group -1 (the cluster's groups are 0 to 2)\r\n"},
		{[]string{"GROUPS", "one"}, "-ERR backup: no group one (the cluster's groups are 0 to 2)\r\n"},
		{[]string{"GROUPS", "1", "1"}, "-ERR backup: group 1 named twice\r\n"},
	} {
		if got := rc.do(append([]string{"KVS.BACKUP"}, c.args...)...); got != c.want {
			t.Errorf("KVS.BACKUP %q on n1: %q, want %q", c.args, got, c.want)
		}
	}

	h, stores := readBackup(t, p.n1, "groups", "1", "0")
	if h.Mode != backup.ModeCluster || h.Flags != backup.FlagGroups || len(stores) != 2 {
		t.Fatalf("KVS.BACKUP GROUPS 1 0 on n1: header %+v, groups %d", h, len(stores))
	}
	if got := keysOf(stores[1]); len(got) != 1 || got[0] != k1 {
		t.Errorf("group 1's part holds %q, want %s", got, k1)
	}
	if stores[0] == nil {
		t.Error("no part of group 0")
	}
	h, stores = readBackup(t, p.n2, "GROUPS", "2")
	if h.Flags != backup.FlagGroups || len(stores) != 1 || len(keysOf(stores[2])) != 2 {
		t.Errorf("KVS.BACKUP GROUPS 2 on n2: header %+v, groups %v", h, stores)
	}

	single := dialRaw(t, startServer(t, Config{}))
	if got := single.do("KVS.BACKUP", "GROUPS", "0"); got != "-ERR backup: GROUPS needs a cluster of several groups; this node's data is a single group\r\n" {
		t.Errorf("KVS.BACKUP GROUPS 0 on a node of one group: %q", got)
	}
}

// TestBackupRefusedMidMove: KVS.BACKUP refuses a node whose groups have a
// move of slots in flight, and takes it again once the move is over.
func TestBackupRefusedMidMove(t *testing.T) {
	srv, stores := startSharded(t, 2)
	rs := []fsm.SlotRange{{Lo: 0, Hi: 9}}
	if r := stores[1].Apply(1, 1, []fsm.Command{fsm.MoveBegin(1, rs)}); r[0].Kind == fsm.ReplyError {
		t.Fatal(r[0].Str)
	}
	rc := dialRaw(t, srv)
	if got := rc.do("KVS.BACKUP"); got != "-"+errBackupMoving+"\r\n" {
		t.Errorf("KVS.BACKUP mid-move: %q", got)
	}
	if r := stores[1].Apply(2, 1, []fsm.Command{fsm.MoveCancel(1)}); r[0].Kind == fsm.ReplyError {
		t.Fatal(r[0].Str)
	}
	if got := dialRaw(t, srv).do("KVS.BACKUP"); !strings.HasPrefix(got, "$?\r\n") {
		t.Errorf("KVS.BACKUP after the move: %.40q", got)
	}
}
