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

// The refusals of commands for keys of slots the store does not serve
// (slots.go), around the slot number: a write to a slot a move is
// handing over, and a command for a slot the store does not own, which
// the server turns into a redirection (SlotMoving, SlotNotOwned tell
// them). The errors of the slot-move entries, which only kvs's own
// orchestration sends, follow.
const (
	ErrSlotMovingPrefix   = "TRYAGAIN slot "
	ErrSlotMovingSuffix   = " is moving, the write was not applied"
	ErrSlotNotOwnedPrefix = "NOTOWNED slot "
	ErrSlotNotOwnedSuffix = " is not served by this group"

	ErrMovesInFlight  = "ERR slot moves are in flight"
	ErrMoveUnknown    = "ERR no slot move %d in flight"
	ErrMoveFinished   = "ERR slot move %d is finished"
	ErrMoveExists     = "ERR slot move %d exists already"
	ErrMoveSlotBusy   = "ERR slot %d is not owned, or is moving already"
	ErrMoveNotFenced  = "ERR slot move %d is not fenced"
	ErrMoveNotDrained = "ERR slot move %d has writes not drained"
	ErrMoveSlotOwned  = "ERR slot %d is not free to move in"
	ErrMoveNotPurged  = "ERR slot %d holds keys left to purge"
	ErrMoveOtherSlots = "ERR slot move %d stages other slots"
	ErrMoveBadChunk   = "ERR bad slot move chunk: %v"
	// ErrMoveSuperseded refuses an OpSlotsAssign for a move (its first
	// %d) by a store that has seen that move or a later one (the second).
	ErrMoveSuperseded = "ERR slots assigned for slot move %d come after slot move %d here"
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

// AppendBulks appends the element e to buf, the Bulk of a ReplyBulks:
// as a RESP bulk string ("$3\r\nabc\r\n"), which RESP2 and RESP3 write
// alike, so the server writes the buffer as it is.
func AppendBulks(buf, e []byte) []byte {
	buf = append(buf, '$')
	if len(e) < 10 {
		buf = append(buf, byte('0'+len(e)))
	} else {
		buf = strconv.AppendInt(buf, int64(len(e)), 10)
	}
	buf = append(buf, '\r', '\n')
	buf = append(buf, e...)
	return append(buf, '\r', '\n')
}

// BulksReply returns the ReplyBulks of the n elements AppendBulks put in
// buf. buf is not copied.
func BulksReply(buf []byte, n int) Reply { return Reply{Kind: ReplyBulks, Int: int64(n), Bulk: buf} }

// NextBulk returns the first element held in b, the Bulk of a ReplyBulks
// (made by AppendBulks or checked by DecodeReplies), and the rest of b.
// The element aliases b, its capacity clipped.
func NextBulk(b []byte) (e, rest []byte) {
	l, i := 0, 1
	for ; b[i] != '\r'; i++ {
		l = l*10 + int(b[i]-'0')
	}
	start := i + 2
	end := start + l
	return b[start:end:end], b[end+2:]
}

// validBulks reports whether b holds exactly n elements as AppendBulks
// writes them.
func validBulks(b []byte, n int64) bool {
	for ; n > 0; n-- {
		if len(b) < 4 || b[0] != '$' || b[1] < '0' || b[1] > '9' || b[1] == '0' && b[2] != '\r' {
			return false
		}
		l, i := uint64(0), 1
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if i > 11 { // 11 digits: far past any bulk Redis allows
				return false
			}
			l = l*10 + uint64(b[i]-'0')
		}
		rest := b[i:]
		if len(rest) < 2 || rest[0] != '\r' || rest[1] != '\n' || l+2 > uint64(len(rest)-2) {
			return false
		}
		if e := rest[2+l:]; e[0] != '\r' || e[1] != '\n' {
			return false
		}
		b = rest[4+l:]
	}
	return len(b) == 0
}

// Expanded returns r with a ReplyBulks written out as the ReplyArray of
// ReplyBulk it stands for (aliasing r.Bulk), and any other reply as it is.
func (r Reply) Expanded() Reply {
	if r.Kind != ReplyBulks {
		return r
	}
	out := make([]Reply, 0, r.Int)
	for b := r.Bulk; len(b) > 0; {
		var e []byte
		e, b = NextBulk(b)
		out = append(out, BulkReply(e))
	}
	return Reply{Kind: ReplyArray, Array: out}
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
	case ReplyArray, ReplyMap, ReplySet, ReplyPairs, ReplyKeyed:
		s := "["
		for i, e := range r.Array {
			if i > 0 {
				s += " "
			}
			s += e.String()
		}
		return s + "]"
	case ReplyBulks:
		return r.Expanded().String()
	}
	return "(invalid reply kind " + strconv.Itoa(int(r.Kind)) + ")"
}
