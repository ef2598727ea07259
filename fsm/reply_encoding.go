package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Reply encoding, for a leader answering a batch a follower forwarded:
//
//	replies = count:uvarint reply*count
//	reply   = kind:byte body
//	          nil, nil array: empty; status, error, bulk, double:
//	          len:uvarint bytes; int: varint; array, map, set, pairs:
//	          replies (a map's and pairs' elements as Reply.Array holds
//	          them); bulks: count:uvarint len:uvarint bytes (Reply.Bulk
//	          as it is: count RESP bulk strings)
//
// The follower writes the decoded replies to its client in the client's
// own protocol version.

// maxReplyDepth bounds the nesting of decoded arrays; kvs's replies nest
// two deep at most (SCAN), a script's reply 33 (package lua ends a
// deeper one in an error at that depth).
const maxReplyDepth = 40

// AppendReplies appends the encoding of replies to dst.
func AppendReplies(dst []byte, replies []Reply) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(replies)))
	for i := range replies {
		dst = appendReply(dst, &replies[i])
	}
	return dst
}

func appendReply(dst []byte, r *Reply) []byte {
	dst = append(dst, byte(r.Kind))
	switch r.Kind {
	case ReplyStatus, ReplyError:
		dst = binary.AppendUvarint(dst, uint64(len(r.Str)))
		dst = append(dst, r.Str...)
	case ReplyInt, ReplyBool:
		dst = binary.AppendVarint(dst, r.Int)
	case ReplyVerbatim:
		dst = binary.AppendUvarint(dst, uint64(len(r.Str)))
		dst = append(dst, r.Str...)
		dst = binary.AppendUvarint(dst, uint64(len(r.Bulk)))
		dst = append(dst, r.Bulk...)
	case ReplyBulk, ReplyDouble, ReplyBigNumber:
		dst = binary.AppendUvarint(dst, uint64(len(r.Bulk)))
		dst = append(dst, r.Bulk...)
	case ReplyArray, ReplyMap, ReplySet, ReplyPairs, ReplyKeyed:
		dst = AppendReplies(dst, r.Array)
	case ReplyBulks:
		dst = binary.AppendUvarint(dst, uint64(r.Int))
		dst = binary.AppendUvarint(dst, uint64(len(r.Bulk)))
		dst = append(dst, r.Bulk...)
	}
	return dst
}

// DecodeReplies decodes what AppendReplies wrote. It comes from the
// network, so it validates everything, returning an error wrapping
// ErrCorrupt and never panicking: kinds, lengths, nesting, and that a
// status or error is one line, as it must be on the wire. Bulk values
// alias b.
func DecodeReplies(b []byte) ([]Reply, error) {
	d := decoder{b: b}
	replies := d.replies(0)
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes after the replies")
	}
	if d.err != nil {
		return nil, d.err
	}
	return replies, nil
}

// replies reads a count and that many replies, at nesting depth depth.
func (d *decoder) replies(depth int) []Reply {
	if depth > maxReplyDepth {
		d.fail("replies nested too deep")
		return nil
	}
	n := d.count(1) // the smallest reply, nil, is its kind byte
	if n == 0 {
		return nil
	}
	out := make([]Reply, n)
	for i := range out {
		if d.err != nil {
			return nil
		}
		r := &out[i]
		r.Kind = ReplyKind(d.byte())
		switch r.Kind {
		case ReplyNil, ReplyNilArray:
		case ReplyStatus, ReplyError:
			b := d.bytes()
			if bytes.ContainsAny(b, "\r\n") {
				d.fail("line break in a status or error")
			}
			r.Str = string(b)
		case ReplyInt, ReplyBool:
			r.Int = d.varint()
		case ReplyVerbatim:
			r.Str = string(d.bytes())
			if len(r.Str) != 3 {
				d.fail("verbatim format not 3 bytes")
			}
			fallthrough
		case ReplyBulk, ReplyDouble, ReplyBigNumber:
			r.Bulk = d.bytes()
			if r.Bulk == nil {
				r.Bulk = []byte{}
			}
		case ReplyArray, ReplySet:
			r.Array = d.replies(depth + 1)
		case ReplyMap:
			if r.Array = d.replies(depth + 1); len(r.Array)%2 != 0 {
				d.fail("map of an odd number of elements")
			}
		case ReplyPairs, ReplyKeyed:
			r.Array = d.replies(depth + 1)
			for _, p := range r.Array {
				if p.Kind != ReplyArray || len(p.Array) != 2 {
					d.fail("pairs holding something other than 2-element arrays")
					break
				}
			}
		case ReplyBulks:
			r.Int = int64(d.count(6)) // the smallest element, empty, is "$0\r\n\r\n"
			if r.Bulk = d.bytes(); d.err == nil && !validBulks(r.Bulk, r.Int) {
				d.fail("bulks not holding their count of elements")
			}
		default:
			d.fail(fmt.Sprintf("unknown reply kind %d", r.Kind))
		}
	}
	return out
}
