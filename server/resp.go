package server

import (
	"strconv"

	"kvs/fsm"
)

// Reply encoding. Replies are appended to the connection's output buffer:
// no allocation per reply. RESP2 and RESP3 differ only in the types RESP2
// lacks (null, map, verbatim string, double), which the functions below
// write according to the connection's protocol version.

func appendStatus(b []byte, s string) []byte {
	b = append(b, '+')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendError(b []byte, s string) []byte {
	b = append(b, '-')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendInt(b []byte, n int64) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

func appendBulk(b, v []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, '\r', '\n')
	b = append(b, v...)
	return append(b, '\r', '\n')
}

func appendBulkString(b []byte, v string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, '\r', '\n')
	b = append(b, v...)
	return append(b, '\r', '\n')
}

func appendBulkInt(b []byte, n int64) []byte {
	var tmp [20]byte
	return appendBulk(b, strconv.AppendInt(tmp[:0], n, 10))
}

func appendArrayLen(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// appendNull writes the null bulk string (RESP2) or null (RESP3).
func appendNull(b []byte, proto int) []byte {
	if proto >= 3 {
		return append(b, '_', '\r', '\n')
	}
	return append(b, '$', '-', '1', '\r', '\n')
}

// appendMapLen starts a map of n pairs: a RESP3 map, or a flat array of 2n
// elements in RESP2.
func appendMapLen(b []byte, n int, proto int) []byte {
	if proto >= 3 {
		b = append(b, '%')
		b = strconv.AppendInt(b, int64(n), 10)
		return append(b, '\r', '\n')
	}
	return appendArrayLen(b, 2*n)
}

// appendVerbatim writes text as a RESP3 verbatim string of format "txt", or
// a bulk string in RESP2, as Redis does for INFO and CLIENT LIST.
func appendVerbatim(b []byte, text string, proto int) []byte {
	if proto < 3 {
		return appendBulkString(b, text)
	}
	b = append(b, '=')
	b = strconv.AppendInt(b, int64(len(text)+4), 10)
	b = append(b, "\r\ntxt:"...)
	b = append(b, text...)
	return append(b, '\r', '\n')
}

// appendReply writes an fsm.Reply.
func appendReply(b []byte, r *fsm.Reply, proto int) []byte {
	switch r.Kind {
	case fsm.ReplyNil:
		return appendNull(b, proto)
	case fsm.ReplyStatus:
		return appendStatus(b, r.Str)
	case fsm.ReplyError:
		return appendError(b, r.Str)
	case fsm.ReplyInt:
		return appendInt(b, r.Int)
	case fsm.ReplyBulk:
		return appendBulk(b, r.Bulk)
	case fsm.ReplyArray:
		b = appendArrayLen(b, len(r.Array))
		for i := range r.Array {
			b = appendReply(b, &r.Array[i], proto)
		}
		return b
	case fsm.ReplyDouble:
		if proto >= 3 {
			b = append(b, ',')
			b = append(b, r.Bulk...)
			return append(b, '\r', '\n')
		}
		return appendBulk(b, r.Bulk)
	case fsm.ReplyMap:
		b = appendMapLen(b, len(r.Array)/2, proto)
		for i := range r.Array {
			b = appendReply(b, &r.Array[i], proto)
		}
		return b
	case fsm.ReplySet:
		b = appendSetLen(b, len(r.Array), proto)
		for i := range r.Array {
			b = appendReply(b, &r.Array[i], proto)
		}
		return b
	case fsm.ReplyNilArray:
		if proto >= 3 {
			return append(b, '_', '\r', '\n')
		}
		return append(b, '*', '-', '1', '\r', '\n')
	case fsm.ReplyPairs:
		// RESP3 nests the pairs; RESP2 flattens them, as Redis does.
		if proto >= 3 {
			b = appendArrayLen(b, len(r.Array))
			for i := range r.Array {
				b = appendReply(b, &r.Array[i], proto)
			}
			return b
		}
		b = appendArrayLen(b, 2*len(r.Array))
		for i := range r.Array {
			for j := range r.Array[i].Array {
				b = appendReply(b, &r.Array[i].Array[j], proto)
			}
		}
		return b
	}
	return appendError(b, errInternal)
}

// appendSetLen starts a set of n elements: a RESP3 set, or an array in RESP2.
func appendSetLen(b []byte, n int, proto int) []byte {
	if proto >= 3 {
		b = append(b, '~')
		b = strconv.AppendInt(b, int64(n), 10)
		return append(b, '\r', '\n')
	}
	return appendArrayLen(b, n)
}
