package server

import (
	"math"
	"strconv"

	"kvs/fsm"
)

func init() {
	registerCommands([]command{
		{name: "hset", arity: -4, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHSet},
		{name: "hmset", arity: -4, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHSet},
		{name: "hsetnx", arity: 4, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHSetNX},
		{name: "hdel", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHDel},
		{name: "hincrby", arity: 4, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHIncrBy},
		{name: "hincrbyfloat", arity: 4, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHIncrByFloat},
		{name: "hget", arity: 3, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHashRead(fsm.OpHGet)},
		{name: "hmget", arity: -3, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHashRead(fsm.OpHMGet)},
		{name: "hgetall", arity: 2, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHashRead(fsm.OpHGetAll)},
		{name: "hkeys", arity: 2, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHashRead(fsm.OpHKeys)},
		{name: "hvals", arity: 2, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHashRead(fsm.OpHVals)},
		{name: "hlen", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHashRead(fsm.OpHLen)},
		{name: "hstrlen", arity: 3, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHashRead(fsm.OpHStrLen)},
		{name: "hexists", arity: 3, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHashRead(fsm.OpHExists)},
		{name: "hrandfield", arity: -2, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHRandField},
		{name: "hscan", arity: -3, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "hash", parse: parseHScan},
	}...)
	// COMMAND DOCS, in redis-server 7.0's words.
	for name, doc := range map[string][2]string{
		"hset":         {"Set the string value of a hash field", "2.0.0"},
		"hmset":        {"Set multiple hash fields to multiple values", "2.0.0"},
		"hsetnx":       {"Set the value of a hash field, only if the field does not exist", "2.0.0"},
		"hdel":         {"Delete one or more hash fields", "2.0.0"},
		"hincrby":      {"Increment the integer value of a hash field by the given number", "2.0.0"},
		"hincrbyfloat": {"Increment the float value of a hash field by the given amount", "2.6.0"},
		"hget":         {"Get the value of a hash field", "2.0.0"},
		"hmget":        {"Get the values of all the given hash fields", "2.0.0"},
		"hgetall":      {"Get all the fields and values in a hash", "2.0.0"},
		"hkeys":        {"Get all the fields in a hash", "2.0.0"},
		"hvals":        {"Get all the values in a hash", "2.0.0"},
		"hlen":         {"Get the number of fields in a hash", "2.0.0"},
		"hstrlen":      {"Get the length of the value of a hash field", "3.2.0"},
		"hexists":      {"Determine if a hash field exists", "2.0.0"},
		"hrandfield":   {"Get one or multiple random fields from a hash", "6.2.0"},
		"hscan":        {"Incrementally iterate hash fields and associated values", "2.8.0"},
	} {
		commandDocs[name] = doc
	}
}

// Error texts only the hash commands use.
const (
	errHashNaNIncr   = "ERR value is NaN or Infinity"
	errOutOfRange    = "ERR value is out of range"
	errCountRangeFmt = "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
)

// parseHashRead parses the reads whose arguments go to the store as they
// are (the table's arity has checked their number).
func parseHashRead(op fsm.Op) func(c *client, args [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		return fsm.Command{Op: op, Args: args[1:]}, ""
	}
}

// parseHSet parses HSET and HMSET: fields and values must pair up.
func parseHSet(c *client, args [][]byte) (fsm.Command, string) {
	if len(args)%2 == 1 {
		return fsm.Command{}, errWrongArgs(lowerName(args[0]))
	}
	cmd := fsm.Command{Op: fsm.OpHSet, Args: args[1:]}
	if is(args[0], "hmset") {
		cmd.Flags = fsm.FlagHashOK
	}
	return cmd, ""
}

func parseHSetNX(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpHSetNX, Args: args[1:4]}, ""
}

func parseHDel(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpHDel, Args: args[1:]}, ""
}

func parseHIncrBy(c *client, args [][]byte) (fsm.Command, string) {
	n, ok := parseInt(args[3])
	if !ok {
		return fsm.Command{}, errNotInteger
	}
	return fsm.Command{Op: fsm.OpHIncrBy, Args: args[1:3], Int: n}, ""
}

// parseHIncrByFloat checks the increment as Redis does before it looks at
// the key: a long double (strtold's syntax and range), and not infinite.
// Its text goes along so the store adds it in long double precision.
func parseHIncrByFloat(c *client, args [][]byte) (fsm.Command, string) {
	if !fsm.ValidFloat(args[3]) {
		return fsm.Command{}, errNotFloat
	}
	f, _ := strconv.ParseFloat(string(args[3]), 64)
	if math.IsInf(f, 0) && isInfText(args[3]) {
		return fsm.Command{}, errHashNaNIncr
	}
	return fsm.Command{Op: fsm.OpHIncrByFloat, Args: args[1:4], Float: f}, ""
}

// isInfText reports whether a valid float's text is "inf" or "infinity"
// (signed, any case): a finite long double can overflow float64, and only
// the spelled-out infinity is infinite in Redis's long double.
func isInfText(b []byte) bool {
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	return is(b, "inf") || is(b, "infinity")
}

// parseHRandField parses HRANDFIELD key [count [WITHVALUES]] in Redis's
// order, whatever the key holds: the count must be an integer of magnitude
// below 2^63, anything after it is WITHVALUES, and with WITHVALUES the
// count's magnitude must be at most 2^62.
func parseHRandField(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpHRandField, Args: args[1:2]}
	if len(args) == 2 {
		return cmd, ""
	}
	n, ok := parseInt(args[2])
	if !ok {
		return fsm.Command{}, errNotInteger
	}
	if n == math.MinInt64 {
		return fsm.Command{}, errCountRangeFmt
	}
	if len(args) > 4 || (len(args) == 4 && !is(args[3], "withvalues")) {
		return fsm.Command{}, errSyntax
	}
	cmd.Flags, cmd.Int = fsm.FlagHashCount, n
	if len(args) == 4 {
		cmd.Flags |= fsm.FlagHashWithValues
		if n < -math.MaxInt64/2 || n > math.MaxInt64/2 {
			return fsm.Command{}, errOutOfRange
		}
	}
	return cmd, ""
}

// parseHScan parses HSCAN key cursor [MATCH pattern] [COUNT count]. Redis
// checks the cursor, then the key (a missing one is an empty page, another
// type WRONGTYPE), and only then the options: an option error goes to the
// store as a flag, to be answered only for a hash.
func parseHScan(c *client, args [][]byte) (fsm.Command, string) {
	cmd, e := parseCollectionScan(fsm.OpHScan, args)
	var flags fsm.Flags
	var match []byte
	for j := 3; j+1 < len(args); j += 2 {
		if is(args[j], "match") {
			// MATCH "" matches the empty field only.
			flags |= fsm.FlagHScanMatch
			match = args[j+1]
		}
	}
	switch e {
	case "":
		if cmd.Op == fsm.OpHScan {
			cmd.Flags = flags
			return cmd, ""
		}
	case errSyntax:
		flags = fsm.FlagHScanSyntax
	case errNotInteger:
		flags = fsm.FlagHScanNotInteger
	default:
		return fsm.Command{}, e
	}
	// An option error, or a cursor at or past 2^63: rebuild the command,
	// the cursor's bits in Int (negative for the latter).
	cursor, _ := parseCursor(args[2])
	return fsm.Command{Op: fsm.OpHScan, Flags: flags, Args: [][]byte{args[1], match}, Int: int64(cursor), Int2: 10}, ""
}
