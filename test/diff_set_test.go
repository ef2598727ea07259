package test

import (
	"slices"
	"strconv"
	"strings"
)

// The set commands' part of the differential test. Members are drawn from
// a small pool of integers (which keep a set an intset in Redis) and
// strings, so that sets meet, overlap and convert; a few batches add
// enough members to pass the intset and listpack thresholds.
//
// What Redis leaves to chance is generated so the comparison still means
// something: SPOP with a count of 0 or at least the set's size (the whole
// set, compared as a multiset), SPOP without a count only on sets of one
// member, SRANDMEMBER with 0, 1 (on one-member sets), counts past the size
// or negative counts (compared by size and membership in same). SSCAN
// starts at cursor 0 with a COUNT large enough that Redis returns a whole
// hashtable in one page, as kvs and Redis both return a small set.
func init() {
	registerDiffType(diffType{
		name:   "set",
		weight: 30,
		gen:    genSetCommand,
		dump: func(c *rawConn, key string) string {
			v := c.Do("SMEMBERS", key)
			ms := make([]string, len(v.Elems))
			for i, e := range v.Elems {
				ms[i] = e.Str
			}
			slices.Sort(ms)
			return strings.Join(ms, ",")
		},
		unordered: map[string]string{
			"SMEMBERS": "elems", "SINTER": "elems", "SUNION": "elems", "SDIFF": "elems", "SPOP": "elems",
		},
		same: sameSetReply,
	})
}

func (g *cmdGen) setMember() string {
	if g.chance(0.5) {
		return g.pick("0", "1", "2", "3", "-1", "10", "100", "42", "-9223372036854775808",
			"9223372036854775807", "9223372036854775808", "01", "-0", "+1", " 1", "1.5")
	}
	if g.chance(0.05) {
		return strings.Repeat("L", 65)
	}
	return g.pick("a", "b", "c", "d", "e", "hello world", "", "A", "x\x00y", "ß")
}

func (g *cmdGen) setMembers(min int) []string {
	n := min + g.r.Intn(4)
	if g.chance(0.03) {
		n = 130 + g.r.Intn(450) // past set-max-listpack-entries, maybe set-max-intset-entries
	}
	ms := make([]string, n)
	for i := range ms {
		if n > 100 {
			if g.chance(0.1) {
				ms[i] = "s" + strconv.Itoa(g.r.Intn(1000))
			} else {
				ms[i] = strconv.Itoa(g.r.Intn(1000))
			}
			continue
		}
		ms[i] = g.setMember()
	}
	return ms
}

// setKey is mostly one of a few keys only set commands write, so that
// sets grow and meet (the shared keys hold strings most of the time),
// and sometimes a shared key, for WRONGTYPE and for sets that strings and
// key commands then overwrite, rename and expire.
func (g *cmdGen) setKey() string {
	if g.chance(0.75) {
		return g.pick("s0", "s1", "s2", "s3")
	}
	return g.key()
}

// setKeys are a few keys for the set algebra, sometimes with one that
// never exists.
func (g *cmdGen) setKeys(min int) []string {
	ks := make([]string, min+g.r.Intn(3))
	for i := range ks {
		ks[i] = g.setKey()
	}
	if g.chance(0.3) {
		ks = []string{ks[0], ks[0]} // intersections that are not empty
	}
	if g.chance(0.2) {
		ks = append(ks, "nosuchset")
	}
	return ks
}

func genSetCommand(g *cmdGen) []string {
	k := g.setKey()
	switch g.r.Intn(24) {
	case 0, 1, 2, 3:
		return append([]string{"SADD", k}, g.setMembers(1)...)
	case 4, 5:
		return append([]string{"SREM", k}, g.setMembers(1)...)
	case 6:
		return []string{"SCARD", k}
	case 7:
		return []string{"SISMEMBER", k, g.setMember()}
	case 8:
		return append([]string{"SMISMEMBER", k}, g.setMembers(1)...)
	case 9:
		return []string{"SMEMBERS", k}
	case 10:
		// Deterministic SPOPs only (see above): the count form with
		// 0 or a count no set here reaches unless it is one of the big
		// batches, which a count of 100000 still covers.
		switch g.r.Intn(4) {
		case 0:
			return []string{"SPOP", k, g.pick("0", "100000", "9223372036854775807")}
		case 1:
			return []string{"SPOP", k, g.pick("-1", "abc", "", "1.5")}
		case 2:
			return []string{"SPOP", k, "1", "2"}
		}
		return []string{"SPOP", "nosuchset"}
	case 11:
		switch g.r.Intn(5) {
		case 0:
			return []string{"SRANDMEMBER", k}
		case 1:
			return []string{"SRANDMEMBER", k, g.pick("0", "100000", "-1", "-5", "-20", "1")}
		case 2:
			return []string{"SRANDMEMBER", k, g.pick("abc", "-9223372036854775808", "9223372036854775807", "1.0")}
		case 3:
			return []string{"SRANDMEMBER", k, "1", "2"}
		}
		return []string{"SRANDMEMBER", "nosuchset", g.pick("-3", "3")}
	case 12:
		return []string{"SMOVE", k, g.setKey(), g.setMember()}
	case 13:
		return append([]string{"SINTER"}, g.setKeys(1)...)
	case 14:
		return append([]string{"SINTERSTORE", g.setKey()}, g.setKeys(1)...)
	case 15:
		ks := g.setKeys(1)
		cmd := []string{"SINTERCARD", strconv.Itoa(len(ks))}
		switch g.r.Intn(6) {
		case 0:
			cmd[1] = g.pick("0", "-1", "abc", "100", strconv.Itoa(len(ks)+1))
		case 1:
			cmd[1] = "1"
		}
		cmd = append(cmd, ks...)
		switch g.r.Intn(5) {
		case 0:
			cmd = append(cmd, "LIMIT", g.pick("0", "1", "2", "100", "-1", "abc"))
		case 1:
			cmd = append(cmd, g.pick("LIMIT", "limit", "FOO"))
		case 2:
			cmd = append(cmd, "limit", "1", "LIMIT", "3")
		}
		return cmd
	case 16:
		return append([]string{"SUNION"}, g.setKeys(1)...)
	case 17:
		return append([]string{"SUNIONSTORE", g.setKey()}, g.setKeys(1)...)
	case 18:
		return append([]string{"SDIFF"}, g.setKeys(1)...)
	case 19:
		return append([]string{"SDIFFSTORE", g.setKey()}, g.setKeys(1)...)
	case 20, 21:
		cmd := []string{"SSCAN", k, "0"}
		if g.chance(0.1) {
			cmd[2] = g.pick("abc", "-", "1.5", "18446744073709551616")
		}
		if g.chance(0.5) {
			cmd = append(cmd, "MATCH", g.pick("*", "a*", "[0-3]", "?", "1*", "h*o*", "x"))
		}
		cmd = append(cmd, "COUNT", g.pick("100000", "5000"))
		if g.chance(0.15) {
			cmd = append(cmd, g.pick("COUNT", "MATCH", "TYPE", "BOGUS"), g.pick("0", "-1", "abc", "x"))
		}
		if g.chance(0.05) {
			cmd = append(cmd, "MATCH")
		}
		return cmd
	}
	return []string{"TYPE", k}
}

// sameSetReply compares what Redis picks at random: SRANDMEMBER's members
// (the same count, members of the set: both servers' replies must be
// multisets drawn from the same members, which the dump compares later)
// and the elements of SSCAN's single page.
func sameSetReply(cmd []string, ref, got Value) (equal, handled bool) {
	switch strings.ToUpper(cmd[0]) {
	case "SRANDMEMBER":
		if ref.Kind == '$' && got.Kind == '$' {
			return ref.Null == got.Null, true
		}
		if ref.Kind != '*' || got.Kind != '*' {
			return false, false
		}
		if len(ref.Elems) != len(got.Elems) {
			return false, true
		}
		// With repeats allowed (a negative count) or a single pick
		// only the size is fixed; a count past the size returns every
		// member.
		if n, err := strconv.Atoi(cmd[2]); err == nil && n <= 1 {
			return true, true
		}
		return slices.Equal(sortedRaw(ref.Elems), sortedRaw(got.Elems)), true
	case "SSCAN":
		if ref.Kind != '*' || len(ref.Elems) != 2 || len(got.Elems) != 2 {
			return false, false
		}
		return string(ref.Elems[0].Raw) == string(got.Elems[0].Raw) &&
			slices.Equal(sortedRaw(ref.Elems[1].Elems), sortedRaw(got.Elems[1].Elems)), true
	}
	return false, false
}
