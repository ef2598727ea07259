package fsm

import (
	"fmt"
	"strconv"
)

// The replies between the store and a script, as RESP: package lua turns
// a command's reply into Lua values, and a script's result into a reply,
// from and to RESP bytes, as Redis's script engine does.

// appendRESP appends r as redis-server writes it to a client speaking
// protocol resp (2 or 3): what a script's redis.call reads.
func appendRESP(b []byte, r *Reply, resp int) []byte {
	switch r.Kind {
	case ReplyNil:
		if resp == 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "$-1\r\n"...)
	case ReplyNilArray:
		if resp == 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "*-1\r\n"...)
	case ReplyStatus:
		return append(append(append(b, '+'), r.Str...), '\r', '\n')
	case ReplyError:
		return append(append(append(b, '-'), r.Str...), '\r', '\n')
	case ReplyInt:
		return appendRESPLen(b, ':', int64(r.Int))
	case ReplyBool:
		if resp == 3 {
			if r.Int != 0 {
				return append(b, "#t\r\n"...)
			}
			return append(b, "#f\r\n"...)
		}
		return appendRESPLen(b, ':', r.Int)
	case ReplyBulk:
		return appendRESPBulk(b, r.Bulk)
	case ReplyDouble:
		if resp == 3 {
			return append(append(append(b, ','), r.Bulk...), '\r', '\n')
		}
		return appendRESPBulk(b, r.Bulk)
	case ReplyBigNumber:
		if resp == 3 {
			return append(append(append(b, '('), r.Bulk...), '\r', '\n')
		}
		return appendRESPBulk(b, r.Bulk)
	case ReplyVerbatim:
		if resp == 3 {
			b = appendRESPLen(b, '=', int64(len(r.Bulk)+4))
			return append(append(append(append(b, r.Str...), ':'), r.Bulk...), '\r', '\n')
		}
		return appendRESPBulk(b, r.Bulk)
	case ReplyMap:
		if resp == 3 {
			b = appendRESPLen(b, '%', int64(len(r.Array)/2))
		} else {
			b = appendRESPLen(b, '*', int64(len(r.Array)))
		}
	case ReplySet:
		if resp == 3 {
			b = appendRESPLen(b, '~', int64(len(r.Array)))
		} else {
			b = appendRESPLen(b, '*', int64(len(r.Array)))
		}
	case ReplyPairs:
		if resp == 3 {
			b = appendRESPLen(b, '*', int64(len(r.Array)))
			break
		}
		// RESP2 flattens the pairs.
		b = appendRESPLen(b, '*', int64(2*len(r.Array)))
		for i := range r.Array {
			for j := range r.Array[i].Array {
				b = appendRESP(b, &r.Array[i].Array[j], resp)
			}
		}
		return b
	case ReplyKeyed:
		if resp == 3 {
			b = appendRESPLen(b, '%', int64(len(r.Array)))
			for i := range r.Array {
				for j := range r.Array[i].Array {
					b = appendRESP(b, &r.Array[i].Array[j], resp)
				}
			}
			return b
		}
		b = appendRESPLen(b, '*', int64(len(r.Array)))
	case ReplyBulks:
		return append(appendRESPLen(b, '*', r.Int), r.Bulk...)
	default:
		b = appendRESPLen(b, '*', int64(len(r.Array)))
	}
	for i := range r.Array {
		b = appendRESP(b, &r.Array[i], resp)
	}
	return b
}

func appendRESPLen(b []byte, kind byte, n int64) []byte {
	return append(strconv.AppendInt(append(b, kind), n, 10), '\r', '\n')
}

func appendRESPBulk(b, s []byte) []byte {
	return append(append(appendRESPLen(b, '$', int64(len(s))), s...), '\r', '\n')
}

// replyFromRESP reads a script's reply as package lua writes it (RESP3,
// a boolean of a RESP2 script as :1 or _), copying every string. The
// bytes come from kvs's own C code, so anything unexpected is a bug.
func replyFromRESP(b []byte) Reply {
	r, rest := readRESP(b)
	if len(rest) != 0 {
		panic(fmt.Sprintf("fsm: %d bytes after a script's reply", len(rest)))
	}
	return r
}

func readRESP(b []byte) (Reply, []byte) {
	line, rest := respLine(b)
	kind, text := line[0], line[1:]
	switch kind {
	case '$':
		n := respInt(text)
		return Reply{Kind: ReplyBulk, Bulk: append([]byte{}, rest[:n]...)}, rest[n+2:]
	case '+':
		return Reply{Kind: ReplyStatus, Str: string(text)}, rest
	case '-':
		return Reply{Kind: ReplyError, Str: string(text)}, rest
	case ':':
		return Reply{Kind: ReplyInt, Int: respInt(text)}, rest
	case '#':
		r := Reply{Kind: ReplyBool}
		if text[0] == 't' {
			r.Int = 1
		}
		return r, rest
	case '_':
		return replyNil, rest
	case ',':
		return Reply{Kind: ReplyDouble, Bulk: append([]byte{}, text...)}, rest
	case '(':
		return Reply{Kind: ReplyBigNumber, Bulk: append([]byte{}, text...)}, rest
	case '=':
		n := respInt(text)
		return Reply{Kind: ReplyVerbatim, Str: string(rest[:3]), Bulk: append([]byte{}, rest[4:n]...)}, rest[n+2:]
	case '*', '%', '~':
		n := respInt(text)
		r := Reply{Kind: ReplyArray}
		switch kind {
		case '%':
			r.Kind, n = ReplyMap, 2*n
		case '~':
			r.Kind = ReplySet
		}
		r.Array = make([]Reply, n)
		for i := range r.Array {
			r.Array[i], rest = readRESP(rest)
		}
		return r, rest
	}
	panic(fmt.Sprintf("fsm: a script's reply of type %q", kind))
}

// respLine splits off b's first line, without its CRLF.
func respLine(b []byte) (line, rest []byte) {
	for i := 1; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return b[:i], b[i+2:]
		}
	}
	panic("fsm: a script's reply without its line end")
}

func respInt(b []byte) int64 {
	// The common case, a few digits, without strconv's generality.
	if len(b) > 0 && len(b) < 19 {
		var n int64
		neg := b[0] == '-'
		digits := b
		if neg {
			digits = b[1:]
		}
		ok := len(digits) > 0
		for _, c := range digits {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if ok {
			if neg {
				return -n
			}
			return n
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		panic(fmt.Sprintf("fsm: a script's reply with length %q", b))
	}
	return n
}
