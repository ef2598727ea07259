package config

import (
	"errors"
	"strconv"
	"strings"

	"kvs/fsm"
)

// The values of client-output-buffer-limit and notify-keyspace-events,
// which Redis parses with code of their own.

// BufferLimit is client-output-buffer-limit for one class of clients: the
// hard limit in bytes, and the soft one with the seconds a client may
// stay over it; 0 is no limit.
type BufferLimit struct {
	Hard, Soft, SoftSeconds int64
}

// BufferLimits is client-output-buffer-limit's value: normal, slave
// (replica) and pubsub, in Redis's order.
type BufferLimits [3]BufferLimit

var bufferClasses = [3]string{"normal", "slave", "pubsub"}

// String is the value as CONFIG GET prints it.
func (l BufferLimits) String() string {
	var b strings.Builder
	for i, c := range bufferClasses {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(c)
		for _, v := range []int64{l[i].Hard, l[i].Soft, l[i].SoftSeconds} {
			b.WriteByte(' ')
			b.WriteString(strconv.FormatInt(v, 10))
		}
	}
	return b.String()
}

var (
	errBufferLimitArgs  = errors.New("Wrong number of arguments in buffer limit configuration.")
	errBufferLimitClass = errors.New("Invalid client class specified in buffer limit configuration.")
	errBufferLimitValue = errors.New("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
	errNotifyClass      = errors.New("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
)

// ParseBufferLimits applies CONFIG SET client-output-buffer-limit's value
// (groups of <class> <hard> <soft> <soft-seconds>) to l, as Redis does:
// every group is checked before any applies.
func ParseBufferLimits(l BufferLimits, v []byte) (BufferLimits, error) {
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
		hard, ok1 := ParseMemory([]byte(f[j+1]))
		soft, ok2 := ParseMemory([]byte(f[j+2]))
		secs := Strtoll(f[j+3])
		if !ok1 || !ok2 || secs < 0 || hard < 0 || soft < 0 {
			return l, errBufferLimitValue
		}
		l[i] = BufferLimit{Hard: hard, Soft: soft, SoftSeconds: secs}
	}
	return l, nil
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

// ParseNotify is Redis's keyspaceEventsStringToFlags.
func ParseNotify(v []byte) (fsm.NotifyClass, error) {
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
				return 0, errNotifyClass
			}
		}
	}
	return f, nil
}

// NotifyString is Redis's keyspaceEventsFlagsToString.
func NotifyString(f fsm.NotifyClass) string {
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
