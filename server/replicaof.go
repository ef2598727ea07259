package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kvs/fsm"
	"kvs/rdb"
)

// REPLICAOF host port (SLAVEOF), REPLICAOF NO ONE, and Config.ReplicaOf:
// kvs as a replica of a running redis-server, as Redis's replica side
// (replication.c) speaks to its master. The link makes a full sync (PING,
// REPLCONF listening-port, REPLCONF capa eof capa psync2, PSYNC ? -1,
// +FULLRESYNC, the RDB as $len or as the diskless $EOF:<mark> form),
// then applies the command stream, acknowledging its offset every second
// and on REPLCONF GETACK. Every write goes through kvs's own write path:
// the full sync first empties the keyspace (FLUSHALL) and loads each RDB
// key as a RESTORE ... ABSTTL REPLACE (package rdb decodes the file), and
// the stream's commands are parsed by the command table and proposed, in
// batches of what arrived together, to their keys' groups, as from an
// internal client with every permission. So a kvs cluster replicates
// what its node takes from the master. While the link is set, clients'
// writes are refused with READONLY, as Redis's replica-read-only yes
// refuses them. REPLICAOF NO ONE stops the link: kvs keeps what it
// applied and takes writes again.

const (
	errReadOnlyReplica = "READONLY You can't write against a read only replica."
	errInvalidPort     = "ERR Invalid master port"
	replAckInterval    = time.Second
	replRetryInterval  = time.Second
	replTimeout        = 60 * time.Second // Redis's repl-timeout
	replBatch          = 512              // stream commands proposed at a time
)

// replica is the node's link to its master, when it has one.
type replica struct {
	s          *Server
	host       string
	port       int
	stop       chan struct{}
	done       chan struct{}
	link       atomic.Bool  // master_link_status up
	syncing    atomic.Bool  // master_sync_in_progress
	lastIO     atomic.Int64 // Unix seconds of the last read from the master; 0: none yet
	readOff    atomic.Int64 // slave_read_repl_offset
	applied    atomic.Int64 // slave_repl_offset: what was applied here
	downSince  atomic.Int64 // Unix seconds the link went down
	masterRun  atomic.Pointer[string]
	connMu     sync.Mutex
	nc         net.Conn
	syncedKeys atomic.Int64 // keys the last full sync loaded (logged)
	streamDB   uint16       // the database the stream starts in (the RDB's repl-stream-db)
	closeOnce  sync.Once
}

// replicaOf returns the node's link, or nil when it is a master.
func (s *Server) replicaOf() *replica { return s.repl.Load() }

// readOnlyReplica reports whether clients' writes are refused.
func (s *Server) readOnlyReplica() bool { return s.repl.Load() != nil }

func init() {
	registerCommands([]command{
		{name: "replicaof", arity: 3, flags: flagAdmin | flagNoScript | flagStale | flagNoAsyncLoading, group: "server", level: 4, run: runReplicaOf, waits: true, blocks: true},
		{name: "slaveof", arity: 3, flags: flagAdmin | flagNoScript | flagStale | flagNoAsyncLoading, group: "server", level: 4, run: runReplicaOf, waits: true, blocks: true},
	}...)
	commandDocs["replicaof"] = [2]string{"Make the server a replica of another instance, or promote it as master.", "5.0.0"}
	commandDocs["slaveof"] = [2]string{"Make the server a replica of another instance, or promote it as master.", "1.0.0"}
}

func runReplicaOf(c *client, args [][]byte) {
	if is(args[1], "no") && is(args[2], "one") {
		if r := c.s.repl.Load(); r != nil {
			c.s.StopReplication()
			c.s.cfg.Logger.Info("MASTER MODE enabled (user request)", "client", c.addr)
		}
		c.out = appendStatus(c.out, "OK")
		return
	}
	port, ok := parseInt(args[2])
	if !ok || port < 0 || port > 65535 {
		c.out = appendError(c.out, errInvalidPort)
		return
	}
	host := string(args[1])
	if r := c.s.repl.Load(); r != nil && strings.EqualFold(r.host, host) && r.port == int(port) {
		c.out = appendStatus(c.out, "OK Already connected to specified master")
		return
	}
	c.s.StartReplication(host, int(port))
	c.s.cfg.Logger.Info("REPLICAOF enabled (user request)", "master", net.JoinHostPort(host, strconv.Itoa(int(port))), "client", c.addr)
	c.out = appendStatus(c.out, "OK")
}

// StartReplication makes the node a replica of host:port (replacing the
// link it had): clients' writes are refused from now on, and the link
// syncs in the background, retrying every second while it cannot.
func (s *Server) StartReplication(host string, port int) {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	if old := s.repl.Load(); old != nil {
		old.close()
	}
	r := &replica{s: s, host: host, port: port, stop: make(chan struct{}), done: make(chan struct{})}
	s.repl.Store(r)
	go r.run()
}

// StopReplication ends the link, if any, and waits for what it was
// applying: the node is a master again with what it applied.
func (s *Server) StopReplication() {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	if r := s.repl.Load(); r != nil {
		r.close()
		s.repl.Store(nil)
	}
}

// close stops the link and waits for its goroutine.
func (r *replica) close() {
	r.closeOnce.Do(func() { close(r.stop) })
	r.connMu.Lock()
	if r.nc != nil {
		r.nc.Close()
	}
	r.connMu.Unlock()
	<-r.done
}

func (r *replica) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// run keeps the link: a full sync, then the stream, again after a
// failure.
func (r *replica) run() {
	defer close(r.done)
	log := r.s.cfg.Logger.With("master", net.JoinHostPort(r.host, strconv.Itoa(r.port)))
	for !r.stopped() {
		err := r.session()
		if r.link.Swap(false) {
			r.downSince.Store(time.Now().Unix()) // 0 (-1 in INFO) until a link was up
		}
		r.syncing.Store(false)
		if r.stopped() {
			return
		}
		log.Warn("replication: link to the master lost; connecting again", "err", err)
		select {
		case <-r.stop:
			return
		case <-time.After(replRetryInterval):
		}
	}
}

// session is one connection to the master: handshake, full sync,
// stream, until an error or the stop.
func (r *replica) session() error {
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(r.host, strconv.Itoa(r.port)), replTimeout)
	if err != nil {
		return err
	}
	r.connMu.Lock()
	if r.stopped() {
		r.connMu.Unlock()
		nc.Close()
		return errors.New("stopped")
	}
	r.nc = nc
	r.connMu.Unlock()
	defer nc.Close()
	br := bufio.NewReaderSize(nc, 1<<16)
	ask := func(args ...string) (string, error) {
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		nc.SetDeadline(time.Now().Add(replTimeout))
		if _, err := nc.Write(appendCommandArgs(nil, b...)); err != nil {
			return "", err
		}
		line, err := readReplLine(br)
		r.lastIO.Store(time.Now().Unix())
		return line, err
	}
	user, pass := r.s.params.Get("masteruser"), r.s.params.Get("masterauth")
	if pass != "" {
		args := []string{"AUTH", pass}
		if user != "" {
			args = []string{"AUTH", user, pass}
		}
		if line, err := ask(args...); err != nil {
			return err
		} else if line[0] == '-' {
			return fmt.Errorf("the master refused AUTH: %s", line[1:])
		}
	}
	line, err := ask("PING")
	if err != nil {
		return err
	}
	// As Redis: only an authentication error stops the handshake.
	for _, e := range []string{"-NOAUTH", "-NOPERM", "-ERR operation not permitted"} {
		if strings.HasPrefix(line, e) {
			return fmt.Errorf("the master refused PING: %s (set masterauth)", line[1:])
		}
	}
	port := "0"
	if a := r.s.Addr(); a != nil {
		if _, p, err := splitHostPort(a.String()); err == nil {
			port = p
		}
	}
	if _, err := ask("REPLCONF", "listening-port", port); err != nil {
		return err
	}
	if _, err := ask("REPLCONF", "capa", "eof", "capa", "psync2"); err != nil {
		return err
	}
	line, err = ask("PSYNC", "?", "-1")
	if err != nil {
		return err
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "+FULLRESYNC" {
		return fmt.Errorf("PSYNC answered %q, want +FULLRESYNC", line)
	}
	offset, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return fmt.Errorf("PSYNC answered %q: %v", line, err)
	}
	runID := f[1]
	r.masterRun.Store(&runID)
	r.syncing.Store(true)
	if err := r.fullSync(nc, br); err != nil {
		return err
	}
	r.syncing.Store(false)
	r.readOff.Store(offset)
	r.applied.Store(offset)
	r.link.Store(true)
	r.downSince.Store(0)
	r.s.cfg.Logger.Info("replication: MASTER <-> REPLICA sync: finished with success", "keys", r.syncedKeys.Load(), "offset", offset)
	return r.stream(nc, br)
}

// readReplLine reads one line without its CR LF; an empty line (the
// master's keepalive newline) is skipped.
func readReplLine(br *bufio.Reader) (string, error) {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if line != "" {
			return line, nil
		}
	}
}

// fullSync reads the RDB the master sends and loads it through the write
// path, after emptying the keyspace.
func (r *replica) fullSync(nc net.Conn, br *bufio.Reader) error {
	var line string
	for {
		// The master sends newlines while it prepares the file.
		nc.SetReadDeadline(time.Now().Add(replTimeout))
		l, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		r.lastIO.Store(time.Now().Unix())
		if l = strings.TrimRight(l, "\r\n"); l != "" {
			line = l
			break
		}
	}
	if line[0] == '-' {
		return fmt.Errorf("the master answered the sync with an error: %s", line[1:])
	}
	if line[0] != '$' {
		return fmt.Errorf("bad protocol from the master: %q", line)
	}
	var mark []byte
	size := int64(-1)
	if strings.HasPrefix(line, "$EOF:") {
		mark = []byte(line[5:])
		if len(mark) != 40 {
			return fmt.Errorf("bad EOF mark from the master: %q", line)
		}
	} else {
		n, err := strconv.ParseInt(line[1:], 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("bad RDB length from the master: %q", line)
		}
		size = n
	}
	if err := r.flushAll(); err != nil {
		return err
	}
	// The deadline moves on with every read of the file (ioDeadline).
	src := &ioDeadline{nc: nc, r: br, lastIO: &r.lastIO}
	var in io.Reader = src
	if size >= 0 {
		in = io.LimitReader(src, size)
	}
	d := rdb.NewDecoder(bufio.NewReaderSize(in, 1<<16))
	if mark != nil {
		// The file is followed by the mark: the decoder must not read
		// past its end, so it reads br itself (it stops at its checksum).
		d = rdb.NewDecoder(br)
	}
	loader := newReplLoader(r.s)
	keys := 0
	r.streamDB = 0
	for {
		if mark != nil {
			nc.SetReadDeadline(time.Now().Add(replTimeout))
		}
		e, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch e.Kind {
		case rdb.KindAux:
			// The database the master's stream goes on in, until its
			// first SELECT (Redis's rsi.repl_stream_db).
			if string(e.Key) == "repl-stream-db" {
				if n, err := strconv.Atoi(string(e.Value)); err == nil && n >= 0 && r.s.validDB(int64(n)) && (n == 0 || !r.s.router.sharded()) {
					r.streamDB = uint16(n)
				}
			}
			continue
		case rdb.KindFunction:
			if err := loader.flush(); err != nil {
				return err
			}
			cmd := fsm.Command{Op: fsm.OpFunctionRestore, Args: [][]byte{fsm.FunctionPayload(e.Value)}, Int: fsm.RestoreReplace}
			if err := r.s.proposeEveryGroup(cmd); err != nil {
				return fmt.Errorf("loading a function library from the master: %w", err)
			}
			continue
		}
		if e.DB != 0 && r.s.router.sharded() {
			r.s.cfg.Logger.Warn("replication: key of a database other than 0 not loaded: a cluster of several groups has database 0 alone", "db", e.DB)
			continue
		}
		if !r.s.validDB(int64(min(e.DB, 1<<32))) {
			r.s.cfg.Logger.Warn("replication: key of a database beyond --databases not loaded", "db", e.DB, "databases", r.s.databases())
			continue
		}
		if v := append([]byte{e.Type}, e.Value...); !fsm.CheckRDBValue(e.Version, v) {
			if !fsm.EmptyRDBValue(v) {
				r.s.cfg.Logger.Warn("replication: key not loaded: kvs cannot keep its value", "key", string(e.Key), "type", rdb.TypeName(e.Type))
			}
			continue
		}
		cmd := fsm.Command{Op: fsm.OpRestore, DB: uint16(e.DB), Args: [][]byte{e.Key, e.Payload()}, Flags: fsm.FlagReplace}
		if e.Expire > 0 {
			cmd.Int = e.Expire
		} else if e.Expire == 0 {
			cmd.Int = 1 // the epoch: long past
		}
		if err := loader.add(cmd); err != nil {
			return err
		}
		keys++
	}
	if err := loader.flush(); err != nil {
		return err
	}
	if mark != nil {
		nc.SetReadDeadline(time.Now().Add(replTimeout))
		got := make([]byte, 40)
		if _, err := io.ReadFull(br, got); err != nil {
			return err
		}
		if !bytes.Equal(got, mark) {
			return errors.New("the RDB from the master does not end with its EOF mark")
		}
	} else if _, err := io.Copy(io.Discard, in); err != nil {
		return err // what the decoder left of the file's length
	}
	r.syncedKeys.Store(int64(keys))
	return nil
}

// ioDeadline reads r, moving nc's read deadline on before each read, and
// notes the time of each read.
type ioDeadline struct {
	nc     net.Conn
	r      io.Reader
	lastIO *atomic.Int64
}

func (d *ioDeadline) Read(p []byte) (int, error) {
	d.nc.SetReadDeadline(time.Now().Add(replTimeout))
	n, err := d.r.Read(p)
	if n > 0 {
		d.lastIO.Store(time.Now().Unix())
	}
	return n, err
}

// flushAll empties every group's keyspace through the write path.
func (r *replica) flushAll() error { return r.flushIn(fsm.Command{Op: fsm.OpFlushAll}) }

// flushIn proposes fc, an OpFlushAll (of every database, or FLUSHDB's of
// its own), to every group holding keys.
func (r *replica) flushIn(fc fsm.Command) error {
	s := r.s
	if !s.router.sharded() {
		_, err := firstReply(s.proposeTo(&s.router.home, []fsm.Command{fc}))
		return err
	}
	for g := range s.router.all() {
		if g.index == 0 {
			continue // the meta group holds no keys
		}
		if _, err := firstReply(s.proposeTo(g, []fsm.Command{fc})); err != nil {
			return err
		}
	}
	return nil
}

// proposeEveryGroup proposes cmd to the home group, and on a sharded
// node to every group (functions: everyGroup).
func (s *Server) proposeEveryGroup(cmd fsm.Command) error {
	if !s.router.sharded() {
		_, err := firstReply(s.proposeTo(&s.router.home, []fsm.Command{cmd}))
		return err
	}
	for g := range s.router.all() {
		if _, err := firstReply(s.proposeTo(g, []fsm.Command{cmd})); err != nil {
			return err
		}
	}
	return nil
}

// replLoader proposes commands in batches, one per group, each in the
// order its commands were added: writes to different groups touch
// different keys, so their batches go to their groups at once.
type replLoader struct {
	s       *Server
	batches map[*groupRef][]fsm.Command
	n       int // commands queued
}

func newReplLoader(s *Server) *replLoader {
	return &replLoader{s: s, batches: map[*groupRef][]fsm.Command{}}
}

// groupOfKey is the group of key (the home group when the node is not
// sharded, or there is no key).
func (s *Server) groupOfKey(key []byte) *groupRef {
	if !s.router.sharded() || key == nil {
		return &s.router.home
	}
	return s.router.groupIn(s.router.slotMap(), fsm.KeySlot(key))
}

// add queues cmd, a write of its first argument's key.
func (l *replLoader) add(cmd fsm.Command) error {
	var key []byte
	if len(cmd.Args) > 0 {
		key = cmd.Args[0]
	}
	return l.addTo(l.s.groupOfKey(key), cmd)
}

// addTo queues cmd for group g, proposing what is queued once it is a
// full batch.
func (l *replLoader) addTo(g *groupRef, cmd fsm.Command) error {
	l.batches[g] = append(l.batches[g], cmd)
	if l.n++; l.n >= replBatch {
		return l.flush()
	}
	return nil
}

// flush proposes every group's batch, the groups' at once, and waits for
// them.
func (l *replLoader) flush() error {
	if l.n == 0 {
		return nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for g, batch := range l.batches {
		if len(batch) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies, err := l.s.proposeTo(g, batch)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
			for i, rep := range replies {
				if rep.Kind == fsm.ReplyError {
					l.s.cfg.Logger.Warn("replication: a write from the master failed here", "op", batch[i].Op.String(), "err", rep.Str)
				}
			}
		}()
	}
	wg.Wait()
	for g := range l.batches {
		l.batches[g] = l.batches[g][:0]
	}
	l.n = 0
	return first
}

// stream applies the master's command stream until an error or the stop,
// acknowledging the applied offset every second.
func (r *replica) stream(nc net.Conn, br *bufio.Reader) error {
	var wmu sync.Mutex
	ack := func() error {
		wmu.Lock()
		defer wmu.Unlock()
		nc.SetWriteDeadline(time.Now().Add(replTimeout))
		_, err := nc.Write(appendCommandArgs(nil, []byte("REPLCONF"), []byte("ACK"),
			strconv.AppendInt(nil, r.applied.Load(), 10)))
		return err
	}
	tick := time.NewTicker(replAckInterval)
	defer tick.Stop()
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		for {
			select {
			case <-r.stop:
				return
			case <-ended:
				return
			case <-tick.C:
				if ack() != nil {
					nc.Close()
					return
				}
			}
		}
	}()
	p := &replParser{s: r.s, c: &client{s: r.s, proto: 2, fd: -1, grp: &r.s.router.home}, loader: newReplLoader(r.s)}
	p.c.selectDB(r.streamDB)
	for {
		// The master pings every 10 seconds (repl-ping-replica-period):
		// a link silent for repl-timeout is dead.
		nc.SetReadDeadline(time.Now().Add(replTimeout))
		args, n, err := readReplCommand(br)
		if err != nil {
			return err
		}
		r.lastIO.Store(time.Now().Unix())
		r.readOff.Add(int64(n))
		switch {
		case is(args[0], "replconf") && len(args) >= 2 && is(args[1], "getack"):
			// Acknowledged before the GETACK counts, as in Redis.
			if err := p.loader.flush(); err != nil {
				return err
			}
			r.applied.Store(r.readOff.Load() - int64(n))
			if err := ack(); err != nil {
				return err
			}
		default:
			if err := p.apply(args); err != nil {
				return err
			}
		}
		if br.Buffered() == 0 && !p.inMulti {
			if err := p.loader.flush(); err != nil {
				return err
			}
			if !p.inMulti {
				r.applied.Store(r.readOff.Load())
			}
		}
	}
}

// readReplCommand reads one RESP array of bulk strings (what a master
// sends), returning it and its length in bytes.
func readReplCommand(br *bufio.Reader) ([][]byte, int, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, 0, err
	}
	n := len(line)
	if len(line) < 3 || line[0] != '*' {
		if strings.TrimSpace(string(line)) == "" {
			// A newline keepalive counts in the offset, as in Redis.
			return [][]byte{[]byte("ping")}, n, nil
		}
		return nil, n, fmt.Errorf("bad protocol from the master: %q", line)
	}
	count, err := strconv.Atoi(string(bytes.TrimRight(line[1:], "\r\n")))
	if err != nil || count < 1 || count > 1<<20 {
		return nil, n, fmt.Errorf("bad multibulk length from the master: %q", line)
	}
	args := make([][]byte, count)
	for i := range args {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return nil, n, err
		}
		n += len(line)
		if len(line) < 3 || line[0] != '$' {
			return nil, n, fmt.Errorf("bad bulk from the master: %q", line)
		}
		size, err := strconv.Atoi(string(bytes.TrimRight(line[1:], "\r\n")))
		if err != nil || size < 0 {
			return nil, n, fmt.Errorf("bad bulk length from the master: %q", line)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, n, err
		}
		n += size + 2
		args[i] = b[:size]
	}
	return args, n, nil
}

// replParser turns the stream's commands into writes.
type replParser struct {
	s       *Server
	c       *client
	loader  *replLoader
	inMulti bool
	// skipDB: the master SELECTed a database kvs does not have here (a
	// cluster of several groups has database 0 alone; or one beyond
	// --databases): its writes are skipped until the next SELECT.
	skipDB bool
}

// apply parses args as the command table does and queues the write, in
// the database the master's last SELECT chose (the parser's client's);
// what kvs does not keep or need (PING, REPLCONF, ...) is skipped, a
// command it lacks logged.
func (p *replParser) apply(args [][]byte) error {
	cmd, _ := p.c.lookup(args[0])
	if cmd == nil {
		p.s.cfg.Logger.Warn("replication: a command from the master kvs does not have was skipped", "command", string(args[0]))
		return nil
	}
	switch cmd.name {
	case "select":
		n, e := dbIndex(args[len(args)-1])
		switch {
		case e != "":
			p.s.cfg.Logger.Warn("replication: a SELECT from the master was refused here", "err", e)
			p.skipDB = true
		case n != 0 && p.s.router.sharded():
			p.skipDB = true
			p.s.cfg.Logger.Warn("replication: the master writes to a database other than 0: a cluster of several groups has database 0 alone, and skips those writes", "db", n)
		case !p.s.validDB(n):
			p.skipDB = true
			p.s.cfg.Logger.Warn("replication: the master writes to a database beyond --databases: its writes are skipped", "db", n, "databases", p.s.databases())
		default:
			p.skipDB = false
			p.c.selectDB(uint16(n))
		}
		return nil
	case "ping", "replconf", "publish", "spublish":
		return nil
	case "multi":
		p.inMulti = true
		return p.loader.flush()
	case "exec":
		p.inMulti = false
		return p.loader.flush()
	}
	if p.skipDB && cmd.name != "flushall" {
		return nil
	}
	if cmd.parse == nil || !cmd.arityOK(args) {
		p.s.cfg.Logger.Warn("replication: a command from the master was skipped", "command", cmd.name)
		return nil
	}
	p.c.errIfFound = ""
	fc, e := cmd.parse(p.c, args)
	fc.DB = p.c.db
	if e != "" || fc.Op == fsm.OpInvalid || !fc.Op.IsWrite() {
		if e != "" {
			p.s.cfg.Logger.Warn("replication: a command from the master was refused here", "command", cmd.name, "err", e)
		}
		return nil
	}
	if fc.Op == fsm.OpFlushAll {
		if err := p.loader.flush(); err != nil {
			return err
		}
		r := p.s.replicaOf()
		if r == nil {
			return nil
		}
		if fc.Flags&fsm.FlagFlushDB == 0 {
			fc.DB = 0 // FLUSHALL: every database, whichever is selected
		}
		return r.flushIn(fc)
	}
	if everyGroup(fc.Op) && p.s.router.sharded() {
		if err := p.loader.flush(); err != nil {
			return err
		}
		return p.s.proposeEveryGroup(fc)
	}
	g := &p.s.router.home
	if p.s.router.sharded() {
		slot, ok := commandSlot(cmd, args, &p.c.slotKeys)
		if !ok {
			p.s.cfg.Logger.Warn("replication: a command from the master on keys of several slots was skipped (CROSSSLOT)", "command", cmd.name)
			return nil
		}
		g = p.s.router.groupIn(p.s.router.slotMap(), slot)
	}
	return p.loader.addTo(g, fc)
}

// replicationInfo is INFO replication of a replica of a redis-server.
func (r *replica) info(s *Server) []InfoField {
	var fs []InfoField
	add := func(name, value string) { fs = append(fs, InfoField{name, value}) }
	link := "down"
	if r.link.Load() {
		link = "up"
	}
	lastIO := int64(-1)
	if t := r.lastIO.Load(); t != 0 && r.link.Load() {
		lastIO = time.Now().Unix() - t
	}
	add("role", "slave")
	add("master_host", r.host)
	add("master_port", strconv.Itoa(r.port))
	add("master_link_status", link)
	add("master_last_io_seconds_ago", strconv.FormatInt(lastIO, 10))
	add("master_sync_in_progress", strconv.Itoa(boolInt(r.syncing.Load())))
	readOff, applied := r.readOff.Load(), r.applied.Load()
	if !r.link.Load() && readOff == 0 {
		readOff, applied = 1, 1 // as Redis before the first sync
	}
	add("slave_read_repl_offset", strconv.FormatInt(readOff, 10))
	add("slave_repl_offset", strconv.FormatInt(applied, 10))
	if !r.link.Load() {
		down := int64(-1)
		if t := r.downSince.Load(); t != 0 {
			down = time.Now().Unix() - t
		}
		add("master_link_down_since_seconds", strconv.FormatInt(down, 10))
	}
	add("slave_priority", "100")
	add("slave_read_only", "1")
	add("replica_announced", "1")
	add("connected_slaves", "0")
	fs = s.addGoodReplicas(fs)
	replid := s.replID
	if id := r.masterRun.Load(); id != nil {
		replid = *id
	}
	add("master_failover_state", "no-failover")
	add("master_replid", replid)
	add("master_replid2", "0000000000000000000000000000000000000000")
	add("master_repl_offset", strconv.FormatInt(applied, 10))
	add("second_repl_offset", "-1")
	add("repl_backlog_active", "0")
	add("repl_backlog_size", "1048576")
	add("repl_backlog_first_byte_offset", "0")
	add("repl_backlog_histlen", "0")
	return fs
}

// appendRole is ROLE's reply on a replica of a redis-server: its master,
// the link's state and the offset applied (-1 while not linked).
func (r *replica) appendRole(b []byte) []byte {
	state, off := "connecting", int64(-1)
	switch {
	case r.link.Load():
		state, off = "connected", r.applied.Load()
	case r.syncing.Load():
		state = "sync"
	}
	b = appendArrayLen(b, 5)
	b = appendBulkString(b, "slave")
	b = appendBulkString(b, r.host)
	b = appendInt(b, int64(r.port))
	b = appendBulkString(b, state)
	return appendInt(b, off)
}

// replicaRefuses reports whether a replica of a redis-server refuses the
// command with READONLY: a write, an EXEC of one, and a script or
// function that may write. Redis runs a script that declares no flags
// and refuses its first write; kvs cannot tell whether such a script
// writes before it runs, and a refusal decided as it applies would
// differ from one replay of the log to another, so it refuses the script.
func (c *client) replicaRefuses(cmd, spec *command, args [][]byte) bool {
	if c.multi != nil && cmd.name == "exec" {
		return c.multi.flags&flagWrite != 0
	}
	f := c.commandFlags(spec, args)
	if spec.flags&flagDeclared != 0 {
		return f&(flagWrite|flagMayReplicate) != 0
	}
	return f&flagWrite != 0
}
