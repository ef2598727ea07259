package server

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"kvs/acl"
	"kvs/fsm"
	"kvs/resp"
)

// AUTH, HELLO's AUTH, and ACL: the commands that read and change the
// users. Changes are proposed (fsm.OpACLSet) with the changed users' whole
// rule lines, computed here from the users as this node knows them; they
// take effect on every node when applied.

// runAuth answers AUTH [user] password.
func runAuth(c *client, args [][]byte) {
	if len(args) > 3 {
		c.out = appendError(c.out, errSyntax)
		return
	}
	name, password := []byte("default"), args[1]
	if len(args) == 2 {
		if d := c.s.aclState().Users["default"]; d == nil || d.NoPass() {
			c.out = appendError(c.out, errAuthNoPassword)
			return
		}
	} else {
		name, password = args[1], args[2]
	}
	if c.authenticate(name, password, string(args[0])) {
		c.out = appendStatus(c.out, "OK")
	} else {
		c.out = appendError(c.out, errWrongPass)
	}
}

// authRequired reports whether c must authenticate before running
// anything but AUTH, HELLO and the other no-auth commands.
func (c *client) authRequired() bool {
	return !c.auth.authed && c.s.aclState().AuthRequired
}

// newClientAuth is a new connection's user: the default user,
// authenticated when it needs no password (as Redis's createClient).
func (s *Server) newClientAuth() clientAuth {
	return clientAuth{name: "default", authed: !s.aclState().AuthRequired}
}

func runACL(c *client, args [][]byte) {
	sub := args[1]
	n := len(args)
	switch {
	case is(sub, "setuser"):
		c.aclSetUser(args)
	case is(sub, "deluser"):
		c.aclDelUser(args)
	case is(sub, "getuser"):
		c.aclGetUser(string(args[2]))
	case is(sub, "list"):
		c.out = appendStrings(c.out, c.s.aclState().List(c.s.acl.cmds))
	case is(sub, "users"):
		c.out = appendStrings(c.out, c.s.aclState().Names)
	case is(sub, "whoami"):
		c.out = appendBulkString(c.out, c.auth.name)
	case c.s.acl.file == "" && (is(sub, "load") || is(sub, "save")):
		c.out = appendError(c.out, errNoACLFile)
	case is(sub, "load"):
		c.aclLoad()
	case is(sub, "save"):
		c.aclSave()
	case is(sub, "cat") && n == 2:
		c.out = appendStrings(c.out, acl.CategoryNames)
	case is(sub, "cat") && n == 3:
		cat, ok := acl.CategoryOf(string(args[2]))
		if !ok {
			c.out = appendError(c.out, errUnknownCategory(args[2]))
			return
		}
		c.out = appendStrings(c.out, c.s.acl.cmds.InCategory(cat))
	case is(sub, "genpass") && n <= 3:
		bits := int64(256)
		if n == 3 {
			v, ok := parseInt(args[2])
			if !ok {
				c.out = appendError(c.out, errNotInteger)
				return
			}
			bits = v
		}
		if bits <= 0 || bits > 4096 {
			c.out = appendError(c.out, errGenpassBits)
			return
		}
		buf := make([]byte, (bits+7)/8)
		if _, err := rand.Read(buf); err != nil {
			c.out = appendError(c.out, "ERR "+err.Error())
			return
		}
		c.out = appendBulkString(c.out, hex.EncodeToString(buf)[:(bits+3)/4])
	case is(sub, "log") && n <= 3:
		c.aclLogCommand(args)
	case is(sub, "dryrun"):
		c.aclDryRun(args)
	case is(sub, "help"):
		c.out = appendHelp(c.out, aclHelp)
	default:
		// CAT, GENPASS or LOG with more arguments than they take.
		c.out = appendError(c.out, errSubcommandSyntax(sub, "ACL"))
	}
}

// aclSetUser answers ACL SETUSER name rule...: the rules are applied to a
// copy of the user (a new user starts off, with no rights), and all or
// none take effect.
func (c *client) aclSetUser(args [][]byte) {
	name := string(args[2])
	if !acl.ValidUserName(name) {
		c.out = appendError(c.out, errUserSpaces)
		return
	}
	rules := make([]string, len(args)-3)
	for i, a := range args[3:] {
		rules[i] = string(a)
	}
	rules, open := acl.MergeSelectors(rules)
	if open >= 0 {
		c.out = appendError(c.out, errUnmatchedSelector(string(args[3+open])))
		return
	}
	u := c.s.aclState().Users[name]
	if u == nil {
		u = acl.NewUser(c.s.acl.cmds, name)
	}
	u, bad, err := u.WithRules(c.s.acl.cmds, rules)
	if err != nil {
		c.out = appendError(c.out, errSetUserRule(bad, err.Error()))
		return
	}
	c.answerACLProposal(c.proposeACL(fsm.ACLUpdate, name, c.s.userLine(u)))
}

func (c *client) answerACLProposal(err error) {
	if err != nil {
		c.out = appendError(c.out, errProposal(err, true))
		return
	}
	c.out = appendStatus(c.out, "OK")
}

func (c *client) aclDelUser(args [][]byte) {
	for _, a := range args[2:] {
		if string(a) == "default" {
			c.out = appendError(c.out, errDeleteDefault)
			return
		}
	}
	st := c.s.aclState()
	var pairs []string
	seen := map[string]bool{}
	for _, a := range args[2:] {
		if name := string(a); st.Users[name] != nil && !seen[name] {
			seen[name] = true
			pairs = append(pairs, name, "")
		}
	}
	if len(pairs) > 0 {
		if err := c.proposeACL(fsm.ACLUpdate, pairs...); err != nil {
			c.out = appendError(c.out, errProposal(err, true))
			return
		}
	}
	c.out = appendInt(c.out, int64(len(pairs)/2))
}

// aclGetUser answers ACL GETUSER in Redis 7.0's shape: flags, passwords,
// commands, keys, channels, selectors.
func (c *client) aclGetUser(name string) {
	u := c.s.aclState().Users[name]
	if u == nil {
		c.out = appendNull(c.out, c.proto)
		return
	}
	b := appendMapLen(c.out, 6, c.proto)
	b = appendBulkString(b, "flags")
	flags := u.Flags()
	b = appendSetLen(b, len(flags), c.proto)
	for _, f := range flags {
		b = appendBulkString(b, f)
	}
	b = appendBulkString(b, "passwords")
	b = appendStrings(b, u.Passwords())
	sels := u.Selectors()
	b = c.appendSelector(b, sels[0])
	b = appendBulkString(b, "selectors")
	b = appendArrayLen(b, len(sels)-1)
	for _, s := range sels[1:] {
		b = appendMapLen(b, 3, c.proto)
		b = c.appendSelector(b, s)
	}
	c.out = b
}

// appendSelector writes GETUSER's commands, keys and channels fields.
func (c *client) appendSelector(b []byte, s *acl.Selector) []byte {
	b = appendBulkString(b, "commands")
	b = appendBulkString(b, s.Commands(c.s.acl.cmds))
	b = appendBulkString(b, "keys")
	b = appendBulkString(b, s.Keys())
	b = appendBulkString(b, "channels")
	return appendBulkString(b, s.Channels())
}

func (c *client) aclLogCommand(args [][]byte) {
	count := int64(10)
	if len(args) == 3 {
		if is(args[2], "reset") {
			c.s.acl.log.Reset()
			c.out = appendStatus(c.out, "OK")
			return
		}
		v, ok := parseInt(args[2])
		if !ok {
			c.out = appendError(c.out, errNotInteger)
			return
		}
		count = max(v, 0)
	}
	entries := c.s.acl.log.Entries(int(min(count, acl.LogMax)))
	now := time.Now()
	b := appendArrayLen(c.out, len(entries))
	for _, e := range entries {
		b = appendMapLen(b, 10, c.proto)
		b = appendBulkString(b, "count")
		b = appendInt(b, e.Count)
		b = appendBulkString(b, "reason")
		b = appendBulkString(b, e.Reason)
		b = appendBulkString(b, "context")
		b = appendBulkString(b, e.Context)
		b = appendBulkString(b, "object")
		b = appendBulkString(b, e.Object)
		b = appendBulkString(b, "username")
		b = appendBulkString(b, e.Username)
		b = appendBulkString(b, "age-seconds")
		age := float64(now.Sub(e.Updated).Milliseconds()) / 1000
		b = resp.AppendDouble(b, age, c.proto) // %.17g, as Redis's addReplyDouble
		b = appendBulkString(b, "client-info")
		b = appendBulkString(b, e.ClientInfo)
		b = appendBulkString(b, "entry-id")
		b = appendInt(b, e.EntryID)
		b = appendBulkString(b, "timestamp-created")
		b = appendInt(b, e.Created.UnixMilli())
		b = appendBulkString(b, "timestamp-last-updated")
		b = appendInt(b, e.Updated.UnixMilli())
	}
	c.out = b
}

// aclDryRun answers ACL DRYRUN user command arg...
func (c *client) aclDryRun(args [][]byte) {
	u := c.s.aclState().Users[string(args[2])]
	if u == nil {
		c.out = appendError(c.out, errUserNotFound(args[2]))
		return
	}
	cargs := args[3:]
	cmd := c.s.commands[lowerName(cargs[0])]
	if cmd == nil {
		c.out = appendError(c.out, errCommandNotFound(cargs[0]))
		return
	}
	ac := c.s.acl.cmds.Resolve(cmd.name, cargs)
	if (cmd.arity > 0 && len(cargs) != cmd.arity) || len(cargs) < -cmd.arity {
		c.out = appendError(c.out, errWrongArgs(ac.Name))
		return
	}
	switch res, at := u.Check(ac, cargs); res {
	case acl.OK:
		c.out = appendStatus(c.out, "OK")
	case acl.DeniedCmd:
		c.out = appendBulkString(c.out, dryRunDenial(res, ac.Name))
	default:
		c.out = appendBulkString(c.out, dryRunDenial(res, string(cargs[at])))
	}
}

var aclHelp = []string{
	"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CAT [<category>]",
	"    List all commands that belong to <category>, or all command categories",
	"    when no category is specified.",
	"DELUSER <username> [<username> ...]",
	"    Delete a list of users.",
	"DRYRUN <username> <command> [<arg> ...]",
	"    Returns whether the user can execute the given command without executing the command.",
	"GETUSER <username>",
	"    Get the user's details.",
	"GENPASS [<bits>]",
	"    Generate a secure 256-bit user password. The optional `bits` argument can",
	"    be used to specify a different size.",
	"LIST",
	"    Show users details in config file format.",
	"LOAD",
	"    Reload users from the ACL file.",
	"LOG [<count> | RESET]",
	"    Show the ACL log entries.",
	"SAVE",
	"    Save the current config to the ACL file.",
	"SETUSER <username> <attribute> [<attribute> ...]",
	"    Create or modify a user with the specified attributes.",
	"USERS",
	"    List all the registered usernames.",
	"WHOAMI",
	"    Return the current connection username.",
	"HELP",
	"    Prints this help.",
}

// appendStrings writes list as an array of bulk strings.
func appendStrings(b []byte, list []string) []byte {
	b = appendArrayLen(b, len(list))
	for _, s := range list {
		b = appendBulkString(b, s)
	}
	return b
}
