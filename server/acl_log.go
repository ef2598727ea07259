package server

import (
	"sync"
	"sync/atomic"
	"time"
)

// ACL LOG, as Redis 7.0 keeps it (addACLLogEntry): the newest denials
// first, at most aclLogMax; a denial like one of the ten newest (same
// reason, context, object and user, within a minute) counts on that entry
// instead of adding one. The log is per node, like Redis's.

const (
	aclLogMax   = 128 // acllog-max-len's default
	aclLogGroup = 60 * time.Second
)

type aclLogEntry struct {
	count    int64
	reason   string // command, key, channel, auth
	context  string // toplevel, multi, lua
	object   string
	username string
	cinfo    string
	updated  time.Time
	// Redis 7.2's identity of an entry: its number among the entries
	// made since start (ACL LOG RESET does not restart it) and when it
	// was made.
	entryID int64
	created time.Time
}

type aclLog struct {
	mu      sync.Mutex     // guards entries and made
	entries []*aclLogEntry // newest first
	made    int64          // entries made since start: the next entry-id

	// Denials since start by reason, for metrics (ACLDenials).
	denied [4]atomic.Int64
}

var aclReasons = [4]string{"command", "key", "channel", "auth"}

func (l *aclLog) add(e *aclLogEntry) {
	for i, r := range aclReasons {
		if r == e.reason {
			l.denied[i].Add(1)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < len(l.entries) && i < 10; i++ {
		m := l.entries[i]
		d := e.updated.Sub(m.updated)
		if d < 0 {
			d = -d
		}
		if m.reason == e.reason && m.context == e.context && m.object == e.object &&
			m.username == e.username && d <= aclLogGroup {
			m.count++
			m.cinfo, m.updated = e.cinfo, e.updated
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = m
			return
		}
	}
	e.count = 1
	e.entryID, e.created = l.made, e.updated
	l.made++
	l.entries = append(l.entries, nil)
	copy(l.entries[1:], l.entries)
	l.entries[0] = e
	if len(l.entries) > aclLogMax {
		l.entries[aclLogMax] = nil
		l.entries = l.entries[:aclLogMax]
	}
}

// snapshot returns copies of the newest n entries.
func (l *aclLog) snapshot(n int) []aclLogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = min(n, len(l.entries))
	out := make([]aclLogEntry, n)
	for i := range out {
		out[i] = *l.entries[i]
	}
	return out
}

func (l *aclLog) reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

// ACLDenials returns the denials counted since start, by reason
// ("command", "key", "channel", "auth"), for metrics. ACL LOG RESET does
// not reset them.
func (s *Server) ACLDenials() map[string]int64 {
	out := make(map[string]int64, len(aclReasons))
	for i, r := range aclReasons {
		out[r] = s.acl.log.denied[i].Load()
	}
	return out
}

func (c *client) logContext() string {
	if c.multi != nil {
		return "multi"
	}
	return "toplevel"
}

// logDenial records a refused command: what was refused is the command's
// name, or the key or channel at args[at].
func (c *client) logDenial(res int, cmd *aclCmd, args [][]byte, at int) {
	now := time.Now()
	c.s.logDenialAs(c.logContext(), c.auth.name, c.describe(now, true), now, res, cmd, args, at)
}

// logDenialAs records a refused command of user, in context (toplevel,
// multi, lua), by the client cinfo describes.
func (s *Server) logDenialAs(context, user, cinfo string, now time.Time, res int, cmd *aclCmd, args [][]byte, at int) {
	e := &aclLogEntry{context: context, username: user, updated: now, cinfo: cinfo}
	switch res {
	case aclDeniedCmd:
		e.reason, e.object = "command", cmd.name
	case aclDeniedKey:
		e.reason, e.object = "key", string(args[at])
	default:
		e.reason, e.object = "channel", string(args[at])
	}
	s.acl.log.add(e)
}

// logAuthFailure records a failed AUTH or HELLO AUTH as user name; object
// is the command as the client spelled it.
func (c *client) logAuthFailure(name, object string) {
	now := time.Now()
	c.s.acl.log.add(&aclLogEntry{reason: "auth", context: c.logContext(), object: object,
		username: name, updated: now, cinfo: c.describe(now, true)})
}
