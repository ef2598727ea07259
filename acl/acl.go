// Package acl is kvs's ACL rule engine: users as Redis 7 has them
// (src/acl.c), the rules ACL SETUSER gives them, their ACL LIST and ACL
// GETUSER descriptions, the check of whether a user may run a command with
// its arguments, the ACL LOG, and the ACL file's format. It knows nothing
// of connections or of how users are replicated: package server hands it
// the rule lines of the store's replicated table and the commands of its
// command table, and sends its refusals to clients.
//
// Each user has flags (on or off, nopass), SHA-256 password hashes, and
// selectors of rules (its root one and any "(...)" ones; a command passes
// when one selector allows it): a bitmap of the commands (and
// subcommands) it may run, first arguments allowed for otherwise denied
// commands (+select|0), key patterns with read/write permissions, and
// channel patterns. The rules are applied in order, as ACL SETUSER gives
// them, to a copy of the user; a user is immutable once published, so
// connections hold a pointer to it without a lock.
//
// The users live in the fsm's replicated ACL table as rule lines (ACL
// LIST's form, which parses back to the same user, so every node compiles
// what the proposer described); Compile turns the table into a Table.
//
// Command ids index the bitmaps. NewCommands gives them to every command
// and subcommand it is given, top-level commands first, each in name
// order, once per process: the same on every node, though nothing outside
// the process depends on them. That order is also the order of ACL CAT's
// commands and of the single commands in a description.
//
// Rule errors and the ACL file's errors are Redis's texts, without the
// "ERR ..." prefix of the command that met them.
package acl

import (
	"sort"
	"strings"

	"kvs/cmdspec"
)

// CategoryNames are Redis's categories in Redis's order (ACL CAT, the
// order COMMAND INFO lists a command's categories in).
var CategoryNames = []string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
	"blocking", "dangerous", "connection", "transaction", "scripting",
}

// Category is a set of categories: CategoryNames[i]'s bit is 1 << i.
type Category uint32

// CategoryOf returns the category named name, in any case.
func CategoryOf(name string) (Category, bool) {
	for i, n := range CategoryNames {
		if strings.EqualFold(n, name) {
			return 1 << i, true
		}
	}
	return 0, false
}

// Spec is what the ACL must be told of a command or subcommand.
type Spec struct {
	// Name is the lowercase name; a subcommand's is "container|sub",
	// and its container must be given too.
	Name string
	// Categories are the command's category names, space-separated.
	Categories string
	// Keys finds the keys among the command's arguments.
	Keys cmdspec.KeyFinder
	// Channels says which arguments are pub/sub channels.
	Channels cmdspec.ChannelKind
	// NoAuth: the command runs before AUTH (AUTH, HELLO, QUIT, RESET),
	// and so do a container's subcommands.
	NoAuth bool
}

// Command is one command or subcommand as the ACL sees it.
type Command struct {
	Name   string     // "get", "config|get"
	Parent *Command   // nil for a top-level command
	Subs   []*Command // a container's subcommands, by name

	id       int
	cats     Category
	noAuth   bool
	keys     cmdspec.KeyFinder
	channels cmdspec.ChannelKind
	// oneKey, when not 0, is the argument index of the command's only
	// key, with oneKeyFlags its spec's flags: GET, SET, INCR, HGET and
	// most others, checked without walking the specs.
	oneKey      int
	oneKeyFlags int
}

// NoAuth reports whether the command runs before AUTH: it or its
// container does.
func (cmd *Command) NoAuth() bool {
	return cmd.noAuth || cmd.Parent != nil && cmd.Parent.noAuth
}

// In reports whether the command is in one of cats.
func (cmd *Command) In(cats Category) bool { return cmd.cats&cats != 0 }

// Categories returns the names of the command's categories, in Redis's
// order.
func (cmd *Command) Categories() []string {
	var names []string
	for i, name := range CategoryNames {
		if cmd.cats&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return names
}

// Commands is the process's command id table. Immutable.
type Commands struct {
	byName map[string]*Command // top-level and "cmd|sub"
	top    []*Command          // top-level commands, by name
	all    []*Command          // by id
	words  int                 // bitmap words: ids plus the "future commands" bit
}

// NewCommands numbers the commands specs describes. It panics at a
// subcommand whose container is not among them, or at an unknown
// category: the table is the program's own.
func NewCommands(specs []Spec) *Commands {
	ac := &Commands{byName: make(map[string]*Command)}
	top := make([]*Spec, 0, len(specs))
	subs := make([]*Spec, 0, 64)
	for i := range specs {
		if strings.IndexByte(specs[i].Name, '|') > 0 {
			subs = append(subs, &specs[i])
		} else {
			top = append(top, &specs[i])
		}
	}
	byName := func(list []*Spec) {
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	}
	byName(top)
	byName(subs)
	add := func(sp *Spec, parent *Command) *Command {
		cmd := &Command{id: len(ac.all), Name: sp.Name, Parent: parent, keys: sp.Keys,
			channels: sp.Channels, noAuth: sp.NoAuth}
		for _, cat := range strings.Fields(sp.Categories) {
			bit, ok := CategoryOf(cat)
			if !ok {
				panic("acl: unknown category " + cat + " of " + sp.Name)
			}
			cmd.cats |= bit
		}
		if specs := cmd.keys.Specs; len(specs) == 1 {
			ks := &specs[0]
			if ks.Keyword == "" && !ks.Unknown && !ks.UnknownKeys && !ks.KeyNum && ks.LastKey == 0 &&
				ks.Flags&(cmdspec.VariableFlags|cmdspec.NotKey|cmdspec.Incomplete) == 0 && ks.Index > 0 {
				cmd.oneKey, cmd.oneKeyFlags = ks.Index, ks.Flags
			}
		}
		ac.all = append(ac.all, cmd)
		ac.byName[sp.Name] = cmd
		return cmd
	}
	for _, sp := range top {
		ac.top = append(ac.top, add(sp, nil))
	}
	for _, sp := range subs {
		parent := ac.byName[sp.Name[:strings.IndexByte(sp.Name, '|')]]
		if parent == nil {
			panic("acl: subcommand without its container: " + sp.Name)
		}
		parent.Subs = append(parent.Subs, add(sp, parent))
	}
	ac.words = (len(ac.all) + 1 + 63) / 64
	return ac
}

// future is the bit +@all sets and only -@all clears: the user may run
// commands added later (Redis's reserved bit), which ACL LIST tells by
// starting with +@all rather than -@all.
func (ac *Commands) future() int { return len(ac.all) }

// Lookup returns the command or subcommand ("config|get") named name, or
// nil.
func (ac *Commands) Lookup(name string) *Command { return ac.byName[name] }

// Resolve returns the command or subcommand that args run (name is
// args[0] lowercased): a container's subcommand when there is one of
// that name.
func (ac *Commands) Resolve(name string, args [][]byte) *Command {
	cmd := ac.byName[name]
	if cmd != nil && len(cmd.Subs) > 0 && len(args) >= 2 {
		if sub := ac.byName[name+"|"+strings.ToLower(string(args[1]))]; sub != nil {
			return sub
		}
	}
	return cmd
}

// InCategory returns the names of the commands and subcommands in cat, in
// id order (ACL CAT <category>).
func (ac *Commands) InCategory(cat Category) []string {
	var names []string
	for _, cmd := range ac.all {
		if cmd.cats&cat != 0 {
			names = append(names, cmd.Name)
		}
	}
	return names
}
