package server

import (
	"strconv"
	"strings"

	"kvs/fsm"
)

// CONFIG GET and SET of the pub/sub parameters: client-output-buffer-limit
// (its normal class is enforced by outbuf.go, its pubsub class by
// pubsub.go; the replica class is kept and echoed, kvs having no replica
// clients) and notify-keyspace-events.

// bufferLimits is client-output-buffer-limit's value: normal, slave
// (replica) and pubsub, in Redis's order.
type bufferLimits [3]outputLimit

var bufferClasses = [3]string{"normal", "slave", "pubsub"}

// pubsubConfig is the server's pub/sub configuration, guarded by mu.
type pubsubConfig struct {
	limits bufferLimits
	notify fsm.NotifyClass
}

func defaultPubsubConfig() pubsubConfig {
	return pubsubConfig{limits: bufferLimits{
		defaultNormalLimit,
		{hard: 256 << 20, soft: 64 << 20, softSeconds: 60},
		defaultPubsubLimit,
	}}
}

func (l bufferLimits) String() string {
	var b strings.Builder
	for i, c := range bufferClasses {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c)
		for _, v := range []int64{l[i].hard, l[i].soft, l[i].softSeconds} {
			b.WriteByte(' ')
			b.WriteString(strconv.FormatInt(v, 10))
		}
	}
	return b.String()
}

const (
	errBufferLimitArgs  = "Wrong number of arguments in buffer limit configuration."
	errBufferLimitClass = "Invalid client class specified in buffer limit configuration."
	errBufferLimitValue = "Error in hard, soft or soft_seconds setting in buffer limit configuration."
	errNotifyClass      = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
)

// parseBufferLimits applies CONFIG SET client-output-buffer-limit's value
// (groups of <class> <hard> <soft> <soft-seconds>) to l, as Redis does:
// every group is checked before any applies.
func parseBufferLimits(l bufferLimits, v []byte) (bufferLimits, string) {
	f := strings.Fields(string(v))
	if len(f)%4 != 0 {
		return l, errBufferLimitArgs
	}
	for j := 0; j < len(f); j += 4 {
		i := -1
		switch strings.ToLower(f[j]) {
		case "normal":
			i = 0
		case "slave", "replica":
			i = 1
		case "pubsub":
			i = 2
		}
		if i < 0 {
			return l, errBufferLimitClass
		}
		hard, ok1 := parseMemory([]byte(f[j+1]))
		soft, ok2 := parseMemory([]byte(f[j+2]))
		secs := strtoll(f[j+3])
		if !ok1 || !ok2 || secs < 0 || hard < 0 || soft < 0 {
			return l, errBufferLimitValue
		}
		l[i] = outputLimit{hard: hard, soft: soft, softSeconds: secs}
	}
	return l, ""
}

// strtoll is C's strtoll(s, NULL, 10): leading blanks, a sign, the digits
// that follow; anything after them is ignored, nothing parses as 0.
func strtoll(s string) int64 {
	s = strings.TrimLeft(s, " \t")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v int64
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if v > (1<<63-1)/10 {
			v = 1<<63 - 1
			break
		}
		v = v*10 + int64(s[i]-'0')
	}
	if neg {
		return -v
	}
	return v
}

// notifyLetters are notify-keyspace-events' letters, in the order Redis
// writes them back.
var notifyLetters = []struct {
	c     byte
	class fsm.NotifyClass
}{
	{'g', fsm.NotifyGeneric}, {'$', fsm.NotifyString}, {'l', fsm.NotifyList},
	{'s', fsm.NotifySet}, {'h', fsm.NotifyHash}, {'z', fsm.NotifyZSet},
	{'x', fsm.NotifyExpired}, {'e', fsm.NotifyEvicted}, {'t', fsm.NotifyStream},
	{'d', fsm.NotifyModule}, {'n', fsm.NotifyNew},
}

// parseNotify is Redis's keyspaceEventsStringToFlags.
func parseNotify(v []byte) (fsm.NotifyClass, bool) {
	var f fsm.NotifyClass
	for _, ch := range v {
		if ch == 0 {
			break // Redis reads the value as a C string
		}
		switch ch {
		case 'A':
			f |= fsm.NotifyAll
		case 'K':
			f |= fsm.NotifyKeyspace
		case 'E':
			f |= fsm.NotifyKeyevent
		case 'm':
			f |= fsm.NotifyKeyMiss
		default:
			found := false
			for _, l := range notifyLetters {
				if l.c == ch {
					f |= l.class
					found = true
				}
			}
			if !found {
				return 0, false
			}
		}
	}
	return f, true
}

// notifyString is Redis's keyspaceEventsFlagsToString.
func notifyString(f fsm.NotifyClass) string {
	var b []byte
	if f&fsm.NotifyAll == fsm.NotifyAll {
		b = append(b, 'A')
	} else {
		for _, l := range notifyLetters {
			if f&l.class != 0 {
				b = append(b, l.c)
			}
		}
	}
	if f&fsm.NotifyKeyspace != 0 {
		b = append(b, 'K')
	}
	if f&fsm.NotifyKeyevent != 0 {
		b = append(b, 'E')
	}
	if f&fsm.NotifyKeyMiss != 0 {
		b = append(b, 'm')
	}
	return string(b)
}

// pubsubParamNames are the settable pub/sub parameters.
func isPubsubParam(name string) bool {
	return name == "client-output-buffer-limit" || name == "notify-keyspace-events"
}

// addPubsubParams adds the pub/sub parameters to CONFIG GET's.
func (s *Server) addPubsubParams(p map[string]string) {
	s.psConfigMu.Lock()
	defer s.psConfigMu.Unlock()
	p["client-output-buffer-limit"] = s.psConfig.limits.String()
	p["notify-keyspace-events"] = notifyString(s.psConfig.notify)
}

// checkPubsubParam checks a CONFIG SET value and returns the change to make
// once every pair passed, or Redis's error text.
func (s *Server) checkPubsubParam(name string, val []byte) (apply func(), e string) {
	s.psConfigMu.Lock()
	cur := s.psConfig
	s.psConfigMu.Unlock()
	switch name {
	case "client-output-buffer-limit":
		l, e := parseBufferLimits(cur.limits, val)
		if e != "" {
			return nil, errConfigSetFailed(name, e)
		}
		return func() { s.setBufferLimits(l) }, ""
	default:
		f, ok := parseNotify(val)
		if !ok {
			return nil, errConfigSetFailed(name, errNotifyClass)
		}
		return func() { s.setNotify(f) }, ""
	}
}

func (s *Server) setBufferLimits(l bufferLimits) {
	s.psConfigMu.Lock()
	s.psConfig.limits = l
	s.psConfigMu.Unlock()
	p, n := l[2], l[0]
	if p.hard == 0 && p.soft == 0 {
		s.pubsubLimit.Store(nil)
	} else {
		s.pubsubLimit.Store(&p)
	}
	if n.hard == 0 && n.soft == 0 {
		s.normalLimit.Store(nil)
	} else {
		s.normalLimit.Store(&n)
	}
}

func (s *Server) setNotify(f fsm.NotifyClass) {
	s.psConfigMu.Lock()
	s.psConfig.notify = f
	s.psConfigMu.Unlock()
	s.updateNotify()
}
