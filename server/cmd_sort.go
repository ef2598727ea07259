package server

import (
	"bytes"

	"kvs/acl"
	"kvs/fsm"
)

func init() {
	registerCommands([]command{
		{name: "sort", arity: -2, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseSort},
		{name: "sort_ro", arity: -2, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseSort},
	}...)
	commandDocs["sort"] = [2]string{"Sort the elements in a list, set or sorted set", "1.0.0"}
	commandDocs["sort_ro"] = [2]string{"Sort the elements in a list, set or sorted set. Read-only variant of SORT.", "7.0.0"}
}

// parseSort parses SORT and SORT_RO key [BY pattern] [LIMIT offset count]
// [GET pattern ...] [ASC|DESC] [ALPHA] [STORE destination] as Redis's
// sortCommandGeneric does: options in any order, the last of each winning,
// STORE a syntax error in SORT_RO. SORT without STORE is a read; with STORE
// a write.
func parseSort(c *client, args [][]byte) (fsm.Command, string) {
	defer func() { c.sortAccess = 0 }()
	readonly := is(args[0], "sort_ro")
	cmd := fsm.Command{Int2: -1}
	var by, store []byte
	var gets [][]byte
	for j := 2; j < len(args); j++ {
		left := len(args) - j - 1
		switch {
		case is(args[j], "asc"):
			cmd.Flags &^= fsm.FlagSortDesc
		case is(args[j], "desc"):
			cmd.Flags |= fsm.FlagSortDesc
		case is(args[j], "alpha"):
			cmd.Flags |= fsm.FlagSortAlpha
		case is(args[j], "limit") && left >= 2:
			off, ok1 := parseInt(args[j+1])
			n, ok2 := parseInt(args[j+2])
			if !ok1 || !ok2 {
				return fsm.Command{}, errNotInteger
			}
			cmd.Int, cmd.Int2 = off, n
			j += 2
		case !readonly && is(args[j], "store") && left >= 1:
			store = args[j+1]
			j++
		case is(args[j], "by") && left >= 1:
			by = args[j+1]
			cmd.Flags |= fsm.FlagSortBy
			if bytes.IndexByte(by, '*') < 0 {
				// Redis stops sorting at a constant BY, and a later
				// BY does not undo it.
				cmd.Flags |= fsm.FlagSortNoSort
			} else if c.s.router.sharded() {
				// The pattern's keys may be in other slots, and so in
				// other groups: refused, as Redis Cluster refuses it.
				return fsm.Command{}, "ERR BY option of SORT denied in Cluster mode."
			} else if !c.sortPatternsAllowed(args) {
				return fsm.Command{}, "ERR BY option of SORT denied due to insufficient ACL permissions."
			}
			j++
		case is(args[j], "get") && left >= 1:
			if c.s.router.sharded() {
				return fsm.Command{}, "ERR GET option of SORT denied in Cluster mode."
			}
			if !c.sortPatternsAllowed(args) {
				return fsm.Command{}, "ERR GET option of SORT denied due to insufficient ACL permissions."
			}
			gets = append(gets, args[j+1])
			j++
		default:
			return fsm.Command{}, errSyntax
		}
	}
	if by == nil {
		by = []byte{}
	}
	if c.script != nil {
		cmd.Flags |= fsm.FlagSortScript
	}
	if store != nil {
		cmd.Op = fsm.OpSortStore
		cmd.Args = append([][]byte{args[1], store, by}, gets...)
	} else {
		cmd.Op = fsm.OpSort
		cmd.Args = append([][]byte{args[1], by}, gets...)
	}
	return cmd, ""
}

// sortPatternsAllowed reports whether c's user may use SORT's BY and GET
// patterns, which read keys outside SORT's key specification: only with
// read access to every key (Redis's user_has_full_key_access). Inside a
// script the user is the script's caller. The answer is kept for the rest
// of the command (c.sortAccess).
func (c *client) sortPatternsAllowed(args [][]byte) bool {
	if c.sortAccess == 0 {
		c.sortAccess = 2
		if !c.sortFullKeys(args) {
			c.sortAccess = 1
		}
	}
	return c.sortAccess == 2
}

func (c *client) sortFullKeys(args [][]byte) bool {
	u := c.auth.user
	if p := c.script; p != nil {
		if p.User == "" {
			return true
		}
		sc, _ := p.Scratch.(*scriptScratch)
		if sc == nil {
			return true
		}
		u = c.s.scriptUser(p, sc)
		if u == nil {
			return false
		}
	} else if c.auth.fast || u == nil {
		return true
	}
	ac := c.s.acl.cmds.Resolve(lowerName(args[0]), args)
	return ac == nil || u.FullKeyAccess(ac, args, acl.Read)
}
