package fsm

import (
	"math"
	"math/big"
)

// Redis computes INCRBYFLOAT in C long double (x87 80-bit: a 64-bit
// significand) and prints the sum with "%.17Lf", trailing zeros trimmed.
// float64 arithmetic gives visibly different answers (0.1 + 0.2 prints
// 0.30000000000000004 instead of Redis's 0.3), so the sum is computed with
// big.Float at 64-bit precision, which rounds exactly as the x87 does.
const longDoublePrec = 64

// Exponent limits of the x87 format in big.Float's MantExp convention
// (x = mant * 2^exp, 0.5 <= |mant| < 1): larger is +-Inf (strtold reports
// ERANGE), smaller rounds to zero (ERANGE too).
const (
	longDoubleMaxExp = 16384
	longDoubleMinExp = -16444
)

// maxLongDoubleChars is Redis's MAX_LONG_DOUBLE_CHARS: longer strings are
// not floats.
const maxLongDoubleChars = 5 * 1024

// incrByFloatLocked implements INCRBYFLOAT. The increment is Args[1] when
// present (the text the client sent, parsed here as Redis parses it) and
// Float otherwise (float64 is less precise than Redis's long double).
func (s *Store) incrByFloatLocked(now int64, c *Command) Reply {
	key := c.Args[0]
	old, ok := s.liveLocked(key, now)
	cur := newLongDouble()
	if ok {
		if old.kind != kindString {
			return ErrorReply(ErrWrongType)
		}
		var valid bool
		if cur, valid = parseLongDouble(old.val); !valid {
			return ErrorReply(ErrNotFloat)
		}
	}
	var incr *big.Float
	if len(c.Args) > 1 {
		var valid bool
		if incr, valid = parseLongDouble(c.Args[1]); !valid {
			return ErrorReply(ErrNotFloat)
		}
	} else {
		if math.IsNaN(c.Float) {
			return ErrorReply(ErrNotFloat)
		}
		incr = newLongDouble().SetFloat64(c.Float)
	}
	if cur.IsInf() || incr.IsInf() {
		return ErrorReply(ErrNaNOrInfinity)
	}
	sum := newLongDouble().Add(cur, incr)
	if sum.Sign() != 0 && sum.MantExp(nil) > longDoubleMaxExp {
		return ErrorReply(ErrNaNOrInfinity)
	}
	text := formatLongDouble(sum)
	it := newItemHash(key, text, old.exp, old.hash)
	it.enc = encNoInt
	s.putLocked(it)
	return BulkReply(text)
}

func newLongDouble() *big.Float {
	return new(big.Float).SetPrec(longDoublePrec).SetMode(big.ToNearestEven)
}

// formatLongDouble is Redis's ld2string in LD_STR_HUMAN mode: "%.17Lf", then
// trailing zeros after the point removed, the point too if nothing follows,
// and "-0" turned into "0".
func formatLongDouble(x *big.Float) []byte {
	return trimHuman(x.Append(make([]byte, 0, 40), 'f', 17))
}

// trimHuman is LD_STR_HUMAN's cut of a "%.17Lf" text: trailing zeros after
// the point removed, the point too if nothing follows, "-0" turned into
// "0".
func trimHuman(b []byte) []byte {
	for b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	if b[len(b)-1] == '.' {
		b = b[:len(b)-1]
	}
	if string(b) == "-0" {
		b = b[:1]
		b[0] = '0'
	}
	return b
}

// parseLongDouble accepts what Redis's string2ld accepts: the whole string
// must be a strtold number (decimal or hex, optional sign and exponent, or
// inf/infinity), with no leading space, not NaN, and within long double range.
func parseLongDouble(b []byte) (*big.Float, bool) {
	if len(b) == 0 || len(b) >= maxLongDoubleChars || !strtoldSyntax(b) {
		return nil, false
	}
	neg := b[0] == '-'
	body := b
	if b[0] == '-' || b[0] == '+' {
		body = b[1:]
	}
	if c := body[0] | 0x20; c == 'i' {
		x := newLongDouble().SetInf(neg)
		return x, true
	}
	x, _, err := newLongDouble().Parse(string(b), 0)
	if err != nil {
		return nil, false
	}
	if x.Sign() != 0 {
		e := x.MantExp(nil)
		if e > longDoubleMaxExp || e < longDoubleMinExp {
			return nil, false
		}
	}
	return x, true
}

// strtoldSyntax reports whether all of b is one number in strtold's syntax,
// NaN excluded: [+-] then inf | infinity | hex float | decimal float.
func strtoldSyntax(b []byte) bool {
	i := 0
	if b[0] == '+' || b[0] == '-' {
		i++
	}
	rest := lower(b[i:])
	if rest == "inf" || rest == "infinity" {
		return true
	}
	digit := isDecDigit
	expChar := byte('e')
	if len(rest) >= 2 && rest[0] == '0' && rest[1] == 'x' {
		digit, expChar = isHexDigit, 'p'
		i += 2
	}
	digits := 0
	for i < len(b) && digit(b[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(b) && b[i] == '.' {
		i++
		for i < len(b) && digit(b[i]) {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(b) && b[i]|0x20 == expChar {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		n := 0
		for i < len(b) && isDecDigit(b[i]) {
			i, n = i+1, n+1
		}
		if n == 0 {
			return false
		}
	}
	return i == len(b)
}

func isDecDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHexDigit(c byte) bool {
	return isDecDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f')
}

func lower(b []byte) string {
	if len(b) > len("infinity") {
		return ""
	}
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

// ValidFloat reports whether b is a float as Redis's string2ld accepts it
// (INCRBYFLOAT's increment, the stored value it adds to): strtold syntax,
// decimal or hex ("0x10", "0x1p-3"), "inf"/"infinity", no spaces, not NaN,
// within long double range. Go's strconv.ParseFloat differs (it rejects
// "0x10", accepts "1_0" with a prefix, and has float64's range), so a
// server that validates arguments with it answers some inputs differently.
func ValidFloat(b []byte) bool {
	_, ok := parseLongDouble(b)
	return ok
}
