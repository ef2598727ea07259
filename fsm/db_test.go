package fsm

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func (cmd Command) db(n uint16) Command { cmd.DB = n; return cmd }

// TestDatabasesKeyspaces checks that each database is a keyspace of its
// own for writes and reads, and what FLUSHDB and FLUSHALL empty.
func TestDatabasesKeyspaces(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		{1, c(OpSet, "k", "zero"), ok},
		{1, c(OpSet, "k", "three").db(3), ok},
		{1, c(OpSet, "only3", "x").db(3), ok},
		{1, c(OpGet, "k"), bulk("zero")},
		{1, c(OpGet, "k").db(3), bulk("three")},
		{1, c(OpGet, "k").db(2), nilr},
		{1, c(OpDBSize), in(1)},
		{1, c(OpDBSize).db(3), in(2)},
		{1, c(OpDBSize).db(7), in(0)},
		{1, c(OpExists, "only3"), in(0)},
		{1, c(OpKeys, "only*").db(3), bulks("only3")},
		{1, c(OpIncrBy, "n").i(5).db(1), in(5)},
		{1, c(OpDel, "k").db(3), in(1)},
		{1, c(OpGet, "k"), bulk("zero")},
		{1, c(OpFlushAll).fl(FlagFlushDB).db(3), ok},
		{1, c(OpDBSize).db(3), in(0)},
		{1, c(OpDBSize).db(1), in(1)},
		{1, c(OpDBSize), in(1)},
		{1, c(OpFlushAll).fl(FlagFlushDB), ok},
		{1, c(OpDBSize), in(0)},
		{1, c(OpDBSize).db(1), in(1)},
		{1, c(OpSet, "a", "b"), ok},
		{1, c(OpFlushAll), ok},
		{1, c(OpDBSize), in(0)},
		{1, c(OpDBSize).db(1), in(0)},
	})
	if s.cur != 0 {
		t.Fatalf("store left in database %d", s.cur)
	}
	if st := s.Stats(1); st.Bytes != 0 {
		t.Errorf("bytes after FLUSHALL: %d", st.Bytes)
	}
}

func TestDatabasesMoveSwapCopy(t *testing.T) {
	s := NewStore()
	run(t, s, []step{
		{1, c(OpSet, "k", "v").i(1000), ok},
		{1, c(OpMoveDB, "k").i(2), in(1)},
		{1, c(OpGet, "k"), nilr},
		{1, c(OpGet, "k").db(2), bulk("v")},
		{1, c(OpPTTL, "k").db(2), in(999)},
		{1, c(OpMoveDB, "nokey").i(2), in(0)},
		{1, c(OpSet, "k", "other"), ok},
		{1, c(OpMoveDB, "k").i(2), in(0)}, // exists there
		{1, c(OpGet, "k"), bulk("other")},
		{1, c(OpRPush, "l", "a", "b").db(5), in(2)},
		{1, c(OpSwapDB).i(0).i2(5), ok},
		{1, c(OpLRange, "l").i(0).i2(-1), bulks("a", "b")},
		{1, c(OpGet, "k").db(5), bulk("other")},
		{1, c(OpDBSize), in(1)},
		{1, c(OpCopyDB, "l", "l2").i(9), in(1)},
		{1, c(OpRPush, "l2", "c").db(9), in(3)},
		{1, c(OpLRange, "l").i(0).i2(-1), bulks("a", "b")},
		{1, c(OpCopyDB, "l", "l2").i(9), in(0)},
		{1, c(OpCopyDB, "l", "l2").i(9).fl(FlagReplace), in(1)},
		{1, c(OpLLen, "l2").db(9), in(2)},
		{1, c(OpCopyDB, "k", "k").i(0).db(5), in(1)},
		{1, c(OpGet, "k"), bulk("other")},
		{1, c(OpSwapDB).i(3).i2(4), ok}, // two empty databases
		{1, c(OpDBSize).db(3), in(0)},
	})
	if s.cur != 0 {
		t.Fatalf("store left in database %d", s.cur)
	}
}

// TestDatabasesSnapshot round-trips a store of several databases and
// checks that one using database 0 alone writes no database record.
func TestDatabasesSnapshot(t *testing.T) {
	s := NewStore()
	s.Apply(1, 1, []Command{
		c(OpSet, "a", "0"), c(OpSet, "a", "3").db(3), c(OpHSet, "h", "f", "v").db(3),
		c(OpSet, "z", "9").i(5000).db(9), c(OpSet, "gone", "x").db(4), c(OpDel, "gone").db(4),
	})
	b := snapshotBytes(t, s)
	if !bytes.Contains(b, []byte{recordDB, 3}) {
		t.Fatal("no record of database 3")
	}
	r := NewStore()
	if _, err := r.Restore(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, r), b) {
		t.Fatal("restored store writes another snapshot")
	}
	run(t, r, []step{
		{2, c(OpGet, "a"), bulk("0")},
		{2, c(OpGet, "a").db(3), bulk("3")},
		{2, c(OpHGet, "h", "f").db(3), bulk("v")},
		{2, c(OpPTTL, "z").db(9), in(4998)},
		{2, c(OpDBSize).db(4), in(0)},
	})
	if got := r.DBStats(2); len(got) != 3 || got[1] != (DBStats{DB: 3, Keys: 2}) || got[2] != (DBStats{DB: 9, Keys: 1, Expires: 1}) {
		t.Errorf("DBStats %+v", got)
	}
	if r.Stats(2).Bytes != s.Stats(2).Bytes {
		t.Errorf("bytes %d, want %d", r.Stats(2).Bytes, s.Stats(2).Bytes)
	}

	// Database 0 alone: the snapshot is that of a store that never had
	// databases (no record of another, even one used and emptied).
	one, other := NewStore(), NewStore()
	one.Apply(1, 1, []Command{c(OpSet, "a", "0")})
	other.Apply(1, 1, []Command{c(OpSet, "a", "0"), c(OpSet, "x", "y").db(2)})
	other.Apply(2, 1, []Command{c(OpDel, "x").db(2)})
	sb := snapshotBytes(t, other)
	if bytes.Contains(sb[1:], []byte{recordDB}) {
		t.Errorf("emptied database written: %x", sb)
	}
	if len(sb) != len(snapshotBytes(t, one)) {
		t.Errorf("snapshot of database 0 alone changed length")
	}

	// Databases out of order are refused.
	bad := NewStore()
	bad.Apply(1, 1, []Command{c(OpSet, "a", "2").db(2), c(OpSet, "a", "3").db(3)})
	bb := snapshotBytes(t, bad)
	i2 := bytes.Index(bb, []byte{recordDB, 2})
	i3 := bytes.Index(bb, []byte{recordDB, 3})
	bb[i2+1], bb[i3+1] = 3, 2
	if _, err := NewStore().Restore(bytes.NewReader(bb)); err == nil {
		t.Error("databases out of order restored")
	}
}

// TestEntryEncodingDB0Golden pins the encoding of database 0's commands to
// that of kvs before databases, byte for byte, and checks that another
// database's takes the DB field and level 4.
func TestEntryEncodingDB0Golden(t *testing.T) {
	cmds := []Command{c(OpSet, "k", "v").i(1700000000000), c(OpDel, "a", "b"), c(OpFlushAll).fl(FlagLazy)}
	got := hex.EncodeToString(EncodeEntry(nil, 1234, cmds))
	const want = "02a4130301000180a0abfef96202016b01760c0000020161016211010000" // written by kvs before databases
	if got != want {
		t.Fatalf("entry %s, want %s", got, want)
	}
	if Level(cmds) != 0 {
		t.Errorf("level %d", Level(cmds))
	}
	in := []Command{c(OpSet, "k", "v").db(3), c(OpGet, "k")}
	b := EncodeEntry(nil, 5, in[:1])
	if len(b) != EntrySize(5, in[:1]) {
		t.Errorf("EntrySize %d, encoded %d", EntrySize(5, in[:1]), len(b))
	}
	_, out, err := DecodeEntry(b)
	if err != nil || len(out) != 1 || out[0].DB != 3 {
		t.Fatalf("decode: %+v %v", out, err)
	}
	if Level(in[:1]) != 4 || Level([]Command{c(OpFlushAll).fl(FlagFlushDB)}) != 4 {
		t.Error("a command of another database, or FLUSHDB, below level 4")
	}
	if Level([]Command{ExecCommand(nil, nil, in)}) != 4 || Level([]Command{ExecCommand(nil, nil, []Command{c(OpSet, "k", "v")})}) != 0 {
		t.Error("a transaction's level does not follow its commands' databases")
	}
	list, err := DecodeCommands(AppendCommands(nil, in))
	if err != nil || list[0].DB != 3 || list[1].DB != 0 {
		t.Fatalf("command list: %+v %v", list, err)
	}
	// A DB field naming database 0 is not an encoding kvs writes.
	zero := []byte{2, 10, 1, byte(OpFlushAll), 0, fieldDB, 0, 0}
	if _, _, err := DecodeEntry(zero); err == nil {
		t.Error("DB field of 0 decoded")
	}
}

// TestDatabasesExec checks a transaction's reads in their own database
// and SWAPDB's touch of a key WATCH saw missing.
func TestDatabasesExec(t *testing.T) {
	s := NewStore()
	s.Apply(0, 1, []Command{c(OpSet, "x", "30").db(1), c(OpSet, "y", "in2").db(2)})
	exec := ExecCommand(nil, nil, []Command{c(OpGet, "y").db(2), c(OpSet, "z", "1").db(3), c(OpGet, "z").db(3)})
	if r := s.Apply(0, 1, []Command{exec})[0]; r.String() != arr(bulk("in2"), ok, bulk("1")).String() {
		t.Errorf("EXEC across databases: %v", r)
	}
	kv := s.WatchKey(1, []byte("x")) // missing in database 0
	s.Apply(0, 1, []Command{c(OpSwapDB).i(0).i2(1)})
	exec = ExecCommand([][]byte{[]byte("x")}, []KeyVersion{kv}, []Command{c(OpGet, "x")})
	if r := s.Apply(0, 1, []Command{exec})[0]; r.Kind != ReplyNilArray {
		t.Errorf("EXEC after SWAPDB brought a watched key: %v", r)
	}
	kv = s.WatchKey(1, []byte("nokey"))
	s.Apply(0, 1, []Command{c(OpSwapDB).i(0).i2(1)})
	exec = ExecCommand([][]byte{[]byte("nokey")}, []KeyVersion{kv}, []Command{c(OpGet, "x")})
	if r := s.Apply(0, 1, []Command{exec})[0]; r.Kind != ReplyArray {
		t.Errorf("EXEC after SWAPDB of a key neither database holds: %v", r)
	}
}

func TestDBKeyNames(t *testing.T) {
	for _, tc := range []struct {
		db  uint16
		key string
	}{{0, "k"}, {3, "k"}, {65535, ""}, {12, "\x00db3\x00x"}, {0, "\x00db3x"}} {
		name := DBKey(tc.db, tc.key)
		if db, key := SplitDBKey(name); db != tc.db || key != tc.key {
			t.Errorf("DBKey(%d, %q) = %q splits to %d %q", tc.db, tc.key, name, db, key)
		}
		if got := KeyOfDBKey(tc.db, name); got != tc.key {
			t.Errorf("KeyOfDBKey(%d, %q) = %q", tc.db, name, got)
		}
	}
	for _, name := range []string{"\x00db0\x00k", "\x00db03\x00k", "\x00db99999\x00k", "\x00dbx\x00k", "\x00db"} {
		if db, key := SplitDBKey(name); db != 0 || key != name {
			t.Errorf("SplitDBKey(%q) = %d %q", name, db, key)
		}
	}
}

// TestDatabasesConcurrent reads database 0 and others while writes switch
// databases: under -race, reads of database 0 (shared lock) never see the
// store in another database.
func TestDatabasesConcurrent(t *testing.T) {
	s := NewStore()
	s.Apply(0, 1, []Command{c(OpSet, "k", "zero"), c(OpSet, "k", "three").db(3)})
	done := make(chan struct{})
	errs := make(chan string, 4)
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 2000 {
				switch g {
				case 0:
					if r := s.Read(1, c(OpGet, "k")); r.String() != bulk("zero").String() {
						errs <- "db 0: " + r.String()
						return
					}
				case 1:
					if r := s.Read(1, c(OpGet, "k").db(3)); r.String() != bulk("three").String() {
						errs <- "db 3: " + r.String()
						return
					}
				case 2:
					s.Apply(0, 1, []Command{c(OpSet, "x", itoa(i)).db(uint16(1 + i%5)), c(OpIncrBy, "n").i(1)})
				case 3:
					s.Apply(0, 1, []Command{c(OpMoveDB, "x").db(uint16(1 + i%5)).i(int64(6 + i%3))})
					s.Read(1, c(OpDBSize).db(uint16(6+i%3)))
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
	if r := s.Read(1, c(OpGet, "n")); r.String() != bulk("2000").String() {
		t.Errorf("INCR in database 0: %v", r)
	}
}
