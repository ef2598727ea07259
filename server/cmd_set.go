package server

import (
	"math"

	"kvs/fsm"
)

func init() {
	registerCommands([]command{
		{name: "sadd", arity: -3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSAdd)},
		{name: "srem", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSRem)},
		{name: "smove", arity: 4, flags: wdf, firstKey: 1, lastKey: 2, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSMove)},
		{name: "sismember", arity: 3, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSIsMember)},
		{name: "smismember", arity: -3, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSMIsMember)},
		{name: "scard", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSCard)},
		{name: "smembers", arity: 2, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSMembers)},
		{name: "spop", arity: -2, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "set", parse: parseSPop},
		{name: "srandmember", arity: -2, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "set", parse: parseSRandMember},
		{name: "sinter", arity: -2, flags: r, firstKey: 1, lastKey: -1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSInter)},
		{name: "sintercard", arity: -3, flags: r, group: "set", parse: parseSInterCard},
		{name: "sinterstore", arity: -3, flags: w, firstKey: 1, lastKey: -1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSInterStore)},
		{name: "sunion", arity: -2, flags: r, firstKey: 1, lastKey: -1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSUnion)},
		{name: "sunionstore", arity: -3, flags: w, firstKey: 1, lastKey: -1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSUnionStore)},
		{name: "sdiff", arity: -2, flags: r, firstKey: 1, lastKey: -1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSDiff)},
		{name: "sdiffstore", arity: -3, flags: w, firstKey: 1, lastKey: -1, keyStep: 1, group: "set", parse: parseSetArgs(fsm.OpSDiffStore)},
		{name: "sscan", arity: -3, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "set", parse: parseSScan},
	}...)
	// COMMAND DOCS, in redis-server 7.0's words.
	for name, doc := range map[string][2]string{
		"sadd":        {"Add one or more members to a set", "1.0.0"},
		"srem":        {"Remove one or more members from a set", "1.0.0"},
		"smove":       {"Move a member from one set to another", "1.0.0"},
		"sismember":   {"Determine if a given value is a member of a set", "1.0.0"},
		"smismember":  {"Returns the membership associated with the given elements for a set", "6.2.0"},
		"scard":       {"Get the number of members in a set", "1.0.0"},
		"smembers":    {"Get all the members in a set", "1.0.0"},
		"spop":        {"Remove and return one or multiple random members from a set", "1.0.0"},
		"srandmember": {"Get one or multiple random members from a set", "1.0.0"},
		"sinter":      {"Intersect multiple sets", "1.0.0"},
		"sintercard":  {"Intersect multiple sets and return the cardinality of the result", "7.0.0"},
		"sinterstore": {"Intersect multiple sets and store the resulting set in a key", "1.0.0"},
		"sunion":      {"Add multiple sets", "1.0.0"},
		"sunionstore": {"Add multiple sets and store the resulting set in a key", "1.0.0"},
		"sdiff":       {"Subtract multiple sets", "1.0.0"},
		"sdiffstore":  {"Subtract multiple sets and store the resulting set in a key", "1.0.0"},
		"sscan":       {"Incrementally iterate Set elements", "2.8.0"},
	} {
		commandDocs[name] = doc
	}
}

// Error texts only the set commands send, in Redis 7.0's words.
const (
	errSetPositive      = "ERR value is out of range, must be positive"
	errSetRandRange     = "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
	errSetNumKeys       = "ERR numkeys should be greater than 0"
	errSetNumKeysArgs   = "ERR Number of keys can't be greater than number of args"
	errSetLimitNegative = "ERR LIMIT can't be negative"
)

// parseSetArgs returns a parser for commands whose arguments all go to
// the store as they are (keys and members).
func parseSetArgs(op fsm.Op) func(c *client, args [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		return fsm.Command{Op: op, Args: args[1:]}, ""
	}
}

// parseSPop draws the seed the store picks members with, so that every
// replica and every replay of the log removes the same ones.
func parseSPop(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpSPop, Args: args[1:2], Int2: c.seed()}
	switch {
	case len(args) > 3:
		return fsm.Command{}, errSyntax
	case len(args) == 3:
		n, ok := parseInt(args[2])
		if !ok || n < 0 {
			return fsm.Command{}, errSetPositive
		}
		cmd.Flags, cmd.Int = fsm.FlagSetCount, n
	}
	return cmd, ""
}

func parseSRandMember(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpSRandMember, Args: args[1:2]}
	switch {
	case len(args) > 3:
		return fsm.Command{}, errSyntax
	case len(args) == 3:
		n, ok := parseInt(args[2])
		if !ok {
			return fsm.Command{}, errNotInteger
		}
		if n == math.MinInt64 {
			return fsm.Command{}, errSetRandRange
		}
		cmd.Flags, cmd.Int = fsm.FlagSetCount, n
	}
	return cmd, ""
}

// parseSInterCard parses SINTERCARD numkeys key [key ...] [LIMIT limit].
func parseSInterCard(c *client, args [][]byte) (fsm.Command, string) {
	numKeys, ok := parseInt(args[1])
	if !ok || numKeys < 1 {
		return fsm.Command{}, errSetNumKeys
	}
	if numKeys > int64(len(args)-2) {
		return fsm.Command{}, errSetNumKeysArgs
	}
	cmd := fsm.Command{Op: fsm.OpSInterCard, Args: args[2 : 2+numKeys]}
	for j := 2 + int(numKeys); j < len(args); j++ {
		if !is(args[j], "limit") || j+1 >= len(args) {
			return fsm.Command{}, errSyntax
		}
		j++
		limit, ok := parseInt(args[j])
		if !ok || limit < 0 {
			return fsm.Command{}, errSetLimitNegative
		}
		cmd.Int = limit
	}
	return cmd, ""
}

// parseSScan parses SSCAN key cursor [MATCH pattern] [COUNT count]. Redis
// checks the cursor first and the options only once it has found a set,
// so a bad option travels to the store as a flag (see fsm.OpSScan).
func parseSScan(c *client, args [][]byte) (fsm.Command, string) {
	cursor, ok := parseCursor(args[2])
	if !ok {
		return fsm.Command{}, errInvalidCursor
	}
	cmd := fsm.Command{Op: fsm.OpSScan, Int: int64(cursor), Int2: 10}
	var match []byte
	matched := false
options:
	for j := 3; j < len(args); j += 2 {
		switch {
		case j+1 >= len(args):
			cmd.Flags = fsm.FlagSetScanSyntax
			break options
		case is(args[j], "count"):
			n, ok := parseInt(args[j+1])
			if !ok {
				cmd.Flags = fsm.FlagSetScanNotInt
				break options
			}
			if n < 1 {
				cmd.Flags = fsm.FlagSetScanSyntax
				break options
			}
			cmd.Int2 = n
		case is(args[j], "match"):
			match = args[j+1]
			matched = true
		default:
			cmd.Flags = fsm.FlagSetScanSyntax
			break options
		}
	}
	if cmd.Flags != 0 {
		cmd.Int2 = 10
	} else if matched {
		cmd.Flags = fsm.FlagScanMatch
	}
	cmd.Args = [][]byte{args[1], match}
	return cmd, ""
}
