package server

import (
	"strconv"
	"strings"

	"kvs/resp"
)

// is reports whether arg equals the lowercase word w, ignoring ASCII case.
func is(arg []byte, w string) bool { return resp.IsWord(arg, w) }

// lowerName is a command name as Redis quotes it in errors.
func lowerName(arg []byte) string { return strings.ToLower(string(arg)) }

// parseInt parses a 64-bit integer argument exactly as Redis's string2ll
// does (see resp.ParseInt).
func parseInt(b []byte) (int64, bool) { return resp.ParseInt(b) }

// parseCursor parses a SCAN cursor as Redis's strtoul-based check does: an
// optional sign, and a negative number wraps around as in C. An empty
// cursor is 0, as strtoul leaves nothing unparsed.
func parseCursor(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

func itoa(n int) string { return strconv.Itoa(n) }
