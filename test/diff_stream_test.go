package test

import (
	"strconv"
	"strings"
)

// The differential test's stream commands. IDs are explicit (ms-seq of
// small numbers, ms alone, ms-*), so that both servers give every entry
// the same ID: a "*" ID is the server's clock, which two servers never
// share, and once a stream holds one every later explicit ID is refused
// on one server and not the other. Consumer groups read, claim and
// acknowledge with min-idle-time 0, and the replies that carry times
// (XPENDING's idle times, XINFO CONSUMERS's idle) are compared with the
// times left out; XINFO STREAM's radix-tree-nodes counts nodes of Redis's
// radix tree, which kvs does not have (docs/compatibility.md), and is
// left out too. Nothing blocks: BLOCK is never drawn.
func init() {
	registerDiffType(diffType{
		name:   "stream",
		weight: 30,
		gen:    (*cmdGen).streamCommand,
		dump:   dumpStream,
		same: func(cmd []string, ref, got Value) (bool, bool) {
			name := strings.ToUpper(cmd[0])
			switch {
			case name == "XPENDING" && len(cmd) >= 6,
				name == "XINFO" && len(cmd) > 1 && strings.EqualFold(cmd[1], "CONSUMERS"),
				name == "XINFO" && len(cmd) > 1 && strings.EqualFold(cmd[1], "STREAM"):
				return streamCanon(name, ref) == streamCanon(name, got), true
			}
			return false, false
		},
	})
}

// streamCanon renders a reply with its times (and XINFO STREAM's
// radix-tree-nodes) blanked.
func streamCanon(name string, v Value) string {
	var b strings.Builder
	var walk func(v Value, depth int)
	walk = func(v Value, depth int) {
		b.WriteByte(v.Kind)
		if v.Null {
			b.WriteString("null;")
			return
		}
		if len(v.Elems) == 0 {
			b.WriteString(strconv.Quote(v.Str) + ";")
			return
		}
		b.WriteString("[")
		for i := 0; i < len(v.Elems); i++ {
			e := v.Elems[i]
			switch {
			case name == "XPENDING" && depth == 1 && i == 2 && len(v.Elems) == 4:
				b.WriteString("time;")
				continue
			case (e.Str == "idle" || e.Str == "radix-tree-nodes") && i+1 < len(v.Elems):
				b.WriteString(e.Str + ";time;")
				i++
				continue
			}
			walk(e, depth+1)
		}
		b.WriteString("]")
	}
	walk(v, 0)
	return b.String()
}

// dumpStream renders a stream: its entries, its counters and its groups
// (with their PELs, less the delivery times).
func dumpStream(c *rawConn, key string) string {
	var b strings.Builder
	b.WriteString(canon(c.Do("XRANGE", key, "-", "+")))
	b.WriteString(streamCanon("XINFO", c.Do("XINFO", "STREAM", key)))
	groups := c.Do("XINFO", "GROUPS", key)
	b.WriteString(canon(groups))
	for _, g := range groups.Elems {
		for i := 0; i+1 < len(g.Elems); i += 2 {
			if g.Elems[i].Str == "name" {
				name := g.Elems[i+1].Str
				b.WriteString(streamCanon("XPENDING", c.Do("XPENDING", key, name, "-", "+", "1000")))
				b.WriteString(streamCanon("XINFO", c.Do("XINFO", "CONSUMERS", key, name)))
			}
		}
	}
	return b.String()
}

// streamID is an explicit ID, often one a stream holds or is about to.
func (g *cmdGen) streamID() string {
	ms := strconv.Itoa(g.r.Intn(40))
	switch g.r.Intn(10) {
	case 0:
		return ms
	case 1:
		return ms + "-*"
	case 2:
		return g.pick("0-0", "0", "18446744073709551615-18446744073709551615", "-", "+", "abc", "1-x", "(5", "01-2", "5-", "-5")
	}
	return ms + "-" + strconv.Itoa(g.r.Intn(4))
}

// streamRangeID is an XRANGE bound.
func (g *cmdGen) streamRangeID() string {
	if g.chance(0.3) {
		return g.pick("-", "+", "(0-1", "(18446744073709551615-18446744073709551615", "(0-0", "0")
	}
	if g.chance(0.2) {
		return "(" + strconv.Itoa(g.r.Intn(40)) + "-" + strconv.Itoa(g.r.Intn(4))
	}
	return g.streamID()
}

func (g *cmdGen) streamPairs() []string {
	n := 1 + g.r.Intn(3)
	if g.chance(0.05) {
		n = 0
	}
	var out []string
	fields := []string{"a", "b", "c", "f", "1", "field"}
	same := g.chance(0.5)
	for i := 0; i < n; i++ {
		f := fields[g.r.Intn(len(fields))]
		if same {
			f = fields[i]
		}
		out = append(out, f, g.value())
	}
	if g.chance(0.03) {
		out = append(out, "odd")
	}
	return out
}

// streamTrim is a trimming option of XADD or XTRIM.
func (g *cmdGen) streamTrim() []string {
	var out []string
	strategy := g.pick("MAXLEN", "MINID", "maxlen")
	out = append(out, strategy)
	approx := ""
	switch g.r.Intn(3) {
	case 0:
		approx = "~"
		out = append(out, "~")
	case 1:
		out = append(out, "=")
	}
	if strings.EqualFold(strategy, "MAXLEN") {
		out = append(out, g.pick("0", "1", "2", "5", "10", "-1", "abc", strconv.Itoa(g.r.Intn(30))))
	} else {
		out = append(out, g.streamID())
	}
	if g.chance(0.2) {
		out = append(out, "LIMIT", g.pick("0", "1", "2", "-1", "x", "100"))
	}
	_ = approx
	return out
}

func (g *cmdGen) streamGroup() string    { return g.pick("g1", "g2", "g3") }
func (g *cmdGen) streamConsumer() string { return g.pick("alice", "bob", "carol") }

// streamCommand returns one stream command.
func (g *cmdGen) streamCommand() []string {
	k := g.key()
	switch g.r.Intn(30) {
	case 0, 1, 2, 3, 4, 5, 6:
		cmd := []string{g.pick("XADD", "xadd"), k}
		if g.chance(0.1) {
			cmd = append(cmd, "NOMKSTREAM")
		}
		if g.chance(0.2) {
			cmd = append(cmd, g.streamTrim()...)
		}
		cmd = append(cmd, g.streamID())
		return append(cmd, g.streamPairs()...)
	case 7:
		// Many entries at once, so that nodes fill and trimming by
		// nodes has something to do.
		return []string{"EVAL", `local ms = tonumber(ARGV[1]) for i = 1, 150 do redis.pcall('XADD', KEYS[1], ms .. '-' .. i, 'f', i) end return redis.call('XLEN', KEYS[1])`,
			"1", k, strconv.Itoa(40 + g.r.Intn(1000))}
	case 8:
		return []string{"XLEN", k}
	case 9, 10:
		cmd := []string{g.pick("XRANGE", "XREVRANGE"), k, g.streamRangeID(), g.streamRangeID()}
		if g.chance(0.4) {
			cmd = append(cmd, "COUNT", g.pick("0", "1", "3", "-1", "x"))
		}
		return cmd
	case 11:
		return append([]string{"XDEL", k}, g.streamID(), g.streamID())
	case 12:
		return append([]string{"XTRIM", k}, g.streamTrim()...)
	case 13:
		cmd := []string{"XREAD"}
		if g.chance(0.5) {
			cmd = append(cmd, "COUNT", g.pick("1", "2", "0", "x"))
		}
		cmd = append(cmd, "STREAMS", k)
		if g.chance(0.3) {
			cmd = append(cmd, g.key(), g.streamID(), g.pick("$", "0"))
		} else {
			cmd = append(cmd, g.pick("$", "0", g.streamID()))
		}
		return cmd
	case 14:
		cmd := []string{"XSETID", k, g.streamID()}
		if g.chance(0.3) {
			cmd = append(cmd, "ENTRIESADDED", g.pick("0", "5", "100", "-1"))
		}
		if g.chance(0.3) {
			cmd = append(cmd, "MAXDELETEDID", g.streamID())
		}
		return cmd
	case 15, 16:
		cmd := []string{"XGROUP", "CREATE", k, g.streamGroup(), g.pick("$", "0", g.streamID())}
		if g.chance(0.5) {
			cmd = append(cmd, "MKSTREAM")
		}
		if g.chance(0.2) {
			cmd = append(cmd, "ENTRIESREAD", g.pick("0", "3", "-1", "-2"))
		}
		return cmd
	case 17:
		switch g.r.Intn(4) {
		case 0:
			return []string{"XGROUP", "SETID", k, g.streamGroup(), g.pick("$", "0", g.streamID())}
		case 1:
			return []string{"XGROUP", "DESTROY", k, g.streamGroup()}
		case 2:
			return []string{"XGROUP", "CREATECONSUMER", k, g.streamGroup(), g.streamConsumer()}
		}
		return []string{"XGROUP", "DELCONSUMER", k, g.streamGroup(), g.streamConsumer()}
	case 18, 19, 20:
		cmd := []string{"XREADGROUP", "GROUP", g.streamGroup(), g.streamConsumer()}
		if g.chance(0.5) {
			cmd = append(cmd, "COUNT", g.pick("1", "2", "5"))
		}
		if g.chance(0.2) {
			cmd = append(cmd, "NOACK")
		}
		return append(cmd, "STREAMS", k, g.pick(">", ">", "0", g.streamID()))
	case 21:
		return []string{"XACK", k, g.streamGroup(), g.streamID(), g.streamID()}
	case 22:
		if g.chance(0.4) {
			return []string{"XPENDING", k, g.streamGroup()}
		}
		cmd := []string{"XPENDING", k, g.streamGroup(), g.streamRangeID(), g.streamRangeID(), g.pick("10", "1", "0")}
		if g.chance(0.3) {
			cmd = append(cmd, g.streamConsumer())
		}
		return cmd
	case 23:
		cmd := []string{"XCLAIM", k, g.streamGroup(), g.streamConsumer(), "0", g.streamID(), g.streamID()}
		if g.chance(0.3) {
			cmd = append(cmd, g.pick("JUSTID", "FORCE", "RETRYCOUNT", "BOGUS"))
			if cmd[len(cmd)-1] == "RETRYCOUNT" {
				cmd = append(cmd, g.pick("3", "x"))
			}
		}
		return cmd
	case 24:
		cmd := []string{"XAUTOCLAIM", k, g.streamGroup(), g.streamConsumer(), "0", g.pick("0", "-", "(0-1", g.streamID())}
		if g.chance(0.4) {
			cmd = append(cmd, "COUNT", g.pick("1", "2", "0"))
		}
		if g.chance(0.2) {
			cmd = append(cmd, "JUSTID")
		}
		return cmd
	case 25, 26:
		switch g.r.Intn(3) {
		case 0:
			return []string{"XINFO", "STREAM", k}
		case 1:
			return []string{"XINFO", "GROUPS", k}
		}
		return []string{"XINFO", "CONSUMERS", k, g.streamGroup()}
	case 27:
		return []string{g.pick("TYPE", "OBJECT"), k}
	}
	return []string{"DEL", k}
}
