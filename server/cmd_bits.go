package server

import (
	"kvs/fsm"
)

func init() {
	registerCommands([]command{
		{name: "setbit", arity: 4, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "bitmap", parse: parseSetBit},
		{name: "getbit", arity: 3, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "bitmap", parse: parseGetBit},
		{name: "bitcount", arity: -2, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "bitmap", parse: parseBitCount},
		{name: "bitpos", arity: -3, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "bitmap", parse: parseBitPos},
		{name: "bitop", arity: -4, flags: w, firstKey: 2, lastKey: -1, keyStep: 1, group: "bitmap", parse: parseBitOp},
		{name: "bitfield", arity: -2, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "bitmap", parse: parseBitField},
		{name: "bitfield_ro", arity: -2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "bitmap", parse: parseBitField},
		{name: "lcs", arity: -3, flags: r, firstKey: 1, lastKey: 2, keyStep: 1, group: "string", parse: parseLCS},
	}...)
	for name, doc := range map[string][2]string{
		"setbit":      {"Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", "2.2.0"},
		"getbit":      {"Returns a bit value by offset.", "2.2.0"},
		"bitcount":    {"Counts the number of set bits (population counting) in a string.", "2.6.0"},
		"bitpos":      {"Finds the first set (1) or clear (0) bit in a string.", "2.8.7"},
		"bitop":       {"Performs bitwise operations on multiple strings, and stores the result.", "2.6.0"},
		"bitfield":    {"Performs arbitrary bitfield integer operations on strings.", "3.2.0"},
		"bitfield_ro": {"Performs arbitrary read-only bitfield integer operations on strings.", "6.0.0"},
		"lcs":         {"Finds the longest common substring.", "7.0.0"},
	} {
		commandDocs[name] = doc
	}
}

// Error texts only the bit commands use.
const (
	errBitOffset      = "ERR bit offset is not an integer or out of range"
	errBitValue       = "ERR bit is not an integer or out of range"
	errBitPosBit      = "ERR The bit argument must be 1 or 0."
	errBitOpNot       = "ERR BITOP NOT must be called with a single source key."
	errBitFieldType   = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
	errBitFieldOver   = "ERR Invalid OVERFLOW type specified"
	errBitFieldRO     = "ERR BITFIELD_RO only supports the GET subcommand"
	errLCSLenAndIdx   = "ERR If you want both the length and indexes, please just use IDX."
	errSameObject     = "ERR source and destination objects are the same"
	errIntRange       = "ERR value is out of range, value must between -2147483648 and 2147483647"
	errInvalidSlot    = "ERR Invalid slot"
	errInvalidSlotKey = "ERR Invalid slot or number of keys"
)

// bitOffset parses a bit offset as Redis's getBitOffsetFromArgument does:
// with hash set and bits > 0, "#n" means n*bits (BITFIELD); the offset
// must not be negative nor address a byte at or past proto-max-bulk-len
// (nor past the largest string kvs holds, fsm.MaxBitOffset).
func (c *client) bitOffset(arg []byte, hash bool, bits int) (int64, bool) {
	useHash := hash && bits > 0 && len(arg) > 0 && arg[0] == '#'
	if useHash {
		arg = arg[1:]
	}
	off, ok := parseInt(arg)
	if !ok {
		return 0, false
	}
	if useHash {
		off *= int64(bits) // wraps as Redis's long long multiply does
	}
	if off < 0 || off>>3 >= c.s.maxBulk.Load() || off > fsm.MaxBitOffset-64 {
		return 0, false
	}
	return off, true
}

func parseSetBit(c *client, args [][]byte) (fsm.Command, string) {
	off, ok := c.bitOffset(args[2], false, 0)
	if !ok {
		return fsm.Command{}, errBitOffset
	}
	on, ok := parseInt(args[3])
	if !ok || on&^1 != 0 {
		return fsm.Command{}, errBitValue
	}
	return fsm.Command{Op: fsm.OpSetBit, Args: args[1:2], Int: off, Int2: on}, ""
}

func parseGetBit(c *client, args [][]byte) (fsm.Command, string) {
	off, ok := c.bitOffset(args[2], false, 0)
	if !ok {
		return fsm.Command{}, errBitOffset
	}
	return fsm.Command{Op: fsm.OpGetBit, Args: args[1:2], Int: off}, ""
}

// deferError makes cmd answer e once its key is found to hold a string:
// Redis 7.0 looks the key up before it parses BITCOUNT's, BITPOS's and
// LCS's options, so a missing key or another type answers first.
func deferError(cmd fsm.Command, e string) fsm.Command {
	cmd.Flags = fsm.FlagDeferredError
	cmd.Args = append(cmd.Args[:len(cmd.Args):len(cmd.Args)], []byte(e))
	return cmd
}

// parseBitCount parses BITCOUNT key [start end [BYTE|BIT]] in Redis
// 7.0's order: start, end, an inverted range of negative indexes (which
// counts 0 whatever follows), then the unit.
func parseBitCount(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpBitCount, Args: args[1:2]}
	switch len(args) {
	case 2:
		return cmd, ""
	case 4, 5:
	default:
		return deferError(cmd, errSyntax), ""
	}
	start, ok1 := parseInt(args[2])
	end, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		return deferError(cmd, errNotInteger), ""
	}
	cmd.Flags, cmd.Int, cmd.Int2 = fsm.FlagBitRange, start, end
	if start < 0 && end < 0 && start > end {
		return cmd, ""
	}
	if len(args) == 5 {
		switch {
		case is(args[4], "bit"):
			cmd.Flags |= fsm.FlagBitUnit
		case !is(args[4], "byte"):
			return deferError(fsm.Command{Op: fsm.OpBitCount, Args: args[1:2]}, errSyntax), ""
		}
	}
	return cmd, ""
}

// parseBitPos parses BITPOS key bit [start [end [BYTE|BIT]]]: the bit
// first, then (after the lookup, in Redis 7.0) start, the unit and end.
func parseBitPos(c *client, args [][]byte) (fsm.Command, string) {
	bit, ok := parseInt(args[2])
	if !ok {
		return fsm.Command{}, errNotInteger
	}
	if bit != 0 && bit != 1 {
		return fsm.Command{}, errBitPosBit
	}
	cmd := fsm.Command{Op: fsm.OpBitPos, Args: args[1:2]}
	var set fsm.Flags
	if bit == 1 {
		set = fsm.FlagBitSet
	}
	plain := fsm.Command{Op: fsm.OpBitPos, Args: args[1:2], Flags: set}
	switch len(args) {
	case 3:
		return plain, ""
	case 4, 5, 6:
	default:
		return withFlags(deferError(plain, errSyntax), set), ""
	}
	start, ok := parseInt(args[3])
	if !ok {
		return withFlags(deferError(plain, errNotInteger), set), ""
	}
	cmd.Flags, cmd.Int = set|fsm.FlagBitRange, start
	if len(args) == 6 {
		switch {
		case is(args[5], "bit"):
			cmd.Flags |= fsm.FlagBitUnit
		case !is(args[5], "byte"):
			return withFlags(deferError(plain, errSyntax), set), ""
		}
	}
	if len(args) >= 5 {
		end, ok := parseInt(args[4])
		if !ok {
			return withFlags(deferError(plain, errNotInteger), set), ""
		}
		cmd.Flags |= fsm.FlagBitEnd
		cmd.Int2 = end
	}
	return cmd, ""
}

func withFlags(cmd fsm.Command, f fsm.Flags) fsm.Command {
	cmd.Flags |= f
	return cmd
}

func parseBitOp(c *client, args [][]byte) (fsm.Command, string) {
	var op int64
	switch {
	case is(args[1], "and"):
		op = fsm.BitOpAnd
	case is(args[1], "or"):
		op = fsm.BitOpOr
	case is(args[1], "xor"):
		op = fsm.BitOpXor
	case is(args[1], "not"):
		op = fsm.BitOpNot
		if len(args) != 4 {
			return fsm.Command{}, errBitOpNot
		}
	default:
		return fsm.Command{}, errSyntax
	}
	return fsm.Command{Op: fsm.OpBitOp, Args: args[2:], Int: op}, ""
}

// parseBitField parses BITFIELD and BITFIELD_RO as Redis's bitfieldGeneric
// does: every subcommand is checked before anything runs. Only GETs make
// a read (so BITFIELD with GETs alone takes no log entry); BITFIELD_RO
// with a write is refused once all its arguments have been checked.
func parseBitField(c *client, args [][]byte) (fsm.Command, string) {
	overflow := fsm.BitFieldWrap
	ops := [][]byte{args[1]}
	writes := false
	for j := 2; j < len(args); j++ {
		rem := len(args) - j - 1
		var op fsm.BitFieldOp
		switch {
		case is(args[j], "get") && rem >= 2:
		case is(args[j], "set") && rem >= 3:
			op.Write = true
		case is(args[j], "incrby") && rem >= 3:
			op.Write, op.Incr = true, true
		case is(args[j], "overflow") && rem >= 1:
			j++
			switch {
			case is(args[j], "wrap"):
				overflow = fsm.BitFieldWrap
			case is(args[j], "sat"):
				overflow = fsm.BitFieldSat
			case is(args[j], "fail"):
				overflow = fsm.BitFieldFail
			default:
				return fsm.Command{}, errBitFieldOver
			}
			continue
		default:
			return fsm.Command{}, errSyntax
		}
		signed, width, ok := bitFieldType(args[j+1])
		if !ok {
			return fsm.Command{}, errBitFieldType
		}
		off, ok := c.bitOffset(args[j+2], true, width)
		if !ok {
			return fsm.Command{}, errBitOffset
		}
		op.Overflow, op.Signed, op.Bits, op.Offset = overflow, signed, width, off
		if op.Write {
			writes = true
			v, ok := parseInt(args[j+3])
			if !ok {
				return fsm.Command{}, errNotInteger
			}
			op.Value = v
			j++
		}
		ops = append(ops, fsm.EncodeBitFieldOp(op))
		j += 2
	}
	switch {
	case !writes:
		return fsm.Command{Op: fsm.OpBitFieldRO, Args: ops}, ""
	case is(args[0], "bitfield_ro"):
		return fsm.Command{}, errBitFieldRO
	}
	return fsm.Command{Op: fsm.OpBitField, Args: ops}, ""
}

// bitFieldType parses i1..i64 and u1..u63.
func bitFieldType(arg []byte) (signed bool, width int, ok bool) {
	if len(arg) == 0 || (arg[0] != 'i' && arg[0] != 'u') {
		return false, 0, false
	}
	signed = arg[0] == 'i'
	n, ok := parseInt(arg[1:])
	maxBits := int64(63)
	if signed {
		maxBits = 64
	}
	if !ok || n < 1 || n > maxBits {
		return false, 0, false
	}
	return signed, int(n), true
}

// parseLCS parses LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n]
// [WITHMATCHLEN]; its errors come after the keys' type check (deferred).
func parseLCS(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpLCS, Args: args[1:3], Int2: c.s.maxBulk.Load()}
	var flags fsm.Flags
	for j := 3; j < len(args); j++ {
		more := len(args) - 1 - j
		switch {
		case is(args[j], "idx"):
			flags |= fsm.FlagLCSIdx
		case is(args[j], "len"):
			flags |= fsm.FlagLCSLen
		case is(args[j], "withmatchlen"):
			flags |= fsm.FlagLCSWithMatchLen
		case is(args[j], "minmatchlen") && more > 0:
			n, ok := parseInt(args[j+1])
			if !ok {
				return deferError(cmd, errNotInteger), ""
			}
			cmd.Int = max(n, 0)
			j++
		default:
			return deferError(cmd, errSyntax), ""
		}
	}
	if flags&fsm.FlagLCSIdx != 0 && flags&fsm.FlagLCSLen != 0 {
		return deferError(cmd, errLCSLenAndIdx), ""
	}
	cmd.Flags = flags
	return cmd, ""
}
