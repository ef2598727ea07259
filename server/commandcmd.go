package server

import (
	"sort"
	"strings"

	"kvs/acl"
	"kvs/cmdspec"
	"kvs/fsm"
)

// runCommand answers COMMAND and its subcommands from the command table
// and Redis's data about the commands (package cmdspec), so that clients
// that discover commands (redis-cli's hints, go-redis's cluster client,
// which routes by the key positions and tips) see what kvs really
// supports, described as Redis describes it.
func runCommand(c *client, args [][]byte) {
	if len(args) == 1 {
		c.commandInfo(c.s.sortedCommands())
		return
	}
	sub := args[1]
	switch {
	case is(sub, "count"):
		c.out = appendInt(c.out, int64(len(c.s.commands)))
	case is(sub, "list"):
		c.commandList(args[2:])
	case is(sub, "info"):
		if len(args) == 2 {
			c.commandInfo(c.s.sortedCommands())
			return
		}
		cmds := make([]*command, len(args)-2)
		for i, a := range args[2:] {
			cmds[i] = c.s.commandByFullName(string(a))
		}
		c.commandInfo(cmds)
	case is(sub, "docs"):
		var cmds []*command
		if len(args) == 2 {
			cmds = c.s.sortedCommands()
		} else {
			for _, a := range args[2:] {
				if cmd := c.s.commands[strings.ToLower(string(a))]; cmd != nil {
					cmds = append(cmds, cmd)
				}
			}
		}
		c.commandDocs(cmds)
	case is(sub, "getkeys"):
		c.commandGetKeys(args[2:], false)
	case is(sub, "getkeysandflags"):
		c.commandGetKeys(args[2:], true)
	default:
		c.out = appendHelp(c.out, commandHelp)
	}
}

var commandHelp = []string{
	"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"(no subcommand)",
	"    Return details about all commands.",
	"COUNT",
	"    Return the total number of commands in this server.",
	"LIST",
	"    Return a list of all commands in this server.",
	"INFO [<command-name> ...]",
	"    Return details about multiple commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"GETKEYS <full-command>",
	"    Return the keys from a full command.",
	"GETKEYSANDFLAGS <full-command>",
	"    Return the keys and the access flags from a full command.",
	"HELP",
	"    Prints this help.",
}

func (s *Server) sortedCommands() []*command {
	list := make([]*command, 0, len(s.commands))
	for _, cmd := range s.commands {
		list = append(list, cmd)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	return list
}

// commandByFullName returns the command or subcommand COMMAND INFO names
// ("get", "config|get"), or nil.
func (s *Server) commandByFullName(name string) *command {
	base, sub, isSub := strings.Cut(strings.ToLower(name), "|")
	cmd := s.commands[base]
	if !isSub || cmd == nil {
		return cmd
	}
	return cmd.describedSubcommand([]byte(sub))
}

// commandList answers COMMAND LIST [FILTERBY MODULE|ACLCAT|PATTERN arg]:
// every command's name, each container's followed by its subcommands'.
func (c *client) commandList(opts [][]byte) {
	var match func(cmd *command) bool
	switch {
	case len(opts) == 0:
		match = func(*command) bool { return true }
	case len(opts) == 3 && is(opts[0], "filterby") && is(opts[1], "module"):
		match = func(*command) bool { return false } // kvs loads no modules
	case len(opts) == 3 && is(opts[0], "filterby") && is(opts[1], "aclcat"):
		cat, ok := acl.CategoryOf(string(opts[2]))
		match = func(cmd *command) bool {
			ac := c.s.acl.cmds.Lookup(cmd.name)
			return ok && ac != nil && ac.In(cat)
		}
	case len(opts) == 3 && is(opts[0], "filterby") && is(opts[1], "pattern"):
		pattern := string(asciiLower(opts[2]))
		match = func(cmd *command) bool { return fsm.MatchGlob(pattern, cmd.name) }
	default:
		c.out = appendError(c.out, errSyntax)
		return
	}
	var names []string
	for _, cmd := range c.s.sortedCommands() {
		if match(cmd) {
			names = append(names, cmd.name)
		}
		for _, sub := range cmd.subcommands {
			if !sub.unlisted && match(sub) {
				names = append(names, sub.name)
			}
		}
	}
	c.out = appendArrayLen(c.out, len(names))
	for _, name := range names {
		c.out = appendBulkString(c.out, name)
	}
}

// asciiLower is b in lower case as C's tolower makes it: ASCII letters
// only. Command names are lower case, so a pattern in lower case matches
// them as Redis's case-insensitive stringmatchlen does.
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, ch := range b {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		out[i] = ch
	}
	return out
}

// commandGetKeys answers COMMAND GETKEYS and GETKEYSANDFLAGS for the
// command line args (getKeysSubcommandImpl).
func (c *client) commandGetKeys(args [][]byte, withFlags bool) {
	cmd := c.s.commands[lowerName(args[0])]
	if cmd != nil && len(args) > 1 && len(cmd.subcommands) > 0 {
		cmd = cmd.describedSubcommand(args[1])
	}
	var keys cmdspec.KeyFinder
	if cmd != nil {
		keys = cmdspec.FinderOf(cmd.name)
	}
	switch {
	case cmd == nil:
		c.out = appendError(c.out, errGetKeysInvalidCommand)
		return
	case !keys.HasKeys():
		c.out = appendError(c.out, errGetKeysNoKeys)
		return
	case !cmd.arityOK(args):
		c.out = appendError(c.out, errGetKeysArity)
		return
	}
	found := keys.Find(args, nil)
	if len(found) == 0 {
		if cmd.flags&flagNoMandatoryKeys != 0 {
			c.out = appendArrayLen(c.out, 0)
		} else {
			c.out = appendError(c.out, errGetKeysInvalidArgs)
		}
		return
	}
	b := appendArrayLen(c.out, len(found))
	for _, k := range found {
		if !withFlags {
			b = appendBulk(b, args[k.Pos])
			continue
		}
		b = appendArrayLen(b, 2)
		b = appendBulk(b, args[k.Pos])
		b = appendKeySpecFlags(b, k.Flags, c.proto)
	}
	c.out = b
}

func appendKeySpecFlags(b []byte, flags, proto int) []byte {
	n := 0
	for i := range cmdspec.KeyFlagNames {
		if flags&(1<<i) != 0 {
			n++
		}
	}
	b = appendSetLen(b, n, proto)
	for i, name := range cmdspec.KeyFlagNames {
		if flags&(1<<i) != 0 {
			b = appendStatus(b, name)
		}
	}
	return b
}

// commandInfo writes Redis 7's ten-element command descriptions; a nil
// entry (an unknown name) is a null.
func (c *client) commandInfo(cmds []*command) {
	b := appendArrayLen(c.out, len(cmds))
	for _, cmd := range cmds {
		b = c.appendCommandInfo(b, cmd)
	}
	c.out = b
}

func (c *client) appendCommandInfo(b []byte, cmd *command) []byte {
	if cmd == nil {
		return appendNull(b, c.proto)
	}
	specs := cmdspec.KeySpecs[cmd.name]
	first, last, step := cmd.firstKey, cmd.lastKey, cmd.keyStep
	if strings.IndexByte(cmd.name, '|') > 0 {
		first, last, step, _ = cmdspec.LegacyRange(specs)
	}
	flags := cmd.flags
	if cmd.container && cmd.arity <= -2 {
		// A container that never runs without a subcommand has no flags
		// of its own in Redis: its subcommands carry them, and the checks
		// before execution read theirs. COMMAND alone runs bare, and has
		// some.
		flags = 0
	}
	b = appendArrayLen(b, 10)
	b = appendBulkString(b, cmd.name)
	b = appendInt(b, int64(cmd.arity))
	n := 0
	for _, f := range flagNames {
		if flags&f.f != 0 {
			n++
		}
	}
	b = appendSetLen(b, n, c.proto)
	for _, f := range flagNames {
		if flags&f.f != 0 {
			b = appendStatus(b, f.name)
		}
	}
	b = appendInt(b, int64(first))
	b = appendInt(b, int64(last))
	b = appendInt(b, int64(step))
	cats := c.s.aclCategories(cmd)
	b = appendSetLen(b, len(cats), c.proto)
	for _, cat := range cats {
		b = appendStatus(b, cat)
	}
	tips := strings.Fields(cmdspec.Tips[cmd.name])
	b = appendSetLen(b, len(tips), c.proto)
	for _, tip := range tips {
		b = appendBulkString(b, tip)
	}
	b = appendSetLen(b, len(specs), c.proto)
	for i := range specs {
		b = appendKeySpec(b, &specs[i], c.proto)
	}
	n = 0
	for _, sub := range cmd.subcommands {
		if !sub.unlisted {
			n++
		}
	}
	if n == 0 {
		return appendSetLen(b, 0, c.proto)
	}
	b = appendArrayLen(b, n)
	for _, sub := range cmd.subcommands {
		if !sub.unlisted {
			b = c.appendCommandInfo(b, sub)
		}
	}
	return b
}

// appendKeySpec writes one key specification as COMMAND INFO does
// (addReplyCommandKeySpecs).
func appendKeySpec(b []byte, ks *cmdspec.KeySpec, proto int) []byte {
	n := 3
	if ks.Notes != "" {
		n++
	}
	b = appendMapLen(b, n, proto)
	if ks.Notes != "" {
		b = appendBulkString(b, "notes")
		b = appendBulkString(b, ks.Notes)
	}
	b = appendBulkString(b, "flags")
	b = appendKeySpecFlags(b, ks.Flags, proto)
	b = appendBulkString(b, "begin_search")
	b = appendMapLen(b, 2, proto)
	b = appendBulkString(b, "type")
	switch {
	case ks.Unknown:
		b = appendBulkString(b, "unknown")
		b = appendBulkString(b, "spec")
		b = appendMapLen(b, 0, proto)
	case ks.Keyword != "":
		b = appendBulkString(b, "keyword")
		b = appendBulkString(b, "spec")
		b = appendMapLen(b, 2, proto)
		b = appendBulkString(b, "keyword")
		b = appendBulkString(b, ks.Keyword)
		b = appendBulkString(b, "startfrom")
		b = appendInt(b, int64(ks.StartFrom))
	default:
		b = appendBulkString(b, "index")
		b = appendBulkString(b, "spec")
		b = appendMapLen(b, 1, proto)
		b = appendBulkString(b, "index")
		b = appendInt(b, int64(ks.Index))
	}
	b = appendBulkString(b, "find_keys")
	b = appendMapLen(b, 2, proto)
	b = appendBulkString(b, "type")
	switch {
	case ks.UnknownKeys:
		b = appendBulkString(b, "unknown")
		b = appendBulkString(b, "spec")
		b = appendMapLen(b, 0, proto)
	case ks.KeyNum:
		b = appendBulkString(b, "keynum")
		b = appendBulkString(b, "spec")
		b = appendMapLen(b, 3, proto)
		b = appendBulkString(b, "keynumidx")
		b = appendInt(b, int64(ks.KeyNumIdx))
		b = appendBulkString(b, "firstkey")
		b = appendInt(b, int64(ks.FirstKey))
		b = appendBulkString(b, "keystep")
		b = appendInt(b, int64(ks.KeyStep))
	default:
		b = appendBulkString(b, "range")
		b = appendBulkString(b, "spec")
		b = appendMapLen(b, 3, proto)
		b = appendBulkString(b, "lastkey")
		b = appendInt(b, int64(ks.LastKey))
		b = appendBulkString(b, "keystep")
		b = appendInt(b, int64(ks.KeyStep))
		b = appendBulkString(b, "limit")
		b = appendInt(b, int64(ks.Limit))
	}
	return b
}

// commandDocs writes the three fields Redis documents as mandatory
// (summary, since, group) for each command.
func (c *client) commandDocs(cmds []*command) {
	b := appendMapLen(c.out, len(cmds), c.proto)
	for _, cmd := range cmds {
		b = appendBulkString(b, cmd.name)
		b = appendMapLen(b, 3, c.proto)
		doc := commandDocs[cmd.name]
		b = appendBulkString(b, "summary")
		b = appendBulkString(b, doc[0])
		b = appendBulkString(b, "since")
		b = appendBulkString(b, doc[1])
		b = appendBulkString(b, "group")
		b = appendBulkString(b, cmd.group)
	}
	c.out = b
}

// aclCategories returns Redis's ACL categories of a command, for COMMAND
// INFO: Redis's own (package cmdspec), in Redis's order.
func (s *Server) aclCategories(cmd *command) []string {
	var cats []string
	if ac := s.acl.cmds.Lookup(cmd.name); ac != nil {
		for _, name := range ac.Categories() {
			cats = append(cats, "@"+name)
		}
	}
	return cats
}
