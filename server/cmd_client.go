package server

import (
	"crypto/tls"
	"net"
	"sync"
	"syscall"
	"time"
)

// The operator's CLIENT subcommands: KILL, REPLY, NO-EVICT, PAUSE and
// UNPAUSE (the others are in admin.go).

// Reply suppression (CLIENT REPLY), in client.replyMode.
const (
	replyOff      = 1 << iota // OFF: no replies until ON
	replySkipNext             // SKIP was the last command: skip the next reply
	replySkipThis             // this command's reply is skipped
)

// suppressReply applies CLIENT REPLY OFF or SKIP to the reply just queued
// at c.out[at:]; it is called only while c.replyMode is not zero. The
// pub/sub frames a command queued before its reply (confirmations,
// messages, up to c.pushedEnd) go out whatever CLIENT REPLY says, as in
// Redis; a goroutine's subscriber may have handed them to its writer
// already (mergeOutput), leaving c.out shorter than at.
func (c *client) suppressReply(at int) {
	at = min(max(at, c.pushedEnd), len(c.out))
	c.pushedEnd = 0
	switch {
	case c.replyMode&replyOff != 0:
		c.out = c.out[:at]
		c.replyMode &^= replySkipNext | replySkipThis
	case c.replyMode&replySkipThis != 0:
		c.out = c.out[:at]
		c.replyMode &^= replySkipThis
	case c.replyMode&replySkipNext != 0:
		c.replyMode = c.replyMode&^replySkipNext | replySkipThis
	}
}

// runClientReply answers CLIENT REPLY ON|OFF|SKIP as Redis does: only ON
// is answered.
func runClientReply(c *client, mode []byte) {
	switch {
	case is(mode, "on"):
		c.replyMode = 0
		c.out = appendStatus(c.out, "OK")
	case is(mode, "off"):
		c.replyMode = replyOff
	case is(mode, "skip"):
		if c.replyMode&replyOff == 0 {
			c.replyMode = replySkipNext
		}
	default:
		c.out = appendError(c.out, errSyntax)
	}
}

// runClientNoEvict answers CLIENT NO-EVICT ON|OFF. kvs evicts no clients
// (maxmemory-clients is not acted on), so the flag changes only what
// CLIENT LIST shows.
func runClientNoEvict(c *client, v []byte) {
	switch {
	case is(v, "on"):
		c.noEvict.Store(true)
	case is(v, "off"):
		c.noEvict.Store(false)
	default:
		c.out = appendError(c.out, errSyntax)
		return
	}
	c.out = appendStatus(c.out, "OK")
}

// killFilter is what CLIENT KILL matches clients by.
type killFilter struct {
	addr, laddr *string
	id          int64
	typ         string // "", or the type the clients must have
	skipme      bool
}

// runClientKill answers CLIENT KILL addr (old form: +OK, or an error when
// no client matched; the caller may kill itself) and CLIENT KILL filter
// value ... (the number killed; SKIPME yes by default), in Redis's order
// of checks.
func runClientKill(c *client, args [][]byte) {
	f := killFilter{skipme: true}
	oldForm := len(args) == 3
	switch {
	case oldForm:
		a := string(args[2])
		f.addr, f.skipme = &a, false
	default:
		for i := 2; i < len(args); i += 2 {
			if i+1 >= len(args) {
				c.out = appendError(c.out, errSyntax)
				return
			}
			opt, v := args[i], args[i+1]
			switch {
			case is(opt, "id"):
				n, ok := parseInt(v)
				if !ok || n < 1 {
					c.out = appendError(c.out, errClientIDPositive)
					return
				}
				f.id = n
			case is(opt, "type"):
				t, ok := clientTypeByName(v)
				if !ok {
					c.out = appendError(c.out, errUnknownClientType(v))
					return
				}
				f.typ = t
			case is(opt, "addr"):
				a := string(v)
				f.addr = &a
			case is(opt, "laddr"):
				a := string(v)
				f.laddr = &a
			case is(opt, "user"):
				if string(v) != "default" {
					c.out = appendError(c.out, errNoSuchUser(v))
					return
				}
			case is(opt, "skipme"):
				switch {
				case is(v, "yes"):
					f.skipme = true
				case is(v, "no"):
					f.skipme = false
				default:
					c.out = appendError(c.out, errSyntax)
					return
				}
			default:
				c.out = appendError(c.out, errSyntax)
				return
			}
		}
	}
	killed := 0
	for _, o := range c.s.clientsByID() {
		if !f.matches(c, o) {
			continue
		}
		if o == c {
			c.quit = true // after this reply, as Redis's CLOSE_AFTER_REPLY
		} else {
			o.kill()
		}
		killed++
	}
	switch {
	case !oldForm:
		c.out = appendInt(c.out, int64(killed))
	case killed == 0:
		c.out = appendError(c.out, errNoSuchClient)
	default:
		c.out = appendStatus(c.out, "OK")
	}
}

func (f *killFilter) matches(self, o *client) bool {
	switch {
	case f.addr != nil && o.addr != *f.addr,
		f.laddr != nil && o.laddr != *f.laddr,
		f.typ != "" && o.clientType() != f.typ,
		f.id != 0 && o.id != f.id,
		f.skipme && o == self:
		return false
	}
	return true
}

// clientTypeByName is Redis's getClientTypeByName: normal, slave or
// replica, pubsub, master.
func clientTypeByName(v []byte) (string, bool) {
	switch {
	case is(v, "normal"):
		return "normal", true
	case is(v, "slave"), is(v, "replica"):
		return "replica", true
	case is(v, "pubsub"):
		return "pubsub", true
	case is(v, "master"):
		return "master", true
	}
	return "", false
}

// clientType is Redis's getClientType of c: pubsub while it has
// subscriptions, normal otherwise. No kvs client is a master or a replica
// link in Redis's sense (nodes replicate through Raft, not RESP).
func (c *client) clientType() string {
	if c.subscribed() {
		return "pubsub"
	}
	return "normal"
}

func (c *client) subscribed() bool {
	return c.subCounts[0].Load()+c.subCounts[1].Load()+c.subCounts[2].Load() > 0
}

// kill closes c's connection from another connection (CLIENT KILL). A
// connection with a goroutine of its own sees its socket closed and ends.
// A loop closes its client on its own goroutine; a client being handed to
// a loop (its fd and loop not yet set) is closed by the loop when it takes
// it, having seen killReq (loop.add stores loopRef before handing it
// over, and kill sets killReq before it loads loopRef).
func (c *client) kill() {
	c.killReq.Store(true)
	c.nc.Close() // a loop client's original socket: closed anyway
	if lp := c.loopRef.Load(); lp != nil {
		lp.kill(c)
	}
}

// Client pauses (CLIENT PAUSE timeout [WRITE|ALL], CLIENT UNPAUSE), as
// Redis 7 has them: the clients are held, not refused; a held command runs
// once the pause ends. WRITE holds the commands that may write or
// propagate (writes, EVAL/EVALSHA/FCALL whatever the script does, PUBLISH,
// SPUBLISH, PFCOUNT, and EXEC of a transaction that writes; WAIT is not
// held, as in Redis 7.0, where it is not flagged may-replicate); ALL
// holds every command. Peer connections (another node's forwarded
// requests) are never held: a pause holds this node's clients only.
//
// Cost when no pause is on: one atomic load per command (Server.pauseMode).

const (
	pauseNone  = 0
	pauseWrite = 1
	pauseAll   = 2
)

// pauseState is the server's client pause.
type pauseState struct {
	mu    sync.Mutex // guards the fields below
	mode  int32
	end   time.Time
	timer *time.Timer
	// done is closed when the pause ends; goroutine-served clients wait
	// for it. held are the loop clients waiting, woken when it ends.
	done chan struct{}
	held []*client
}

// pause starts or extends the pause: as in Redis, a new pause keeps the
// later end and the stronger mode of the two.
func (s *Server) pause(mode int32, end time.Time) {
	p := &s.clientPause
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != pauseNone {
		if end.Before(p.end) {
			end = p.end
		}
		if mode < p.mode {
			mode = p.mode
		}
	} else {
		p.done = make(chan struct{})
	}
	p.mode, p.end = mode, end
	if p.timer != nil {
		p.timer.Stop()
	}
	p.timer = time.AfterFunc(time.Until(end), s.unpauseExpired)
	s.pauseMode.Store(mode)
}

// stopTimer stops the pause's timer: the server is stopping.
func (p *pauseState) stopTimer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}

// unpauseExpired ends the pause if its end has come (a later pause may
// have moved it).
func (s *Server) unpauseExpired() {
	p := &s.clientPause
	p.mu.Lock()
	if p.mode != pauseNone && time.Until(p.end) > 0 {
		p.timer = time.AfterFunc(time.Until(p.end), s.unpauseExpired)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	s.unpause()
}

// unpause ends the pause and releases the held clients.
func (s *Server) unpause() {
	p := &s.clientPause
	p.mu.Lock()
	if p.mode == pauseNone {
		p.mu.Unlock()
		return
	}
	p.mode = pauseNone
	s.pauseMode.Store(pauseNone)
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	close(p.done)
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for _, c := range held {
		c.lp.wakeHeld(c)
	}
}

// holds reports whether the pause in mode holds cmd with args: under a
// pause of writes, the commands that may be propagated, an EXEC of a
// transaction holding one among them, as Redis's processCommand decides.
func (c *client) holds(mode int32, cmd *command, args [][]byte) bool {
	if c.peer || c.script != nil || cmd == nil {
		return false
	}
	if mode == pauseAll {
		return true
	}
	if c.commandFlags(cmd, args)&(flagWrite|flagMayReplicate) != 0 {
		return true
	}
	return cmd.name == "exec" && c.multi != nil && c.multi.flags&(flagWrite|flagMayReplicate) != 0
}

// commandFlags are cmd's flags for args (Redis's getCommandFlags): a
// script or function that declares flags (a shebang, a library's
// registration) has those of what it declares, found in the node's
// script cache or libraries; one that does not is the command's.
func (c *client) commandFlags(cmd *command, args [][]byte) cmdFlags {
	f := cmd.flags
	if f&flagDeclared == 0 {
		return f
	}
	var sf scriptFlags
	switch cmd.name {
	case "eval", "eval_ro":
		sf, _ = shebangFlags(args[1])
	case "evalsha", "evalsha_ro":
		if len(args[1]) != 40 {
			return f
		}
		line, _ := c.s.scriptShebang(args[1])
		sf, _ = shebangFlags(line)
	case "fcall", "fcall_ro":
		found, noWrites, allowOOM := c.s.cfg.Store.Function(string(args[1]))
		sf = scriptFlags{shebang: found, noWrites: noWrites, allowOOM: allowOOM}
	default:
		return f
	}
	if !sf.shebang {
		return f
	}
	f &^= flagStale | flagDenyOOM | flagWrite | flagMayReplicate
	if !sf.allowOOM && !sf.noWrites {
		f |= flagDenyOOM
	}
	if !sf.noWrites {
		f |= flagWrite
	}
	return f
}

// holdIfPaused holds c while a pause holds cmd. It reports false when c
// is a loop client that now waits to be woken, having done nothing; a
// client with a goroutine of its own waits here.
func (c *client) holdIfPaused(cmd *command, args [][]byte) bool {
	if c.held {
		// Woken on its loop: the pause ended (or another began).
		c.held = false
		c.resumeAfterHold()
	}
	for {
		mode := c.s.pauseMode.Load()
		if mode == pauseNone || !c.holds(mode, cmd, args) {
			return true
		}
		p := &c.s.clientPause
		p.mu.Lock()
		if p.mode == pauseNone {
			p.mu.Unlock()
			continue
		}
		c.setPaused(true)
		if c.fd >= 0 {
			c.held = true
			p.held = append(p.held, c)
			p.mu.Unlock()
			return false
		}
		done := p.done
		p.mu.Unlock()
		select {
		case <-done:
			c.resumeAfterHold()
		case <-c.s.cronStopChan():
			c.quit = true
			return true
		}
	}
}

// resumeAfterHold reads the clock again after a client pause held c, and
// leaves the time it was held out of its commands' durations, as Redis
// does not count a postponed client's wait.
func (c *client) resumeAfterHold() {
	c.setPaused(false)
	c.now = time.Now().UnixMilli()
	c.restartTiming()
}

// setPaused records whether a client pause holds c: Redis counts a
// client it postpones as blocked (INFO's blocked_clients, CLIENT LIST's
// flag b).
func (c *client) setPaused(on bool) {
	if c.paused.Swap(on) != on {
		if on {
			c.s.pausedClients.Add(1)
		} else {
			c.s.pausedClients.Add(-1)
		}
	}
}

// runClientPause answers CLIENT PAUSE timeout [WRITE|ALL], checking the
// mode before the timeout as Redis does.
func runClientPause(c *client, args [][]byte) {
	mode := int32(pauseAll)
	if len(args) == 4 {
		switch {
		case is(args[3], "write"):
			mode = pauseWrite
		case is(args[3], "all"):
		default:
			c.out = appendError(c.out, errPauseMode)
			return
		}
	}
	ms, ok := parseInt(args[2])
	switch {
	case !ok:
		c.out = appendError(c.out, errPauseTimeout)
		return
	case ms < 0:
		c.out = appendError(c.out, errPauseNegative)
		return
	}
	if ms > int64(365*24*time.Hour/time.Millisecond) {
		ms = int64(365 * 24 * time.Hour / time.Millisecond)
	}
	c.s.pause(mode, time.Now().Add(time.Duration(ms)*time.Millisecond))
	c.out = appendStatus(c.out, "OK")
}

// runClientOps dispatches the subcommands of this file; it reports false
// for a subcommand it does not answer.
func runClientOps(c *client, sub []byte, args [][]byte) bool {
	switch {
	case is(sub, "kill"):
		runClientKill(c, args)
	case is(sub, "reply"):
		runClientReply(c, args[2])
	case is(sub, "no-evict"):
		runClientNoEvict(c, args[2])
	case is(sub, "pause") && len(args) <= 4:
		runClientPause(c, args)
	case is(sub, "unpause"):
		c.s.unpause()
		c.out = appendStatus(c.out, "OK")
	case is(sub, "tracking"):
		runClientTracking(c, args)
	case is(sub, "caching"):
		runClientCaching(c, args[2])
	case is(sub, "getredir"):
		runClientGetredir(c)
	case is(sub, "trackinginfo"):
		runClientTrackingInfo(c)
	default:
		return false
	}
	return true
}

// clientFlags is CLIENT LIST's flags= of c.
func (c *client) clientFlags() string {
	var b []byte
	if c.isMonitor.Load() {
		b = append(b, 'O')
	}
	if c.subscribed() {
		b = append(b, 'P')
	}
	if c.multiCount.Load() >= 0 {
		b = append(b, 'x')
	}
	if c.paused.Load() || c.s.blocked.isBlocked(c.id) {
		b = append(b, 'b')
	}
	if f, _ := c.trackingFlags(); f != "" {
		b = append(b, f...)
	}
	if c.unixSock {
		b = append(b, 'U')
	}
	if c.noEvict.Load() {
		b = append(b, 'e')
	}
	if len(b) == 0 {
		return "N"
	}
	return string(b)
}

// connFD returns nc's socket descriptor, for CLIENT LIST's fd=, or -1.
func connFD(nc net.Conn) int {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}
