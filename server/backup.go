package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"kvs/backup"
	"kvs/fsm"
)

// Backups and saves.
//
// KVS.BACKUP streams a backup file (package backup: header, the fsm's
// snapshot, checksum) on the connection that asks for it, then closes the
// connection. The store's Snapshot is a copy-on-write view taken in O(1)
// under its lock; it is written out without the lock, in chunks, so
// writers go on and the snapshot is never held in memory whole. The reply
// is a RESP3 streamed string, whatever the connection's protocol:
//
//	$?\r\n  (;<len>\r\n<len bytes>\r\n)*  ;0\r\n
//
// An error before the first byte is an ordinary error reply; a failure
// midway closes the connection without the final ;0, so the client sees a
// truncated stream (and the file's checksum would not match either).
//
// On a cluster follower the backup first waits until the store has
// applied what the leader had applied (as a READONLY read does,
// replicasync.go), so it holds every write acknowledged before it began;
// with no leader to ask it goes ahead with what the node has and marks the
// file backup.FlagUnsynced. A node of several groups writes each group's
// snapshot, each at its own index and caught up with its own leader
// (backup.FlagGroups). There, KVS.BACKUP GROUPS id [id ...] writes the
// named groups' alone, in group order, the header's index being the
// first's: each group is on --replicas nodes, so that no node may hold
// every one, and kvs backup takes each from a node that holds it and
// puts them together (backup.Assembler). Without GROUPS a node that
// holds no replica of some group refuses.
//
// SAVE and BGSAVE ask Config.Saver for a snapshot (the wal's compaction,
// a raft snapshot); LASTSAVE is the Unix time of the last one that
// succeeded, or of the server's start, as in Redis. In memory mode there
// is nowhere to save to and nothing a restart would load: a save there
// writes nothing and succeeds (memorySaver), so that tools and tests that
// call SAVE or BGSAVE go on, and the server's log says so once.

// Saver takes a snapshot of the store where the node keeps its state, and
// returns once it is written and durable (or failed). Config.Saver.
type Saver interface {
	Save() error
}

// memorySaver is memory mode's Saver: see the top of this file.
type memorySaver struct {
	s    *Server
	once sync.Once
}

func (m *memorySaver) Save() error {
	m.once.Do(func() {
		m.s.cfg.Logger.Warn("SAVE or BGSAVE in memory mode writes nothing: the data lives only in memory " +
			"(start kvs with --data-dir to keep it, or use kvs backup)")
	})
	return nil
}

// saver is the Saver SAVE, BGSAVE and SHUTDOWN SAVE use.
func (s *Server) saver() Saver {
	if s.cfg.RDBFile != "" {
		return rdbFileSaver{s, s.cfg.Saver} // memory mode: the RDB file alone
	}
	if s.cfg.Saver != nil {
		return s.cfg.Saver
	}
	return &s.memSaver
}

const (
	errBgsaveInProgress  = "ERR Background save already in progress"
	backupChunkBytes     = 256 << 10
	backupStreamHeader   = "$?\r\n"
	backupStreamTerminal = ";0\r\n"
)

// saveState is SAVE, BGSAVE and LASTSAVE's state.
type saveState struct {
	mu        sync.Mutex // guards the fields below
	running   bool       // a SAVE or BGSAVE is taking its snapshot
	scheduled bool       // BGSAVE SCHEDULE asked for another after it
	last      time.Time  // the last successful save, or the server's start
	lastErr   error      // the last save's outcome
	// dirty is the store's Dirty when the last successful save began:
	// INFO's rdb_changes_since_last_save counts from it, as Redis's
	// dirty counter starts over at a save.
	dirty int64
}

// backupMode is the mode a backup's header records.
func (s *Server) backupMode() backup.Mode {
	switch {
	case s.router.clustered():
		return backup.ModeCluster
	case s.cfg.Saver != nil:
		return backup.ModeDurable
	}
	return backup.ModeMemory
}

// runBackup answers KVS.BACKUP [GROUPS id [id ...]]: see the top of this
// file.
// errBackupMoving refuses a backup of a group with a move of slots in
// flight: each group's snapshot is of its own moment, and a move is
// steps in two groups' logs.
const errBackupMoving = "ERR backup: slots are moving between groups (kvs slots status): back up once the move is over"

func runBackup(c *client, args [][]byte) {
	s := c.s
	want, errText := s.backupGroups(args[1:])
	if errText != "" {
		c.out = appendError(c.out, errText)
		return
	}
	var flags byte
	// One snapshot per group, each at its own index, taken before any is
	// written: a group this node follows first catches up with its
	// leader.
	var ids []uint32
	snaps := make([]*fsm.Snapshot, 0, s.router.count())
	release := func() {
		for _, snap := range snaps {
			snap.Release()
		}
	}
	for g := range s.router.all() {
		if want != nil && !want[g.index] {
			continue
		}
		if g.remote() {
			release()
			c.out = appendError(c.out, "ERR backup: this node holds no replica of group "+strconv.Itoa(g.index)+
				" (each group is on --replicas nodes): name the groups it holds with KVS.BACKUP GROUPS, as kvs backup does")
			return
		}
		if !g.leads() && !s.syncReplica(g) {
			flags |= backup.FlagUnsynced
			s.cfg.Logger.Warn("server: backup of a follower that could not sync with a leader; it holds what this node has applied", "group", g.index)
		}
		snap := g.store.SnapshotServing()
		if snap == nil {
			release()
			c.out = appendError(c.out, errBusy(g.store.ScriptBusy()))
			return
		}
		ids = append(ids, uint32(g.index))
		snaps = append(snaps, snap)
		if snap.MovesInFlight() {
			release()
			c.out = appendError(c.out, errBackupMoving)
			return
		}
	}
	if s.router.sharded() {
		flags |= backup.FlagGroups
	}
	conn, err := c.streamConn()
	if err != nil {
		release()
		c.out = appendError(c.out, "ERR backup: "+err.Error())
		return
	}
	// What the pipeline answered before this command goes first.
	prefix := append([]byte(nil), c.out...)
	c.out = c.out[:0]
	c.quit = true
	h := backup.Header{Mode: s.backupMode(), Flags: flags, Index: snaps[0].Index(), Created: time.Now()}
	stream := func() {
		defer release()
		defer s.untrackStream(conn)
		if err := writeBackupStream(conn, prefix, h, ids, snaps); err != nil {
			s.cfg.Logger.Warn("server: backup stream failed", "client", c.addr, "err", err)
			return
		}
		keys := 0
		for _, snap := range snaps {
			keys += snap.Len()
		}
		s.cfg.Logger.Info("server: backup streamed", "client", c.addr, "index", h.Index, "groups", len(snaps), "keys", keys)
	}
	if c.fd < 0 {
		stream() // the connection's own goroutine
		return
	}
	// On an event loop: the loop closes its descriptor once this pipeline
	// is done; the stream writes through its own, on a goroutine the
	// server waits for.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		stream()
	}()
}

// backupGroups parses KVS.BACKUP's arguments: none (every group, nil), or
// GROUPS and the ids of the groups to write, on a node of several groups.
// It returns the error reply for arguments that name no groups of the
// cluster.
func (s *Server) backupGroups(args [][]byte) (want []bool, errText string) {
	if len(args) == 0 {
		return nil, ""
	}
	if len(args) < 2 || !is(args[0], "groups") {
		return nil, errSyntax
	}
	n := len(s.router.table())
	if !s.router.sharded() {
		return nil, "ERR backup: GROUPS needs a cluster of several groups; this node's data is a single group"
	}
	want = make([]bool, n)
	for _, a := range args[1:] {
		id, ok := parseInt(a)
		switch {
		case !ok || id < 0 || id >= int64(n) || s.router.group(int(id)) == nil:
			return nil, "ERR backup: no group " + string(a) + " (the cluster's groups are " + s.router.idsText() + ")"
		case want[id]:
			return nil, "ERR backup: group " + string(a) + " named twice"
		}
		want[id] = true
	}
	return want, ""
}

// chunkWriter frames what is written to it as RESP3 streamed-string chunks.
type chunkWriter struct{ w *bufio.Writer }

func (cw chunkWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	cw.w.WriteByte(';')
	cw.w.WriteString(strconv.Itoa(len(p)))
	cw.w.WriteString("\r\n")
	cw.w.Write(p)
	_, err := cw.w.WriteString("\r\n")
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeBackupStream writes the backup of snaps, of groups ids: the one
// snapshot, or on a node of several groups (backup.FlagGroups) a part per
// group.
func writeBackupStream(conn net.Conn, prefix []byte, h backup.Header, ids []uint32, snaps []*fsm.Snapshot) error {
	defer conn.Close()
	bw := bufio.NewWriterSize(conn, backupChunkBytes+64)
	bw.Write(prefix)
	bw.WriteString(backupStreamHeader)
	// The snapshot buffers its own writes; the chunks are its flushes.
	fw, err := backup.NewWriter(chunkWriter{bw}, h)
	if err != nil {
		return err
	}
	if h.Flags&backup.FlagGroups == 0 {
		if _, err := snaps[0].WriteTo(fw); err != nil {
			return err
		}
	} else {
		for i, snap := range snaps {
			err := backup.WritePart(fw, ids[i], snap.Index(), func(w io.Writer) error {
				_, err := snap.WriteTo(w)
				return err
			})
			if err != nil {
				return err
			}
		}
	}
	if err := fw.Close(); err != nil {
		return err
	}
	bw.WriteString(backupStreamTerminal)
	return bw.Flush()
}

// streamConn returns a connection that writes to c's socket and that the
// caller closes: c's own net.Conn on a goroutine-served connection, a
// duplicate of the loop's descriptor on an event loop. The server's Close
// closes it too.
func (c *client) streamConn() (net.Conn, error) {
	conn := c.nc
	if c.fd >= 0 {
		fd, err := dupFD(c.fd)
		if err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(fd), "backup")
		conn, err = net.FileConn(f) // a duplicate of its own, in Go's poller
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	if !c.s.trackStream(conn) {
		if c.fd >= 0 {
			conn.Close()
		}
		return nil, errors.New("server shutting down")
	}
	return conn, nil
}

// trackStream records a backup's connection so that Close can close it;
// it reports false once the server is stopping.
func (s *Server) trackStream(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.streams == nil {
		s.streams = make(map[net.Conn]struct{})
	}
	s.streams[conn] = struct{}{}
	return true
}

func (s *Server) untrackStream(conn net.Conn) {
	s.mu.Lock()
	delete(s.streams, conn)
	s.mu.Unlock()
}

// closeStreamsLocked closes the backups' connections (Close).
func (s *Server) closeStreamsLocked() {
	for conn := range s.streams {
		conn.Close()
	}
}

// runSave answers SAVE: a snapshot now, waited for. On an event loop the
// loop's other connections wait with it, as every client of redis-server
// waits for its SAVE.
func runSave(c *client, args [][]byte) {
	s := c.s
	if !s.saves.begin() {
		c.out = appendError(c.out, errBgsaveInProgress)
		return
	}
	dirty := s.dirty()
	err := s.saver().Save()
	if s.saves.end(err, dirty) {
		s.saveInBackground() // a BGSAVE SCHEDULE came meanwhile
	}
	if err != nil {
		c.out = appendError(c.out, "ERR "+err.Error())
		return
	}
	c.out = appendStatus(c.out, "OK")
}

// runBgsave answers BGSAVE [SCHEDULE]: a snapshot on a goroutine the
// server waits for; SCHEDULE while one runs asks for another after it.
func runBgsave(c *client, args [][]byte) {
	s := c.s
	schedule := false
	if len(args) > 1 {
		if len(args) != 2 || !is(args[1], "schedule") {
			c.out = appendError(c.out, errSyntax)
			return
		}
		schedule = true
	}
	if !s.saves.begin() {
		if !schedule {
			c.out = appendError(c.out, errBgsaveInProgress)
			return
		}
		s.saves.schedule()
		c.out = appendStatus(c.out, "Background saving scheduled")
		return
	}
	s.saveInBackground()
	c.out = appendStatus(c.out, "Background saving started")
}

// saveInBackground saves on a goroutine the server waits for, and again
// while BGSAVE SCHEDULE asks; the caller holds the claim (begin).
func (s *Server) saveInBackground() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for again := true; again; {
			dirty := s.dirty()
			err := s.saver().Save()
			if err != nil {
				s.cfg.Logger.Error("server: background save failed", "err", err)
			}
			again = s.saves.end(err, dirty)
		}
	}()
}

// begin claims the one snapshot that may run; false if one is running.
func (st *saveState) begin() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.running {
		return false
	}
	st.running = true
	return true
}

// schedule asks for another save once the running one ends.
func (st *saveState) schedule() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.scheduled = true
}

// end records the outcome of a save that began when the store's Dirty was
// dirty. It reports true, keeping the claim, when another was scheduled
// meanwhile: the caller then saves again.
func (st *saveState) end(err error, dirty int64) (again bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.lastErr = err
	if err == nil {
		st.last = time.Now()
		st.dirty = dirty
	}
	if st.scheduled {
		st.scheduled = false
		return true
	}
	st.running = false
	return false
}

// status returns LASTSAVE's time, whether a save runs, and the last outcome.
func (st *saveState) status() (last time.Time, running bool, lastErr error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.last, st.running, st.lastErr
}

// changesSinceSave is INFO's rdb_changes_since_last_save.
func (s *Server) changesSinceSave() int64 {
	s.saves.mu.Lock()
	base := s.saves.dirty
	s.saves.mu.Unlock()
	return s.dirty() - base
}

func runLastsave(c *client, args [][]byte) {
	last, _, _ := c.s.saves.status()
	c.out = appendInt(c.out, last.Unix())
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// okErr is how INFO persistence reports an outcome.
func okErr(err error) string {
	if err != nil {
		return "err"
	}
	return "ok"
}
