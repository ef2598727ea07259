package server

import (
	"strconv"
	"sync"
	"time"
)

// MONITOR: every command the node executes, as one line per command in
// Redis's format,
//
//	+1690000000.123456 [0 127.0.0.1:5555] "SET" "k" "v"
//
// pushed to the connections that sent MONITOR. As in Redis, commands
// refused before execution (unknown, wrong arity) and administrative ones
// (CONFIG, SLOWLOG, LATENCY, CLIENT KILL/LIST/PAUSE/..., MONITOR) are not
// shown, EVAL/EVALSHA/FCALL are shown and then the commands their scripts
// call, from "lua", and the passwords of AUTH and HELLO are redacted.
// A script runs on every replica, so each node's MONITOR shows its
// commands. A write sent to a cluster follower is shown by the follower
// (which received it from the client), not by the leader it is forwarded
// to.
//
// Cost when no one monitors: one atomic load per command
// (Server.monitoring).

// monitorSet is the server's monitoring connections.
type monitorSet struct {
	mu   sync.Mutex // guards list
	list []*client
}

// runMonitor makes c a monitor: from its reply on, c receives the lines.
func runMonitor(c *client, args [][]byte) {
	if c.isMonitor.Load() {
		c.out = appendStatus(c.out, "OK")
		return
	}
	c.out = appendStatus(c.out, "OK")
	ps := c.ensurePush()
	// The +OK goes before the first line: queue it as pushed output.
	ps.mu.Lock()
	c.mergeOutputLocked(ps)
	ps.mu.Unlock()
	m := &c.s.monitors
	m.mu.Lock()
	m.list = append(m.list, c)
	c.s.monitoring.Store(int32(len(m.list)))
	m.mu.Unlock()
	c.isMonitor.Store(true)
}

// removeMonitor forgets c, which is closing.
func (s *Server) removeMonitor(c *client) {
	if !c.isMonitor.Load() {
		return
	}
	m := &s.monitors
	m.mu.Lock()
	for i, o := range m.list {
		if o == c {
			m.list = append(m.list[:i], m.list[i+1:]...)
			break
		}
	}
	s.monitoring.Store(int32(len(m.list)))
	m.mu.Unlock()
}

// feedMonitors shows args, executed by c (or by a script when from is
// "lua"), to the monitors, unless Redis would not show cmd (the
// subcommand, for a container): not Redis's ADMIN commands and
// subcommands. Redis 7.0 shows EVAL and then its script's commands, and
// so does kvs.
func (s *Server) feedMonitors(from string, db uint16, cmd *command, args [][]byte) {
	if cmd.flags&flagAdmin != 0 {
		return
	}
	line := monitorLine(time.Now(), db, from, args)
	m := &s.monitors
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mc := range m.list {
		s.deliver(mc, line)
	}
}

// execMonitorLines are the MONITOR lines of an EXEC by c: its queued
// commands, those the ACL still allows (run), and then the EXEC itself,
// as Redis shows a transaction once it runs; nil when no monitor is on.
func (c *client) execMonitorLines(queued []queuedCmd, run bool, exec [][]byte) [][]byte {
	if c.s.monitoring.Load() == 0 || c.peer {
		return nil
	}
	now := time.Now()
	var lines [][]byte
	for _, q := range queued {
		if run && q.spec.flags&flagAdmin == 0 && c.execRefusal(q.cmd, q.args) == "" {
			lines = append(lines, monitorLine(now, c.db, c.addr, q.args))
		}
	}
	return append(lines, monitorLine(now, c.db, c.addr, exec))
}

// showMonitorLines delivers lines to the monitors.
func (s *Server) showMonitorLines(lines [][]byte) {
	if len(lines) == 0 {
		return
	}
	m := &s.monitors
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, line := range lines {
		for _, mc := range m.list {
			s.deliver(mc, line)
		}
	}
}

// monitorLine formats one MONITOR line as Redis's replicationFeedMonitors
// does, with each argument quoted as sdscatrepr quotes it.
func monitorLine(now time.Time, db uint16, from string, args [][]byte) []byte {
	b := make([]byte, 0, 64)
	b = append(b, '+')
	b = strconv.AppendInt(b, now.Unix(), 10)
	b = append(b, '.')
	us := strconv.AppendInt(nil, int64(now.Nanosecond()/1000), 10)
	for i := len(us); i < 6; i++ {
		b = append(b, '0')
	}
	b = append(b, us...)
	b = append(b, " ["...)
	b = strconv.AppendInt(b, int64(db), 10)
	b = append(b, ' ')
	b = append(b, from...)
	b = append(b, "] "...)
	red := redactedArgs(args)
	for j, a := range args {
		if j > 0 {
			b = append(b, ' ')
		}
		if red(j) {
			a = []byte("(redacted)")
		}
		b = appendRepr(b, a)
	}
	return append(b, "\r\n"...)
}

// appendRepr appends a quoted as Redis's sdscatrepr does.
func appendRepr(b, a []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, ch := range a {
		switch ch {
		case '\\', '"':
			b = append(b, '\\', ch)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\a':
			b = append(b, '\\', 'a')
		case '\b':
			b = append(b, '\\', 'b')
		default:
			if ch >= 0x20 && ch <= 0x7e {
				b = append(b, ch)
			} else {
				b = append(b, '\\', 'x', hex[ch>>4], hex[ch&15])
			}
		}
	}
	return append(b, '"')
}

func init() {
	commandDocs["monitor"] = [2]string{"Listens for all requests received by the server in real-time.", "1.0.0"}
}
