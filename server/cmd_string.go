package server

import (
	"math"
	"strconv"

	"kvs/fsm"
)

func init() {
	registerCommands([]command{
		{name: "get", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGet},
		{name: "set", arity: -3, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseSet},
		{name: "setnx", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseSetNX},
		{name: "setex", arity: 4, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseSetEx},
		{name: "psetex", arity: 4, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseSetEx},
		{name: "getset", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGetSet},
		{name: "getdel", arity: 2, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGetDel},
		{name: "getex", arity: -2, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGetEx},
		{name: "mget", arity: -2, flags: rf, firstKey: 1, lastKey: -1, keyStep: 1, group: "string", parse: parseMGet},
		{name: "mset", arity: -3, flags: w, firstKey: 1, lastKey: -1, keyStep: 2, group: "string", parse: parseMSet},
		{name: "msetnx", arity: -3, flags: w, firstKey: 1, lastKey: -1, keyStep: 2, group: "string", parse: parseMSet},
		{name: "append", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseAppend},
		{name: "strlen", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseStrLen},
		{name: "getrange", arity: 4, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGetRange},
		{name: "substr", arity: 4, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGetRange},
		{name: "setrange", arity: 4, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseSetRange},
		{name: "incr", arity: 2, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseIncr},
		{name: "decr", arity: 2, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseIncr},
		{name: "incrby", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseIncrBy},
		{name: "decrby", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseIncrBy},
		{name: "incrbyfloat", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseIncrByFloat},
	}...)
}

// Parsers of the string commands. Each checks what Redis checks before it
// touches the keyspace, in Redis's order, and returns Redis's error text for
// the first failure.

func parseGet(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpGet, Args: args[1:2]}, ""
}

// Expiry units and bases of the SET/GETEX options and SETEX/PSETEX.
const (
	expSeconds = iota
	expMillis
	expUnixSeconds
	expUnixMillis
)

// setOptions parses the options of SET (forGetEx false) or GETEX (true) as
// Redis's parseExtendedStringArgumentsOrReply does: an option conflicting
// with one seen before is a syntax error; repeating one is not.
func setOptions(opts [][]byte, forGetEx bool) (flags fsm.Flags, unit int, expire []byte, e string) {
	const (
		ex = 1 << iota
		px
		exat
		pxat
		keepTTL
		persist
	)
	var seen int
	anyExpire := ex | px | exat | pxat
	for j := 0; j < len(opts); j++ {
		opt := opts[j]
		hasNext := j+1 < len(opts)
		switch {
		case !forGetEx && is(opt, "nx") && flags&fsm.FlagXX == 0:
			flags |= fsm.FlagNX
		case !forGetEx && is(opt, "xx") && flags&fsm.FlagNX == 0:
			flags |= fsm.FlagXX
		case !forGetEx && is(opt, "get"):
			flags |= fsm.FlagGet
		case !forGetEx && is(opt, "keepttl") && seen&(persist|anyExpire) == 0:
			seen |= keepTTL
			flags |= fsm.FlagKeepTTL
		case forGetEx && is(opt, "persist") && seen&(keepTTL|anyExpire) == 0:
			seen |= persist
			flags |= fsm.FlagPersist
		case is(opt, "ex") && hasNext && seen&(keepTTL|persist|px|exat|pxat) == 0:
			seen |= ex
			unit, expire = expSeconds, opts[j+1]
			j++
		case is(opt, "px") && hasNext && seen&(keepTTL|persist|ex|exat|pxat) == 0:
			seen |= px
			unit, expire = expMillis, opts[j+1]
			j++
		case is(opt, "exat") && hasNext && seen&(keepTTL|persist|ex|px|pxat) == 0:
			seen |= exat
			unit, expire = expUnixSeconds, opts[j+1]
			j++
		case is(opt, "pxat") && hasNext && seen&(keepTTL|persist|ex|px|exat) == 0:
			seen |= pxat
			unit, expire = expUnixMillis, opts[j+1]
			j++
		default:
			return 0, 0, nil, errSyntax
		}
	}
	return flags, unit, expire, ""
}

// deadline turns an expiry argument of SET, GETEX, SETEX or PSETEX into an
// absolute Unix time in milliseconds, with Redis's checks: not an integer,
// not positive, or overflowing once converted is an error.
func (c *client) deadline(arg []byte, unit int, cmdName string) (int64, string) {
	v, ok := parseInt(arg)
	if !ok {
		return 0, errNotInteger
	}
	if v <= 0 {
		return 0, errInvalidExpire(cmdName)
	}
	if unit == expSeconds || unit == expUnixSeconds {
		if v > math.MaxInt64/1000 {
			return 0, errInvalidExpire(cmdName)
		}
		v *= 1000
	}
	if unit == expSeconds || unit == expMillis {
		now := c.clockMs()
		if v > math.MaxInt64-now {
			return 0, errInvalidExpire(cmdName)
		}
		v += now
	}
	return v, ""
}

func parseSet(c *client, args [][]byte) (fsm.Command, string) {
	flags, unit, expire, e := setOptions(args[3:], false)
	if e != "" {
		return fsm.Command{}, e
	}
	cmd := fsm.Command{Op: fsm.OpSet, Flags: flags, Args: args[1:3]}
	if expire != nil {
		if cmd.Int, e = c.deadline(expire, unit, "set"); e != "" {
			return fsm.Command{}, e
		}
	}
	return cmd, ""
}

func parseSetNX(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpSetNX, Args: args[1:3]}, ""
}

// parseSetEx parses SETEX key seconds value and PSETEX key ms value.
func parseSetEx(c *client, args [][]byte) (fsm.Command, string) {
	unit, name := expSeconds, "setex"
	if is(args[0], "psetex") {
		unit, name = expMillis, "psetex"
	}
	d, e := c.deadline(args[2], unit, name)
	if e != "" {
		return fsm.Command{}, e
	}
	// The store's SET takes key and value side by side; the value is
	// args[3], so build the pair.
	return fsm.Command{Op: fsm.OpSet, Args: [][]byte{args[1], args[3]}, Int: d}, ""
}

func parseGetSet(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpGetSet, Args: args[1:3]}, ""
}

func parseGetDel(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpGetDel, Args: args[1:2]}, ""
}

func parseGetEx(c *client, args [][]byte) (fsm.Command, string) {
	flags, unit, expire, e := setOptions(args[2:], true)
	if e != "" {
		return fsm.Command{}, e
	}
	cmd := fsm.Command{Op: fsm.OpGetEx, Flags: flags, Args: args[1:2]}
	if expire != nil {
		if cmd.Int, e = c.deadline(expire, unit, "getex"); e != "" {
			// Redis looks the key up before it checks the time: a
			// missing key is nil and another type WRONGTYPE, whatever
			// the time. So read the key, and answer e only if it holds
			// a string.
			c.errIfFound = e
			return fsm.Command{Op: fsm.OpGet, Args: args[1:2]}, ""
		}
		cmd.Flags |= fsm.FlagExpire
	}
	return cmd, ""
}

func parseMGet(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpMGet, Args: args[1:]}, ""
}

// parseMSet parses MSET and MSETNX: keys and values must pair up.
func parseMSet(c *client, args [][]byte) (fsm.Command, string) {
	op, name := fsm.OpMSet, "mset"
	if is(args[0], "msetnx") {
		op, name = fsm.OpMSetNX, "msetnx"
	}
	if len(args)%2 == 0 {
		return fsm.Command{}, errWrongArgs(name)
	}
	return fsm.Command{Op: op, Args: args[1:]}, ""
}

func parseAppend(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpAppend, Args: args[1:3]}, ""
}

func parseStrLen(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpStrLen, Args: args[1:2]}, ""
}

func parseGetRange(c *client, args [][]byte) (fsm.Command, string) {
	start, ok1 := parseInt(args[2])
	end, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		return fsm.Command{}, errNotInteger
	}
	return fsm.Command{Op: fsm.OpGetRange, Args: args[1:2], Int: start, Int2: end}, ""
}

func parseSetRange(c *client, args [][]byte) (fsm.Command, string) {
	off, ok := parseInt(args[2])
	if !ok {
		return fsm.Command{}, errNotInteger
	}
	if off < 0 {
		return fsm.Command{}, errOffset
	}
	// The resulting size is checked by the store, after the type check
	// and only when there is something to write, in Redis's order.
	return fsm.Command{Op: fsm.OpSetRange, Args: [][]byte{args[1], args[3]}, Int: off}, ""
}

// parseIncr parses INCR and DECR.
func parseIncr(c *client, args [][]byte) (fsm.Command, string) {
	delta := int64(1)
	if is(args[0], "decr") {
		delta = -1
	}
	return fsm.Command{Op: fsm.OpIncrBy, Args: args[1:2], Int: delta}, ""
}

// parseIncrBy parses INCRBY and DECRBY.
func parseIncrBy(c *client, args [][]byte) (fsm.Command, string) {
	delta, ok := parseInt(args[2])
	if !ok {
		return fsm.Command{}, errNotInteger
	}
	if is(args[0], "decrby") {
		if delta == math.MinInt64 {
			return fsm.Command{}, errDecrOverflow
		}
		delta = -delta
	}
	return fsm.Command{Op: fsm.OpIncrBy, Args: args[1:2], Int: delta}, ""
}

func parseIncrByFloat(c *client, args [][]byte) (fsm.Command, string) {
	// Redis accepts what strtold accepts (hex, "inf", long double range),
	// which strconv.ParseFloat does not, and checks it only after the
	// key's type (a hash answers WRONGTYPE whatever the increment): the
	// store does both, from the increment's text.
	f, _ := strconv.ParseFloat(string(args[2]), 64)
	// The increment's text goes along so that the store can add it in long
	// double precision as Redis does (0.1 + 0.2 is "0.3").
	return fsm.Command{Op: fsm.OpIncrByFloat, Args: args[1:3], Float: f}, ""
}
