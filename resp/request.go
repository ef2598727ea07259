package resp

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"unsafe"
)

// Request framing limits, as Redis enforces them.
const (
	// maxInlineLen caps an inline (telnet-style) request line and the
	// header lines of a RESP request (PROTO_INLINE_MAX_SIZE).
	maxInlineLen = 64 << 10
	// maxMultiBulkLen caps the argument count of one request.
	maxMultiBulkLen = math.MaxInt32
	// unauthMaxArgs and unauthMaxBulk cap the argument count and the bulk
	// length of a request from a client that must authenticate and has
	// not (processMultibulkBuffer's authRequired checks), so that such a
	// client can make the server hold no more than a few hundred KiB.
	unauthMaxArgs = 10
	unauthMaxBulk = 16 << 10
)

// ReadChunk is the size of a Reader's first read buffer and of the room it
// makes before a read; the buffer grows past it only for requests that do
// not fit.
const ReadChunk = 16 << 10

// Reader reads requests from a connection and parses them in place: the
// arguments it returns alias its read buffer, and the slices holding them
// are reused, so a pipeline of small requests costs no allocation. The
// arguments stay valid until the next ReadCommands or ReadReady call.
//
// It enforces Redis's framing limits as it parses, with Redis's error
// texts:
//
//   - A header line ("*<count>" or "$<len>") is checked as soon as it is
//     complete: a bulk length above maxBulk, a malformed count, a missing
//     '$' or an overlong line stops the stream there, before the payload it
//     announces is read. The complete requests before it still come back
//     first; the *ProtocolError comes with the next call.
//   - An empty request ("*0" or "*-1") is skipped, as Redis ignores it.
//   - An inline (telnet-style) request is split into arguments as Redis's
//     sdssplitargs splits it (see appendInline).
//   - A payload not followed by CRLF is an invalid bulk length.
//   - While the client must still authenticate (SetAuthRequired), a
//     request of more than 10 arguments or with a bulk longer than 16 KiB
//     is refused at its header, with Redis's "unauthenticated" texts.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	r       io.Reader
	maxBulk func() int64
	// maxQuery, when set, caps the bytes buffered and not yet parsed
	// (Redis's client-query-buffer-limit); see SetQueryLimit.
	maxQuery func() int64
	// authRequired, when set, says whether the client must still
	// authenticate; see SetAuthRequired.
	authRequired func() bool
	// account, when set, is told every change of len(buf) and of
	// slotBytes; see SetBufferAccount.
	account func(delta int)
	// slotBytes is the size of the argument lists' backing (args' and
	// cmds'), as last told to account.
	slotBytes int

	err error // the read error that ends the stream, once buf is parsed

	buf        []byte // buf[start:end] is read but not yet parsed
	start, end int
	need       int // parse again only once end-start reaches need
	// batch is where the requests last returned begin (QueryBuf); peak
	// the most bytes buffered unparsed since the last Resize.
	batch, peak int

	// buf[start+nlFrom : start+nlTo] is known to hold no '\n': the
	// unfinished line at the end of the buffer is not scanned again
	// byte by byte as a client sends it slowly.
	nlFrom, nlTo int

	cmds   [][][]byte // the last pipeline, reused
	args   [][]byte   // backing of cmds' argument lists, reused
	inline []byte     // inline requests rewritten as RESP, reused
}

// NewReader returns a Reader of the requests arriving on r. maxBulk is
// called once per parse of the buffered bytes and returns the largest bulk
// argument accepted (Redis's proto-max-bulk-len, which CONFIG SET may
// change while the connection lives).
func NewReader(r io.Reader, maxBulk func() int64) *Reader {
	return &Reader{r: r, maxBulk: maxBulk}
}

// SetQueryLimit makes rr end the stream with ErrQueryBufferLimit once the
// bytes it holds unparsed (an incomplete request) exceed max(), checked
// before each read, as Redis checks its query buffer after each. A
// complete request is never refused for its size here: maxBulk and the
// argument count bound those.
func (rr *Reader) SetQueryLimit(max func() int64) { rr.maxQuery = max }

// SetAuthRequired makes rr hold requests to the limits Redis sets a client
// that must authenticate and has not, while required() reports true: at
// most 10 arguments (MsgUnauthMultiBulkLength) and bulks of at most 16 KiB
// (MsgUnauthBulkLength), refused at the header, before the payload is read.
// Inline requests keep their 64 KiB line limit, as in Redis. required is
// asked once per parse of the buffered bytes, before any request of it
// runs; the parse stops at a request over the limits and returns the ones
// before it, so a request pipelined after an AUTH is judged once the AUTH
// has run, as Redis judges each request after the one before it ran.
func (rr *Reader) SetAuthRequired(required func() bool) { rr.authRequired = required }

// SetBufferAccount makes rr tell account of every change in the size of
// its read buffer, as it allocates, grows, drops or releases it, and of
// the argument lists it keeps for reuse (a request of many arguments
// needs large ones), so that the sum of the deltas is what rr holds. It
// is called only when those change size, never per request.
func (rr *Reader) SetBufferAccount(account func(delta int)) { rr.account = account }

// Release drops rr's read buffer and argument lists, as its connection
// closes, and returns the read buffer's size. Requests already returned
// must not be used after it.
func (rr *Reader) Release() int {
	n := len(rr.buf)
	rr.setBuf(nil)
	rr.dropSlots()
	rr.start, rr.end, rr.need, rr.nlFrom, rr.nlTo = 0, 0, 0, 0, 0
	return n
}

// setBuf replaces the read buffer, telling the account. The argument
// lists kept for reuse still point into the old buffer beyond their
// length; they are cleared, or the old buffer would stay reachable (and
// counted by the collector as live) until later requests overwrite every
// slot.
func (rr *Reader) setBuf(b []byte) {
	if rr.account != nil && len(b) != len(rr.buf) {
		rr.account(len(b) - len(rr.buf))
	}
	if rr.buf != nil {
		clear(rr.args[:cap(rr.args)])
		clear(rr.cmds[:cap(rr.cmds)])
	}
	rr.buf = b
}

// sliceHeader is the size of one argument slot ([]byte) or argument list
// ([][]byte).
const sliceHeader = int(unsafe.Sizeof([]byte(nil)))

// noteSlots tells the account how much the argument lists grew or shrank
// by since it was last told.
func (rr *Reader) noteSlots() {
	n := (cap(rr.args) + cap(rr.cmds)) * sliceHeader
	if n != rr.slotBytes && rr.account != nil {
		rr.account(n - rr.slotBytes)
	}
	rr.slotBytes = n
}

// dropSlots lets the argument lists go.
func (rr *Reader) dropSlots() {
	rr.args, rr.cmds = nil, nil
	rr.noteSlots()
}

// parseMore is the parse outcome of a request not yet complete.
const parseMore = -1

// ReadCommands returns the next requests: every complete request buffered,
// reading from the connection first if there is none. It returns a
// *ProtocolError for a framing violation and the read error otherwise.
func (rr *Reader) ReadCommands() ([][][]byte, error) {
	for {
		// On a blocking connection each ReadReady reads (waiting) until
		// a request is complete or the connection fails.
		if cmds, _, err := rr.ReadReady(); len(cmds) > 0 || err != nil {
			return cmds, err
		}
	}
}

// ReadReady is ReadCommands for a non-blocking connection (an event
// loop's), whose Read returns ErrAgain when it has nothing to give: it
// returns the requests buffered, reading once first if there are none,
// and never waits. more reports whether the socket may hold
// bytes not yet read (the read filled the space it was given, or an error
// is still to be reported); otherwise the next bytes will be announced by
// the poller. No requests and no error: nothing complete has arrived.
func (rr *Reader) ReadReady() (cmds [][][]byte, more bool, err error) {
	if cap(rr.args) > maxReusedArgs {
		// One request of very many arguments: its lists are not kept
		// for the next, which are unlikely to need them.
		rr.dropSlots()
	}
	rr.cmds = rr.cmds[:0]
	rr.args = rr.args[:0]
	rr.inline = rr.inline[:0]
	if rr.end-rr.start >= rr.need {
		rr.batch = rr.start
		err := rr.parseAll()
		rr.noteSlots()
		if len(rr.cmds) > 0 {
			return rr.cmds, true, nil
		} else if err != nil {
			return nil, false, err
		}
	}
	if rr.err != nil {
		return nil, false, rr.err
	}
	full := rr.fill()
	if rr.err == ErrAgain {
		rr.err = nil
		full = false
	}
	more = full || rr.err != nil
	if rr.end-rr.start >= rr.need {
		rr.batch = rr.start
		err := rr.parseAll()
		rr.noteSlots()
		if len(rr.cmds) > 0 {
			// A framing error after the requests is reported next time.
			more = more || err != nil
			return rr.cmds, more, nil
		} else if err != nil {
			return nil, false, err
		}
	}
	if rr.err != nil {
		return nil, false, rr.err
	}
	return nil, more, nil
}

// fill reads once from the connection, making room first, and reports
// whether the read filled the room. The buffer grows as data arrives, not
// to the size a header announces, so memory is spent only on bytes the
// client actually sent.
func (rr *Reader) fill() bool {
	if rr.start == rr.end {
		rr.start, rr.end = 0, 0
		if len(rr.buf) > 1<<20 {
			rr.setBuf(nil) // do not keep a huge buffer for an idle connection
		}
	}
	if rr.buf == nil {
		rr.setBuf(make([]byte, ReadChunk))
	}
	pending := rr.end - rr.start
	if rr.maxQuery != nil && int64(pending) > rr.maxQuery() {
		rr.err = ErrQueryBufferLimit
		return false
	}
	if want := pending + ReadChunk/4; len(rr.buf)-rr.start < want {
		if pending <= len(rr.buf)/2 && len(rr.buf) >= want {
			copy(rr.buf, rr.buf[rr.start:rr.end])
		} else {
			size := 2 * len(rr.buf)
			if rr.need > want && size > rr.need {
				size = rr.need
			}
			// A buffer Resize cut below a read's worth grows back to one.
			nb := make([]byte, max(size, want, ReadChunk))
			copy(nb, rr.buf[rr.start:rr.end])
			rr.setBuf(nb)
		}
		rr.start, rr.end = 0, pending
	}
	room := len(rr.buf) - rr.end
	n, err := rr.r.Read(rr.buf[rr.end:])
	rr.end += n
	rr.peak = max(rr.peak, rr.end-rr.start)
	if err != nil {
		rr.err = err
	}
	return n == room
}

// QueryBuf returns what Redis's CLIENT LIST calls a client's qbuf and
// qbuf-free: the bytes buffered and the room left after them, counted as
// if they began the buffer (Redis moves its query buffer's bytes to the
// front after each batch). executing counts the requests last returned
// as still buffered, as Redis's buffer holds the batch it is running.
func (rr *Reader) QueryBuf(executing bool) (used, free int) {
	from := rr.start
	if executing {
		from = rr.batch
	}
	used = rr.end - from
	return used, len(rr.buf) - used
}

// Resize gives back room the buffer no longer needs, as Redis's
// clientsCronResizeQueryBuffer does, when more than 4 KB of it is free:
// all of it when idle (the client sent nothing for a while); otherwise,
// for a buffer over 32 KB more than twice the most bytes buffered since
// the last Resize, what lies past the larger of those, the bytes buffered
// and the request being read. Call it periodically, and never while the
// requests last returned are in use: their arguments alias the buffer.
// The argument lists a request of many arguments needed are given back
// too.
func (rr *Reader) Resize(idle bool) {
	if cap(rr.args) > maxKeptArgs {
		rr.dropSlots()
	}
	used := rr.end - rr.start
	if len(rr.buf)-used > resizeSlack {
		switch {
		case idle:
			rr.resizeTo(used)
		case len(rr.buf) > resizeThreshold && len(rr.buf)/2 > rr.peak:
			rr.resizeTo(max(used, rr.peak, rr.need))
		}
	}
	rr.peak = max(rr.end-rr.start, rr.need)
}

// Redis's bounds for giving back query buffer room: PROTO_RESIZE_THRESHOLD,
// and the 4 KB clientsCronResizeQueryBuffer leaves alone; the most
// argument slots Resize keeps for the next requests; and the most
// ReadReady keeps from one call to the next (a pipeline read at once
// rarely needs more; a single request of many arguments does).
const (
	resizeThreshold = 32 << 10
	resizeSlack     = 4 << 10
	maxKeptArgs     = 1 << 10
	maxReusedArgs   = 1 << 14
)

// resizeTo moves the unparsed bytes to a buffer of n bytes (n >= their
// number; none when 0).
func (rr *Reader) resizeTo(n int) {
	var nb []byte
	if n > 0 {
		nb = make([]byte, n)
		copy(nb, rr.buf[rr.start:rr.end])
	}
	rr.setBuf(nb)
	rr.start, rr.end, rr.batch = 0, rr.end-rr.start, 0
}

// limits are the header limits one parse holds requests to.
type limits struct {
	args, bulk int64 // the largest argument count and bulk length accepted
	// maxBulk is proto-max-bulk-len: a bulk over it is invalid, one over
	// bulk but not over maxBulk is refused as unauthenticated.
	maxBulk int64
	unauth  bool // args and bulk are the unauthenticated limits
}

// inlineLimits are those of an inline request rewritten as RESP: its line
// is bounded already, and Redis sets an unauthenticated client no other
// limit on it.
var inlineLimits = limits{args: maxMultiBulkLen, bulk: math.MaxInt64, maxBulk: math.MaxInt64}

// limits returns the limits of the next parse (see SetAuthRequired).
func (rr *Reader) limits() limits {
	l := limits{args: maxMultiBulkLen, bulk: rr.maxBulk()}
	l.maxBulk = l.bulk
	if rr.authRequired != nil && rr.authRequired() {
		l.unauth = true
		l.args = unauthMaxArgs
		l.bulk = min(l.bulk, unauthMaxBulk)
	}
	return l
}

// errOver is header's report of a number over the limit it was given:
// limits.argsError and bulkError say which error that is.
var errOver = errors.New("resp: header over the limit")

// argsError is the error of an argument count n over l.args: invalid past
// Redis's own limit (checked first, as Redis does), unauthenticated below.
func (l limits) argsError(n int64) error {
	if l.unauth && n <= maxMultiBulkLen {
		return &ProtocolError{MsgUnauthMultiBulkLength}
	}
	return &ProtocolError{MsgInvalidMultiBulkLength}
}

// bulkError is argsError for a bulk length n over l.bulk.
func (l limits) bulkError(n int64) error {
	if l.unauth && n <= l.maxBulk {
		return &ProtocolError{MsgUnauthBulkLength}
	}
	return &ProtocolError{MsgInvalidBulkLength}
}

// parseAll parses every complete request in the buffer into cmds. It
// returns a framing error only when it is at the first unparsed byte.
func (rr *Reader) parseAll() error {
	rr.need = 0
	lim := rr.limits()
	for rr.start < rr.end {
		b := rr.buf[rr.start:rr.end]
		var n int
		var err error
		if b[0] == '*' {
			n, err = rr.parseMultiBulk(b, lim)
		} else {
			n, err = rr.parseInline(b)
		}
		if err != nil {
			return err
		}
		if n == parseMore {
			return nil
		}
		rr.start += n
		rr.nlTo = 0
	}
	return nil
}

// parseMultiBulk parses the RESP request at the start of b and appends it
// to cmds. It returns the bytes it took, or parseMore (setting need).
func (rr *Reader) parseMultiBulk(b []byte, lim limits) (int, error) {
	count, p, err := rr.header(b, 0, MsgInvalidMultiBulkLength, MsgMultiBulkCountTooBig, lim.args)
	if p < 0 || err != nil {
		if err == errOver {
			err = lim.argsError(count)
		}
		return p, err
	}
	if count <= 0 {
		return p, nil // an empty request: skipped
	}
	first := len(rr.args)
	for range count {
		if p >= len(b) {
			return rr.more(first, p+1)
		}
		if b[p] != '$' {
			rr.args = rr.args[:first]
			return 0, &ProtocolError{msgExpectedDollar(b[p])}
		}
		size, q, err := rr.header(b, p, MsgInvalidBulkLength, MsgBulkCountTooBig, lim.bulk)
		if q < 0 || err != nil {
			rr.args = rr.args[:first]
			if err == errOver {
				err = lim.bulkError(size)
			}
			return q, err
		}
		if size < 0 {
			rr.args = rr.args[:first]
			return 0, &ProtocolError{MsgInvalidBulkLength}
		}
		end := q + int(size)
		if end+2 > len(b) {
			return rr.more(first, end+2)
		}
		if b[end] != '\r' || b[end+1] != '\n' {
			rr.args = rr.args[:first]
			return 0, &ProtocolError{MsgInvalidBulkLength}
		}
		rr.args = append(rr.args, b[q:end:end])
		p = end + 2
	}
	rr.cmds = append(rr.cmds, rr.args[first:len(rr.args):len(rr.args)])
	return p, nil
}

// more drops a partly parsed request's arguments and asks for n bytes.
func (rr *Reader) more(first, n int) (int, error) {
	rr.args = rr.args[:first]
	rr.need = n
	return parseMore, nil
}

// header parses the header line starting at b[p] ('*' or '$'), as Redis's
// string2ll would, and returns its number and where the line ends. A number
// that does not parse is invalid; one that exceeds limit is returned with
// errOver; a line longer than maxInlineLen without its end is tooLong. A
// line not yet complete returns parseMore.
func (rr *Reader) header(b []byte, p int, invalid, tooLong string, limit int64) (int64, int, error) {
	// The common case first: a positive number of up to 18 digits (no
	// leading zero, no overflow) and CRLF, in one pass.
	if q := p + 1; q < len(b) && b[q] >= '1' && b[q] <= '9' {
		n := int64(b[q] - '0')
		for q++; q < len(b) && q < p+19 && b[q] >= '0' && b[q] <= '9'; q++ {
			n = n*10 + int64(b[q]-'0')
		}
		if q+1 < len(b) && b[q] == '\r' && b[q+1] == '\n' {
			if n > limit {
				return n, 0, errOver
			}
			return n, q + 2, nil
		}
	}
	i := rr.lineEnd(b, p)
	if i < 0 {
		if len(b)-p > maxInlineLen {
			return 0, 0, &ProtocolError{tooLong}
		}
		rr.need = len(b) + 1
		return 0, parseMore, nil
	}
	line := b[p+1 : p+i]
	if len(line) == 0 || line[len(line)-1] != '\r' {
		return 0, 0, &ProtocolError{invalid}
	}
	n, ok := ParseInt(line[:len(line)-1])
	if !ok {
		return 0, 0, &ProtocolError{invalid}
	}
	if n > limit {
		return n, 0, errOver
	}
	return n, p + i + 1, nil
}

// lineEnd returns the offset from p of the first '\n' in b at or after p,
// or -1, skipping what an earlier call found to hold none.
func (rr *Reader) lineEnd(b []byte, p int) int {
	from := p
	if rr.nlFrom == p && rr.nlTo > p {
		from = rr.nlTo
	}
	i := bytes.IndexByte(b[from:], '\n')
	if i < 0 {
		rr.nlFrom, rr.nlTo = p, len(b)
		return -1
	}
	return from + i - p
}

// parseInline parses the inline request line at the start of b.
func (rr *Reader) parseInline(b []byte) (int, error) {
	i := rr.lineEnd(b, 0)
	if i < 0 {
		if len(b) > maxInlineLen {
			return 0, &ProtocolError{MsgInlineTooBig}
		}
		rr.need = len(b) + 1
		return parseMore, nil
	}
	if i > maxInlineLen {
		return 0, &ProtocolError{MsgInlineTooBig}
	}
	line := b[:i]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	start := len(rr.inline)
	var ok bool
	if rr.inline, ok = appendInline(rr.inline, line); !ok {
		rr.inline = rr.inline[:start]
		return 0, &ProtocolError{MsgUnbalancedQuotes}
	}
	if len(rr.inline) > start {
		// Earlier inline requests keep aliasing the old array if
		// appendInline grew it, so parsing this one in place is safe.
		rr.parseMultiBulk(rr.inline[start:], inlineLimits)
	}
	return i + 1, nil
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
	if bytes.IndexByte(line, '"') < 0 && bytes.IndexByte(line, '\'') < 0 {
		return appendPlainInline(out, line), true
	}
	return appendQuotedInline(out, line)
}

// appendQuotedInline is appendInline for a line that may hold quotes.
func appendQuotedInline(out, line []byte) ([]byte, bool) {
	var args [][]byte
	if !splitArgs(line, func(arg []byte) { args = append(args, arg) }) {
		return out, false
	}
	if len(args) == 0 {
		return out, true
	}
	out = AppendArrayLen(out, len(args))
	for _, a := range args {
		out = AppendBulk(out, a)
	}
	return out, true
}

// SplitArgs splits line into words as Redis's sdssplitargs does, as an
// inline request is split; Redis reads config files, script shebangs and
// library metadata with it too. The line ends at a NUL byte, as the C
// string Redis splits does. It reports false for unbalanced quotes.
func SplitArgs(line string) ([]string, bool) {
	if i := strings.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	var args []string
	ok := splitArgs([]byte(line), func(arg []byte) { args = append(args, string(arg)) })
	return args, ok
}

// splitArgs is sdssplitargs over line (cut at its NUL byte already): it
// gives each argument to add, in order, and reports false for unbalanced
// quotes (some arguments may have been given already). Arguments are
// separated by white space; "double quotes" take \n \r \t \b \a \xHH and
// \<any> escapes; 'single quotes' only \'; a quote may start inside a word,
// and a closing quote must be followed by white space or the end.
func splitArgs(line []byte, add func([]byte)) bool {
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p == len(line) {
			return true
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
						return false
					}
					done = true
				case c == 0:
					return false
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
						return false
					}
					done = true
				case c == 0:
					return false
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
		add(cur)
	}
}

// appendPlainInline is appendInline for a line without quotes, the usual
// case (redis-cli's pipes, mass loads): the arguments are the runs of
// non-spaces, written straight from the line, with nothing allocated.
func appendPlainInline(out, line []byte) []byte {
	n := 0
	for i := 0; i < len(line); {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			break
		}
		n++
		for i < len(line) && !isSplit(line[i]) {
			i++
		}
	}
	if n == 0 {
		return out
	}
	out = AppendArrayLen(out, n)
	for i := 0; i < len(line); {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			break
		}
		start := i
		for i < len(line) && !isSplit(line[i]) {
			i++
		}
		out = AppendBulk(out, line[start:i])
	}
	return out
}

// isSplit reports whether sdssplitargs ends an unquoted argument at c. It
// skips every isSpace byte before an argument, but \v and \f inside one
// are kept.
func isSplit(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

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
