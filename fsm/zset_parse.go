package fsm

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
)

// Score and range parsing, shared by the server (which must answer a bad
// argument before the command reaches the store) and the store.

// ParseScore parses a score, a weight or an increment as Redis's
// getDoubleFromObject does: all of b is a strtod number (decimal, hex,
// "inf", "infinity"), no leading space, not NaN, and not out of range
// (an overflow or an underflow to zero is an error; a subnormal is not).
func ParseScore(b []byte) (float64, bool) {
	if len(b) == 0 || isCSpace(b[0]) {
		return 0, false
	}
	if f, ok := parseSmallInt(b); ok {
		return f, true
	}
	return parseStrtod(b)
}

// parseSmallInt parses the common score: an optional '-' and one to 15
// decimal digits, which a float64 holds exactly, so the result is
// strtod's (-0 included). ok is false for anything else.
func parseSmallInt(b []byte) (float64, bool) {
	neg := b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		return -float64(n), true
	}
	return float64(n), true
}

// ParseScoreBound parses one end of a score range as Redis's
// zslParseRange does: an optional '(' makes it exclusive, then strtod of
// the rest, which may start with spaces, may be empty (0), may overflow
// (to an infinity) and must not be NaN.
func ParseScoreBound(b []byte) (f float64, exclusive, ok bool) {
	if len(b) > 0 && b[0] == '(' {
		exclusive = true
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, exclusive, true
	}
	b = bytes.TrimLeft(b, " \t\n\v\f\r")
	if len(b) == 0 || len(b) >= maxLongDoubleChars || !strtoldSyntax(b) {
		return 0, exclusive, false
	}
	f, err := strconv.ParseFloat(hexFloat(b), 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, exclusive, false
	}
	return f, exclusive, true
}

// ValidLexBound reports whether b is one end of a lexicographic range as
// Redis's zslParseLexRangeItem accepts it: "+", "-", or "(" or "[" and a
// string.
func ValidLexBound(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	switch b[0] {
	case '+', '-':
		// Redis compares a C string: a NUL after the sign ends it.
		return len(b) == 1 || b[1] == 0
	case '(', '[':
		return true
	}
	return false
}

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func parseStrtod(b []byte) (float64, bool) {
	if len(b) >= maxLongDoubleChars || !strtoldSyntax(b) {
		return 0, false
	}
	f, err := strconv.ParseFloat(hexFloat(b), 64)
	if err != nil {
		return 0, false // out of range: strtod's ERANGE at HUGE_VAL
	}
	if f == 0 && hasNonZeroDigit(b) {
		return 0, false // underflow to zero: ERANGE too
	}
	return f, true
}

// hexFloat is b as strconv.ParseFloat takes it: strtod reads a hex float
// without a binary exponent ("0x10"), Go needs one. The result may alias
// b (ParseFloat keeps no reference to its argument; its errors copy it).
func hexFloat(b []byte) string {
	s := unsafeString(b)
	body := s
	if len(body) > 0 && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	if len(body) > 1 && body[0] == '0' && body[1]|0x20 == 'x' && !bytes.ContainsAny(b, "pP") {
		s += "p0"
	}
	return s
}

// hasNonZeroDigit reports whether the significand of a number in strtod
// syntax has a digit other than 0.
func hasNonZeroDigit(b []byte) bool {
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	hex := len(b) > i+1 && b[i] == '0' && b[i+1]|0x20 == 'x'
	if hex {
		i += 2
	}
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '.':
		case c >= '1' && c <= '9':
			return true
		case hex && c|0x20 >= 'a' && c|0x20 <= 'f':
			return true
		case c == '0':
		default:
			return false // the exponent
		}
	}
	return false
}

// ScoreArg is a score as OpZAdd and weights carry it: 8 bytes, the
// float64's bits little-endian.
func ScoreArg(f float64) []byte {
	return binary.LittleEndian.AppendUint64(make([]byte, 0, 8), math.Float64bits(f))
}

func scoreOfArg(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }

func validScoreArg(b []byte) bool { return len(b) == 8 && !math.IsNaN(scoreOfArg(b)) }

// lexBound is one end of a lexicographic range: inf -1 for "-", +1 for
// "+", else 0 and the string.
type lexBound struct {
	inf int
	val string
	ex  bool
}

func parseLexBound(b []byte) lexBound {
	switch b[0] {
	case '-':
		return lexBound{inf: -1, ex: true}
	case '+':
		return lexBound{inf: 1, ex: true}
	}
	return lexBound{val: unsafeString(b[1:]), ex: b[0] == '('}
}

// gteMin reports whether m is at or after the range's start.
func (min lexBound) gteMin(m string) bool {
	switch {
	case min.inf < 0:
		return true
	case min.inf > 0:
		return false
	case min.ex:
		return m > min.val
	}
	return m >= min.val
}

// lteMax reports whether m is at or before the range's end.
func (max lexBound) lteMax(m string) bool {
	switch {
	case max.inf > 0:
		return true
	case max.inf < 0:
		return false
	case max.ex:
		return m < max.val
	}
	return m <= max.val
}
