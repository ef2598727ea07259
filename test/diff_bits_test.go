package test

import (
	"strconv"
	"strings"
)

// The differential test's bit commands, LCS, COPY, OBJECT and CONFIG of
// the encoding thresholds. They work on strings (and COPY and OBJECT on
// every type), which the string dump already compares, so the type is
// registered under a name no key has and its dump is never called.
//
// CONFIG SET is given only values that change nothing (the defaults) or
// that are refused: kvs forgets run-time configuration when a durable node
// restarts, as redis-server would, but the reference never restarts.
// CONFIG GET replies are compared without set-max-listpack-*, which
// Redis 7.0 (the reference) lacks and kvs, answering as 7.2, has.
// COPY's DB is 0 or invalid here: a node of several groups (the sharded
// modes) has database 0 alone, and diff_dbs_test.go copies to other
// databases. CLUSTER's slot queries, which a standalone redis-server
// refuses while a kvs cluster answers them, are tested on a cluster in
// crash_bits_test.go.
func init() {
	registerDiffType(diffType{
		name:   "bits",
		weight: 14,
		gen:    (*cmdGen).bitsCommand,
		dump:   func(c *rawConn, key string) string { return "" },
		unordered: map[string]string{
			"CONFIG": "pairs", // Redis lists parameters in its dict's order
		},
		same: func(cmd []string, ref, got Value) (bool, bool) {
			if len(cmd) >= 3 && strings.EqualFold(cmd[0], "CONFIG") && strings.EqualFold(cmd[1], "GET") && !got.IsError() {
				// A pattern such as *-entries finds set-max-listpack-*
				// on kvs alone: compare the rest as pairs. CONFIG GET
				// takes several patterns (next's wrong-arity case
				// appends one).
				var kept []Value
				for i := 0; i+1 < len(got.Elems); i += 2 {
					if !strings.HasPrefix(got.Elems[i].Str, "set-max-listpack-") {
						kept = append(kept, got.Elems[i], got.Elems[i+1])
					}
				}
				got.Elems = kept
				return sameMapReply(ref, got), true
			}
			if len(cmd) == 3 && strings.EqualFold(cmd[0], "OBJECT") && strings.EqualFold(cmd[1], "IDLETIME") {
				// The idle time depends on when each server last saw the
				// key, to the second.
				return ref.Kind == got.Kind && ref.Null == got.Null, true
			}
			return false, false
		},
	})
}

// bitOffset is a bit offset: mostly small, so strings stay short, and
// sometimes invalid or past proto-max-bulk-len (512 MB).
func (g *cmdGen) bitOffset() string {
	if g.chance(0.9) {
		return strconv.Itoa(g.r.Intn(120))
	}
	return g.pick("-1", "abc", "4294967296", "9223372036854775807", "1.5", "", "+1", "1000")
}

func (g *cmdGen) bitRange() []string {
	switch g.r.Intn(6) {
	case 0:
		return nil
	case 1:
		return []string{g.rangeIndex()} // start alone: BITCOUNT's syntax error
	case 2:
		return []string{g.rangeIndex(), g.rangeIndex(), g.pick("BIT", "byte", "bit", "BYTE", "bits")}
	}
	return []string{g.rangeIndex(), g.rangeIndex()}
}

func (g *cmdGen) bitFieldType() string {
	if g.chance(0.9) {
		if g.chance(0.5) {
			return "i" + strconv.Itoa(1+g.r.Intn(64))
		}
		return "u" + strconv.Itoa(1+g.r.Intn(63))
	}
	return g.pick("u64", "i65", "i0", "x8", "", "i", "U8", "i-1")
}

func (g *cmdGen) bitFieldOffset() string {
	if g.chance(0.2) {
		return "#" + strconv.Itoa(g.r.Intn(12))
	}
	return g.bitOffset()
}

func (g *cmdGen) bitFieldValue() string {
	return g.pick("0", "1", "-1", "7", "100", "-100", "255", "256", "9223372036854775807",
		"-9223372036854775808", "4611686018427387904", "abc", "1.5")
}

func (g *cmdGen) bitFieldOps(readOnly bool) []string {
	var ops []string
	for n := g.r.Intn(4) + 1; n > 0; n-- {
		switch g.r.Intn(7) {
		case 0, 1:
			ops = append(ops, g.pick("GET", "get"), g.bitFieldType(), g.bitFieldOffset())
		case 2:
			if readOnly && g.chance(0.7) {
				continue
			}
			ops = append(ops, "SET", g.bitFieldType(), g.bitFieldOffset(), g.bitFieldValue())
		case 3:
			if readOnly && g.chance(0.7) {
				continue
			}
			ops = append(ops, g.pick("INCRBY", "incrby"), g.bitFieldType(), g.bitFieldOffset(), g.bitFieldValue())
		case 4:
			ops = append(ops, "OVERFLOW", g.pick("WRAP", "SAT", "FAIL", "fail", "bogus"))
		case 5:
			if g.chance(0.3) {
				ops = append(ops, g.pick("GET", "SET", "OVERFLOW", "BOGUS")) // missing arguments
			}
		default:
			ops = append(ops, "GET", "u8", strconv.Itoa(8*g.r.Intn(4)))
		}
	}
	return ops
}

// limitParams are the threshold parameters of Redis 7.0 with their
// defaults.
var limitParams = [][2]string{
	{"hash-max-listpack-entries", "512"}, {"hash-max-ziplist-entries", "512"},
	{"hash-max-listpack-value", "64"}, {"hash-max-ziplist-value", "64"},
	{"set-max-intset-entries", "512"},
	{"zset-max-listpack-entries", "128"}, {"zset-max-ziplist-entries", "128"},
	{"zset-max-listpack-value", "64"}, {"zset-max-ziplist-value", "64"},
	{"list-max-listpack-size", "-2"}, {"list-max-ziplist-size", "-2"},
	{"list-compress-depth", "0"},
}

func (g *cmdGen) configLimits() []string {
	p := limitParams[g.r.Intn(len(limitParams))]
	switch g.r.Intn(6) {
	case 5:
		// A bad value before a bad name: the name's error wins.
		return []string{"CONFIG", "SET", p[0], "abc", g.pick("bogus-param", p[0]), p[1]}
	case 0:
		return []string{"CONFIG", "GET", g.pick("hash-max-*", "*ziplist*", "zset-*", "list-*", "*-entries",
			"hash-max-listpack-entries", "list-compress*", "set-max-intset-entries", "zset-max-listpack-value")}
	case 1:
		return []string{"CONFIG", "GET", p[0]}
	case 2:
		q := limitParams[g.r.Intn(len(limitParams))]
		return []string{"CONFIG", "SET", p[0], p[1], q[0], q[1]} // duplicate when q is p
	case 3:
		return []string{"CONFIG", "SET", p[0], g.pick("-1", "abc", "1.5", "", "+5", "05", "1kb", "2mb", "1K",
			"9223372036854775808", "2147483648", "-2147483649", "-0", " 1", "99999999999999999999")}
	}
	return []string{"CONFIG", "SET", p[0], p[1]}
}

// bitsCommand returns one bit, LCS, COPY, OBJECT or CONFIG command.
func (g *cmdGen) bitsCommand() []string {
	k := g.key()
	switch g.r.Intn(14) {
	case 0, 1:
		return []string{"SETBIT", k, g.bitOffset(), g.pick("0", "1", "1", "2", "-1", "a", "01")}
	case 2:
		return []string{"GETBIT", k, g.bitOffset()}
	case 3:
		return append([]string{"BITCOUNT", k}, g.bitRange()...)
	case 4:
		cmd := []string{"BITPOS", k, g.pick("0", "1", "1", "0", "2", "x", "-1")}
		switch g.r.Intn(5) {
		case 0:
			return cmd
		case 1:
			return append(cmd, g.rangeIndex())
		case 2:
			return append(cmd, g.rangeIndex(), g.rangeIndex())
		case 3:
			return append(cmd, g.rangeIndex(), g.rangeIndex(), g.pick("BIT", "BYTE", "bit", "bogus"))
		}
		return append(cmd, g.rangeIndex(), g.pick("bit", "1"), g.pick("BIT", "x"), "extra")
	case 5, 6:
		op := g.pick("AND", "OR", "XOR", "NOT", "and", "not", "NAND")
		return append([]string{"BITOP", op, g.key()}, g.keys(1)...)
	case 7, 8:
		return append([]string{g.pick("BITFIELD", "bitfield")}, append([]string{k}, g.bitFieldOps(false)...)...)
	case 9:
		return append([]string{"BITFIELD_RO", k}, g.bitFieldOps(true)...)
	case 10:
		cmd := []string{"LCS", k, g.key()}
		for n := g.r.Intn(4); n > 0; n-- {
			switch g.r.Intn(6) {
			case 0:
				cmd = append(cmd, g.pick("IDX", "idx"))
			case 1:
				cmd = append(cmd, g.pick("LEN", "len"))
			case 2:
				cmd = append(cmd, "WITHMATCHLEN")
			case 3:
				cmd = append(cmd, "MINMATCHLEN", g.pick("0", "1", "2", "3", "-5", "abc", "100"))
			case 4:
				cmd = append(cmd, g.pick("MINMATCHLEN", "BOGUS"))
			default:
				cmd = append(cmd, "IDX", "WITHMATCHLEN")
			}
		}
		return cmd
	case 11:
		cmd := []string{"COPY", k, g.key()}
		if g.chance(0.5) {
			cmd = append(cmd, g.pick("REPLACE", "replace"))
		}
		if g.chance(0.3) {
			cmd = append(cmd, g.pick("DB", "db"), g.pick("0", "0", "x", "-1", "16", "99999999999"))
		}
		if g.chance(0.05) {
			// Not a bare DB: the generator's extra argument could make
			// it DB 1, which a node of several groups refuses.
			cmd = append(cmd, "BOGUS")
		}
		return cmd
	case 12:
		sub := g.pick("ENCODING", "encoding", "REFCOUNT", "IDLETIME", "FREQ", "HELP", "BOGUS")
		if sub == "HELP" {
			if g.chance(0.7) {
				return []string{"OBJECT", "HELP"}
			}
		}
		if g.chance(0.05) {
			return []string{"OBJECT", sub}
		}
		return []string{"OBJECT", sub, k}
	}
	return g.configLimits()
}
