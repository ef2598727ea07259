package test

import (
	"slices"
	"strconv"
	"strings"
)

// The hash commands' part of TestDifferential. Fields come from a small
// pool so commands meet each other's fields; now and then a value or field
// longer than hash-max-listpack-value, or an HSET of more than
// hash-max-listpack-entries fields, converts a hash to Redis's hashtable,
// so both encodings are compared.
func init() {
	registerDiffType(diffType{
		name:   "hash",
		weight: 30,
		gen:    (*cmdGen).hashCommand,
		dump: func(c *rawConn, key string) string {
			return strings.Join(sortedPairs(c.Do("HGETALL", key).Elems), " ")
		},
		unordered: map[string]string{"HGETALL": "pairs", "HKEYS": "elems", "HVALS": "elems"},
		same:      sameHashReply,
	})
}

var longHashText = strings.Repeat("L", 70)

func (g *cmdGen) hashField() string {
	if g.chance(0.02) {
		return longHashText
	}
	return g.pick("f0", "f1", "f2", "f3", "f4", "f5", "F", "")
}

func (g *cmdGen) hashValue() string {
	if g.chance(0.02) {
		return longHashText
	}
	return g.value()
}

func (g *cmdGen) hashFields(min int) []string {
	fs := make([]string, min+g.r.Intn(3))
	for i := range fs {
		fs[i] = g.hashField()
	}
	return fs
}

func (g *cmdGen) hashCommand() []string {
	k := g.key()
	switch g.r.Intn(20) {
	case 0, 1, 2:
		cmd := []string{g.pick("HSET", "HSET", "HMSET"), k}
		if g.chance(0.04) {
			// More fields than a listpack holds.
			for i := range 130 {
				cmd = append(cmd, "m"+strconv.Itoa(i), strconv.Itoa(i))
			}
			return cmd
		}
		for _, f := range g.hashFields(1) {
			cmd = append(cmd, f, g.hashValue())
		}
		if g.chance(0.05) {
			cmd = cmd[:len(cmd)-1] // a field without its value
		}
		return cmd
	case 3:
		return []string{"HSETNX", k, g.hashField(), g.hashValue()}
	case 4, 5:
		return []string{"HGET", k, g.hashField()}
	case 6:
		return append([]string{"HMGET", k}, g.hashFields(1)...)
	case 7:
		return []string{"HGETALL", k}
	case 8:
		return append([]string{"HDEL", k}, g.hashFields(1)...)
	case 9:
		return []string{"HLEN", k}
	case 10:
		return []string{"HSTRLEN", k, g.hashField()}
	case 11:
		return []string{"HEXISTS", k, g.hashField()}
	case 12:
		return []string{g.pick("HKEYS", "HVALS"), k}
	case 13, 14:
		return []string{"HINCRBY", k, g.hashField(), g.integer()}
	case 15:
		return []string{"HINCRBYFLOAT", k, g.hashField(), g.float()}
	case 16, 17:
		cmd := []string{"HRANDFIELD", k}
		if g.chance(0.2) {
			return cmd
		}
		cmd = append(cmd, g.pick("0", "1", "2", "3", "-1", "-3", "-10", "10", "200", "-200",
			"abc", "", "9223372036854775807", "-9223372036854775808", "4611686018427387904",
			"4611686018427387903"))
		// No large negative counts: Redis would send that many fields
		// (kvs answers out of range past MaxHRandFieldRepeats), and a
		// dropped WITHVALUES could turn an error into that.
		if g.chance(0.5) {
			cmd = append(cmd, g.pick("WITHVALUES", "withvalues", "WITHVALUES", "BOGUS"))
		}
		if g.chance(0.03) {
			cmd = append(cmd, "WITHVALUES")
		}
		return cmd
	}
	cmd := []string{"HSCAN", k, "0"}
	if g.chance(0.2) {
		cmd[2] = g.pick("5", "-1", "18446744073709551615", "18446744073709551616", "abc", "")
	}
	if g.chance(0.3) {
		cmd = append(cmd, "MATCH", g.pick("*", "f*", "f[0-2]", "m1*", "", "x*"))
	}
	if g.chance(0.6) {
		// COUNT 1000 makes Redis finish a hashtable in one call too.
		cmd = append(cmd, "COUNT", g.pick("1000", "1000", "1000", "1", "10", "0", "-1", "abc"))
	}
	if g.chance(0.05) {
		cmd = append(cmd, g.pick("MATCH", "TYPE", "NOVALUES", "COUNT"))
	}
	return cmd
}

// sameHashReply compares what redis-server and kvs may legitimately answer
// differently: HRANDFIELD's random picks (same count, distinct fields when
// the count is positive, the whole hash when the count exceeds it), and
// HSCAN's cursor, which is Redis's dictionary cursor for a hashtable.
// An HSCAN from cursor 0 that both complete must return the same pairs.
func sameHashReply(cmd []string, ref, got Value) (equal, handled bool) {
	switch strings.ToUpper(cmd[0]) {
	case "HRANDFIELD":
		if ref.IsError() || got.IsError() {
			return false, true
		}
		if len(cmd) == 2 {
			return ref.Null == got.Null, true
		}
		if len(ref.Elems) != len(got.Elems) {
			return false, true
		}
		n, _ := strconv.Atoi(cmd[2])
		withValues := len(cmd) == 4
		step := 1
		if withValues && len(ref.Elems) > 0 && ref.Elems[0].Kind != '*' {
			step = 2 // RESP2 flattens the pairs
		}
		if n > 0 && len(ref.Elems)/step < n {
			// The whole hash, in each server's order.
			if step == 2 {
				return slices.Equal(sortedPairs(ref.Elems), sortedPairs(got.Elems)), true
			}
			return slices.Equal(sortedRaw(ref.Elems), sortedRaw(got.Elems)), true
		}
		if n > 0 {
			seen := map[string]bool{}
			for i := 0; i < len(got.Elems); i += step {
				e := got.Elems[i]
				if e.Kind == '*' && len(e.Elems) == 2 {
					e = e.Elems[0]
				}
				if seen[e.Str] {
					return false, true
				}
				seen[e.Str] = true
			}
		}
		return true, true
	case "HSCAN":
		if ref.Kind != '*' || len(ref.Elems) != 2 || len(got.Elems) != 2 {
			return false, true
		}
		// From a cursor of its own a hashtable's page is each server's
		// own too (a listpack comes whole from any cursor, but which
		// encoding a hash has is not known here).
		fromStart := cmd[2] == "0" || cmd[2] == ""
		if fromStart && ref.Elems[0].Str == "0" && got.Elems[0].Str == "0" {
			return slices.Equal(sortedPairs(ref.Elems[1].Elems), sortedPairs(got.Elems[1].Elems)), true
		}
		// A page of a hashtable: its cursor and contents are each
		// server's own, and where Redis's page ends depends on its
		// buckets.
		return got.Elems[1].Kind == '*' && len(got.Elems[1].Elems)%2 == 0, true
	}
	return false, false
}
