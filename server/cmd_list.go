package server

import (
	"kvs/fsm"
)

func init() {
	registerCommands([]command{
		{name: "lpush", arity: -3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parsePush},
		{name: "rpush", arity: -3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parsePush},
		{name: "lpushx", arity: -3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parsePush},
		{name: "rpushx", arity: -3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parsePush},
		{name: "lpop", arity: -2, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parsePop},
		{name: "rpop", arity: -2, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parsePop},
		{name: "llen", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parseLLen},
		{name: "lrange", arity: 4, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parseLRange},
		{name: "lindex", arity: 3, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parseLIndex},
		{name: "lset", arity: 4, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parseLSet},
		{name: "linsert", arity: 5, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parseLInsert},
		{name: "lrem", arity: 4, flags: wd, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parseLRem},
		{name: "ltrim", arity: 4, flags: wd, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parseLTrim},
		{name: "lpos", arity: -3, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "list", parse: parseLPos},
		{name: "lmove", arity: 5, flags: w, firstKey: 1, lastKey: 2, keyStep: 1, group: "list", parse: parseLMove},
		{name: "rpoplpush", arity: 3, flags: w, firstKey: 1, lastKey: 2, keyStep: 1, group: "list", parse: parseRPopLPush},
		{name: "lmpop", arity: -4, flags: wd, group: "list", parse: parseLMPop},

		{name: "blpop", arity: -3, flags: wd | flagNoScript | flagBlocking, firstKey: 1, lastKey: -2, keyStep: 1, group: "list", block: blockBPop},
		{name: "brpop", arity: -3, flags: wd | flagNoScript | flagBlocking, firstKey: 1, lastKey: -2, keyStep: 1, group: "list", block: blockBPop},
		{name: "blmove", arity: 6, flags: w | flagNoScript | flagBlocking, firstKey: 1, lastKey: 2, keyStep: 1, group: "list", block: blockBLMove},
		{name: "brpoplpush", arity: 4, flags: w | flagNoScript | flagBlocking, firstKey: 1, lastKey: 2, keyStep: 1, group: "list", block: blockBRPopLPush},
		{name: "blmpop", arity: -5, flags: wd | flagBlocking, group: "list", block: blockBLMPop},
	}...)
}

// Error texts only lists give.
const (
	errPositiveCount   = "ERR value is out of range, must be positive"
	errLPosRank        = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
	errLPosCount       = "ERR COUNT can't be negative"
	errLPosMaxLen      = "ERR MAXLEN can't be negative"
	errNumKeys         = "ERR numkeys should be greater than 0"
	errCountPositive   = "ERR count should be greater than 0"
	errTimeoutNegative = "ERR timeout is negative"
	errTimeoutNotFloat = "ERR timeout is not a float or out of range"
)

func parsePush(c *client, args [][]byte) (fsm.Command, string) {
	op := fsm.OpLPush
	switch {
	case is(args[0], "rpush"):
		op = fsm.OpRPush
	case is(args[0], "lpushx"):
		op = fsm.OpLPushX
	case is(args[0], "rpushx"):
		op = fsm.OpRPushX
	}
	return fsm.Command{Op: op, Args: args[1:]}, ""
}

// parsePop parses LPOP and RPOP key [count]: a count that is not a
// non-negative integer is one message.
func parsePop(c *client, args [][]byte) (fsm.Command, string) {
	if len(args) > 3 {
		return fsm.Command{}, errWrongArgs(lowerName(args[0]))
	}
	cmd := fsm.Command{Op: fsm.OpLPop, Args: args[1:2]}
	if is(args[0], "rpop") {
		cmd.Op = fsm.OpRPop
	}
	if len(args) == 3 {
		n, ok := parseInt(args[2])
		if !ok || n < 0 {
			return fsm.Command{}, errPositiveCount
		}
		cmd.Flags, cmd.Int = fsm.FlagListCount, n
	}
	return cmd, ""
}

func parseLLen(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpLLen, Args: args[1:2]}, ""
}

func parseLRange(c *client, args [][]byte) (fsm.Command, string) {
	start, ok1 := parseInt(args[2])
	stop, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		return fsm.Command{}, errNotInteger
	}
	return fsm.Command{Op: fsm.OpLRange, Args: args[1:2], Int: start, Int2: stop}, ""
}

// parseLIndex: Redis looks the key up before it parses the index, so a bad
// index is the store's to report (FlagListBadIndex).
func parseLIndex(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpLIndex, Args: args[1:2]}
	var ok bool
	if cmd.Int, ok = parseInt(args[2]); !ok {
		cmd.Flags = fsm.FlagListBadIndex
	}
	return cmd, ""
}

func parseLSet(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpLSet, Args: [][]byte{args[1], args[3]}}
	var ok bool
	if cmd.Int, ok = parseInt(args[2]); !ok {
		cmd.Flags = fsm.FlagListBadIndex
	}
	return cmd, ""
}

func parseLInsert(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpLInsert, Args: [][]byte{args[1], args[3], args[4]}}
	switch {
	case is(args[2], "after"):
		cmd.Flags = fsm.FlagListAfter
	case !is(args[2], "before"):
		return fsm.Command{}, errSyntax
	}
	return cmd, ""
}

func parseLRem(c *client, args [][]byte) (fsm.Command, string) {
	n, ok := parseInt(args[2])
	if !ok {
		return fsm.Command{}, errNotInteger
	}
	return fsm.Command{Op: fsm.OpLRem, Args: [][]byte{args[1], args[3]}, Int: n}, ""
}

func parseLTrim(c *client, args [][]byte) (fsm.Command, string) {
	start, ok1 := parseInt(args[2])
	stop, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		return fsm.Command{}, errNotInteger
	}
	return fsm.Command{Op: fsm.OpLTrim, Args: args[1:2], Int: start, Int2: stop}, ""
}

// parseLPos parses LPOS key element [RANK rank] [COUNT n] [MAXLEN len],
// options in any order and repeated, each checked as it comes.
func parseLPos(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpLPos, Args: args[1:3], Int: 1}
	for j := 3; j < len(args); j++ {
		more := j+1 < len(args)
		switch {
		case is(args[j], "rank") && more:
			j++
			n, ok := parseInt(args[j])
			if !ok {
				return fsm.Command{}, errNotInteger
			}
			if n == 0 {
				return fsm.Command{}, errLPosRank
			}
			cmd.Int = n
		case is(args[j], "count") && more:
			j++
			n, ok := parseInt(args[j])
			if !ok || n < 0 {
				return fsm.Command{}, errLPosCount
			}
			cmd.Flags, cmd.Int2 = fsm.FlagListCount, n
		case is(args[j], "maxlen") && more:
			j++
			n, ok := parseInt(args[j])
			if !ok || n < 0 {
				return fsm.Command{}, errLPosMaxLen
			}
			// A list cannot be 2^53 long: larger is as good as no limit.
			cmd.Float = float64(min(n, 1<<53))
		default:
			return fsm.Command{}, errSyntax
		}
	}
	return cmd, ""
}

// listEnd parses LEFT or RIGHT; right reports RIGHT.
func listEnd(arg []byte) (right, ok bool) {
	switch {
	case is(arg, "left"):
		return false, true
	case is(arg, "right"):
		return true, true
	}
	return false, false
}

func lmoveCommand(src, dst, from, to []byte) (fsm.Command, string) {
	fromRight, ok1 := listEnd(from)
	toRight, ok2 := listEnd(to)
	if !ok1 || !ok2 {
		return fsm.Command{}, errSyntax
	}
	cmd := fsm.Command{Op: fsm.OpLMove, Args: [][]byte{src, dst}}
	if fromRight {
		cmd.Flags |= fsm.FlagListRight
	}
	if toRight {
		cmd.Flags |= fsm.FlagListToRight
	}
	return cmd, ""
}

func parseLMove(c *client, args [][]byte) (fsm.Command, string) {
	return lmoveCommand(args[1], args[2], args[3], args[4])
}

func parseRPopLPush(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpLMove, Args: args[1:3], Flags: fsm.FlagListRight}, ""
}

// lmpopCommand parses LMPOP's numkeys key... LEFT|RIGHT [COUNT n], args
// starting at numkeys, in Redis's order of checks.
func lmpopCommand(args [][]byte) (fsm.Command, string) {
	numkeys, ok := parseInt(args[0])
	if !ok || numkeys <= 0 {
		return fsm.Command{}, errNumKeys
	}
	if numkeys > int64(len(args)-2) {
		return fsm.Command{}, errSyntax
	}
	keys := args[1 : 1+numkeys]
	right, ok := listEnd(args[1+numkeys])
	if !ok {
		return fsm.Command{}, errSyntax
	}
	cmd := fsm.Command{Op: fsm.OpLMPop, Args: keys}
	if right {
		cmd.Flags |= fsm.FlagListRight
	}
	for j := int(2 + numkeys); j < len(args); j++ {
		if is(args[j], "count") && j+1 < len(args) && cmd.Flags&fsm.FlagListCount == 0 {
			j++
			n, ok := parseInt(args[j])
			if !ok || n <= 0 {
				return fsm.Command{}, errCountPositive
			}
			cmd.Flags |= fsm.FlagListCount
			cmd.Int = n
			continue
		}
		return fsm.Command{}, errSyntax
	}
	return cmd, ""
}

func parseLMPop(c *client, args [][]byte) (fsm.Command, string) {
	return lmpopCommand(args[1:])
}

// The blocking forms: each is its non-blocking command (over every key
// first, then over the key that became ready) and a timeout.

func blockBPop(c *client, args [][]byte) (blockReq, string) {
	timeout, e := parseTimeout(args[len(args)-1])
	if e != "" {
		return blockReq{}, e
	}
	keys := args[1 : len(args)-1]
	cmd := fsm.Command{Op: fsm.OpLMPop, Args: keys, Flags: fsm.FlagListBPop}
	if is(args[0], "brpop") {
		cmd.Flags |= fsm.FlagListRight
	}
	return blockReq{cmd: cmd, keys: keys, timeout: timeout, retry: retryListKey, tokenized: true}, ""
}

func blockBLMove(c *client, args [][]byte) (blockReq, string) {
	cmd, e := lmoveCommand(args[1], args[2], args[3], args[4])
	if e != "" {
		return blockReq{}, e
	}
	timeout, e := parseTimeout(args[5])
	if e != "" {
		return blockReq{}, e
	}
	return blockReq{cmd: cmd, keys: args[1:2], dst: args[2], timeout: timeout, retry: retryLMove, tokenized: true}, ""
}

// retryLMove is BLMOVE's and BRPOPLPUSH's retry: the move itself, its
// source of another type passed over.
func retryLMove(cmd fsm.Command, _ []byte) fsm.Command {
	cmd.Flags |= fsm.FlagListReady
	return cmd
}

func blockBRPopLPush(c *client, args [][]byte) (blockReq, string) {
	timeout, e := parseTimeout(args[3])
	if e != "" {
		return blockReq{}, e
	}
	cmd := fsm.Command{Op: fsm.OpLMove, Args: args[1:3], Flags: fsm.FlagListRight}
	return blockReq{cmd: cmd, keys: args[1:2], dst: args[2], timeout: timeout, retry: retryLMove, tokenized: true}, ""
}

func blockBLMPop(c *client, args [][]byte) (blockReq, string) {
	cmd, e := lmpopCommand(args[2:])
	if e != "" {
		return blockReq{}, e
	}
	timeout, e := parseTimeout(args[1])
	if e != "" {
		return blockReq{}, e
	}
	return blockReq{cmd: cmd, keys: cmd.Args, timeout: timeout, retry: retryListKey, tokenized: true}, ""
}

func init() {
	for name, doc := range map[string][2]string{
		"lpush":      {"Prepends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0"},
		"rpush":      {"Appends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0"},
		"lpushx":     {"Prepends one or more elements to a list only when the list exists.", "2.2.0"},
		"rpushx":     {"Appends an element to a list only when the list exists.", "2.2.0"},
		"lpop":       {"Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", "1.0.0"},
		"rpop":       {"Returns and removes the last elements of a list. Deletes the list if the last element was popped.", "1.0.0"},
		"llen":       {"Returns the length of a list.", "1.0.0"},
		"lrange":     {"Returns a range of elements from a list.", "1.0.0"},
		"lindex":     {"Returns an element from a list by its index.", "1.0.0"},
		"lset":       {"Sets the value of an element in a list by its index.", "1.0.0"},
		"linsert":    {"Inserts an element before or after another element in a list.", "2.2.0"},
		"lrem":       {"Removes elements from a list. Deletes the list if the last element was removed.", "1.0.0"},
		"ltrim":      {"Removes elements from both ends a list. Deletes the list if all elements were trimmed.", "1.0.0"},
		"lpos":       {"Returns the index of matching elements in a list.", "6.0.6"},
		"lmove":      {"Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", "6.2.0"},
		"rpoplpush":  {"Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", "1.2.0"},
		"lmpop":      {"Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", "7.0.0"},
		"blpop":      {"Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "2.0.0"},
		"brpop":      {"Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "2.0.0"},
		"blmove":     {"Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", "6.2.0"},
		"brpoplpush": {"Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", "2.2.0"},
		"blmpop":     {"Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "7.0.0"},
	} {
		commandDocs[name] = doc
	}
}
