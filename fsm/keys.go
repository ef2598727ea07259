package fsm

// Keys returns the keys a write command touches, as its Args hold them
// (not copies), for saying what a damaged or cut log record affected.
// FLUSHALL touches every key: all is true and keys is empty. Reads and
// OpMetaSet (cluster metadata, not a key) touch none.
func (c Command) Keys() (keys [][]byte, all bool) {
	switch c.Op {
	case OpFlushAll:
		return nil, true
	case OpMSet, OpMSetNX:
		for i := 0; i < len(c.Args); i += 2 {
			keys = append(keys, c.Args[i])
		}
		return keys, false
	case OpDel, OpDelExpired:
		return c.Args, false
	case OpRename, OpRenameNX:
		return c.Args[:min(2, len(c.Args))], false
	case OpMetaSet, OpInvalid:
		return nil, false
	}
	if c.Op.IsWrite() && len(c.Args) > 0 {
		return c.Args[:1], false
	}
	return nil, false
}
