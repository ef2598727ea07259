package test

import (
	"strconv"
	"strings"
)

// The list commands' part of the differential test. Blocking commands are
// given only timeouts that end (short, invalid or negative), so a command
// on an empty list answers the timeout's null array on both servers.

func init() {
	registerDiffType(diffType{name: "list", weight: 30, gen: genList, dump: dumpList})
}

func (g *cmdGen) listElem() string {
	if g.chance(0.6) {
		return g.pick("a", "b", "c", "a", "x", "1", "-1", "")
	}
	return g.value()
}

func (g *cmdGen) listElems(min int) []string {
	n := min + g.r.Intn(4)
	if g.chance(0.05) {
		n += 200 // past the packed form's limits
	}
	out := make([]string, n)
	for i := range out {
		if n > 100 {
			out[i] = strings.Repeat(g.pick("a", "b", "c"), 1+g.r.Intn(80))
		} else {
			out[i] = g.listElem()
		}
	}
	return out
}

func (g *cmdGen) listIndex() string {
	if g.chance(0.85) {
		return strconv.Itoa(g.r.Intn(24) - 12)
	}
	return g.pick("9223372036854775807", "-9223372036854775808", "abc", "1.0", "", "300", "-300")
}

func (g *cmdGen) listEnd() string {
	if g.chance(0.95) {
		return g.pick("LEFT", "RIGHT", "left", "right")
	}
	return g.pick("MIDDLE", "")
}

func (g *cmdGen) listCount() string {
	if g.chance(0.8) {
		return strconv.Itoa(g.r.Intn(6))
	}
	return g.pick("-1", "abc", "9223372036854775807", "-9223372036854775808", "1000", "")
}

// timeout is a blocking command's timeout that always ends.
func (g *cmdGen) timeout() string {
	return g.pick("0.01", "0.02", "0.001", "-1", "abc", "-0.5", "inf", "1e400", "nan", "", "0x", "9999999999999999")
}

func genList(g *cmdGen) []string {
	k := g.key()
	switch g.r.Intn(30) {
	case 0, 1, 2:
		return append([]string{g.pick("LPUSH", "RPUSH"), k}, g.listElems(1)...)
	case 3:
		return append([]string{g.pick("LPUSHX", "RPUSHX"), k}, g.listElems(1)...)
	case 4, 5:
		cmd := []string{g.pick("LPOP", "RPOP"), k}
		if g.chance(0.5) {
			cmd = append(cmd, g.listCount())
		}
		return cmd
	case 6:
		return []string{"LLEN", k}
	case 7, 8:
		return []string{"LRANGE", k, g.listIndex(), g.listIndex()}
	case 9:
		return []string{"LINDEX", k, g.listIndex()}
	case 10:
		return []string{"LSET", k, g.listIndex(), g.listElem()}
	case 11:
		return []string{"LINSERT", k, g.pick("BEFORE", "AFTER", "before", "middle"), g.listElem(), g.listElem()}
	case 12:
		return []string{"LREM", k, g.pick("0", "1", "-1", "2", "-2", "100", "abc", "-9223372036854775808"), g.listElem()}
	case 13:
		return []string{"LTRIM", k, g.listIndex(), g.listIndex()}
	case 14, 15:
		cmd := []string{"LPOS", k, g.listElem()}
		for n := g.r.Intn(4); n > 0; n-- {
			switch g.r.Intn(4) {
			case 0:
				cmd = append(cmd, "RANK", g.pick("1", "2", "-1", "-2", "0", "abc", "9223372036854775807", "-9223372036854775808"))
			case 1:
				cmd = append(cmd, "COUNT", g.pick("0", "1", "2", "-1", "abc"))
			case 2:
				cmd = append(cmd, "MAXLEN", g.pick("0", "1", "3", "-1", "abc"))
			default:
				cmd = append(cmd, g.pick("BOGUS", "RANK"))
			}
		}
		return cmd
	case 16, 17:
		return []string{"LMOVE", k, g.key(), g.listEnd(), g.listEnd()}
	case 18:
		return []string{"RPOPLPUSH", k, g.key()}
	case 19, 20:
		return append([]string{"LMPOP"}, g.lmpopArgs()...)
	case 21, 22:
		return append(append([]string{g.pick("BLPOP", "BRPOP")}, g.keys(1)...), g.timeout())
	case 23:
		return []string{"BLMOVE", k, g.key(), g.listEnd(), g.listEnd(), g.timeout()}
	case 24:
		return []string{"BRPOPLPUSH", k, g.key(), g.timeout()}
	case 25:
		return append([]string{"BLMPOP", g.timeout()}, g.lmpopArgs()...)
	case 26:
		return []string{"TYPE", k}
	case 27:
		return []string{"RPUSH", k, g.listElem()}
	}
	return []string{"LRANGE", k, "0", "-1"}
}

// lmpopArgs are LMPOP's and BLMPOP's arguments after the timeout.
func (g *cmdGen) lmpopArgs() []string {
	keys := g.keys(1)
	n := strconv.Itoa(len(keys))
	if g.chance(0.1) {
		n = g.pick("0", "-1", "abc", "10", "9223372036854775807")
	}
	args := append(append([]string{n}, keys...), g.listEnd())
	if g.chance(0.5) {
		args = append(args, "COUNT", g.listCount())
	}
	if g.chance(0.05) {
		args = append(args, g.pick("COUNT", "BOGUS"))
	}
	return args
}

func dumpList(c *rawConn, key string) string {
	v := c.Do("LRANGE", key, "0", "-1")
	parts := make([]string, len(v.Elems))
	for i, e := range v.Elems {
		parts[i] = strconv.Quote(e.Str)
	}
	return strings.Join(parts, ",")
}

// timeoutLast reports whether a command's last argument is its timeout,
// whatever the number of arguments (BLPOP key... timeout), so that the
// generator never appends an argument to it.
func timeoutLast(name string) bool {
	switch strings.ToUpper(name) {
	case "BLPOP", "BRPOP", "BZPOPMIN", "BZPOPMAX":
		return true
	}
	return false
}

// genBlockedList is a TestDifferentialBlocked scenario over lists: BLPOP,
// BRPOP and BLMPOP (with counts) on one or two keys, BLMOVE and
// BRPOPLPUSH into destinations that may hold a string; then pushes, and
// changes of a source's or a destination's type.
func genBlockedList(g *cmdGen) blockedScenario {
	srcs := []string{"k1", "k2"}
	dsts := []string{"d1", "d2", "str", "k1"}
	sc := blockedScenario{
		setup: [][]string{{"SET", "str", "x"}},
		keys:  []string{"k1", "k2", "d1", "d2", "str"},
		proto: g.blockedProto(),
	}
	if g.chance(0.3) {
		sc.setup = append(sc.setup, []string{"SET", "d2", "y"})
	}
	src := func() []string {
		if g.chance(0.3) {
			return []string{srcs[0], srcs[1]}
		}
		return []string{g.pick(srcs...)}
	}
	for n := 2 + g.r.Intn(4); n > 0; n-- {
		var cmd []string
		switch g.r.Intn(6) {
		case 0:
			cmd = append(append([]string{g.pick("BLPOP", "BRPOP")}, src()...), "0")
		case 1, 2:
			keys := src()
			cmd = append(append([]string{"BLMPOP", "0", strconv.Itoa(len(keys))}, keys...), g.pick("LEFT", "RIGHT"))
			if g.chance(0.7) {
				cmd = append(cmd, "COUNT", g.pick("1", "2", "3", "10"))
			}
		case 3, 4:
			cmd = []string{"BLMOVE", g.pick(srcs...), g.pick(dsts...), g.pick("LEFT", "RIGHT"), g.pick("LEFT", "RIGHT"), "0"}
		default:
			cmd = []string{"BRPOPLPUSH", g.pick(srcs...), g.pick(dsts...), "0"}
		}
		sc.waiters = append(sc.waiters, blockedWaiter{proto: g.blockedProto(), cmd: cmd})
	}
	sc.writes = g.blockedWrites(func() []string {
		switch g.r.Intn(10) {
		case 0:
			return []string{"SET", g.pick("d1", "d2", "k1"), "s"}
		case 1:
			return []string{"DEL", g.pick("d1", "d2", "str", "k1", "k2")}
		case 2:
			return []string{"RPUSH", g.pick("d1", "d2"), "old"}
		}
		push := []string{g.pick("LPUSH", "RPUSH"), g.pick(srcs...)}
		for m := 1 + g.r.Intn(4); m > 0; m-- {
			push = append(push, g.pick("a", "b", "c", "d", "e", "f"))
		}
		return push
	})
	return sc
}
