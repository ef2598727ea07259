package server

import (
	"strconv"

	"kvs/fsm"
)

// The stream commands. Each carries its arguments to the store as the
// client sent them; the syntax Redis checks before it looks a key up is
// checked here with the store's own parsers (fsm.StreamSyntaxError), the
// rest where the command runs. XADD and XTRIM carry
// stream-node-max-entries and stream-node-max-bytes as they are when
// they are proposed: the store splits a stream's nodes by them, and
// every replica must split alike.
func init() {
	registerCommands([]command{
		{name: "xadd", arity: -5, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXAdd)},
		{name: "xtrim", arity: -4, flags: wd, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXTrim)},
		{name: "xdel", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXDel)},
		{name: "xsetid", arity: -3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXSetID)},
		{name: "xlen", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXLen)},
		{name: "xrange", arity: -4, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXRange)},
		{name: "xrevrange", arity: -4, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXRevRange)},
		{name: "xread", arity: -4, flags: r | flagBlocking | flagMovableKeys, group: "stream", level: 4,
			parse: parseXRead},
	}...)
	for name, doc := range map[string][2]string{
		"xadd":      {"Appends a new entry to a stream", "5.0.0"},
		"xtrim":     {"Deletes messages from the beginning of a stream.", "5.0.0"},
		"xdel":      {"Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.", "5.0.0"},
		"xsetid":    {"An internal command for replicating stream values", "5.0.0"},
		"xlen":      {"Return the number of entries in a stream", "5.0.0"},
		"xrange":    {"Return a range of elements in a stream, with IDs matching the specified IDs interval", "5.0.0"},
		"xrevrange": {"Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE", "5.0.0"},
		"xread":     {"Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.", "5.0.0"},
	} {
		commandDocs[name] = doc
	}
}

// streamNodeLimits returns stream-node-max-entries and
// stream-node-max-bytes.
func (s *Server) streamNodeLimits() (entries, bytes int64) {
	entries, _ = strconv.ParseInt(s.params.Get("stream-node-max-entries"), 10, 64)
	bytes, _ = strconv.ParseInt(s.params.Get("stream-node-max-bytes"), 10, 64)
	return entries, bytes
}

func streamParse(op fsm.Op) func(c *client, args [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		cmd := fsm.Command{Op: op, Args: args[1:]}
		if op == fsm.OpXAdd || op == fsm.OpXTrim {
			cmd.Int, cmd.Int2 = c.s.streamNodeLimits()
		}
		if e := fsm.StreamSyntaxError(op, cmd.Args, cmd.Int); e != "" {
			return fsm.Command{}, e
		}
		return cmd, ""
	}
}

// parseXRead parses XREAD, which blocks only outside scripts and MULTI
// (where it answers at once, as in Redis: blockXRead is its blocking
// form).
func parseXRead(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpXRead, Args: args[1:]}
	if e := fsm.StreamSyntaxError(fsm.OpXRead, cmd.Args, 0); e != "" {
		return fsm.Command{}, e
	}
	if c.script != nil && xreadBlocks(args) {
		return fsm.Command{}, "ERR " + string(args[0]) + " command is not allowed with BLOCK option from scripts"
	}
	return cmd, ""
}

// xreadBlocks reports whether an XREAD or XREADGROUP has a BLOCK option
// (its syntax checked).
func xreadBlocks(args [][]byte) bool {
	for i := 1; i+1 < len(args); i++ {
		switch {
		case is(args[i], "streams"):
			return false
		case is(args[i], "block"):
			return true
		case is(args[i], "count"):
			i++
		case is(args[i], "group"):
			i += 2
		}
	}
	return false
}
