package server

import (
	"sort"
	"strings"
)

// commandSubcommands are the COMMAND subcommands kvs serves, with Redis's
// arities and flags.
var commandSubcommands = subcommands("command",
	command{name: "count", arity: 2, flags: subHelp},
	command{name: "docs", arity: -2, flags: subHelp},
	command{name: "help", arity: 2, flags: subHelp},
	command{name: "info", arity: -2, flags: subHelp},
	command{name: "list", arity: -2, flags: subHelp},
)

// runCommand answers COMMAND, COMMAND COUNT, COMMAND INFO [name...],
// COMMAND DOCS [name...] and COMMAND LIST from the command table, so that
// clients that discover commands (redis-cli's hints, go-redis's cluster
// client) see what kvs really supports.
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
		if len(args) > 2 {
			// Redis's FILTERBY, which kvs does not have, or a bad option.
			c.out = appendError(c.out, errSyntax)
			return
		}
		cmds := c.s.sortedCommands()
		c.out = appendArrayLen(c.out, len(cmds))
		for _, cmd := range cmds {
			c.out = appendBulkString(c.out, cmd.name)
		}
	case is(sub, "info"):
		if len(args) == 2 {
			c.commandInfo(c.s.sortedCommands())
			return
		}
		cmds := make([]*command, len(args)-2)
		for i, a := range args[2:] {
			cmds[i] = c.s.commands[strings.ToLower(string(a))]
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
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple commands.",
	"HELP",
	"    Print this help.",
}

func (s *Server) sortedCommands() []*command {
	list := make([]*command, 0, len(s.commands))
	for _, cmd := range s.commands {
		list = append(list, cmd)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	return list
}

// commandInfo writes Redis 7's ten-element command descriptions; a nil
// entry (an unknown name) is a null.
func (c *client) commandInfo(cmds []*command) {
	b := appendArrayLen(c.out, len(cmds))
	for _, cmd := range cmds {
		if cmd == nil {
			b = appendNull(b, c.proto)
			continue
		}
		b = appendArrayLen(b, 10)
		b = appendBulkString(b, cmd.name)
		b = appendInt(b, int64(cmd.arity))
		n := 0
		for _, f := range flagNames {
			if cmd.flags&f.f != 0 {
				n++
			}
		}
		b = appendSetLen(b, n, c.proto)
		for _, f := range flagNames {
			if cmd.flags&f.f != 0 {
				b = appendStatus(b, f.name)
			}
		}
		b = appendInt(b, int64(cmd.firstKey))
		b = appendInt(b, int64(cmd.lastKey))
		b = appendInt(b, int64(cmd.keyStep))
		cats := c.s.aclCategories(cmd)
		b = appendSetLen(b, len(cats), c.proto)
		for _, cat := range cats {
			b = appendStatus(b, cat)
		}
		b = appendSetLen(b, 0, c.proto) // tips
		b = appendSetLen(b, 0, c.proto) // key specs
		b = appendSetLen(b, 0, c.proto) // subcommands
	}
	c.out = b
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
// INFO: Redis's own (acl_table.go), in Redis's order.
func (s *Server) aclCategories(cmd *command) []string {
	var cats []string
	if ac := s.acl.cmds.byName[cmd.name]; ac != nil {
		for i, name := range aclCategoryNames {
			if ac.cats&(1<<i) != 0 {
				cats = append(cats, "@"+name)
			}
		}
	}
	return cats
}
