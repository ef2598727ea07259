package fsm

import "strconv"

// Error texts sent to clients. They match redis-server 7.x byte for byte;
// clients and tests compare them literally, so they live here and nowhere else.
const (
	ErrWrongType     = "WRONGTYPE Operation against a key holding the wrong kind of value"
	ErrNotInteger    = "ERR value is not an integer or out of range"
	ErrOverflow      = "ERR increment or decrement would overflow"
	ErrNotFloat      = "ERR value is not a valid float"
	ErrNaNOrInfinity = "ERR increment would produce NaN or Infinity"
	ErrNoSuchKey     = "ERR no such key"
	ErrStringTooLong = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
)

// MaxStringLen is Redis's default proto-max-bulk-len: APPEND and SETRANGE
// refuse to build a string longer than this.
const MaxStringLen = 512 << 20

// Replies that carry no per-call data; returning them costs no allocation.
var (
	replyOK        = Reply{Kind: ReplyStatus, Str: "OK"}
	replyNil       = Reply{Kind: ReplyNil}
	replyZero      = Reply{Kind: ReplyInt, Int: 0}
	replyOne       = Reply{Kind: ReplyInt, Int: 1}
	replyEmpty     = Reply{Kind: ReplyBulk, Bulk: []byte{}}
	replyWrongType = Reply{Kind: ReplyError, Str: ErrWrongType}
)

// ErrorReply returns the error reply with the given full text, e.g.
// ErrorReply(ErrWrongType).
func ErrorReply(text string) Reply { return Reply{Kind: ReplyError, Str: text} }

// IntReply returns an integer reply.
func IntReply(n int64) Reply { return Reply{Kind: ReplyInt, Int: n} }

// BulkReply returns a bulk reply. b is not copied.
func BulkReply(b []byte) Reply { return Reply{Kind: ReplyBulk, Bulk: b} }

func boolReply(ok bool) Reply {
	if ok {
		return replyOne
	}
	return replyZero
}

// valueReply returns a stored string without copying it. Stored values are
// never modified in place below their length (see item), so the alias stays
// valid after the lock is released; the capacity is clipped so a caller that
// appends to Bulk cannot write into the store's spare capacity.
func valueReply(v []byte) Reply {
	return Reply{Kind: ReplyBulk, Bulk: v[:len(v):len(v)]}
}

// IsError reports whether r is an error reply.
func (r Reply) IsError() bool { return r.Kind == ReplyError }

// String renders r roughly as redis-cli would; for tests and logs.
func (r Reply) String() string {
	switch r.Kind {
	case ReplyNil:
		return "(nil)"
	case ReplyStatus:
		return r.Str
	case ReplyError:
		return "(error) " + r.Str
	case ReplyInt:
		return "(integer) " + strconv.FormatInt(r.Int, 10)
	case ReplyBulk:
		return strconv.Quote(string(r.Bulk))
	case ReplyDouble:
		return "(double) " + string(r.Bulk)
	case ReplyNilArray:
		return "(nil array)"
	case ReplyArray, ReplyMap, ReplySet, ReplyPairs:
		s := "["
		for i, e := range r.Array {
			if i > 0 {
				s += " "
			}
			s += e.String()
		}
		return s + "]"
	}
	return "(invalid reply kind " + strconv.Itoa(int(r.Kind)) + ")"
}
