package fsm

import (
	"strconv"
	"strings"
)

// Numbered databases (SELECT). A store holds one keyspace per database:
// database 0's always, the others' from their first use. Every command
// names its database (Command.DB); apply and read switch the store to it
// for the command and back to database 0 after it, so the code of every
// op works on s.keys, "the current database", as it did when there was
// one. Switching is a swap of two pointers and a counter under the
// exclusive lock: an apply holds it anyway; a read of a database other
// than 0 takes it instead of the shared one (reads of database 0, the
// common case, are untouched and still run side by side).
//
// At rest (no command running) s.cur is 0 and s.keys and s.bytes are
// database 0's; dbs[d] holds database d's keyspace and its byte count for
// every other database that has been used, and is stale for the current
// one.

// MaxDB is the highest database number a command may name: kvs keeps at
// most 65536 databases (the databases parameter is capped there).
const MaxDB = 1<<16 - 1

// dbKeys is one database's keyspace and the bytes its items hold.
type dbKeys struct {
	keys  *keyspace
	bytes int64
}

// selectLocked makes db the current database, allocating its keyspace on
// first use. The caller holds the exclusive lock (or is building a store
// nobody else sees).
func (s *Store) selectLocked(db uint16) {
	if db == s.cur {
		return
	}
	if int(db) >= len(s.dbs) || int(s.cur) >= len(s.dbs) {
		n := max(int(db), int(s.cur)) + 1
		grown := make([]dbKeys, n)
		copy(grown, s.dbs)
		s.dbs = grown
	}
	s.dbs[s.cur] = dbKeys{keys: s.keys, bytes: s.bytes}
	d := &s.dbs[db]
	if d.keys == nil {
		d.keys = newKeys()
		d.keys.acc = s.keys.acc   // one table of access records for every database
		d.keys.mods = s.keys.mods // and one record of changed keys (tracking)
		d.bytes = 0
	}
	// The write counter is the store's: the database switched to goes on
	// from it, so a version is never given twice, whichever databases the
	// items end up in (MOVE, SWAPDB).
	if v := &d.keys.vers; v.now < s.keys.vers.now {
		v.now = s.keys.vers.now
	}
	d.keys.vers.clock = s.keys.vers.clock
	s.keys, s.bytes = d.keys, d.bytes
	s.cur = db
}

// dbLocked returns database db's keyspace and bytes without switching to
// it: nil when it was never used.
func (s *Store) dbLocked(db uint16) dbKeys {
	if db == s.cur {
		return dbKeys{keys: s.keys, bytes: s.bytes}
	}
	if int(db) < len(s.dbs) {
		return s.dbs[db]
	}
	return dbKeys{}
}

// setDBLocked replaces database db's keyspace and byte count.
func (s *Store) setDBLocked(db uint16, d dbKeys) {
	if db == s.cur {
		s.keys, s.bytes = d.keys, d.bytes
		return
	}
	if int(db) >= len(s.dbs) {
		grown := make([]dbKeys, int(db)+1)
		copy(grown, s.dbs)
		s.dbs = grown
	}
	s.dbs[db] = d
}

// totalBytesLocked is the bytes held by every database's items.
func (s *Store) totalBytesLocked() int64 {
	n := s.bytes
	for i := range s.dbs {
		if uint16(i) != s.cur {
			n += s.dbs[i].bytes
		}
	}
	return n
}

// otherDBsLocked calls f for each database other than the current one
// that has been used, in ascending order.
func (s *Store) otherDBsLocked(f func(db uint16, d dbKeys)) {
	for i := range s.dbs {
		if uint16(i) != s.cur && s.dbs[i].keys != nil {
			f(uint16(i), s.dbs[i])
		}
	}
}

// applyInDBLocked applies c, a command of a database other than the
// current one, in its database.
func (s *Store) applyInDBLocked(now int64, c *Command) Reply {
	prev := s.cur
	s.selectLocked(c.DB)
	r := s.applyLocked(now, c)
	s.selectLocked(prev)
	return r
}

// unlockRead releases the lock a read took: the shared one for database
// 0, the exclusive one (switching back to database 0 first) for another,
// or for a script that runs again under it (replyRetryExclusive).
func (s *Store) unlockRead(scripts bool) {
	if s.cur != 0 || s.excl {
		s.selectLocked(0)
		s.unlock(true, scripts)
		return
	}
	s.unlock(false, scripts)
}

// replyRetryExclusive is what a read-only script of database 0 that read
// another database returns, run under the shared lock: the read runs
// again under the exclusive lock (readInDB), where it may switch. Only
// the store's read functions see it.
var replyRetryExclusive = Reply{Kind: ReplyError, Str: "\x00kvs: run again under the exclusive lock"}

func isRetryExclusive(r *Reply) bool {
	return r.Kind == ReplyError && r.Str == replyRetryExclusive.Str
}

// readInDB is ReadRef of a command of a database other than 0 (or of a
// script of database 0 that reads another), under the exclusive lock (serving: as ReadServing, reporting false when a script
// turned busy while it waited).
func (s *Store) readInDB(now int64, c *Command, whileBusy func(), serving bool) (Reply, bool) {
	sp := s.checkRead(c)
	scripts := isScriptOp(c.Op)
	if serving {
		if !s.lockServing(true, scripts) {
			return Reply{}, false
		}
	} else {
		s.lockWaiting(true, scripts)
	}
	s.selectLocked(c.DB)
	return s.readHeld(now, c, sp, scripts, whileBusy), true
}

// DBStats is one non-empty database's line of INFO keyspace.
type DBStats struct {
	DB      int
	Keys    int // keys not expired
	Expires int // of those, keys with a deadline
}

// DBStats returns the key counts of each database holding keys at now,
// in ascending order of database; database 0's are Stats' (slots the
// store does not serve left out).
func (s *Store) DBStats(now int64) []DBStats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.dbStatsLocked(now)
}

func (s *Store) dbStatsLocked(now int64) []DBStats {
	var out []DBStats
	if st := s.statsLocked(now); st.Keys > 0 {
		out = append(out, DBStats{DB: 0, Keys: st.Keys, Expires: st.Expires})
	}
	for i := 1; i < len(s.dbs); i++ {
		ks := s.dbs[i].keys
		if ks == nil || ks.Len() == 0 {
			continue
		}
		dead := ks.countExpired(now)
		if ks.Len()-dead > 0 {
			out = append(out, DBStats{DB: i, Keys: ks.Len() - dead, Expires: ks.TTLs() - dead})
		}
	}
	return out
}

// OtherDBs returns the databases other than 0 that hold keys, ascending:
// those active expiry visits besides database 0.
func (s *Store) OtherDBs() []int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []int
	s.otherDBsLocked(func(db uint16, d dbKeys) {
		if d.keys.Len() > 0 {
			out = append(out, int(db))
		}
	})
	return out
}

// ExpiredKeysInDB is ExpiredKeys of database db (not 0); the keys are
// copies.
func (s *Store) ExpiredKeysInDB(db int, now int64, max int) [][]byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if db <= 0 || db > MaxDB || max <= 0 {
		return nil
	}
	d := s.dbLocked(uint16(db))
	if d.keys == nil {
		return nil
	}
	var out [][]byte
	d.keys.earliest(now, func(it *item) bool {
		out = append(out, []byte(it.key))
		return len(out) < max
	})
	return out
}

// The ops across two databases. They are numbered in the keyspace ops'
// range and need level 4.
const (
	// OpMoveDB (MOVE): Args[0]=key, Int=the destination database (not
	// the command's, checked by the server). Moves the key with its TTL
	// unless the destination holds it. Reply :1 moved, :0 not.
	OpMoveDB Op = opBaseKeys + 70 + iota
	// OpSwapDB (SWAPDB): Int and Int2 are the two databases. Reply +OK.
	OpSwapDB
	// OpCopyDB (COPY ... DB n, n not the command's database): Args[0]=
	// source, Args[1]=destination in database Int; FlagReplace. Reply :1
	// copied, :0 not.
	OpCopyDB
)

func dbCheck(c *Command) error {
	if c.Int < 0 || c.Int > MaxDB || c.Int2 < 0 || c.Int2 > MaxDB {
		return errorString("database out of range")
	}
	return nil
}

func init() {
	registerOp(OpMoveDB, opSpec{name: "MOVE", write: true, args: 1, check: dbCheck, keys: keysFirst(1),
		apply: applyMoveDB, level: 4})
	registerOp(OpSwapDB, opSpec{name: "SWAPDB", write: true, args: 0, check: dbCheck, keys: keysNone,
		apply: applySwapDB, level: 4})
	registerOp(OpCopyDB, opSpec{name: "COPY", write: true, args: 2, flags: FlagReplace, check: dbCheck, keys: keysFirst(2),
		apply: applyCopyDB, level: 4})
}

// inDBLocked runs f with database db current, then the one before.
func (s *Store) inDBLocked(db uint16, f func()) {
	prev := s.cur
	s.selectLocked(db)
	f()
	s.selectLocked(prev)
}

// transplant returns it ready to be stored in the current database: a
// large collection is cloned (O(1)), since its copy-on-write generation
// is its old keyspace's.
func (s *Store) transplant(it item) item {
	if it.obj != nil {
		it.obj = it.obj.clone()
		*it.obj.cowGen() = s.keys.gen
	}
	return it
}

func applyMoveDB(s *Store, now int64, c *Command) Reply {
	key := c.Args[0]
	old, ok := s.liveLocked(key, now)
	if !ok || uint16(c.Int) == s.cur {
		return replyZero
	}
	moved := false
	s.inDBLocked(uint16(c.Int), func() {
		if _, exists := s.liveLocked(key, now); exists {
			return
		}
		s.keys.vers.begin(now)
		s.deleteLocked(key) // an expired one
		it := s.transplant(old)
		s.putLocked(it)
		s.notifyLocked(NotifyNew, "new", key)
		moved = true
	})
	if !moved {
		return replyZero
	}
	s.deleteLocked(key)
	s.notifyLocked(NotifyGeneric, "move_from", key)
	s.inDBLocked(uint16(c.Int), func() {
		s.notifyLocked(NotifyGeneric, "move_to", key)
		if old.kind == kindList || old.kind == kindZSet {
			s.signalReadyLocked(key)
		}
	})
	s.reportDirtyLocked(1)
	return replyOne
}

func applySwapDB(s *Store, now int64, c *Command) Reply {
	a, b := uint16(c.Int), uint16(c.Int2)
	s.reportDirtyLocked(1)
	if a == b {
		return replyOK
	}
	prev := s.cur
	s.selectLocked(0)
	for _, db := range []uint16{a, b} {
		if s.dbLocked(db).keys == nil {
			s.inDBLocked(db, func() {}) // allocate it
		}
	}
	// The current keyspace holds the store's write counter (selectLocked):
	// both go on from it, whichever becomes current.
	top, clock := s.keys.vers.now, s.keys.vers.clock
	da, db := s.dbLocked(a), s.dbLocked(b)
	for _, d := range []dbKeys{da, db} {
		if d.keys.vers.now < top {
			d.keys.vers.now = top
		}
		d.keys.vers.clock = clock
	}
	// Every live key of both databases counts as written now, as Redis
	// touches the watched keys either database holds (a stale key, one
	// logically expired, is left alone as Redis leaves it). For
	// client-side caching they are not changed keys: Redis's SWAPDB
	// invalidates nothing, and neither does kvs's.
	s.setDBLocked(a, db)
	s.setDBLocked(b, da)
	for _, d := range []uint16{a, b} {
		s.inDBLocked(d, func() {
			mods := s.keys.mods
			s.keys.mods = nil
			defer func() { s.keys.mods = mods }()
			s.keys.vers.begin(now)
			var live []item
			s.keys.Scan(func(it item) bool {
				if !it.expired(now) {
					live = append(live, it)
				}
				// Clients blocked on a key now holding a list or sorted
				// set may pop.
				if it.kind == kindList || it.kind == kindZSet {
					s.signalReadyLocked([]byte(it.key))
				}
				return true
			})
			for _, it := range live {
				s.keys.Set(it) // stamps the current version
			}
		})
	}
	s.selectLocked(prev)
	return replyOK
}

func applyCopyDB(s *Store, now int64, c *Command) Reply {
	src, dst := c.Args[0], c.Args[1]
	old, ok := s.liveLocked(src, now)
	if !ok {
		return replyZero
	}
	copied := false
	s.inDBLocked(uint16(c.Int), func() {
		if _, exists := s.liveLocked(dst, now); exists && c.Flags&FlagReplace == 0 {
			return
		}
		s.keys.vers.begin(now)
		s.deleteLocked(dst)
		cp := s.newCollection(dst, old.kind, old.val[:len(old.val):len(old.val)], nil, old.exp)
		if old.obj != nil {
			cp.obj = old.obj.clone()
			*cp.obj.cowGen() = s.keys.gen
		}
		cp.enc = old.enc
		if old.enc == encByContent {
			cp.enc = encUnshared
		}
		s.putLocked(cp)
		s.notifyLocked(NotifyNew, "new", dst)
		s.notifyLocked(NotifyGeneric, "copy_to", dst)
		if old.kind == kindList || old.kind == kindZSet {
			s.signalReadyLocked(dst)
		}
		copied = true
	})
	if !copied {
		return replyZero
	}
	s.reportDirtyLocked(1)
	return replyOne
}

// OtherDBStatsServing is DBStats of the databases other than 0, for a
// connection's goroutine (INFO keyspace): ok false when a script turned
// busy while it waited for the lock.
func (s *Store) OtherDBStatsServing(now int64) ([]DBStats, bool) {
	if !s.lockServing(false, false) {
		return nil, false
	}
	defer s.mu.RUnlock()
	all := s.dbStatsLocked(now)
	if len(all) > 0 && all[0].DB == 0 {
		all = all[1:]
	}
	return all, true
}

// WatchKeyInDBServing is WatchKeyServing of a key of database db.
func (s *Store) WatchKeyInDBServing(now int64, db uint16, key []byte) (KeyVersion, bool) {
	if db == 0 {
		return s.WatchKeyServing(now, key)
	}
	if !s.lockServing(true, false) {
		return KeyVersion{}, false
	}
	s.selectLocked(db)
	kv := s.watchKeyLocked(now, key)
	s.selectLocked(0)
	s.unlockRaw(true)
	return kv, true
}

// DBKey is how the ready hook names key of database db, and how the
// server files the clients blocked on it: the key itself in database 0,
// else the key behind a prefix naming its database.
func DBKey(db uint16, key string) string {
	if db == 0 {
		return key
	}
	return "\x00db" + strconv.Itoa(int(db)) + "\x00" + key
}

// KeyOfDBKey is the key DBKey(db, key) named.
func KeyOfDBKey(db uint16, k string) string {
	if db == 0 {
		return k
	}
	p := "\x00db" + strconv.Itoa(int(db)) + "\x00"
	if len(k) >= len(p) && k[:len(p)] == p {
		return k[len(p):]
	}
	return k
}

// SplitDBKey is the database and key a name DBKey made stands for: (0,
// name) for any other name.
func SplitDBKey(name string) (db uint16, key string) {
	if len(name) < 5 || name[:3] != "\x00db" {
		return 0, name
	}
	end := strings.IndexByte(name[3:], 0)
	if end <= 0 {
		return 0, name
	}
	n, err := strconv.Atoi(name[3 : 3+end])
	if err != nil || n <= 0 || n > MaxDB || strconv.Itoa(n) != name[3:3+end] {
		return 0, name
	}
	return uint16(n), name[3+end+1:]
}
