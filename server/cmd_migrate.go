package server

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"kvs/fsm"
)

// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
// [AUTH password] [AUTH2 username password] [KEYS key ...], as Redis
// 7.0's migrateCommand (cluster.c): the keys' DUMP payloads go to the
// target as RESTORE (RESTORE-ASKING from a cluster node) with their TTL,
// over a connection cached per target for 10 seconds, and the keys the
// target acknowledged are deleted here unless COPY, by a DEL through the
// write path. The keys are the connection's database's; the target gets
// a SELECT of destination-db first when its cached connection has
// another selected (or none yet), as in Redis. The command runs off the
// event loop: it waits for the target.
//
// RESTORE-ASKING is RESTORE under the name Redis Cluster's MIGRATE sends.

func init() {
	registerCommands([]command{
		{name: "migrate", arity: -6, flags: flagWrite, firstKey: 3, lastKey: 3, keyStep: 1, group: "generic", level: 4,
			run: runMigrate, waits: true, blocks: true},
		{name: "restore-asking", arity: -4, flags: w | flagAsking, firstKey: 1, lastKey: 1, keyStep: 1, group: "server", level: 4,
			parse: parseRestore},
	}...)
	commandDocs["migrate"] = [2]string{"Atomically transfer a key from a Redis instance to another one.", "2.6.0"}
	commandDocs["restore-asking"] = [2]string{"An internal command for migrating keys in a cluster", "3.0.0"}
}

const (
	errMigrateKeys      = "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
	errMigrateConnect   = "IOERR error or timeout connecting to the client"
	errMigrateWriting   = "IOERR error or timeout writing to target instance"
	errMigrateReading   = "IOERR error or timeout reading to target instance"
	errMigrateTargetPfx = "ERR Target instance replied with error: "

	migrateCacheItems = 64               // Redis's MIGRATE_SOCKET_CACHE_ITEMS
	migrateCacheTTL   = 10 * time.Second // MIGRATE_SOCKET_CACHE_TTL
	migrateChunk      = 64 * 1024        // written at a time, each within the timeout
)

// migrateConn is a cached connection to a MIGRATE target.
type migrateConn struct {
	nc      net.Conn
	rd      *bufio.Reader
	lastDB  int64 // the database last SELECTed; -1: unknown
	lastUse time.Time
}

// migrateCache is Redis's migrate_cached_sockets: a connection per
// "host:port". A MIGRATE takes its target's out while it uses it (a
// second MIGRATE to the same target meanwhile dials its own) and puts
// it back after.
type migrateCache struct {
	mu    sync.Mutex
	conns map[string]*migrateConn
	inUse map[string]int // taken out, counted as cached (INFO)
}

// count is INFO's migrate_cached_sockets.
func (m *migrateCache) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.conns)
	for name, k := range m.inUse {
		if m.conns[name] == nil && k > 0 {
			n++
		}
	}
	return n
}

// take returns the cached connection to name, or dials one within
// timeout. It returns an error only when there is no address to connect
// to (Redis's connect step fails only then); a connection refused or not
// made in time is an error of the first write, as in Redis, whose
// connect does not wait for the outcome.
func (m *migrateCache) take(name string, timeout time.Duration) (*migrateConn, error) {
	m.mu.Lock()
	if cs := m.conns[name]; cs != nil {
		delete(m.conns, name)
		m.inUse[name]++
		m.mu.Unlock()
		return cs, nil
	}
	m.mu.Unlock()
	nc, err := net.DialTimeout("tcp", name, timeout)
	if err != nil {
		var dns *net.DNSError
		var addr *net.AddrError
		if errors.As(err, &dns) || errors.As(err, &addr) {
			return nil, err
		}
		nc = failedConn{err}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	m.mu.Lock()
	if m.conns == nil {
		m.conns, m.inUse = map[string]*migrateConn{}, map[string]int{}
	}
	if len(m.conns) >= migrateCacheItems {
		for k, old := range m.conns { // one at random, as Redis drops
			old.nc.Close()
			delete(m.conns, k)
			break
		}
	}
	m.inUse[name]++
	m.mu.Unlock()
	return &migrateConn{nc: nc, rd: bufio.NewReader(nc), lastDB: -1}, nil
}

// failedConn is a connection that could not be made: every write fails
// with its error.
type failedConn struct{ err error }

func (f failedConn) Read([]byte) (int, error)         { return 0, f.err }
func (f failedConn) Write([]byte) (int, error)        { return 0, f.err }
func (f failedConn) Close() error                     { return nil }
func (f failedConn) LocalAddr() net.Addr              { return nil }
func (f failedConn) RemoteAddr() net.Addr             { return nil }
func (f failedConn) SetDeadline(time.Time) error      { return nil }
func (f failedConn) SetReadDeadline(time.Time) error  { return nil }
func (f failedConn) SetWriteDeadline(time.Time) error { return nil }

// give puts cs back after use (closed: dropped), keeping one per target.
func (m *migrateCache) give(name string, cs *migrateConn, closed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inUse[name]--; m.inUse[name] <= 0 {
		delete(m.inUse, name)
	}
	if closed {
		return
	}
	if m.conns[name] != nil {
		cs.nc.Close()
		return
	}
	cs.lastUse = time.Now()
	m.conns[name] = cs
}

// closeIdle closes the connections unused for longer than
// migrateCacheTTL (Redis's migrateCloseTimedoutSockets, from the cron),
// and every one when all is set (the server stops).
func (m *migrateCache) closeIdle(now time.Time, all bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, cs := range m.conns {
		if all || now.Sub(cs.lastUse) > migrateCacheTTL {
			cs.nc.Close()
			delete(m.conns, name)
		}
	}
}

// migrateKey is a key MIGRATE sends: its payload and deadline.
type migrateKey struct {
	key, payload []byte
	deadline     int64 // Unix ms; 0: none
}

func runMigrate(c *client, args [][]byte) {
	var copyKeys, replace bool
	var user, pass []byte
	hasPass := false
	first, num := 3, 1
opts:
	for j := 6; j < len(args); j++ {
		more := len(args) - 1 - j
		switch {
		case is(args[j], "copy"):
			copyKeys = true
		case is(args[j], "replace"):
			replace = true
		case is(args[j], "auth"):
			if more == 0 {
				c.out = appendError(c.out, errSyntax)
				return
			}
			j++
			pass, hasPass = args[j], true
		case is(args[j], "auth2"):
			if more < 2 {
				c.out = appendError(c.out, errSyntax)
				return
			}
			user, pass, hasPass = args[j+1], args[j+2], true
			j += 2
		case is(args[j], "keys"):
			if len(args[3]) != 0 {
				c.out = appendError(c.out, errMigrateKeys)
				return
			}
			first, num = j+1, len(args)-j-1
			break opts
		default:
			c.out = appendError(c.out, errSyntax)
			return
		}
	}
	timeoutMs, ok := parseInt(args[5])
	if !ok {
		c.out = appendError(c.out, errNotInteger)
		return
	}
	db, ok := parseInt(args[4])
	if !ok {
		c.out = appendError(c.out, errNotInteger)
		return
	}
	if timeoutMs <= 0 {
		timeoutMs = 1000
	}
	timeout := time.Duration(timeoutMs) * time.Millisecond

	// The keys here, as Redis's lookupKeyRead finds them.
	var keys []migrateKey
	now := time.Now().UnixMilli()
	for _, key := range args[first : first+num] {
		r, ok := c.grp.store.ReadServing(now, &fsm.Command{Op: fsm.OpDump, DB: c.db, Args: [][]byte{key}}, nil)
		if !ok {
			c.out = appendError(c.out, errBusy(c.s.scriptBusy()))
			return
		}
		if r.Kind == fsm.ReplyError {
			c.out = appendReply(c.out, &r, c.proto)
			return
		}
		if r.Kind != fsm.ReplyBulk {
			continue
		}
		t, _ := c.grp.store.ReadServing(now, &fsm.Command{Op: fsm.OpPExpireTime, DB: c.db, Args: [][]byte{key}}, nil)
		if t.Kind == fsm.ReplyInt && t.Int == -2 {
			continue
		}
		k := migrateKey{key: key, payload: r.Bulk}
		if t.Kind == fsm.ReplyInt && t.Int > 0 {
			k.deadline = t.Int
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		c.out = appendStatus(c.out, "NOKEY")
		return
	}

	name := net.JoinHostPort(string(args[1]), string(args[2]))
	restore := "RESTORE"
	if c.s.router.clustered() {
		restore = "RESTORE-ASKING"
	}
	cache := &c.s.migrates
	mayRetry := true
	for {
		cs, err := cache.take(name, timeout)
		if err != nil {
			c.out = appendError(c.out, errMigrateConnect)
			return
		}
		// The request: AUTH, SELECT when the connection has another
		// database selected, a RESTORE per key not expired by now.
		var buf []byte
		if hasPass {
			if user != nil {
				buf = appendCommandArgs(buf, []byte("AUTH"), user, pass)
			} else {
				buf = appendCommandArgs(buf, []byte("AUTH"), pass)
			}
		}
		sel := cs.lastDB != db
		if sel {
			buf = appendCommandArgs(buf, []byte("SELECT"), strconv.AppendInt(nil, db, 10))
		}
		sent := keys[:0:0]
		ms := time.Now().UnixMilli()
		for _, k := range keys {
			var ttl int64
			if k.deadline != 0 {
				if ttl = k.deadline - ms; ttl < 0 {
					continue
				}
				ttl = max(ttl, 1)
			}
			sent = append(sent, k)
			a := [][]byte{[]byte(restore), k.key, strconv.AppendInt(nil, ttl, 10), k.payload}
			if replace {
				a = append(a, []byte("REPLACE"))
			}
			buf = appendCommandArgs(buf, a...)
		}
		writeErr := false
		for pos := 0; pos < len(buf) && err == nil; {
			end := min(pos+migrateChunk, len(buf))
			cs.nc.SetWriteDeadline(time.Now().Add(timeout))
			var n int
			n, err = cs.nc.Write(buf[pos:end])
			pos += n
		}
		var authLine, selLine string
		if err != nil {
			writeErr = true
		} else if hasPass {
			authLine, err = cs.readLine(timeout)
		}
		if err == nil && sel {
			selLine, err = cs.readLine(timeout)
		}
		if err != nil {
			cs.nc.Close()
			cache.give(name, cs, true)
			if !isTimeout(err) && mayRetry {
				mayRetry = false
				continue
			}
			if writeErr {
				c.out = appendError(c.out, errMigrateWriting)
			} else {
				c.out = appendError(c.out, errMigrateReading)
			}
			return
		}
		targetErr := ""
		var acked [][]byte
		socketErr := false
		var readErr error
		j := 0
		for ; j < len(sent); j++ {
			var line string
			line, readErr = cs.readLine(timeout)
			if readErr != nil {
				socketErr = true
				break
			}
			switch {
			case hasPass && authLine[0] == '-', sel && selLine[0] == '-', line[0] == '-':
				if targetErr == "" {
					cs.lastDB = -1
					e := line
					if hasPass && authLine[0] == '-' {
						e = authLine
					} else if sel && selLine[0] == '-' {
						e = selLine
					}
					targetErr = errMigrateTargetPfx + e[1:]
				}
			default:
				if !copyKeys {
					acked = append(acked, sent[j].key)
				}
			}
		}
		if targetErr == "" && socketErr && j == 0 && mayRetry && !isTimeout(readErr) {
			cs.nc.Close()
			cache.give(name, cs, true)
			mayRetry = false
			continue
		}
		if socketErr {
			cs.nc.Close()
		}
		if targetErr == "" && !socketErr {
			cs.lastDB = db
		}
		cache.give(name, cs, socketErr)
		if len(acked) > 0 {
			// The keys the target has now leave this node through the
			// write path, as Redis propagates MIGRATE as a DEL of them.
			replies, err := c.s.proposeTo(c.grp, []fsm.Command{{Op: fsm.OpDel, DB: c.db, Args: acked}})
			if r, err := firstReply(replies, err); err != nil {
				c.out = appendError(c.out, errProposal(err, true))
				return
			} else if r.Kind == fsm.ReplyError {
				c.out = appendReply(c.out, &r, c.proto)
				return
			}
		}
		switch {
		case targetErr != "":
			c.out = appendError(c.out, targetErr)
		case socketErr:
			c.out = appendError(c.out, errMigrateReading)
		default:
			c.out = appendStatus(c.out, "OK")
		}
		return
	}
}

// readLine is Redis's connSyncReadLine: one line within timeout, without
// its CR LF; an empty line is an error.
func (cs *migrateConn) readLine(timeout time.Duration) (string, error) {
	cs.nc.SetReadDeadline(time.Now().Add(timeout))
	line, err := cs.rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if line == "" {
		return "", errors.New("empty line")
	}
	return line, nil
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// appendCommandArgs appends args as a RESP array of bulk strings.
func appendCommandArgs(b []byte, args ...[]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}
