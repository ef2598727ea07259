package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"kvs/fsm"
)

// Forwarding: a follower sends a batch of commands to the leader as one
// internal request, KVS.FORWARD <request>, and the leader answers with a
// bulk string holding the replies, or with an error that applies to every
// command of the batch. The follower writes the replies in its own client's
// protocol, so they are the bytes the leader would have sent that client.
//
// fsm.EncodeEntry is not reused: it accepts only writes, and a follower
// serving linearizable reads forwards reads too. Both encodings are
// versioned by their first byte. Integers are varints (zig-zag for signed):
//
//	request := version=1  uvarint(count)  command*
//	command := op:byte  uvarint(flags)  varint(Int)  varint(Int2)
//	           float:8 bytes (IEEE 754 bits, little endian)
//	           uvarint(nargs)  (uvarint(len) bytes)*
//
//	replies := version=1  uvarint(count)  reply*
//	reply   := kind:byte  body
//	           nil: empty; status, error, bulk: uvarint(len) bytes;
//	           int: varint; array: uvarint(count) reply*
//
// Both come from the network: decoding validates everything (each command
// must pass fsm.Command.Validate) and returns errors, never panics.

const (
	forwardVersion = 1
	// maxReplyDepth bounds the nesting of decoded arrays; kvs's replies
	// nest two deep at most (SCAN).
	maxReplyDepth = 8
)

// ErrLeaderUnreachable: the follower could not send a request to the
// leader (no connection, or it failed before any byte was sent), so the
// request certainly did not take effect and may be retried.
var ErrLeaderUnreachable = errors.New("leader unreachable")

// appendCommands appends the request encoding of cmds to dst.
func appendCommands(dst []byte, cmds []fsm.Command) []byte {
	dst = append(dst, forwardVersion)
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	for i := range cmds {
		c := &cmds[i]
		dst = append(dst, byte(c.Op))
		dst = binary.AppendUvarint(dst, uint64(c.Flags))
		dst = binary.AppendVarint(dst, c.Int)
		dst = binary.AppendVarint(dst, c.Int2)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(c.Float))
		dst = binary.AppendUvarint(dst, uint64(len(c.Args)))
		for _, a := range c.Args {
			dst = binary.AppendUvarint(dst, uint64(len(a)))
			dst = append(dst, a...)
		}
	}
	return dst
}

// decodeCommands decodes a request. The arguments alias b.
func decodeCommands(b []byte) ([]fsm.Command, error) {
	d := wireDecoder{b: b}
	if v := d.byte(); d.err == nil && v != forwardVersion {
		return nil, fmt.Errorf("server: forwarded request version %d, want %d", v, forwardVersion)
	}
	// The smallest command is 13 bytes: op, flags, Int, Int2, Float, nargs.
	n := d.count(13)
	cmds := make([]fsm.Command, 0, n)
	for range n {
		if d.err != nil {
			break
		}
		var c fsm.Command
		c.Op = fsm.Op(d.byte())
		flags := d.uvarint()
		if flags > math.MaxUint16 {
			d.fail("flags out of range")
		}
		c.Flags = fsm.Flags(flags)
		c.Int = d.varint()
		c.Int2 = d.varint()
		c.Float = math.Float64frombits(d.uint64())
		if nargs := d.count(1); nargs > 0 {
			c.Args = make([][]byte, nargs)
			for j := range c.Args {
				c.Args[j] = d.bytes()
			}
		}
		if d.err == nil {
			if err := c.Validate(); err != nil {
				return nil, fmt.Errorf("server: forwarded command %d: %w", len(cmds), err)
			}
		}
		cmds = append(cmds, c)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return cmds, nil
}

// appendReplies appends the encoding of replies to dst.
func appendReplies(dst []byte, replies []fsm.Reply) []byte {
	dst = append(dst, forwardVersion)
	dst = binary.AppendUvarint(dst, uint64(len(replies)))
	for i := range replies {
		dst = appendWireReply(dst, &replies[i])
	}
	return dst
}

func appendWireReply(dst []byte, r *fsm.Reply) []byte {
	dst = append(dst, byte(r.Kind))
	switch r.Kind {
	case fsm.ReplyStatus, fsm.ReplyError:
		dst = binary.AppendUvarint(dst, uint64(len(r.Str)))
		dst = append(dst, r.Str...)
	case fsm.ReplyInt:
		dst = binary.AppendVarint(dst, r.Int)
	case fsm.ReplyBulk:
		dst = binary.AppendUvarint(dst, uint64(len(r.Bulk)))
		dst = append(dst, r.Bulk...)
	case fsm.ReplyArray:
		dst = binary.AppendUvarint(dst, uint64(len(r.Array)))
		for i := range r.Array {
			dst = appendWireReply(dst, &r.Array[i])
		}
	}
	return dst
}

// decodeReplies decodes a reply encoding. Bulk values alias b.
func decodeReplies(b []byte) ([]fsm.Reply, error) {
	d := wireDecoder{b: b}
	if v := d.byte(); d.err == nil && v != forwardVersion {
		return nil, fmt.Errorf("server: forwarded replies version %d, want %d", v, forwardVersion)
	}
	replies := d.replies(0)
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return replies, nil
}

// wireDecoder reads the forwarding encodings. The first error sticks: every
// later read returns zero values, and callers check err once at the end.
type wireDecoder struct {
	b   []byte
	off int // bytes consumed, for error messages
	err error
}

func (d *wireDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("server: bad forwarding encoding at byte %d: %s", d.off, what)
	}
	d.b = nil
}

func (d *wireDecoder) advance(n int) {
	d.b = d.b[n:]
	d.off += n
}

func (d *wireDecoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.advance(1)
	return c
}

func (d *wireDecoder) uint64() uint64 {
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.advance(8)
	return v
}

func (d *wireDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.advance(n)
	return v
}

func (d *wireDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.advance(n)
	return v
}

// count reads an element count and checks that the rest of the input could
// hold that many elements of at least minSize bytes, so a corrupt count
// cannot make the decoder allocate without bound.
func (d *wireDecoder) count(minSize int) int {
	v := d.uvarint()
	if d.err != nil {
		return 0
	}
	if v > uint64(len(d.b)/minSize) {
		d.fail("count exceeds input")
		return 0
	}
	return int(v)
}

func (d *wireDecoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length exceeds input")
		return nil
	}
	v := d.b[:n:n]
	d.advance(int(n))
	return v
}

// replies reads a count and that many replies, at nesting depth depth.
func (d *wireDecoder) replies(depth int) []fsm.Reply {
	if depth > maxReplyDepth {
		d.fail("replies nested too deep")
		return nil
	}
	n := d.count(1) // the smallest reply, nil, is its kind byte
	if n == 0 {
		return nil
	}
	out := make([]fsm.Reply, n)
	for i := range out {
		if d.err != nil {
			return nil
		}
		r := &out[i]
		r.Kind = fsm.ReplyKind(d.byte())
		switch r.Kind {
		case fsm.ReplyNil:
		case fsm.ReplyStatus, fsm.ReplyError:
			b := d.bytes()
			if bytes.ContainsAny(b, "\r\n") {
				// It becomes one line of the client's reply.
				d.fail("line break in a status or error")
			}
			r.Str = string(b)
		case fsm.ReplyInt:
			r.Int = d.varint()
		case fsm.ReplyBulk:
			r.Bulk = d.bytes()
			if r.Bulk == nil {
				r.Bulk = []byte{}
			}
		case fsm.ReplyArray:
			r.Array = d.replies(depth + 1)
		default:
			d.fail(fmt.Sprintf("unknown reply kind %d", r.Kind))
		}
	}
	return out
}
