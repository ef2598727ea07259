package server

import (
	"io"
	"math"
)

// Request framing limits, as Redis enforces them.
const (
	// maxInlineLen caps an inline (telnet-style) request line and the
	// header lines of a RESP request (PROTO_INLINE_MAX_SIZE).
	maxInlineLen = 64 << 10
	// maxMultiBulkLen caps the argument count of one request.
	maxMultiBulkLen = math.MaxInt32
	// readChunk is how much limitReader reads from the connection at once.
	readChunk = 16 << 10
)

// protoError is a request framing error; text is the client-facing error
// (from errors.go). The connection is answered with it and closed, as Redis
// does, because the stream cannot be resynchronised.
type protoError struct{ text string }

func (e *protoError) Error() string { return e.text }

// limitReader sits between the connection and redcon's Reader, which parses
// requests but enforces no limits: a request announcing a 100 GB bulk string
// would make it grow its buffer until memory ran out. limitReader follows
// the RESP framing of the bytes as they pass and hands on only what is
// within Redis's limits:
//
//   - A header line ("*<count>" or "$<len>") is held back until it is
//     complete and checked; a bulk length above proto-max-bulk-len, a
//     malformed count, a missing '$' or an overlong line stops the stream
//     there. The bytes before it are handed on, so the complete commands
//     before it still run; the protoError comes with the next Read.
//   - An empty request ("*0" or "*-1"), which redcon would reject, is
//     dropped, as Redis ignores it.
//   - An inline (telnet-style) request is split into arguments as Redis's
//     sdssplitargs splits it and handed on as a RESP request; redcon's
//     inline parser treats quotes and escapes differently.
//   - Bulk payloads pass through by count. While the reader is inside a
//     payload and has nothing buffered, it reads straight into the
//     caller's buffer, so large values are not copied twice.
type limitReader struct {
	r       io.Reader
	maxBulk func() int64

	err   error // returned once out is drained; sticky
	ioErr error // the last error of r, to tell it from redcon's parse errors

	in   []byte // read buffer
	out  []byte // checked bytes not yet handed on
	hold []byte // the start of a header or inline line an earlier read cut

	lineStart int // where the current header line starts in the scanned buffer

	state limitState
	args  int64 // arguments still to come in the current request
	skip  int64 // payload bytes (with CRLF) still to come
}

type limitState uint8

const (
	lsStart     limitState = iota // at the first byte of a request
	lsInline                      // in an inline request line
	lsMultiBulk                   // in a "*<count>" line
	lsBulkStart                   // expecting '$'
	lsBulkLen                     // in a "$<len>" line
	lsPayload                     // in a bulk payload
)

func (l *limitReader) Read(p []byte) (int, error) {
	for len(l.out) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		if l.state == lsPayload && l.skip > 2 {
			// Straight into p: a payload needs no checking.
			want := min(int64(len(p)), l.skip-2)
			n, err := l.r.Read(p[:want])
			l.skip -= int64(n)
			if err != nil {
				l.ioErr = err
				if n == 0 {
					return 0, err
				}
			}
			return n, nil
		}
		if l.in == nil {
			l.in = make([]byte, readChunk)
		}
		n, err := l.r.Read(l.in)
		if n > 0 {
			l.out = l.out[:0]
			l.scan(l.in[:n])
		}
		if err != nil {
			l.ioErr = err
			if l.err == nil {
				l.err = err
			}
		}
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}

// scan checks b and appends what may be handed on to out. On a violation it
// sets err and drops the rest of b.
func (l *limitReader) scan(b []byte) {
	for i := 0; i < len(b); i++ {
		switch l.state {
		case lsStart:
			if b[i] == '*' {
				l.state = lsMultiBulk
				l.lineStart = i
				continue
			}
			l.state = lsInline
			l.hold = l.hold[:0]
			fallthrough
		case lsInline:
			j := i
			for j < len(b) && b[j] != '\n' {
				j++
			}
			l.hold = append(l.hold, b[i:j]...)
			i = j
			if len(l.hold) > maxInlineLen {
				l.fail(errProtoInline)
				return
			}
			if j == len(b) {
				continue
			}
			l.state = lsStart
			line := l.hold
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			var ok bool
			if l.out, ok = appendInline(l.out, line); !ok {
				l.fail(errProtoQuotes)
				return
			}
		case lsMultiBulk, lsBulkLen:
			// The line started at lineStart in b, or, when hold is not
			// empty, in an earlier read (and b continues it from 0).
			j := i
			for j < len(b) && b[j] != '\n' {
				j++
			}
			if j == len(b) {
				i = j // the line goes on in the next read
				continue
			}
			line := b[l.lineStart : j+1]
			if len(l.hold) > 0 {
				l.hold = append(l.hold, line...)
				line = l.hold
			}
			i = j
			if !l.headerDone(line) {
				return
			}
			l.hold = l.hold[:0]
		case lsBulkStart:
			if b[i] != '$' {
				l.fail("ERR Protocol error: expected '$', got '" + string(b[i:i+1]) + "'")
				return
			}
			l.state = lsBulkLen
			l.lineStart = i
		case lsPayload:
			take := min(int64(len(b)-i), l.skip)
			l.out = append(l.out, b[i:i+int(take)]...)
			l.skip -= take
			i += int(take) - 1
			if l.skip == 0 {
				l.args--
				if l.args == 0 {
					l.state = lsStart
				} else {
					l.state = lsBulkStart
				}
			}
		}
	}
	if l.state == lsMultiBulk || l.state == lsBulkLen {
		// Keep the unfinished header line for the next read.
		l.hold = append(l.hold, b[l.lineStart:]...)
		l.lineStart = 0
		if len(l.hold) > maxInlineLen {
			if l.state == lsMultiBulk {
				l.fail(errProtoMbulkCount)
			} else {
				l.fail(errProtoBulkCount)
			}
		}
	}
}

// headerDone checks the complete header line in hold and moves to the next
// state; it reports false after a violation.
func (l *limitReader) headerDone(line []byte) bool {
	n, ok := headerInt(line[1:])
	if l.state == lsMultiBulk {
		if !ok || n > maxMultiBulkLen {
			l.fail(errProtoMultiBulk)
			return false
		}
		if n <= 0 {
			l.state = lsStart // an empty request: dropped
			return true
		}
		l.args = n
		l.state = lsBulkStart
	} else {
		if !ok || n < 0 || n > l.maxBulk() {
			l.fail(errProtoBulk)
			return false
		}
		l.skip = n + 2
		l.state = lsPayload
	}
	l.out = append(l.out, line...)
	return true
}

// headerInt parses the number of a header line "<digits>\r\n" (after the
// type byte), as Redis's string2ll would.
func headerInt(b []byte) (int64, bool) {
	if len(b) < 2 || b[len(b)-2] != '\r' {
		return 0, false
	}
	return parseInt(b[:len(b)-2])
}

func (l *limitReader) fail(text string) {
	l.err = &protoError{text}
	l.hold = l.hold[:0]
}

// appendInline appends the inline request line as a RESP request, split
// into arguments exactly as Redis's sdssplitargs does: arguments separated
// by spaces; "double quotes" with \n \r \t \b \a \xHH and \<any>
// escapes; 'single quotes' with only \' escaped; a closing quote must be
// followed by a space or the end. It reports false for unbalanced quotes.
// A blank line appends nothing.
func appendInline(out, line []byte) ([]byte, bool) {
	// The line ends at a NUL byte, as the C string Redis splits does.
	for i, c := range line {
		if c == 0 {
			line = line[:i]
			break
		}
	}
	var args [][]byte
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p == len(line) {
			break
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			var c byte // 0 is the end of the line, as in C
			if p < len(line) {
				c = line[p]
			}
			next := func(k int) byte {
				if p+k < len(line) {
					return line[p+k]
				}
				return 0
			}
			switch {
			case inq:
				switch {
				case c == '\\' && next(1) == 'x' && isHex(next(2)) && isHex(next(3)):
					cur = append(cur, unhex(next(2))<<4|unhex(next(3)))
					p += 3
				case c == '\\' && next(1) != 0:
					p++
					e := line[p]
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					}
					cur = append(cur, e)
				case c == '"':
					if n := next(1); n != 0 && !isSpace(n) {
						return out, false
					}
					done = true
				case c == 0:
					return out, false
				default:
					cur = append(cur, c)
				}
			case insq:
				switch {
				case c == '\\' && next(1) == '\'':
					p++
					cur = append(cur, '\'')
				case c == '\'':
					if n := next(1); n != 0 && !isSpace(n) {
						return out, false
					}
					done = true
				case c == 0:
					return out, false
				default:
					cur = append(cur, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		args = append(args, cur)
	}
	if len(args) == 0 {
		return out, true
	}
	out = appendArrayLen(out, len(args))
	for _, a := range args {
		out = appendBulk(out, a)
	}
	return out, true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'f')
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c | 0x20 - 'a' + 10
}
