package server

import (
	"bytes"
	"errors"
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
