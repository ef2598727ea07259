package server

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The slow log (SLOWLOG GET / LEN / RESET / HELP), as Redis keeps it: the
// commands that took at least slowlog-log-slower-than microseconds (-1:
// none, 0: every command), newest first, at most slowlog-max-len of them.
//
// What a command's duration is, in kvs, is the time commandstats records
// for it (metrics.go): for a command answered at once (reads, server
// commands, errors) the time from the server turning to it to its reply
// being queued, a run of one command's name in a pipeline sharing its time
// evenly; for a write, the time of its batch, from the parse of the
// batch's first command to the replies being queued, which includes the
// wait for the batch to be durable (fsync) or committed (Raft). Redis
// measures execution alone; see docs/compatibility.md.
//
// Cost on the hot path: one atomic load per run or batch, and a comparison;
// the arguments are copied only for a command that is logged.

// Redis's caps on what an entry keeps of a command.
const (
	slowlogMaxArgs   = 32  // SLOWLOG_ENTRY_MAX_ARGC
	slowlogMaxString = 128 // SLOWLOG_ENTRY_MAX_STRING
)

// Redis's defaults.
const (
	defaultSlowlogSlowerThan = 10000
	defaultSlowlogMaxLen     = 128
)

type slowEntry struct {
	id       int64
	unix     int64 // seconds
	duration int64 // µs
	args     [][]byte
	addr     string
	name     string
}

type slowLog struct {
	// slowerThan is slowlog-log-slower-than in µs (-1: off); maxLen is
	// slowlog-max-len. CONFIG SET stores them; the hot path loads
	// slowerThan once per run or batch.
	slowerThan atomic.Int64
	maxLen     atomic.Int64

	mu      sync.Mutex  // guards the fields below
	entries []slowEntry // oldest first
	nextID  int64
}

func (l *slowLog) init() {
	l.slowerThan.Store(defaultSlowlogSlowerThan)
	l.maxLen.Store(defaultSlowlogMaxLen)
}

// threshold returns slowlog-log-slower-than as a duration, or -1 when the
// slow log is off.
func (l *slowLog) threshold() time.Duration {
	us := l.slowerThan.Load()
	if us < 0 {
		return -1
	}
	if us > int64(1<<62)/int64(time.Microsecond) {
		return 1 << 62
	}
	return time.Duration(us) * time.Microsecond
}

// add logs args, which took d, run by c; the entry copies what it keeps.
func (l *slowLog) add(c *client, args [][]byte, d time.Duration) {
	e := slowEntry{
		unix:     time.Now().Unix(),
		duration: d.Microseconds(),
		args:     slowlogArgs(args),
		addr:     c.addr,
	}
	c.info.Lock()
	e.name = c.info.name
	c.info.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	e.id = l.nextID
	l.nextID++
	l.entries = append(l.entries, e)
	l.trimLocked()
}

// trimLocked drops the oldest entries past slowlog-max-len.
func (l *slowLog) trimLocked() {
	max := l.maxLen.Load()
	if n := int64(len(l.entries)); n > max {
		drop := int(n - max)
		clear(l.entries[:drop])
		l.entries = append(l.entries[:0], l.entries[drop:]...)
	}
}

// setMaxLen is CONFIG SET slowlog-max-len: Redis trims at the next entry,
// kvs at once, which no reply can tell apart.
func (l *slowLog) setMaxLen(n int64) {
	l.maxLen.Store(n)
	l.mu.Lock()
	l.trimLocked()
	l.mu.Unlock()
}

func (l *slowLog) reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

func (l *slowLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// newest returns up to n entries, newest first (n < 0: all).
func (l *slowLog) newest(n int) []slowEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n < 0 || n > len(l.entries) {
		n = len(l.entries)
	}
	out := make([]slowEntry, n)
	for i := range out {
		out[i] = l.entries[len(l.entries)-1-i]
	}
	return out
}

// slowlogArgs copies args as Redis's slowlogCreateEntry keeps them: at most
// 32, the last of them then saying how many more there were, each at most
// 128 bytes and then how many more bytes it had; the passwords of AUTH and
// HELLO ... AUTH replaced, as Redis redacts them.
func slowlogArgs(args [][]byte) [][]byte {
	red := redactedArgs(args)
	n := len(args)
	if n > slowlogMaxArgs {
		n = slowlogMaxArgs
	}
	out := make([][]byte, n)
	for j := 0; j < n; j++ {
		a := args[j]
		switch {
		case n != len(args) && j == n-1:
			out[j] = []byte("... (" + strconv.Itoa(len(args)-n+1) + " more arguments)")
		case red(j):
			out[j] = []byte("(redacted)")
		case len(a) > slowlogMaxString:
			b := append([]byte(nil), a[:slowlogMaxString]...)
			out[j] = append(b, "... ("+strconv.Itoa(len(a)-slowlogMaxString)+" more bytes)"...)
		default:
			out[j] = append([]byte(nil), a...)
		}
	}
	return out
}

// redactedArgs returns which arguments of args Redis redacts in the slow
// log and MONITOR: AUTH's, HELLO's AUTH username and password, and the
// values CONFIG SET gives its sensitive parameters.
func redactedArgs(args [][]byte) func(j int) bool {
	switch {
	case is(args[0], "auth"):
		return func(j int) bool { return j > 0 }
	case is(args[0], "config") && len(args) > 1 && is(args[1], "set"):
		return func(j int) bool { return j > 2 && j%2 == 1 && sensitiveParam(args[j-1]) }
	case is(args[0], "migrate"):
		red := map[int]bool{}
	scan:
		for j := 6; j < len(args); j++ {
			more := len(args) - 1 - j
			switch {
			case is(args[j], "copy"), is(args[j], "replace"):
			case is(args[j], "auth") && more >= 1:
				red[j+1] = true
				j++
			case is(args[j], "auth2") && more >= 2:
				red[j+1], red[j+2] = true, true
				j += 2
			default:
				break scan
			}
		}
		return func(j int) bool { return red[j] }
	case is(args[0], "hello"):
		at := -1
		for j := 2; j+2 < len(args); j++ {
			if is(args[j], "auth") {
				at = j
				break
			}
			if is(args[j], "setname") {
				j++
			}
		}
		return func(j int) bool { return at > 0 && (j == at+1 || j == at+2) }
	}
	return func(int) bool { return false }
}

// sensitiveParam reports whether Redis redacts the value CONFIG SET gives
// the parameter (its SENSITIVE_CONFIG flag).
func sensitiveParam(name []byte) bool {
	return is(name, "masteruser") || is(name, "masterauth") || is(name, "requirepass")
}

// logSlowRun logs the commands of the run just ended (c.pipe[c.runFirst:]
// of n commands), each of which took d, if d reaches the threshold.
func (c *client) logSlowRun(id int, n int64, d time.Duration) {
	c.checkLatency(id, d)
	t := c.s.slowlog.threshold()
	if t < 0 || d < t || !c.slowLoggable(id) {
		return
	}
	for j := c.runFirst; j < c.runFirst+int(n) && j < len(c.pipe); j++ {
		c.s.slowlog.add(c, c.pipe[j], d)
	}
}

// logSlowBatch logs the commands of the batch just answered, each of which
// took d, if d reaches the threshold.
func (c *client) logSlowBatch(d time.Duration) {
	if len(c.pending) > 0 {
		c.checkLatency(c.pending[0].cmd, d)
	}
	t := c.s.slowlog.threshold()
	if t < 0 || d < t {
		return
	}
	for _, p := range c.pending {
		if !p.rejected && c.slowLoggable(p.cmd) && p.at < len(c.pipe) {
			c.s.slowlog.add(c, c.pipe[p.at], d)
		}
	}
}

// slowLoggable reports whether the command of statistics index id goes in
// the slow log: not an unknown command, nor EXEC (Redis's SKIP_SLOWLOG),
// nor a peer's forwarded batch (logged as its commands on the leader).
func (c *client) slowLoggable(id int) bool {
	st := &c.s.stats.cmds
	if id == st.unknown || c.peer || c.script != nil {
		return false
	}
	name := st.names[id]
	return name != "exec" && name != "kvs.forward"
}

// runSlowlog answers SLOWLOG GET [count] / LEN / RESET / HELP.
func runSlowlog(c *client, args [][]byte) {
	sub := args[1]
	l := &c.s.slowlog
	switch {
	case is(sub, "help"):
		c.out = appendHelp(c.out, slowlogHelp)
	case is(sub, "reset"):
		l.reset()
		c.out = appendStatus(c.out, "OK")
	case is(sub, "len"):
		c.out = appendInt(c.out, int64(l.len()))
	case is(sub, "get") && len(args) <= 3:
		count := int64(10)
		if len(args) == 3 {
			n, ok := parseInt(args[2])
			if !ok || n < -1 {
				c.out = appendError(c.out, errSlowlogCount)
				return
			}
			count = n
		}
		if count > 1<<31 {
			count = -1
		}
		entries := l.newest(int(count))
		b := appendArrayLen(c.out, len(entries))
		for _, e := range entries {
			b = appendArrayLen(b, 6)
			b = appendInt(b, e.id)
			b = appendInt(b, e.unix)
			b = appendInt(b, e.duration)
			b = appendArrayLen(b, len(e.args))
			for _, a := range e.args {
				b = appendBulk(b, a)
			}
			b = appendBulkString(b, e.addr)
			b = appendBulkString(b, e.name)
		}
		c.out = b
	default:
		// GET with more arguments than it takes.
		c.out = appendError(c.out, errSubcommandSyntax(sub, "SLOWLOG"))
	}
}

var slowlogHelp = []string{
	"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GET [<count>]",
	"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
	"    Entries are made of:",
	"    id, timestamp, time in microseconds, arguments array, client IP and port,",
	"    client name",
	"LEN",
	"    Return the length of the slowlog.",
	"RESET",
	"    Reset the slowlog.",
	"HELP",
	"    Prints this help.",
}

func init() {
	commandDocs["slowlog"] = [2]string{"A container for slow log commands.", "2.2.12"}
}
