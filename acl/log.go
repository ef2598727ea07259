package acl

import (
	"sync"
	"sync/atomic"
	"time"
)

// ACL LOG, as Redis 7.0 keeps it (addACLLogEntry): the newest denials
// first, at most LogMax; a denial like one of the ten newest (same
// reason, context, object and user, within a minute) counts on that entry
// instead of adding one. The log is per node, like Redis's.

const (
	LogMax   = 128 // acllog-max-len's default
	logGroup = 60 * time.Second
)

// Entry is one entry of the log.
type Entry struct {
	Count      int64
	Reason     string // command, key, channel, auth
	Context    string // toplevel, multi, lua
	Object     string
	Username   string
	ClientInfo string
	Updated    time.Time
	// Redis 7.2's identity of an entry: its number among the entries
	// made since start (Reset does not restart it) and when it was
	// made.
	EntryID int64
	Created time.Time
}

// Log is the ACL LOG. Its zero value is empty and ready.
type Log struct {
	mu      sync.Mutex // guards entries and made
	entries []*Entry   // newest first
	made    int64      // entries made since start: the next entry-id

	// Denials since start by reason, for metrics (Denials).
	denied [4]atomic.Int64
}

var reasons = [4]string{"command", "key", "channel", "auth"}

// Add records e: its Reason, Context, Object, Username, ClientInfo and
// Updated (when it happened). Count, EntryID and Created are the log's.
func (l *Log) Add(e *Entry) {
	for i, r := range reasons {
		if r == e.Reason {
			l.denied[i].Add(1)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < len(l.entries) && i < 10; i++ {
		m := l.entries[i]
		d := e.Updated.Sub(m.Updated)
		if d < 0 {
			d = -d
		}
		if m.Reason == e.Reason && m.Context == e.Context && m.Object == e.Object &&
			m.Username == e.Username && d <= logGroup {
			m.Count++
			m.ClientInfo, m.Updated = e.ClientInfo, e.Updated
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = m
			return
		}
	}
	e.Count = 1
	e.EntryID, e.Created = l.made, e.Updated
	l.made++
	l.entries = append(l.entries, nil)
	copy(l.entries[1:], l.entries)
	l.entries[0] = e
	if len(l.entries) > LogMax {
		l.entries[LogMax] = nil
		l.entries = l.entries[:LogMax]
	}
}

// AddDenial records a refused command of user, in context (toplevel,
// multi, lua), by the client cinfo describes: what was refused (res) is
// cmd, or the key or channel at args[at].
func (l *Log) AddDenial(context, user, cinfo string, now time.Time, res Result, cmd *Command, args [][]byte, at int) {
	e := &Entry{Context: context, Username: user, Updated: now, ClientInfo: cinfo}
	switch res {
	case DeniedCmd:
		e.Reason, e.Object = "command", cmd.Name
	case DeniedKey:
		e.Reason, e.Object = "key", string(args[at])
	default:
		e.Reason, e.Object = "channel", string(args[at])
	}
	l.Add(e)
}

// Entries returns copies of the newest n entries.
func (l *Log) Entries(n int) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n = min(n, len(l.entries))
	out := make([]Entry, n)
	for i := range out {
		out[i] = *l.entries[i]
	}
	return out
}

// Reset empties the log (ACL LOG RESET).
func (l *Log) Reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

// Denials returns the denials counted since start, by reason ("command",
// "key", "channel", "auth"). Reset does not reset them.
func (l *Log) Denials() map[string]int64 {
	out := make(map[string]int64, len(reasons))
	for i, r := range reasons {
		out[r] = l.denied[i].Load()
	}
	return out
}
