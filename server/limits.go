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
)

// protoError is a request framing error; text is the client-facing error
// (from errors.go). The connection is answered with it and closed, as Redis
// does, because the stream cannot be resynchronised.
type protoError struct{ text string }

func (e *protoError) Error() string { return e.text }

// limitReader sits between the connection and redcon's Reader, which parses
// requests but enforces no limits: a request announcing a 100 GB bulk string
// would make it grow its buffer until memory ran out. limitReader follows
// the RESP framing of the bytes as they pass (headers only; bulk payloads
// are skipped by count) and stops the stream where a header breaks a limit.
// It hands over the bytes before that header, so the complete commands
// before it still run, and returns the protoError on the next Read.
//
// Framing that redcon rejects on its own (for example "*0") is left to it.
type limitReader struct {
	r       io.Reader
	maxBulk func() int64

	err   error // sticky: returned by every Read once set
	ioErr error // the last error of r, to tell it from redcon's parse errors

	state   limitState
	lineLen int   // bytes of the current header or inline line
	num     int64 // the number being read in a header line
	neg     bool
	digits  bool  // num has at least one digit
	bad     bool  // the header line is not a well-formed integer
	args    int64 // arguments still to come in the current request
	skip    int64 // payload bytes (with CRLF) still to come
	bytesIn int64 // total bytes handed over, for INFO
}

type limitState uint8

const (
	lsStart     limitState = iota // at the first byte of a request
	lsInline                      // in an inline request line
	lsMultiBulk                   // in a "*<count>" line
	lsBulkStart                   // expecting '$'
	lsBulkLen                     // in a "$<len>" line
	lsPayload                     // in a bulk payload
	lsOff                         // framing lost: redcon reports the error
)

func (l *limitReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	if err != nil {
		l.ioErr = err
	}
	if n > 0 {
		if cut, perr := l.scan(p[:n]); perr != nil {
			l.err = perr
			n = cut
			if n == 0 {
				return 0, perr
			}
			// The error comes with the next Read, after the commands
			// before the bad header have been parsed and run.
			err = nil
		}
	}
	l.bytesIn += int64(n)
	return n, err
}

// scan advances the framing state over b. On a limit violation it returns
// the offset of the violating line's end and the error.
func (l *limitReader) scan(b []byte) (int, *protoError) {
	for i := 0; i < len(b); i++ {
		switch l.state {
		case lsOff:
			return len(b), nil
		case lsStart:
			if b[i] == '*' {
				l.startLine(lsMultiBulk)
			} else {
				l.state = lsInline
				l.lineLen = 1
				if b[i] == '\n' {
					l.state = lsStart
				}
			}
		case lsInline:
			// Skip to the newline in one step; inline requests are rare.
			j := i
			for j < len(b) && b[j] != '\n' {
				j++
			}
			l.lineLen += j - i
			if l.lineLen > maxInlineLen {
				return i, &protoError{errProtoInline}
			}
			i = j
			if j < len(b) {
				l.state = lsStart
			}
		case lsMultiBulk, lsBulkLen:
			c := b[i]
			if c != '\n' {
				l.headerByte(c)
				if l.lineLen > maxInlineLen {
					if l.state == lsMultiBulk {
						return i, &protoError{errProtoMbulkCount}
					}
					return i, &protoError{errProtoBulkCount}
				}
				continue
			}
			if l.state == lsMultiBulk {
				if l.bad || !l.digits || l.num > maxMultiBulkLen {
					return i, &protoError{errProtoMultiBulk}
				}
				if l.neg || l.num == 0 {
					l.state = lsOff
					continue
				}
				l.args = l.num
				l.state = lsBulkStart
				continue
			}
			if l.bad || !l.digits || l.neg || l.num > l.maxBulk() {
				return i, &protoError{errProtoBulk}
			}
			l.skip = l.num + 2
			l.state = lsPayload
		case lsBulkStart:
			if b[i] != '$' {
				return i, &protoError{"ERR Protocol error: expected '$', got '" + string(b[i:i+1]) + "'"}
			}
			l.startLine(lsBulkLen)
		case lsPayload:
			avail := int64(len(b) - i)
			if avail < l.skip {
				l.skip -= avail
				return len(b), nil
			}
			i += int(l.skip) - 1
			l.skip = 0
			l.args--
			if l.args == 0 {
				l.state = lsStart
			} else {
				l.state = lsBulkStart
			}
		}
	}
	return len(b), nil
}

func (l *limitReader) startLine(s limitState) {
	l.state = s
	l.lineLen = 1
	l.num, l.neg, l.digits, l.bad = 0, false, false, false
}

// headerByte accumulates one byte of a "*<n>" or "$<n>" line (before '\n').
func (l *limitReader) headerByte(c byte) {
	l.lineLen++
	switch {
	case c >= '0' && c <= '9':
		if l.num > (math.MaxInt64-9)/10 {
			l.bad = true
			return
		}
		l.num = l.num*10 + int64(c-'0')
		l.digits = true
	case c == '-' && l.lineLen == 2:
		l.neg = true
	case c == '\r':
		// The CR of CRLF; redcon checks that it is there.
	default:
		l.bad = true
	}
}
