package server

import (
	"math"

	"kvs/fsm"
)

func init() {
	registerCommands([]command{
		{name: "del", arity: -2, flags: wd, firstKey: 1, lastKey: -1, keyStep: 1, group: "generic", parse: parseDel},
		{name: "unlink", arity: -2, flags: wdf, firstKey: 1, lastKey: -1, keyStep: 1, group: "generic", parse: parseDel},
		{name: "exists", arity: -2, flags: rf, firstKey: 1, lastKey: -1, keyStep: 1, group: "generic", parse: parseExists},
		{name: "touch", arity: -2, flags: rf, firstKey: 1, lastKey: -1, keyStep: 1, group: "generic", parse: parseExists},
		{name: "type", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseType},
		{name: "rename", arity: 3, flags: wd, firstKey: 1, lastKey: 2, keyStep: 1, group: "generic", parse: parseRename},
		{name: "renamenx", arity: 3, flags: wdf, firstKey: 1, lastKey: 2, keyStep: 1, group: "generic", parse: parseRename},
		{name: "keys", arity: 2, flags: r, group: "generic", parse: parseKeys},
		{name: "scan", arity: -2, flags: r, group: "generic", parse: parseScan},
		{name: "randomkey", arity: 1, flags: r, group: "generic", parse: parseRandomKey},
		{name: "expire", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseExpire},
		{name: "pexpire", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseExpire},
		{name: "expireat", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseExpire},
		{name: "pexpireat", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseExpire},
		{name: "ttl", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseTTL},
		{name: "pttl", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseTTL},
		{name: "expiretime", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseTTL},
		{name: "pexpiretime", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseTTL},
		{name: "persist", arity: 2, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parsePersist},
	}...)
}

// Parsers of the keyspace and server data commands.

// parseDel parses DEL and UNLINK, which differ only in that Redis frees
// what UNLINK deletes in the background (lazyfreed_objects).
func parseDel(c *client, args [][]byte) (fsm.Command, string) {
	var f fsm.Flags
	if is(args[0], "unlink") {
		f = fsm.FlagLazy
	}
	return fsm.Command{Op: fsm.OpDel, Flags: f, Args: args[1:]}, ""
}

// parseExists parses EXISTS and TOUCH, which differ only in that TOUCH is
// an access of the keys (OBJECT IDLETIME). Both count a repeated key
// again.
func parseExists(c *client, args [][]byte) (fsm.Command, string) {
	var f fsm.Flags
	if is(args[0], "touch") {
		f = fsm.FlagTouch
	}
	return fsm.Command{Op: fsm.OpExists, Flags: f, Args: args[1:]}, ""
}

func parseType(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpType, Args: args[1:2]}, ""
}

// parseRename parses RENAME and RENAMENX.
func parseRename(c *client, args [][]byte) (fsm.Command, string) {
	op := fsm.OpRename
	if is(args[0], "renamenx") {
		op = fsm.OpRenameNX
	}
	return fsm.Command{Op: op, Args: args[1:3]}, ""
}

func parseKeys(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpKeys, Args: args[1:2]}, ""
}

// parseScan parses SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]. The
// cursor is an unsigned 64-bit number carried in Int's bits.
func parseScan(c *client, args [][]byte) (fsm.Command, string) {
	cmd, match, typ, e := parseScanArgs(fsm.OpScan, args, 1, true)
	if e != "" || cmd.Op == 0 {
		return cmd, e
	}
	cmd.Args = [][]byte{match, typ}
	return cmd, ""
}

func parseRandomKey(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpRandomKey}, ""
}

// parseExpire parses EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT as Redis's
// expireGenericCommand does: the options first, then the time, which may be
// negative (the key is deleted) but must not overflow as a deadline.
func parseExpire(c *client, args [][]byte) (fsm.Command, string) {
	name := expireName(args[0])
	var flags fsm.Flags
	for _, opt := range args[3:] {
		switch {
		case is(opt, "nx"):
			flags |= fsm.FlagNX
		case is(opt, "xx"):
			flags |= fsm.FlagXX
		case is(opt, "gt"):
			flags |= fsm.FlagGT
		case is(opt, "lt"):
			flags |= fsm.FlagLT
		default:
			return fsm.Command{}, errUnsupportedOption(opt)
		}
	}
	if flags&fsm.FlagNX != 0 && flags&(fsm.FlagXX|fsm.FlagGT|fsm.FlagLT) != 0 {
		return fsm.Command{}, errExpireNXCompat
	}
	if flags&fsm.FlagGT != 0 && flags&fsm.FlagLT != 0 {
		return fsm.Command{}, errExpireGTLT
	}
	when, ok := parseInt(args[2])
	if !ok {
		return fsm.Command{}, errNotInteger
	}
	if name == "expire" || name == "expireat" {
		if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
			return fsm.Command{}, errInvalidExpire(name)
		}
		when *= 1000
	}
	if name == "expire" || name == "pexpire" {
		now := c.clockMs()
		if when > math.MaxInt64-now {
			return fsm.Command{}, errInvalidExpire(name)
		}
		when += now
	}
	return fsm.Command{Op: fsm.OpExpireAt, Flags: flags, Args: args[1:2], Int: when}, ""
}

// expireName is the lowercase name of the EXPIRE-family command arg names
// (in any case), without the allocation of lowering it: a script's
// redis.call('EXPIRE', ...) parses it on every call.
func expireName(arg []byte) string {
	for _, name := range [...]string{"expire", "pexpire", "expireat"} {
		if is(arg, name) {
			return name
		}
	}
	return "pexpireat"
}

// parseTTL parses TTL, PTTL, EXPIRETIME and PEXPIRETIME.
func parseTTL(c *client, args [][]byte) (fsm.Command, string) {
	op := fsm.OpTTL
	switch {
	case is(args[0], "pttl"):
		op = fsm.OpPTTL
	case is(args[0], "expiretime"):
		op = fsm.OpExpireTime
	case is(args[0], "pexpiretime"):
		op = fsm.OpPExpireTime
	}
	return fsm.Command{Op: op, Args: args[1:2]}, ""
}

func parsePersist(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpPersist, Args: args[1:2]}, ""
}

func parseDBSize(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpDBSize}, ""
}

// parseFlush parses FLUSHDB and FLUSHALL [ASYNC|SYNC]; the mode changes
// nothing visible. FLUSHDB empties the client's database (FlagFlushDB);
// a cluster of several groups has database 0 alone, where it is FLUSHALL.
func parseFlush(c *client, args [][]byte) (fsm.Command, string) {
	if len(args) > 2 || (len(args) == 2 && !is(args[1], "async") && !is(args[1], "sync")) {
		return fsm.Command{}, errSyntax
	}
	var f fsm.Flags
	if len(args) == 2 && is(args[1], "async") {
		f = fsm.FlagLazy
	}
	if is(args[0], "flushdb") && !c.s.router.sharded() {
		f |= fsm.FlagFlushDB
	}
	return fsm.Command{Op: fsm.OpFlushAll, Flags: f}, ""
}

// parseMove parses MOVE key db, with Redis's checks in its order.
func parseMove(c *client, args [][]byte) (fsm.Command, string) {
	if c.s.router.sharded() {
		return fsm.Command{}, "ERR MOVE is not allowed in cluster mode"
	}
	db, e := dbIndex(args[2])
	switch {
	case e != "":
		return fsm.Command{}, e
	case !c.s.validDB(db):
		return fsm.Command{}, errDBIndex
	case uint16(db) == c.db:
		return fsm.Command{}, errSameObject
	}
	return fsm.Command{Op: fsm.OpMoveDB, Args: args[1:2], Int: db}, ""
}

// parseSwapDB parses SWAPDB index1 index2.
func parseSwapDB(c *client, args [][]byte) (fsm.Command, string) {
	if c.s.router.sharded() {
		return fsm.Command{}, "ERR SWAPDB is not allowed in cluster mode"
	}
	a, ok := parseDBIndex(args[1])
	if !ok {
		return fsm.Command{}, "ERR invalid first DB index"
	}
	b, ok := parseDBIndex(args[2])
	if !ok {
		return fsm.Command{}, "ERR invalid second DB index"
	}
	if !c.s.validDB(a) || !c.s.validDB(b) {
		return fsm.Command{}, errDBIndex
	}
	return fsm.Command{Op: fsm.OpSwapDB, Int: a, Int2: b}, ""
}
