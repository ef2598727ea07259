package server

import (
	"math"

	"kvs/fsm"
)

func init() {
	k1 := func(name string, arity int, flags cmdFlags, parse func(*client, [][]byte) (fsm.Command, string)) command {
		return command{name: name, arity: arity, flags: flags, firstKey: 1, lastKey: 1, keyStep: 1, group: "sorted_set", parse: parse}
	}
	k0 := func(name string, arity int, flags cmdFlags, parse func(*client, [][]byte) (fsm.Command, string)) command {
		return command{name: name, arity: arity, flags: flags, group: "sorted_set", parse: parse}
	}
	registerCommands([]command{
		k1("zadd", -4, wf, parseZAdd),
		k1("zincrby", 4, wf, parseZIncrBy),
		k1("zrem", -3, wdf, parseZRem),
		k1("zcard", 2, rf, parseZKey(fsm.OpZCard)),
		k1("zscore", 3, rf, parseZKeyMember(fsm.OpZScore, 0)),
		k1("zmscore", -3, rf, parseZMScore),
		k1("zrank", -3, rf, parseZRank(0)),
		k1("zrevrank", -3, rf, parseZRank(fsm.FlagZRev)),
		k1("zcount", 4, rf, parseZCount),
		k1("zlexcount", 4, rf, parseZLexCount),
		k1("zrange", -4, r, parseZRangeAs(zrAuto, zrAuto, false)),
		{name: "zrangestore", arity: -5, flags: w, firstKey: 1, lastKey: 2, keyStep: 1, group: "sorted_set",
			parse: parseZRangeAs(zrAuto, zrAuto, true)},
		k1("zrangebyscore", -4, r, parseZRangeAs(zrScore, zrForward, false)),
		k1("zrevrangebyscore", -4, r, parseZRangeAs(zrScore, zrReverse, false)),
		k1("zrangebylex", -4, r, parseZRangeAs(zrLex, zrForward, false)),
		k1("zrevrangebylex", -4, r, parseZRangeAs(zrLex, zrReverse, false)),
		k1("zrevrange", -4, r, parseZRangeAs(zrRank, zrReverse, false)),
		k1("zremrangebyrank", 4, wd, parseZRemRange(zrRank)),
		k1("zremrangebyscore", 4, wd, parseZRemRange(zrScore)),
		k1("zremrangebylex", 4, wd, parseZRemRange(zrLex)),
		k1("zpopmin", -2, wdf, parseZPop(0)),
		k1("zpopmax", -2, wdf, parseZPop(fsm.FlagZMax)),
		k0("zmpop", -4, wd, parseZMPop),
		{name: "bzpopmin", arity: -3, flags: wdf | flagNoScript | flagBlocking, firstKey: 1, lastKey: -2, keyStep: 1, group: "sorted_set", block: blockBZPop},
		{name: "bzpopmax", arity: -3, flags: wdf | flagNoScript | flagBlocking, firstKey: 1, lastKey: -2, keyStep: 1, group: "sorted_set", block: blockBZPop},
		{name: "bzmpop", arity: -5, flags: wd | flagBlocking, group: "sorted_set", block: blockBZMPop},
		k1("zrandmember", -2, r, parseZRandMember),
		k0("zunion", -3, r, parseZSetOp(fsm.ZSetUnion, false)),
		k0("zinter", -3, r, parseZSetOp(fsm.ZSetInter, false)),
		k0("zdiff", -3, r, parseZSetOp(fsm.ZSetDiff, false)),
		k0("zintercard", -3, r, parseZSetOp(fsm.ZSetInterCard, false)),
		k1("zunionstore", -4, w, parseZSetOp(fsm.ZSetUnion, true)),
		k1("zinterstore", -4, w, parseZSetOp(fsm.ZSetInter, true)),
		k1("zdiffstore", -4, w, parseZSetOp(fsm.ZSetDiff, true)),
		k1("zscan", -3, r, parseZScan),
	}...)
}

// Error texts only sorted sets use.
const (
	errZAddXXNX       = "ERR XX and NX options at the same time are not compatible"
	errZAddGTLTNX     = "ERR GT, LT, and/or NX options at the same time are not compatible"
	errZAddIncrPair   = "ERR INCR option supports a single increment-element pair"
	errZMinMaxFloat   = "ERR min or max is not a float"
	errZMinMaxLex     = "ERR min or max not valid string range item"
	errZLimitRank     = "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
	errZWithScoresLex = "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
	errZPositive      = "ERR value is out of range, must be positive"
	errZNumKeys       = "ERR numkeys should be greater than 0"
	errZCount         = "ERR count should be greater than 0"
	errZRandRange     = "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
	errZRandScores    = "ERR value is out of range"
	errZWeight        = "ERR weight value is not a float"
	errZLimitNegative = "ERR LIMIT can't be negative"
)

func errZNoKeys(name string) string {
	return "ERR at least 1 input key is needed for '" + name + "' command"
}

// zaddOptions reads ZADD's options after the key, those of accept only
// (GEOADD takes NX, XX and CH), up to the first other argument: the
// options and where the scores begin.
func zaddOptions(args [][]byte, accept fsm.Flags) (fsm.Flags, int) {
	var f fsm.Flags
	i := 2
	for ; i < len(args); i++ {
		var o fsm.Flags
		switch a := args[i]; {
		case is(a, "nx"):
			o = fsm.FlagZNX
		case is(a, "xx"):
			o = fsm.FlagZXX
		case is(a, "ch"):
			o = fsm.FlagZCH
		case is(a, "incr"):
			o = fsm.FlagZIncr
		case is(a, "gt"):
			o = fsm.FlagZGT
		case is(a, "lt"):
			o = fsm.FlagZLT
		}
		if o&accept == 0 {
			break
		}
		f |= o
	}
	return f, i
}

func parseZAdd(c *client, args [][]byte) (fsm.Command, string) {
	f, i := zaddOptions(args, fsm.FlagZNX|fsm.FlagZXX|fsm.FlagZCH|fsm.FlagZIncr|fsm.FlagZGT|fsm.FlagZLT)
	pairs := args[i:]
	switch has := func(x fsm.Flags) bool { return f&x != 0 }; {
	case len(pairs) == 0 || len(pairs)%2 != 0:
		return fsm.Command{}, errSyntax
	case has(fsm.FlagZNX) && has(fsm.FlagZXX):
		return fsm.Command{}, errZAddXXNX
	case has(fsm.FlagZNX) && has(fsm.FlagZGT|fsm.FlagZLT), has(fsm.FlagZGT) && has(fsm.FlagZLT):
		return fsm.Command{}, errZAddGTLTNX
	case has(fsm.FlagZIncr) && len(pairs) > 2:
		return fsm.Command{}, errZAddIncrPair
	}
	cmd := fsm.Command{Op: fsm.OpZAdd, Flags: f, Args: make([][]byte, 1, 1+len(pairs))}
	cmd.Args[0] = args[1]
	for j := 0; j < len(pairs); j += 2 {
		score, ok := fsm.ParseScore(pairs[j])
		if !ok {
			return fsm.Command{}, errNotFloat
		}
		cmd.Args = append(cmd.Args, fsm.ScoreArg(score), pairs[j+1])
	}
	return cmd, ""
}

func parseZIncrBy(c *client, args [][]byte) (fsm.Command, string) {
	incr, ok := fsm.ParseScore(args[2])
	if !ok {
		return fsm.Command{}, errNotFloat
	}
	return fsm.Command{Op: fsm.OpZAdd, Flags: fsm.FlagZIncr, Args: [][]byte{args[1], fsm.ScoreArg(incr), args[3]}}, ""
}

func parseZRem(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpZRem, Args: args[1:]}, ""
}

func parseZKey(op fsm.Op) func(*client, [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		return fsm.Command{Op: op, Args: args[1:2]}, ""
	}
}

func parseZKeyMember(op fsm.Op, f fsm.Flags) func(*client, [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		return fsm.Command{Op: op, Flags: f, Args: args[1:3]}, ""
	}
}

// parseZRank parses ZRANK and ZREVRANK key member [WITHSCORE] (Redis
// 7.2's zrankGenericCommand: the arity checked in the command, then the
// option).
func parseZRank(f fsm.Flags) func(*client, [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		cmd := fsm.Command{Op: fsm.OpZRank, Flags: f, Args: args[1:3]}
		switch {
		case len(args) > 4:
			return fsm.Command{}, errWrongArgs(lowerName(args[0]))
		case len(args) == 4 && !is(args[3], "withscore"):
			return fsm.Command{}, errSyntax
		case len(args) == 4:
			cmd.Flags |= fsm.FlagZWithScores
		}
		return cmd, ""
	}
}

func parseZMScore(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpZMScore, Args: args[1:]}, ""
}

// scoreRange fills cmd's score range from min and max (Redis's
// zslParseRange).
func scoreRange(cmd *fsm.Command, min, max []byte) string {
	lo, loEx, ok1 := fsm.ParseScoreBound(min)
	hi, hiEx, ok2 := fsm.ParseScoreBound(max)
	if !ok1 || !ok2 {
		return errZMinMaxFloat
	}
	cmd.Flags |= fsm.FlagZByScore
	cmd.Float, cmd.Float2 = lo, hi
	if loEx {
		cmd.Flags |= fsm.FlagZMinEx
	}
	if hiEx {
		cmd.Flags |= fsm.FlagZMaxEx
	}
	return ""
}

// lexRange appends a lexicographic range to cmd's arguments.
func lexRange(cmd *fsm.Command, min, max []byte) string {
	if !fsm.ValidLexBound(min) || !fsm.ValidLexBound(max) {
		return errZMinMaxLex
	}
	cmd.Flags |= fsm.FlagZByLex
	cmd.Args = append(cmd.Args, min, max)
	return ""
}

func parseZCount(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpZCount, Args: args[1:2]}
	return cmd, scoreRange(&cmd, args[2], args[3])
}

func parseZLexCount(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpZCount, Args: [][]byte{args[1]}}
	return cmd, lexRange(&cmd, args[2], args[3])
}

// Range types and directions of zrangeGenericCommand.
const (
	zrAuto = iota
	zrRank
	zrScore
	zrLex
	zrForward
	zrReverse
)

// parseZRangeAs returns the parser of ZRANGE (store: ZRANGESTORE) and its
// older forms, which fix the range type or the direction: Redis's
// zrangeGenericCommand, options first, then the range, in its order.
func parseZRangeAs(rangeType, direction int, store bool) func(*client, [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		at := 1 // the source key
		if store {
			at = 2
		}
		rt, dir := rangeType, direction
		withScores := false
		var offset, limit int64 = 0, -1
		for j := at + 3; j < len(args); j++ {
			left := len(args) - j - 1
			switch a := args[j]; {
			case !store && is(a, "withscores"):
				withScores = true
			case is(a, "limit") && left >= 2:
				var ok1, ok2 bool
				offset, ok1 = parseInt(args[j+1])
				if ok1 {
					limit, ok2 = parseInt(args[j+2])
				}
				if !ok1 || !ok2 {
					return fsm.Command{}, errNotInteger
				}
				j += 2
			case dir == zrAuto && is(a, "rev"):
				dir = zrReverse
			case rt == zrAuto && is(a, "bylex"):
				rt = zrLex
			case rt == zrAuto && is(a, "byscore"):
				rt = zrScore
			default:
				return fsm.Command{}, errSyntax
			}
		}
		if rt == zrAuto {
			rt = zrRank
		}
		switch {
		case limit != -1 && rt == zrRank:
			return fsm.Command{}, errZLimitRank
		case withScores && rt == zrLex:
			return fsm.Command{}, errZWithScoresLex
		}
		min, max := args[at+1], args[at+2]
		cmd := fsm.Command{Op: fsm.OpZRange, Args: [][]byte{args[1]}}
		if store {
			cmd = fsm.Command{Op: fsm.OpZRangeStore, Args: [][]byte{args[1], args[2]}}
		}
		if dir == zrReverse {
			cmd.Flags |= fsm.FlagZRev
			if rt != zrRank {
				// The reverse forms take max before min.
				min, max = max, min
			}
		}
		if withScores {
			cmd.Flags |= fsm.FlagZWithScores
		}
		var e string
		switch rt {
		case zrRank:
			var ok1, ok2 bool
			cmd.Int, ok1 = parseInt(min)
			cmd.Int2, ok2 = parseInt(max)
			if !ok1 || !ok2 {
				e = errNotInteger
			}
		case zrScore:
			e = scoreRange(&cmd, min, max)
			cmd.Int, cmd.Int2 = offset, limit
		case zrLex:
			e = lexRange(&cmd, min, max)
			cmd.Int, cmd.Int2 = offset, limit
		}
		if e != "" {
			return fsm.Command{}, e
		}
		return cmd, ""
	}
}

func parseZRemRange(rt int) func(*client, [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		cmd := fsm.Command{Op: fsm.OpZRemRange, Args: [][]byte{args[1]}}
		var e string
		switch rt {
		case zrRank:
			var ok1, ok2 bool
			cmd.Int, ok1 = parseInt(args[2])
			cmd.Int2, ok2 = parseInt(args[3])
			if !ok1 || !ok2 {
				e = errNotInteger
			}
		case zrScore:
			e = scoreRange(&cmd, args[2], args[3])
		case zrLex:
			e = lexRange(&cmd, args[2], args[3])
		}
		if e != "" {
			return fsm.Command{}, e
		}
		return cmd, ""
	}
}

func parseZPop(f fsm.Flags) func(*client, [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		if len(args) > 3 {
			return fsm.Command{}, errSyntax
		}
		cmd := fsm.Command{Op: fsm.OpZPop, Flags: f, Args: args[1:2]}
		if len(args) == 3 {
			n, ok := parseInt(args[2])
			if !ok || n < 0 {
				return fsm.Command{}, errZPositive
			}
			cmd.Flags |= fsm.FlagZCount
			cmd.Int = n
		}
		return cmd, ""
	}
}

// parseZMPopArgs parses numkeys key... MIN|MAX [COUNT count] from
// args[at] (ZMPOP's and BZMPOP's), returning the keys, the direction and
// the count.
func parseZMPopArgs(args [][]byte, at int) (keys [][]byte, f fsm.Flags, count int64, e string) {
	numkeys, ok := parseInt(args[at])
	if !ok || numkeys < 1 {
		return nil, 0, 0, errZNumKeys
	}
	if numkeys >= int64(len(args)-at-1) {
		return nil, 0, 0, errSyntax
	}
	where := at + 1 + int(numkeys)
	switch {
	case is(args[where], "min"):
	case is(args[where], "max"):
		f = fsm.FlagZMax
	default:
		return nil, 0, 0, errSyntax
	}
	count = -1
	for j := where + 1; j < len(args); j++ {
		if count == -1 && is(args[j], "count") && j+1 < len(args) {
			j++
			n, ok := parseInt(args[j])
			if !ok || n < 1 {
				return nil, 0, 0, errZCount
			}
			count = n
			continue
		}
		return nil, 0, 0, errSyntax
	}
	if count == -1 {
		count = 1
	}
	return args[at+1 : where], f, count, ""
}

func parseZMPop(c *client, args [][]byte) (fsm.Command, string) {
	keys, f, count, e := parseZMPopArgs(args, 1)
	if e != "" {
		return fsm.Command{}, e
	}
	return fsm.Command{Op: fsm.OpZMPop, Flags: f, Args: keys, Int: count}, ""
}

// The blocking forms: ZMPOP over every key first, then over the key that
// became ready, and a timeout, parsed in Redis's order.

func blockBZPop(c *client, args [][]byte) (blockReq, string) {
	timeout, e := parseTimeout(args[len(args)-1])
	if e != "" {
		return blockReq{}, e
	}
	keys := args[1 : len(args)-1]
	cmd := fsm.Command{Op: fsm.OpZMPop, Args: keys, Int: 1, Flags: fsm.FlagZBPop}
	if is(args[0], "bzpopmax") {
		cmd.Flags |= fsm.FlagZMax
	}
	return blockReq{cmd: cmd, keys: keys, timeout: timeout, retry: retryZSetKey}, ""
}

func blockBZMPop(c *client, args [][]byte) (blockReq, string) {
	keys, f, count, e := parseZMPopArgs(args, 2)
	if e != "" {
		return blockReq{}, e
	}
	timeout, e := parseTimeout(args[1])
	if e != "" {
		return blockReq{}, e
	}
	cmd := fsm.Command{Op: fsm.OpZMPop, Flags: f, Args: keys, Int: count}
	return blockReq{cmd: cmd, keys: keys, timeout: timeout, retry: retryZSetKey}, ""
}

func parseZRandMember(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpZRandMember, Args: args[1:2]}
	if len(args) < 3 {
		return cmd, ""
	}
	n, ok := parseInt(args[2])
	switch {
	case !ok:
		return fsm.Command{}, errNotInteger
	case n == math.MinInt64:
		return fsm.Command{}, errZRandRange
	case len(args) > 4 || (len(args) == 4 && !is(args[3], "withscores")):
		return fsm.Command{}, errSyntax
	case len(args) == 4:
		if n < -math.MaxInt64/2 || n > math.MaxInt64/2 {
			return fsm.Command{}, errZRandScores
		}
		cmd.Flags |= fsm.FlagZWithScores
	}
	cmd.Flags |= fsm.FlagZCount
	cmd.Int = n
	return cmd, ""
}

// parseZSetOp returns the parser of ZUNION, ZINTER, ZDIFF, ZINTERCARD
// and (store) their STORE forms, as zunionInterDiffGenericCommand: the
// key count, then the keys' types, then the options. An option error is
// therefore answered by the store, after it has checked the keys
// (OpZCheck).
func parseZSetOp(kind int64, store bool) func(*client, [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		at := 1 // numkeys
		if store {
			at = 2
		}
		numkeys, ok := parseInt(args[at])
		switch {
		case !ok:
			return fsm.Command{}, errNotInteger
		case numkeys < 1:
			return fsm.Command{}, errZNoKeys(lowerName(args[0]))
		case numkeys > int64(len(args)-at-1):
			return fsm.Command{}, errSyntax
		}
		keys := args[at+1 : at+1+int(numkeys)]
		cmd := fsm.Command{Op: fsm.OpZSetOp, Int2: kind}
		if store {
			cmd.Op = fsm.OpZSetOpStore
		}
		var weights [][]byte
		setOp, card := kind != fsm.ZSetDiff && kind != fsm.ZSetInterCard, kind == fsm.ZSetInterCard
		e := ""
		for j := at + 1 + len(keys); j < len(args) && e == ""; {
			left := len(args) - j
			switch a := args[j]; {
			case setOp && left >= len(keys)+1 && is(a, "weights"):
				cmd.Flags |= fsm.FlagZWeights
				weights = weights[:0]
				for _, w := range args[j+1 : j+1+len(keys)] {
					f, ok := fsm.ParseScore(w)
					if !ok {
						e = errZWeight
						break
					}
					weights = append(weights, fsm.ScoreArg(f))
				}
				j += 1 + len(keys)
			case setOp && left >= 2 && is(a, "aggregate"):
				cmd.Flags &^= fsm.FlagZAggMin | fsm.FlagZAggMax
				switch b := args[j+1]; {
				case is(b, "sum"):
				case is(b, "min"):
					cmd.Flags |= fsm.FlagZAggMin
				case is(b, "max"):
					cmd.Flags |= fsm.FlagZAggMax
				default:
					e = errSyntax
				}
				j += 2
			case !store && !card && is(a, "withscores"):
				cmd.Flags |= fsm.FlagZWithScores
				j++
			case card && left >= 2 && is(a, "limit"):
				n, ok := parseInt(args[j+1])
				if !ok || n < 0 {
					e = errZLimitNegative
				}
				cmd.Int = n
				j += 2
			default:
				e = errSyntax
			}
		}
		if e != "" {
			return fsm.Command{Op: fsm.OpZCheck, Int: fsm.ZCheckSetOp,
				Args: append([][]byte{[]byte(e)}, keys...)}, ""
		}
		if store {
			cmd.Args = append(cmd.Args, args[1])
		}
		cmd.Args = append(cmd.Args, keys...)
		cmd.Args = append(cmd.Args, weights...)
		return cmd, ""
	}
}

func parseZScan(c *client, args [][]byte) (fsm.Command, string) {
	cmd, e := parseCollectionScan(fsm.OpZScan, args)
	switch {
	case e == errInvalidCursor:
		return fsm.Command{}, e
	case e != "":
		// Redis looks the key up before it reads the options.
		return fsm.Command{Op: fsm.OpZCheck, Int: fsm.ZCheckScan, Args: [][]byte{[]byte(e), args[1]}}, ""
	case cmd.Op == 0:
		// A cursor no iteration hands out: a packed set still answers
		// whole, as Redis answers a listpack whatever the cursor.
		cmd.Op, cmd.Int, cmd.Args = fsm.OpZScan, -1, [][]byte{args[1], nil}
	}
	return cmd, ""
}

// zsetDocs are COMMAND DOCS of the sorted set commands, as redis-server
// 7.0 reports them.
var zsetDocs = map[string][2]string{
	"zadd":             {"Add one or more members to a sorted set, or update its score if it already exists", "1.2.0"},
	"zincrby":          {"Increment the score of a member in a sorted set", "1.2.0"},
	"zrem":             {"Remove one or more members from a sorted set", "1.2.0"},
	"zcard":            {"Get the number of members in a sorted set", "1.2.0"},
	"zscore":           {"Get the score associated with the given member in a sorted set", "1.2.0"},
	"zmscore":          {"Get the score associated with the given members in a sorted set", "6.2.0"},
	"zrank":            {"Determine the index of a member in a sorted set", "2.0.0"},
	"zrevrank":         {"Determine the index of a member in a sorted set, with scores ordered from high to low", "2.0.0"},
	"zcount":           {"Count the members in a sorted set with scores within the given values", "2.0.0"},
	"zlexcount":        {"Count the number of members in a sorted set between a given lexicographical range", "2.8.9"},
	"zrange":           {"Return a range of members in a sorted set", "1.2.0"},
	"zrangestore":      {"Store a range of members from sorted set into another key", "6.2.0"},
	"zrangebyscore":    {"Return a range of members in a sorted set, by score", "1.0.5"},
	"zrevrangebyscore": {"Return a range of members in a sorted set, by score, with scores ordered from high to low", "2.2.0"},
	"zrangebylex":      {"Return a range of members in a sorted set, by lexicographical range", "2.8.9"},
	"zrevrangebylex":   {"Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", "2.8.9"},
	"zrevrange":        {"Return a range of members in a sorted set, by index, with scores ordered from high to low", "1.2.0"},
	"zremrangebyrank":  {"Remove all members in a sorted set within the given indexes", "2.0.0"},
	"zremrangebyscore": {"Remove all members in a sorted set within the given scores", "1.2.0"},
	"zremrangebylex":   {"Remove all members in a sorted set between the given lexicographical range", "2.8.9"},
	"zpopmin":          {"Remove and return members with the lowest scores in a sorted set", "5.0.0"},
	"zpopmax":          {"Remove and return members with the highest scores in a sorted set", "5.0.0"},
	"zmpop":            {"Remove and return members with scores in a sorted set", "7.0.0"},
	"bzpopmin":         {"Remove and return the member with the lowest score from one or more sorted sets, or block until one is available", "5.0.0"},
	"bzpopmax":         {"Remove and return the member with the highest score from one or more sorted sets, or block until one is available", "5.0.0"},
	"bzmpop":           {"Remove and return members with scores in a sorted set or block until one is available", "7.0.0"},
	"zrandmember":      {"Get one or multiple random elements from a sorted set", "6.2.0"},
	"zunion":           {"Add multiple sorted sets", "6.2.0"},
	"zinter":           {"Intersect multiple sorted sets", "6.2.0"},
	"zdiff":            {"Subtract multiple sorted sets", "6.2.0"},
	"zintercard":       {"Intersect multiple sorted sets and return the cardinality of the result", "7.0.0"},
	"zunionstore":      {"Add multiple sorted sets and store the resulting sorted set in a new key", "2.0.0"},
	"zinterstore":      {"Intersect multiple sorted sets and store the resulting sorted set in a new key", "2.0.0"},
	"zdiffstore":       {"Subtract multiple sorted sets and store the resulting sorted set in a new key", "6.2.0"},
	"zscan":            {"Incrementally iterate sorted sets elements and associated scores", "2.8.0"},
}

func init() {
	for name, d := range zsetDocs {
		commandDocs[name] = d
	}
}
