package server

import (
	"strconv"

	"kvs/fsm"
	"kvs/resp"
)

// Replies are appended to the connection's output buffer with package
// resp's writer: no allocation per reply. These short names keep the
// command files readable; each is resp's function of the same name.

func appendStatus(b []byte, s string) []byte     { return resp.AppendStatus(b, s) }
func appendError(b []byte, s string) []byte      { return resp.AppendError(b, s) }
func appendInt(b []byte, n int64) []byte         { return resp.AppendInt(b, n) }
func appendBulk(b, v []byte) []byte              { return resp.AppendBulk(b, v) }
func appendBulkString(b []byte, v string) []byte { return resp.AppendBulkString(b, v) }
func appendBulkInt(b []byte, n int64) []byte     { return resp.AppendBulkInt(b, n) }
func appendArrayLen(b []byte, n int) []byte      { return resp.AppendArrayLen(b, n) }
func appendNull(b []byte, proto int) []byte      { return resp.AppendNull(b, proto) }
func appendMapLen(b []byte, n, proto int) []byte { return resp.AppendMapLen(b, n, proto) }
func appendSetLen(b []byte, n, proto int) []byte { return resp.AppendSetLen(b, n, proto) }
func appendVerbatim(b []byte, s string, proto int) []byte {
	return resp.AppendVerbatim(b, s, proto)
}

// appendReply writes an fsm.Reply.
func appendReply(b []byte, r *fsm.Reply, proto int) []byte {
	switch r.Kind {
	case fsm.ReplyNil:
		return resp.AppendNull(b, proto)
	case fsm.ReplyStatus:
		return resp.AppendStatus(b, r.Str)
	case fsm.ReplyError:
		return resp.AppendError(b, r.Str)
	case fsm.ReplyInt:
		return resp.AppendInt(b, r.Int)
	case fsm.ReplyBulk:
		return resp.AppendBulk(b, r.Bulk)
	case fsm.ReplyArray:
		b = resp.AppendArrayLen(b, len(r.Array))
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
	case fsm.ReplyBool:
		return resp.AppendBool(b, r.Int != 0, proto)
	case fsm.ReplyBigNumber:
		return resp.AppendBigNumber(b, string(r.Bulk), proto)
	case fsm.ReplyVerbatim:
		if proto < 3 {
			return resp.AppendBulk(b, r.Bulk)
		}
		b = append(b, '=')
		b = strconv.AppendInt(b, int64(len(r.Bulk)+4), 10)
		b = append(b, '\r', '\n')
		b = append(b, r.Str...)
		b = append(b, ':')
		b = append(b, r.Bulk...)
		return append(b, '\r', '\n')
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
	case fsm.ReplyKeyed:
		if proto >= 3 {
			b = appendMapLen(b, len(r.Array), proto)
			for i := range r.Array {
				for j := range r.Array[i].Array {
					b = appendReply(b, &r.Array[i].Array[j], proto)
				}
			}
			return b
		}
		b = appendArrayLen(b, len(r.Array))
		for i := range r.Array {
			b = appendReply(b, &r.Array[i], proto)
		}
		return b
	case fsm.ReplyBulks:
		// The elements are RESP bulk strings already.
		b = resp.AppendArrayLen(b, int(r.Int))
		return append(b, r.Bulk...)
	}
	return resp.AppendError(b, errInternal)
}
