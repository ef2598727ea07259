package resp

import (
	"math"
	"strconv"
)

// The reply writer. Each function appends one reply, or the header of an
// aggregate whose elements the caller appends next, to b and returns the
// extended slice: no allocation beyond b's growth. Functions taking proto
// write the RESP3 type when proto is 3 or more and the RESP2 form Redis
// falls back to otherwise.

// AppendStatus appends a simple string ("+OK"). s must not hold CR or LF.
func AppendStatus(b []byte, s string) []byte {
	b = append(b, '+')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendError appends an error reply; s is the text without the leading
// '-' ("ERR syntax error") and must not hold CR or LF.
func AppendError(b []byte, s string) []byte {
	b = append(b, '-')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendInt appends an integer reply.
func AppendInt(b []byte, n int64) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

// AppendBulk appends a bulk string.
func AppendBulk(b, v []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, '\r', '\n')
	b = append(b, v...)
	return append(b, '\r', '\n')
}

// AppendBulkString appends a bulk string.
func AppendBulkString(b []byte, v string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, '\r', '\n')
	b = append(b, v...)
	return append(b, '\r', '\n')
}

// AppendBulkInt appends n in decimal as a bulk string.
func AppendBulkInt(b []byte, n int64) []byte {
	var tmp [20]byte
	return AppendBulk(b, strconv.AppendInt(tmp[:0], n, 10))
}

// AppendArrayLen starts an array of n elements.
func AppendArrayLen(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// AppendNull appends the null bulk string "$-1" (RESP2) or the null "_"
// (RESP3): a missing value.
func AppendNull(b []byte, proto int) []byte {
	if proto >= 3 {
		return append(b, '_', '\r', '\n')
	}
	return append(b, '$', '-', '1', '\r', '\n')
}

// AppendNullArray appends the null array "*-1" (RESP2) or the null "_"
// (RESP3), as Redis answers a missing aggregate (a timed-out BLPOP, an
// aborted EXEC).
func AppendNullArray(b []byte, proto int) []byte {
	if proto >= 3 {
		return append(b, '_', '\r', '\n')
	}
	return append(b, '*', '-', '1', '\r', '\n')
}

// AppendMapLen starts a map of n pairs: a RESP3 map, or a flat array of 2n
// elements in RESP2.
func AppendMapLen(b []byte, n int, proto int) []byte {
	if proto >= 3 {
		return appendHeader(b, '%', n)
	}
	return AppendArrayLen(b, 2*n)
}

// AppendSetLen starts a set of n elements: a RESP3 set, or an array in
// RESP2.
func AppendSetLen(b []byte, n int, proto int) []byte {
	if proto >= 3 {
		return appendHeader(b, '~', n)
	}
	return AppendArrayLen(b, n)
}

// AppendPushLen starts a push message of n elements (pub/sub, client
// tracking): a RESP3 push, or an array in RESP2.
func AppendPushLen(b []byte, n int, proto int) []byte {
	if proto >= 3 {
		return appendHeader(b, '>', n)
	}
	return AppendArrayLen(b, n)
}

// AppendVerbatim appends text as a RESP3 verbatim string of format "txt",
// or a bulk string in RESP2, as Redis does for INFO and CLIENT LIST.
func AppendVerbatim(b []byte, text string, proto int) []byte {
	if proto < 3 {
		return AppendBulkString(b, text)
	}
	b = append(b, '=')
	b = strconv.AppendInt(b, int64(len(text)+4), 10)
	b = append(b, "\r\ntxt:"...)
	b = append(b, text...)
	return append(b, '\r', '\n')
}

// AppendDouble appends f as a RESP3 double, or as a bulk string in RESP2,
// formatted as redis-server 7.0's addReplyDouble formats it (a sorted
// set's score): "inf" and "-inf" for the infinities, otherwise C's
// "%.17g" ("1.1000000000000001", "3", "1e+100", "-0"). NaN, which Redis
// never stores, is written "nan" as RESP3 spells it.
func AppendDouble(b []byte, f float64, proto int) []byte {
	var tmp [32]byte
	num := appendDoubleText(tmp[:0], f)
	if proto < 3 {
		return AppendBulk(b, num)
	}
	b = append(b, ',')
	b = append(b, num...)
	return append(b, '\r', '\n')
}

// appendDoubleText appends f as C's printf("%.17g") does. Go's 'g' format
// with precision 17 picks between the plain and the exponent form and
// drops trailing zeros exactly as C does, and prints the exponent with at
// least two digits as C does; only the infinities and NaN are spelled
// differently.
func appendDoubleText(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case math.IsNaN(f):
		return append(b, "nan"...)
	}
	return strconv.AppendFloat(b, f, 'g', 17, 64)
}

// AppendBool appends a RESP3 boolean ("#t", "#f"), or the integer 1 or 0
// in RESP2, as Redis's addReplyBool does.
func AppendBool(b []byte, v bool, proto int) []byte {
	if proto >= 3 {
		if v {
			return append(b, '#', 't', '\r', '\n')
		}
		return append(b, '#', 'f', '\r', '\n')
	}
	if v {
		return append(b, ':', '1', '\r', '\n')
	}
	return append(b, ':', '0', '\r', '\n')
}

// AppendBigNumber appends num, a decimal integer of any size, as a RESP3
// big number, or a bulk string in RESP2, as Redis's addReplyBigNum does.
// The caller guarantees num is an optional '-' and digits.
func AppendBigNumber(b []byte, num string, proto int) []byte {
	if proto < 3 {
		return AppendBulkString(b, num)
	}
	b = append(b, '(')
	b = append(b, num...)
	return append(b, '\r', '\n')
}

func appendHeader(b []byte, kind byte, n int) []byte {
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}
