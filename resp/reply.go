package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// The reply reader: what a client of a RESP server needs. ReadReply reads
// one reply of any RESP2 or RESP3 type into a Value; SkipReply reads one
// without keeping it, reporting only what kvs bench counts, and allocates
// nothing. Both validate every byte they read: a malformed reply or one
// past the Limits is an error wrapping ErrProtocol, never a panic, and
// beyond a first buffer of at most 1 MB (or 1024 elements) memory grows
// only as the bytes a header announces arrive. After an error the stream's position is unknown: the connection
// must be closed.
//
// Attributes ("|", RESP3 metadata ahead of a reply) are read and
// dropped; the reply they annotate is returned. Streamed strings and
// aggregates ("$?", "*?") are not supported.

// Kind is a reply's type, named by its RESP prefix byte.
type Kind byte

// The reply types. RESP2 has the first five.
const (
	KindStatus    Kind = '+' // simple string
	KindError     Kind = '-' // simple error
	KindInt       Kind = ':'
	KindBulk      Kind = '$' // bulk string, or the RESP2 null bulk "$-1"
	KindArray     Kind = '*' // array, or the RESP2 null array "*-1"
	KindNull      Kind = '_'
	KindDouble    Kind = ','
	KindBool      Kind = '#'
	KindBlobError Kind = '!'
	KindVerbatim  Kind = '='
	KindBigNumber Kind = '('
	KindMap       Kind = '%'
	KindSet       Kind = '~'
	KindPush      Kind = '>'
	kindAttribute Kind = '|'
)

// Value is one reply.
type Value struct {
	Kind Kind
	// Null is set for "_" and for RESP2's null bulk ("$-1", KindBulk)
	// and null array ("*-1", KindArray).
	Null bool
	// Str is the text of a status, error, bulk string, blob error, big
	// number (its digits) or verbatim string (without its format). It is
	// the Value's own copy.
	Str []byte
	// Format is a verbatim string's format ("txt", "mkd").
	Format string
	// Int is an integer, or a boolean's 1 (true) or 0 (false).
	Int int64
	// Float is a double.
	Float float64
	// Elems are an array's, set's or push's elements, or a map's keys
	// and values alternating (key, value, key, value, ...).
	Elems []Value
}

// IsError reports whether v is an error reply, simple or blob.
func (v *Value) IsError() bool { return v.Kind == KindError || v.Kind == KindBlobError }

// Limits bound what a reply may announce. The zero value of each field
// means its default.
type Limits struct {
	// MaxBulk is the largest bulk string, verbatim string or blob error
	// accepted, in bytes. Default: 512 MB, Redis's proto-max-bulk-len.
	MaxBulk int64
	// MaxElems is the largest aggregate accepted, in elements (a map's
	// pairs count one each). Default: math.MaxInt32.
	MaxElems int64
	// MaxDepth is the deepest nesting of aggregates accepted; a reply
	// that is not an aggregate has depth 0. Default: 128.
	MaxDepth int
}

// Defaults of the Limits fields.
const (
	DefaultMaxBulk  = 512 << 20
	DefaultMaxElems = math.MaxInt32
	DefaultMaxDepth = 128
)

func (l Limits) withDefaults() Limits {
	if l.MaxBulk <= 0 {
		l.MaxBulk = DefaultMaxBulk
	}
	if l.MaxElems <= 0 {
		l.MaxElems = DefaultMaxElems
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// ErrProtocol is wrapped by every error that reports a malformed reply or
// one beyond the Limits.
var ErrProtocol = errors.New("resp: protocol error in reply")

// A bulk payload is read into a buffer of at most preallocBulk bytes
// first, and one of at most preallocElems elements for an aggregate: the
// rest grows as the bytes arrive, so a header announcing gigabytes costs
// memory only once they are sent.
const (
	preallocBulk  = 1 << 20
	preallocElems = 1024
)

// ReadReply reads one reply from br. It returns io.EOF if br ends before
// the reply starts and io.ErrUnexpectedEOF if it ends inside it.
func ReadReply(br *bufio.Reader, lim Limits) (Value, error) {
	lim = lim.withDefaults()
	var v Value
	err := readValue(br, &lim, 0, &v)
	return v, err
}

func readValue(br *bufio.Reader, lim *Limits, depth int, v *Value) error {
	var dropped ReplyInfo
	kind, body, err := readHeader(br, lim, depth, &dropped)
	if err != nil {
		return err
	}
	*v = Value{Kind: kind}
	switch kind {
	case KindStatus, KindError:
		v.Str = append([]byte(nil), body...)
	case KindInt:
		if v.Int, err = parseIntBody(body); err != nil {
			return err
		}
	case KindNull:
		if len(body) != 0 {
			return protoErr("null", body)
		}
		v.Null = true
	case KindBool:
		var b bool
		if b, err = parseBool(body); err != nil {
			return err
		}
		if b {
			v.Int = 1
		}
	case KindDouble:
		if v.Float, err = parseDouble(body); err != nil {
			return err
		}
	case KindBigNumber:
		if !isBigNumber(body) {
			return protoErr("big number", body)
		}
		v.Str = append([]byte(nil), body...)
	case KindBulk, KindBlobError, KindVerbatim:
		n, err := bulkLen(kind, body, lim)
		if err != nil {
			return err
		}
		if n < 0 {
			v.Null = true
			return nil
		}
		if v.Str, err = readBulk(br, n); err != nil {
			return err
		}
		if kind == KindVerbatim {
			if len(v.Str) < 4 || v.Str[3] != ':' {
				return errNoFormat
			}
			v.Format, v.Str = string(v.Str[:3]), v.Str[4:]
		}
	case KindArray, KindSet, KindPush, KindMap:
		n, err := aggregateLen(kind, body, lim, depth)
		if err != nil {
			return err
		}
		if n < 0 {
			v.Null = true
			return nil
		}
		elems := make([]Value, 0, min(n, preallocElems))
		for range n {
			elems = append(elems, Value{})
			if err := readValue(br, lim, depth+1, &elems[len(elems)-1]); err != nil {
				return err
			}
		}
		v.Elems = elems
	default:
		return fmt.Errorf("%w: unknown reply type %q", ErrProtocol, byte(kind))
	}
	return nil
}

// ReplyInfo is what SkipReply reports of a reply.
type ReplyInfo struct {
	Kind Kind
	// Null is set for "_", "$-1" and "*-1".
	Null bool
	// Size is the number of bytes the reply took.
	Size int
	// Text is a simple error's text, aliasing br's buffer: valid until
	// the next read from br. It is empty for every other kind.
	Text []byte
}

// IsError reports whether the reply was an error, simple or blob.
func (ri *ReplyInfo) IsError() bool { return ri.Kind == KindError || ri.Kind == KindBlobError }

// SkipReply reads one reply from br, validating it as ReadReply does but
// keeping nothing of it: a reply read without error allocates nothing.
func SkipReply(br *bufio.Reader, lim Limits) (ReplyInfo, error) {
	if ri, ok := skipSimple(br, lim); ok {
		return ri, nil
	}
	return skipReply(br, lim)
}

func skipReply(br *bufio.Reader, lim Limits) (ReplyInfo, error) {
	lim = lim.withDefaults()
	var ri ReplyInfo
	err := skipValue(br, &lim, 0, &ri)
	return ri, err
}

// skipSimple is SkipReply's fast path for the replies a load generator
// sees most, a status, an error or a bulk string whose bytes are all
// buffered: it reads one and reports true, or reads nothing and reports
// false, leaving every other case (and every error) to skipValue.
func skipSimple(br *bufio.Reader, lim Limits) (ReplyInfo, bool) {
	b := br.Buffered()
	if b < 3 {
		return ReplyInfo{}, false
	}
	p, _ := br.Peek(b)
	i := bytes.IndexByte(p, '\n')
	if i < 2 || p[i-1] != '\r' {
		return ReplyInfo{}, false
	}
	body := p[1 : i-1]
	switch Kind(p[0]) {
	case KindStatus:
		br.Discard(i + 1)
		return ReplyInfo{Kind: KindStatus, Size: i + 1}, true
	case KindError:
		br.Discard(i + 1)
		return ReplyInfo{Kind: KindError, Size: i + 1, Text: body}, true
	case KindBulk:
		n, ok := ParseInt(body)
		maxBulk := lim.MaxBulk
		if maxBulk <= 0 {
			maxBulk = DefaultMaxBulk
		}
		if !ok || n < -1 || n > maxBulk {
			return ReplyInfo{}, false
		}
		if n == -1 {
			br.Discard(i + 1)
			return ReplyInfo{Kind: KindBulk, Null: true, Size: i + 1}, true
		}
		end := i + 1 + int(n)
		if end+2 > len(p) || p[end] != '\r' || p[end+1] != '\n' {
			return ReplyInfo{}, false
		}
		br.Discard(end + 2)
		return ReplyInfo{Kind: KindBulk, Size: end + 2}, true
	}
	return ReplyInfo{}, false
}

func skipValue(br *bufio.Reader, lim *Limits, depth int, ri *ReplyInfo) error {
	kind, body, err := readHeader(br, lim, depth, ri)
	if err != nil {
		return err
	}
	if depth == 0 {
		ri.Kind = kind
	}
	switch kind {
	case KindStatus:
	case KindError:
		if depth == 0 {
			ri.Text = body
		}
	case KindInt:
		_, err = parseIntBody(body)
	case KindNull:
		if len(body) != 0 {
			return protoErr("null", body)
		}
		ri.Null = depth == 0
	case KindBool:
		_, err = parseBool(body)
	case KindDouble:
		_, err = parseDouble(body)
	case KindBigNumber:
		if !isBigNumber(body) {
			err = protoErr("big number", body)
		}
	case KindBulk, KindBlobError, KindVerbatim:
		n, err := bulkLen(kind, body, lim)
		if err != nil {
			return err
		}
		if n < 0 {
			ri.Null = depth == 0
			return nil
		}
		if kind == KindVerbatim {
			if n < 4 {
				return errNoFormat
			}
			f, err := br.Peek(4)
			if err != nil {
				return unexpectedEOF(err)
			}
			if f[3] != ':' {
				return errNoFormat
			}
		}
		if n+2 <= br.Buffered() {
			// The common case, checked in place.
			p, _ := br.Peek(n + 2)
			if p[n] != '\r' || p[n+1] != '\n' {
				return errNoCRLF
			}
			br.Discard(n + 2)
			ri.Size += n + 2
			return nil
		}
		d, err := br.Discard(n)
		ri.Size += d
		if err != nil {
			return unexpectedEOF(err)
		}
		if err := readCRLF(br); err != nil {
			return err
		}
		ri.Size += 2
	case KindArray, KindSet, KindPush, KindMap:
		n, err := aggregateLen(kind, body, lim, depth)
		if err != nil {
			return err
		}
		if n < 0 {
			ri.Null = depth == 0
			return nil
		}
		for range n {
			if err := skipValue(br, lim, depth+1, ri); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: unknown reply type %q", ErrProtocol, byte(kind))
	}
	return err
}

// readHeader reads a reply's first line, as readLine, after dropping the
// attributes ahead of it (skipped into ri, which counts their size). The
// loop keeps the stack flat however many attributes come in a row.
func readHeader(br *bufio.Reader, lim *Limits, depth int, ri *ReplyInfo) (Kind, []byte, error) {
	inside := depth > 0
	for {
		kind, body, err := readLine(br, inside)
		if err != nil {
			return 0, nil, err
		}
		ri.Size += len(body) + 3
		if kind != kindAttribute {
			return kind, body, nil
		}
		n, err := aggregateLen(kind, body, lim, depth)
		if err != nil {
			return 0, nil, err
		}
		for range n {
			if err := skipValue(br, lim, depth+1, ri); err != nil {
				return 0, nil, err
			}
		}
		inside = true // the reply the attribute annotates must follow
	}
}

// readLine reads a reply's first line and returns its type and the text
// between the type and CRLF, aliasing br's buffer. inside says the reply
// is an element of another, so that the stream ending is unexpected.
func readLine(br *bufio.Reader, inside bool) (Kind, []byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return 0, nil, fmt.Errorf("%w: a line longer than %d bytes", ErrProtocol, br.Size())
		case err == io.EOF && (inside || len(line) > 0):
			return 0, nil, io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return 0, nil, fmt.Errorf("%w: a line not ended by CRLF: %q", ErrProtocol, truncate(line))
	}
	return Kind(line[0]), line[1 : len(line)-2], nil
}

// bulkLen parses a bulk header's length: -1 for RESP2's null bulk string.
func bulkLen(kind Kind, body []byte, lim *Limits) (int, error) {
	n, ok := ParseInt(body)
	switch {
	case !ok || n < -1 || (n == -1 && kind != KindBulk):
		return 0, protoErr("length", body)
	case n > lim.MaxBulk || n > math.MaxInt-2:
		return 0, fmt.Errorf("%w: a %d-byte string exceeds the limit of %d", ErrProtocol, n, lim.MaxBulk)
	}
	return int(n), nil
}

// aggregateLen parses an aggregate header's count, in elements (a map's
// and an attribute's doubled): -1 for RESP2's null array.
func aggregateLen(kind Kind, body []byte, lim *Limits, depth int) (int, error) {
	n, ok := ParseInt(body)
	switch {
	case !ok || n < -1 || (n == -1 && kind != KindArray):
		return 0, protoErr("count", body)
	case n > lim.MaxElems || n > math.MaxInt32:
		return 0, fmt.Errorf("%w: an aggregate of %d elements exceeds the limit of %d", ErrProtocol, n, lim.MaxElems)
	case n > 0 && depth >= lim.MaxDepth:
		return 0, fmt.Errorf("%w: aggregates nested deeper than %d", ErrProtocol, lim.MaxDepth)
	}
	if kind == KindMap || kind == kindAttribute {
		n *= 2
	}
	return int(n), nil
}

// readBulk reads an n-byte payload and its CRLF into a buffer of its own.
func readBulk(br *bufio.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, preallocBulk))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow: append picks the size
		}
		m := min(cap(buf), n)
		k, err := io.ReadFull(br, buf[len(buf):m])
		buf = buf[:len(buf)+k]
		if err != nil {
			return nil, unexpectedEOF(err)
		}
	}
	if err := readCRLF(br); err != nil {
		return nil, err
	}
	return buf[:n:n], nil
}

func readCRLF(br *bufio.Reader) error {
	cr, err := br.ReadByte()
	if err != nil {
		return unexpectedEOF(err)
	}
	lf, err := br.ReadByte()
	if err != nil {
		return unexpectedEOF(err)
	}
	if cr != '\r' || lf != '\n' {
		return errNoCRLF
	}
	return nil
}

func parseIntBody(body []byte) (int64, error) {
	n, ok := ParseInt(body)
	if !ok {
		return 0, protoErr("integer", body)
	}
	return n, nil
}

func parseBool(body []byte) (bool, error) {
	if len(body) == 1 && (body[0] == 't' || body[0] == 'f') {
		return body[0] == 't', nil
	}
	return false, protoErr("boolean", body)
}

// parseDouble parses a double as RESP3 writes it: a decimal number with
// an optional exponent, "inf", "-inf" or "nan".
func parseDouble(body []byte) (float64, error) {
	switch string(body) {
	case "inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	case "nan":
		return math.NaN(), nil
	}
	if !isDecimal(body) {
		return 0, protoErr("double", body)
	}
	f, err := strconv.ParseFloat(string(body), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, protoErr("double", body)
	}
	return f, nil
}

// isDecimal reports whether b is [-]digits[.digits][(e|E)[+|-]digits]
// with at least one digit before the exponent.
func isDecimal(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		digits++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
		if i == start {
			return false
		}
	}
	return i == len(b)
}

// isBigNumber reports whether b is [-]digits.
func isBigNumber(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

var (
	errNoFormat = fmt.Errorf("%w: a verbatim string without a format", ErrProtocol)
	errNoCRLF   = fmt.Errorf("%w: a string not followed by CRLF", ErrProtocol)
)

func protoErr(what string, body []byte) error {
	return fmt.Errorf("%w: invalid %s %q", ErrProtocol, what, truncate(body))
}

// truncate keeps an error message short whatever a peer sent.
func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// unexpectedEOF turns the end of the stream inside a reply into
// io.ErrUnexpectedEOF.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
