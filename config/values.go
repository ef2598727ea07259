package config

import (
	"math"
	"strconv"
	"strings"
)

// The number and word syntaxes of Redis's config values, as its C
// functions (memtoull, strtoll, yesnotoi) read them.

// ParseMemory parses a memory value as Redis's memtoull does: digits, then
// an optional unit (b, k, kb, m, mb, g, gb, any case; k is 1000, kb 1024);
// no sign. Too many digits give the largest value, and a product too
// large wraps, as in C; the caller's range check then refuses both.
func ParseMemory(b []byte) (int64, bool) {
	v, ok := ParseMemoryU(b)
	return int64(v), ok
}

// ParseMemoryU is ParseMemory's unsigned 64-bit number, as Redis's
// memtoull returns it.
func ParseMemoryU(b []byte) (uint64, bool) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	var mul uint64
	switch unit := strings.ToLower(string(b[i:])); unit {
	case "", "b":
		mul = 1
	case "k":
		mul = 1000
	case "kb":
		mul = 1024
	case "m":
		mul = 1000 * 1000
	case "mb":
		mul = 1024 * 1024
	case "g":
		mul = 1000 * 1000 * 1000
	case "gb":
		mul = 1024 * 1024 * 1024
	default:
		return 0, false
	}
	if i >= 128 {
		return 0, false
	}
	var v uint64
	for _, c := range b[:i] {
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			v = math.MaxUint64
			break
		}
		v = v*10 + d
	}
	return v * mul, true
}

// strtollWhole parses a whole decimal number as C's strtoll does when the
// caller then checks that nothing is left: leading spaces and a sign are
// allowed, and an empty string is 0.
func strtollWhole(a string) (int64, bool) {
	t := strings.TrimLeft(a, " \t\n\v\f\r")
	if t == "" {
		// No digits: strtoll parses nothing, and only an empty string
		// leaves nothing behind.
		return 0, a == ""
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			if strings.HasPrefix(t, "-") {
				return math.MinInt64, true
			}
			return math.MaxInt64, true
		}
		return 0, false
	}
	return v, true
}

// Strtoll is C's strtoll(s, NULL, 10): leading blanks, a sign, the digits
// that follow; anything after them is ignored, nothing parses as 0.
func Strtoll(s string) int64 {
	s = strings.TrimLeft(s, " \t")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v int64
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if v > (1<<63-1)/10 {
			v = 1<<63 - 1
			break
		}
		v = v*10 + int64(s[i]-'0')
	}
	if neg {
		return -v
	}
	return v
}

// ParseYesNo is Redis's yesnotoi: yes or no, in any case.
func ParseYesNo(v []byte) (on, ok bool) {
	switch strings.ToLower(string(v)) {
	case "yes":
		return true, true
	case "no":
		return false, true
	}
	return false, false
}
