package fsm

import "fmt"

// allFlags are the bits Flags defines; any other bit is corruption.
const allFlags = FlagNX | FlagXX | FlagGT | FlagLT | FlagGet | FlagKeepTTL | FlagPersist | FlagExpire

// opNames are the ops kvs knows; Op.String and validation use them.
var opNames = map[Op]string{
	OpSet: "SET", OpSetNX: "SETNX", OpGetSet: "GETSET", OpGetDel: "GETDEL",
	OpGetEx: "GETEX", OpMSet: "MSET", OpMSetNX: "MSETNX", OpAppend: "APPEND",
	OpSetRange: "SETRANGE", OpIncrBy: "INCRBY", OpIncrByFloat: "INCRBYFLOAT",
	OpDel: "DEL", OpRename: "RENAME", OpRenameNX: "RENAMENX",
	OpExpireAt: "EXPIREAT", OpPersist: "PERSIST", OpFlushAll: "FLUSHALL",
	OpDelExpired: "DELEXPIRED", OpMetaSet: "METASET",
	OpGet: "GET", OpMGet: "MGET", OpStrLen: "STRLEN", OpGetRange: "GETRANGE",
	OpExists: "EXISTS", OpType: "TYPE", OpKeys: "KEYS", OpScan: "SCAN",
	OpRandomKey: "RANDOMKEY", OpTTL: "TTL", OpPTTL: "PTTL",
	OpExpireTime: "EXPIRETIME", OpPExpireTime: "PEXPIRETIME",
	OpDBSize: "DBSIZE", OpMemoryUsage: "MEMORY USAGE",
}

// String returns the Redis command an op stands for (its canonical form).
func (op Op) String() string {
	if s, ok := opNames[op]; ok {
		return s
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// Validate reports whether c is well formed for its op: a known op, the
// argument count and the fields its op needs, and only known flags. The
// server builds commands that pass it; DecodeEntry rejects entries that do
// not; Apply and Read panic on a command that does not (a bug, not input).
func (c *Command) Validate() error {
	n := len(c.Args)
	bad := func(what string) error {
		return fmt.Errorf("fsm: %v with %d args: %s", c.Op, n, what)
	}
	if c.Flags&^allFlags != 0 {
		return fmt.Errorf("fsm: %v: unknown flags %#x", c.Op, uint16(c.Flags&^allFlags))
	}
	switch c.Op {
	case OpSet, OpSetNX, OpGetSet, OpAppend, OpRename, OpRenameNX:
		if n != 2 {
			return bad("want 2")
		}
	case OpSetRange:
		if n != 2 {
			return bad("want 2")
		}
		if c.Int < 0 {
			return bad("negative offset")
		}
	case OpIncrByFloat:
		// Args[1], the increment as the client wrote it, is optional.
		if n != 1 && n != 2 {
			return bad("want 1 or 2")
		}
	case OpGetDel, OpGetEx, OpIncrBy, OpExpireAt, OpPersist,
		OpGet, OpStrLen, OpGetRange, OpType, OpKeys, OpTTL, OpPTTL,
		OpExpireTime, OpPExpireTime, OpMemoryUsage:
		if n != 1 {
			return bad("want 1")
		}
	case OpMSet, OpMSetNX:
		if n == 0 || n%2 != 0 {
			return bad("want key-value pairs")
		}
	case OpDel, OpMGet, OpExists:
		if n == 0 {
			return bad("want at least 1")
		}
	case OpDelExpired:
	case OpMetaSet:
		if n != 2 {
			return bad("want 2")
		}
		if len(c.Args[0]) == 0 {
			return bad("empty name")
		}
	case OpFlushAll, OpRandomKey, OpDBSize:
		if n != 0 {
			return bad("want none")
		}
	case OpScan:
		if n > 2 {
			return bad("want at most 2")
		}
		if c.Int < 0 {
			return bad("negative cursor")
		}
	default:
		return fmt.Errorf("fsm: unknown op %d", uint8(c.Op))
	}
	return nil
}
