package server

import (
	"math"
	"strconv"
	"time"

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
		{name: "xreadgroup", arity: -7, flags: wd | flagBlocking | flagMovableKeys, group: "stream", level: 4,
			parse: parseXRead},
		{name: "xack", arity: -4, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXAck)},
		{name: "xpending", arity: -3, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXPending)},
		{name: "xclaim", arity: -6, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXClaim)},
		{name: "xautoclaim", arity: -6, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "stream", level: 4,
			parse: streamParse(fsm.OpXAutoClaim)},
		{name: "xgroup", arity: -2, group: "stream", level: 4,
			subs: "create createconsumer delconsumer destroy help setid", parse: parseXSub(fsm.OpXGroup), runs: xgroupHelp},
		{name: "xinfo", arity: -2, group: "stream", level: 4,
			subs: "consumers groups help stream", parse: parseXSub(fsm.OpXInfo), runs: xinfoHelp},
	}...)
	for name, doc := range map[string][2]string{
		"xadd":       {"Appends a new entry to a stream", "5.0.0"},
		"xtrim":      {"Deletes messages from the beginning of a stream.", "5.0.0"},
		"xdel":       {"Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.", "5.0.0"},
		"xsetid":     {"An internal command for replicating stream values", "5.0.0"},
		"xlen":       {"Return the number of entries in a stream", "5.0.0"},
		"xrange":     {"Return a range of elements in a stream, with IDs matching the specified IDs interval", "5.0.0"},
		"xrevrange":  {"Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE", "5.0.0"},
		"xreadgroup": {"Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.", "5.0.0"},
		"xack":       {"Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.", "5.0.0"},
		"xpending":   {"Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.", "5.0.0"},
		"xclaim":     {"Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.", "5.0.0"},
		"xautoclaim": {"Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.", "6.2.0"},
		"xgroup":     {"A container for consumer groups commands", "5.0.0"},
		"xinfo":      {"A container for stream introspection commands", "5.0.0"},
		"xread":      {"Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.", "5.0.0"},
	} {
		commandDocs[name] = doc
	}
}

// streamNodeLimits returns stream-node-max-entries and
// stream-node-max-bytes.
func (s *Server) streamNodeLimits() (entries, bytes int64) {
	if s.params == nil {
		// The parser of a store's replay (InstallScriptParser), before
		// the server exists: Redis's defaults.
		return 100, 4096
	}
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
	op := fsm.OpXRead
	if len(args[0]) == len("xreadgroup") {
		op = fsm.OpXReadGroup
	}
	cmd := fsm.Command{Op: op, Args: args[1:]}
	if e := fsm.StreamSyntaxError(op, cmd.Args, 0); e != "" {
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

// parseXSub parses XGROUP and XINFO subcommands (but HELP, which the
// server answers): the store gets the key first, then the subcommand and
// the rest.
func parseXSub(op fsm.Op) func(c *client, args [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) {
		if len(args) < 3 {
			return fsm.Command{}, "ERR unknown subcommand or wrong number of arguments for '" + string(args[1]) +
				"'. Try " + upperName(args[0]) + " HELP."
		}
		cargs := make([][]byte, 0, len(args)-1)
		cargs = append(cargs, args[2], args[1])
		cargs = append(cargs, args[3:]...)
		return fsm.Command{Op: op, Args: cargs}, ""
	}
}

func upperName(b []byte) string {
	out := make([]byte, len(b))
	for i, ch := range b {
		if ch >= 'a' && ch <= 'z' {
			ch -= 'a' - 'A'
		}
		out[i] = ch
	}
	return string(out)
}

func xgroupHelp(c *client, args [][]byte) func(*client, [][]byte) {
	if !is(args[1], "help") {
		return nil
	}
	return func(c *client, args [][]byte) { c.out = appendHelp(c.out, xgroupHelpLines) }
}

func xinfoHelp(c *client, args [][]byte) func(*client, [][]byte) {
	if !is(args[1], "help") {
		return nil
	}
	return func(c *client, args [][]byte) {
		if len(args) != 2 {
			c.out = appendError(c.out, "ERR unknown subcommand or wrong number of arguments for '"+string(args[1])+"'. Try XINFO HELP.")
			return
		}
		c.out = appendHelp(c.out, xinfoHelpLines)
	}
}

var xgroupHelpLines = []string{
	"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CREATE <key> <groupname> <id|$> [option]",
	"    Create a new consumer group. Options are:",
	"    * MKSTREAM",
	"      Create the empty stream if it does not exist.",
	"    * ENTRIESREAD entries_read",
	"      Set the group's entries_read counter (internal use).",
	"CREATECONSUMER <key> <groupname> <consumer>",
	"    Create a new consumer in the specified group.",
	"DELCONSUMER <key> <groupname> <consumer>",
	"    Remove the specified consumer.",
	"DESTROY <key> <groupname>",
	"    Remove the specified group.",
	"SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
	"    Set the current group ID and entries_read counter.",
	"HELP",
	"    Prints this help.",
}

var xinfoHelpLines = []string{
	"XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CONSUMERS <key> <groupname>",
	"    Show consumers of <groupname>.",
	"GROUPS <key>",
	"    Show the stream consumer groups.",
	"STREAM <key> [FULL [COUNT <count>]",
	"    Show information about the stream.",
	"HELP",
	"    Prints this help.",
}

// blockXRead is the blocking form of XREAD and XREADGROUP with BLOCK: its
// tries run through the write path (fsm.OpXReadBlocked for XREAD), and
// XREAD's "$" IDs are the streams' last IDs as the client blocks. A
// client woken without a COUNT reads at most 1000 entries a stream, as in
// Redis.
func blockXRead(c *client, args [][]byte) (blockReq, string) {
	cmd, e := parseXRead(c, args)
	if e != "" {
		return blockReq{}, e
	}
	var timeout time.Duration
	for i := 1; i+1 < len(args); i++ {
		if is(args[i], "streams") {
			break
		}
		if is(args[i], "block") {
			ms, _ := parseInt(args[i+1])
			timeout = 0 // beyond any deadline: forever
			if ms <= int64(math.MaxInt64/time.Millisecond) {
				timeout = time.Duration(ms) * time.Millisecond
			}
			i++
		} else if is(args[i], "count") {
			i++
		} else if is(args[i], "group") {
			i += 2
		}
	}
	if cmd.Op == fsm.OpXRead {
		cmd.Op = fsm.OpXReadBlocked
		if c.grp != nil && c.grp.store != nil {
			cmd.Args = c.grp.store.XReadLastIDs(time.Now().UnixMilli(), c.db, cmd.Args)
		}
	}
	req := blockReq{cmd: cmd, keys: fsm.XReadKeys(cmd.Op, cmd.Args), timeout: timeout, broadcast: true}
	req.retry = func(cmd fsm.Command, key []byte) fsm.Command {
		cmd.Flags |= fsm.FlagStreamReady
		if !xreadCounted(cmd.Args) {
			cmd.Args = append([][]byte{[]byte("COUNT"), []byte("1000")}, cmd.Args...)
		}
		return cmd
	}
	return req, ""
}

// xreadCounted reports whether XREAD's arguments (after the name) give a
// COUNT other than 0.
func xreadCounted(args [][]byte) bool {
	counted := false
	for i := 0; i+1 < len(args); i++ {
		switch {
		case is(args[i], "streams"):
			return counted
		case is(args[i], "count"):
			n, _ := parseInt(args[i+1])
			counted = n > 0
			i++
		case is(args[i], "block"):
			i++
		case is(args[i], "group"):
			i += 2
		}
	}
	return counted
}
