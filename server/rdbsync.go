package server

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"kvs/fsm"
	"kvs/rdb"
)

// Redis's RDB files out of kvs (package rdb), so that a team leaves kvs
// as easily as it came:
//
//   - SYNC and PSYNC answer a full resynchronization, as a master answers
//     a replica that cannot continue: PSYNC first says +FULLRESYNC <replid>
//     <offset>; then the RDB file goes out as $<length>\r\n<bytes>, or,
//     to a client that announced REPLCONF capa eof, in the EOF-mark form
//     ($EOF:<40 characters>\r\n<bytes><the 40 characters>), written as it
//     is made. That is what redis-cli --rdb FILE reads. The command stream
//     that would follow is not sent: the connection closes after the
//     file, as Redis closes it for REPLCONF rdb-only 1. kvs is no Redis
//     master (its replicas are Raft's).
//   - REPLCONF takes the options a replica or redis-cli sends (answering
//     +OK, or nothing to ACK and GETACK, as Redis does to a client that is
//     not its replica); rdb-filter-only functions asks for the functions
//     alone (and needs capa eof, as in Redis).
//   - With Config.RDBFile (kvs serve --save-rdb FILE), SAVE, BGSAVE and
//     SHUTDOWN SAVE also write that file, after the snapshot kvs keeps its
//     own state in (which they take as before: the RDB file is a copy
//     for leaving, never what kvs restarts from): to a temporary file
//     beside it, fsynced and renamed over it, as Redis writes dump.rdb.
//
// The file holds every key live at the time, with its deadline, in the
// encodings Redis 7.0 writes (DUMP's), and the function libraries; on a
// cluster node, the keys of the groups the node holds a replica of (a
// follower's as far as it has applied them), as a Redis Cluster node's
// file holds its own slots.

// replConf is what REPLCONF told about a connection.
type replConf struct {
	capaEOF   bool
	rdbOnly   bool
	filtered  bool // rdb-filter-only: no keys
	functions bool // rdb-filter-only functions
}

func runReplconf(c *client, args [][]byte) {
	if len(args)%2 == 0 {
		c.out = appendError(c.out, errSyntax)
		return
	}
	for j := 1; j < len(args); j += 2 {
		opt, val := args[j], args[j+1]
		switch {
		case is(opt, "listening-port"):
			if _, ok := parseInt(val); !ok {
				c.out = appendError(c.out, errNotInteger)
				return
			}
		case is(opt, "ip-address"):
			if len(val) >= 256 { // NET_HOST_STR_LEN
				c.out = appendError(c.out, fmt.Sprintf("ERR REPLCONF ip-address provided by replica instance is too long: %d bytes", len(val)))
				return
			}
		case is(opt, "capa"):
			if is(val, "eof") {
				c.repl.capaEOF = true
			}
		case is(opt, "ack"), is(opt, "getack"):
			return // no reply: this connection is no replica of this node
		case is(opt, "rdb-only"):
			n, ok := parseInt(val)
			if !ok {
				c.out = appendError(c.out, errNotInteger)
				return
			}
			if n < 0 || n > 1 {
				c.out = appendError(c.out, "ERR value is out of range, value must between 0 and 1")
				return
			}
			c.repl.rdbOnly = n == 1
		case is(opt, "rdb-filter-only"):
			fs, ok := splitArgs(string(val))
			if !ok {
				c.out = appendError(c.out, "ERR Missing rdb-filter-only values")
				return
			}
			c.repl.filtered, c.repl.functions = true, false
			for _, f := range fs {
				if !is([]byte(f), "functions") {
					c.out = appendError(c.out, "ERR Unsupported rdb-filter-only option: "+f)
					return
				}
				c.repl.functions = true
			}
		default:
			c.out = appendError(c.out, "ERR Unrecognized REPLCONF option: "+string(opt))
			return
		}
	}
	c.out = appendStatus(c.out, "OK")
}

// splitArgs is sdssplitargs for rdb-filter-only's list: words apart by
// spaces (quotes are not needed by its one word).
func splitArgs(s string) ([]string, bool) {
	var out []string
	word := ""
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' {
			if word != "" {
				out = append(out, word)
				word = ""
			}
			continue
		}
		if s[i] == '"' || s[i] == '\'' {
			return nil, false
		}
		word += s[i : i+1]
	}
	return out, true
}

// runSyncRDB answers SYNC and PSYNC replid offset: see the top of this
// file.
func runSyncRDB(c *client, args [][]byte) {
	s := c.s
	psync := is(args[0], "psync")
	if psync && len(args) > 3 && is(args[3], "failover") {
		c.out = appendError(c.out, "ERR PSYNC FAILOVER can't be sent to a master.")
		return
	}
	if len(c.out) > 0 {
		c.out = appendError(c.out, "ERR SYNC and PSYNC are invalid with pending output")
		return
	}
	if c.repl.filtered && !c.repl.capaEOF {
		c.out = appendError(c.out, "ERR Filtered replica requires EOF capability")
		return
	}
	if psync {
		if _, ok := parseInt(args[2]); !ok {
			c.out = appendError(c.out, errNotInteger)
			return
		}
	}
	parts, release, e := s.rdbParts(true)
	if e != "" {
		c.out = appendError(c.out, e)
		return
	}
	if c.repl.filtered {
		// The functions alone: the first part's libraries, no keys.
		parts = parts[:1]
	}
	conn, err := c.streamConn()
	if err != nil {
		release()
		c.out = appendError(c.out, "ERR sync: "+err.Error())
		return
	}
	var head []byte
	if psync {
		head = fmt.Appendf(nil, "+FULLRESYNC %s %d\r\n", s.replicationID(), 0)
	}
	c.quit = true
	opts := syncOpts{eof: c.repl.capaEOF, noKeys: c.repl.filtered, noFunctions: c.repl.filtered && !c.repl.functions}
	addr := c.addr
	stream := func() {
		defer release()
		defer s.untrackStream(conn)
		defer conn.Close()
		keys, n, err := s.writeSync(conn, head, parts, opts)
		if err != nil {
			s.cfg.Logger.Warn("server: SYNC: sending the RDB file failed", "client", addr, "err", err)
			return
		}
		s.cfg.Logger.Info("server: SYNC: RDB file sent", "client", addr, "keys", keys, "bytes", n)
	}
	if c.fd < 0 {
		stream()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		stream()
	}()
}

// replicationID is INFO replication's master_replid.
func (s *Server) replicationID() string {
	if s.replID != "" {
		return s.replID
	}
	return "0000000000000000000000000000000000000000"
}

type syncOpts struct {
	eof                 bool // the EOF-mark form
	noKeys, noFunctions bool
}

// writeSync writes head and the RDB file of parts to conn: with a length
// first, made into a temporary file to learn it, or in the EOF-mark form.
func (s *Server) writeSync(conn net.Conn, head []byte, parts []rdb.SnapshotPart, o syncOpts) (keys int, n int64, err error) {
	bw := bufio.NewWriterSize(conn, 256<<10)
	bw.Write(head)
	now := time.Now().UnixMilli()
	info := rdb.Info{RedisVersion: s.cfg.RedisVersion, ReplID: s.replicationID()}
	if o.noKeys {
		parts = []rdb.SnapshotPart{{Snap: parts[0].Snap, Limits: parts[0].Limits, NoKeys: true, NoFunctions: o.noFunctions}}
	}
	if o.eof {
		var mark [20]byte
		rand.Read(mark[:])
		m := hex.EncodeToString(mark[:])
		bw.WriteString("$EOF:" + m + "\r\n")
		cw := &countWriter{w: bw}
		keys, err = rdb.WriteSnapshot(cw, parts, now, info)
		if err != nil {
			return keys, cw.n, err
		}
		bw.WriteString(m)
		return keys, cw.n, bw.Flush()
	}
	tmp, err := os.CreateTemp("", "kvs-sync-*.rdb")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if keys, err = rdb.WriteSnapshot(tmp, parts, now, info); err != nil {
		return keys, 0, err
	}
	if n, err = tmp.Seek(0, io.SeekCurrent); err != nil {
		return keys, 0, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return keys, 0, err
	}
	bw.WriteString("$" + strconv.FormatInt(n, 10) + "\r\n")
	if _, err := io.Copy(bw, tmp); err != nil {
		return keys, n, err
	}
	return keys, n, bw.Flush()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (cw *countWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}

// rdbParts takes a snapshot of each group this node holds a replica of;
// serving: for a client's command (SnapshotServing, which refuses while
// a script runs). The caller releases them.
func (s *Server) rdbParts(serving bool) ([]rdb.SnapshotPart, func(), string) {
	var parts []rdb.SnapshotPart
	release := func() {
		for _, p := range parts {
			p.Snap.Release()
		}
	}
	for g := range s.router.all() {
		if g.remote() {
			continue
		}
		if serving && !g.leads() {
			s.syncReplica(g)
		}
		var snap *fsm.Snapshot
		if !serving {
			snap = g.store.Snapshot()
		} else if snap = g.store.SnapshotServing(); snap == nil {
			release()
			return nil, nil, errBusy(g.store.ScriptBusy())
		}
		parts = append(parts, rdb.SnapshotPart{Snap: snap, Limits: g.store.Limits()})
	}
	if len(parts) == 0 {
		return nil, nil, "ERR this node holds no replica of any group"
	}
	return parts, release, ""
}

// rdbFileSaver is the Saver of a server with Config.RDBFile: the node's
// own snapshot (none in memory mode: inner nil), then the RDB file.
type rdbFileSaver struct {
	s     *Server
	inner Saver
}

func (r rdbFileSaver) Save() error {
	if r.inner != nil {
		if err := r.inner.Save(); err != nil {
			return err
		}
	}
	return r.s.saveRDBFile(r.s.cfg.RDBFile)
}

// saveRDBFile writes the RDB file to path through a temporary file beside
// it, fsynced and renamed over it.
func (s *Server) saveRDBFile(path string) error {
	parts, release, e := s.rdbParts(false)
	if e != "" {
		return errors.New(e)
	}
	defer release()
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "temp-*.rdb")
	if err != nil {
		return fmt.Errorf("writing the RDB file: %w", err)
	}
	defer os.Remove(tmp.Name())
	tmp.Chmod(0o644) // as redis-server's dump.rdb (0666 less the usual umask)
	keys, err := rdb.WriteSnapshot(tmp, parts, time.Now().UnixMilli(), rdb.Info{RedisVersion: s.cfg.RedisVersion})
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		if d, derr := os.Open(dir); derr == nil {
			d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("writing the RDB file %s: %w", path, err)
	}
	s.cfg.Logger.Info("server: RDB file written", "file", path, "keys", keys)
	return nil
}
