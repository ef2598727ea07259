package server

import (
	"time"

	"kvs/acl"
	"kvs/fsm"
)

// The ACL inside scripts. A script or function called by a user with
// restricted rights carries that user's name in its command
// (fsm.FlagScriptUser), so each command it calls is checked as Redis's
// scriptVerifyACL checks it: against the user's rules, after the arity
// and no-script checks and before the read-only one, with Redis's "The
// user executing the script ..." error, and an ACL LOG entry in context
// "lua". The rules are the store's ACL table as the script runs (its
// place in the log), given in fsm.ParseContext, so every replica and
// every replay refuses the same calls; this node's compiled table
// (Server.aclState) is not used, since it may be ahead of or behind the entry.
// A sharded cluster's data groups have no ACL table (it is the meta
// group's): there the entry carries the user's rule line as the
// proposing node's table had it (fsm.FlagScriptRules, scriptUserOn), and
// the calls are checked against that.
//
// Each node that runs the script logs its denials, so in a cluster every
// node's ACL LOG has them, and the entry's client is the script's own
// (kvs runs a script apart from the caller's connection).

// scriptUser returns the user p's script runs as, compiled from p's table;
// nil for a user the table does not have.
func (s *Server) scriptUser(p *fsm.ParseContext, sc *scriptScratch) *acl.User {
	line, ok := p.ACL[p.User]
	if !ok && p.User == "default" {
		line, ok = acl.DefaultUserLine, true
	}
	if sc.aclSet && sc.aclName == p.User && sc.aclFound == ok && sc.aclLine == line {
		return sc.aclUser
	}
	var u *acl.User
	if ok {
		u, _ = acl.ParseUser(s.acl.cmds, p.User, line)
	}
	sc.aclName, sc.aclLine, sc.aclFound, sc.aclUser, sc.aclSet = p.User, line, ok, u, true
	return u
}

// scriptACLResult checks the call args (of cmd) as p's user.
func (s *Server) scriptACLResult(p *fsm.ParseContext, sc *scriptScratch, ac *acl.Command, args [][]byte) (res acl.Result, at int) {
	u := s.scriptUser(p, sc)
	switch {
	case u == nil:
		return acl.DeniedCmd, 0
	case u.Unrestricted():
		return acl.OK, 0
	}
	return u.Check(ac, args)
}

// scriptACLRefusal returns the error a script's call of cmd gets when its
// user may not run it, or "".
func (s *Server) scriptACLRefusal(p *fsm.ParseContext, sc *scriptScratch, cmd *command, args [][]byte) string {
	ac := s.acl.cmds.Resolve(cmd.name, args)
	if ac == nil {
		return ""
	}
	res, at := s.scriptACLResult(p, sc, ac, args)
	if res == acl.OK {
		return ""
	}
	now := time.UnixMilli(p.Now)
	s.acl.log.AddDenial("lua", p.User, scriptClientInfo(p.User, ac.Name), now, res, ac, args, at)
	var why string
	switch res {
	case acl.DeniedCmd:
		why = "can't run this command or subcommand"
	case acl.DeniedKey:
		why = "can't access at least one of the keys mentioned in the command arguments"
	case acl.DeniedChannel:
		why = "can't publish to the channel mentioned in the command"
	default:
		why = "lacking the permissions for the command"
	}
	return "ERR The user executing the script " + why
}

// scriptACLCheck answers redis.acl_check_cmd: whether p's user may run
// args, as a ReplyBool, or Redis's error for a command (or subcommand)
// that does not exist.
func (s *Server) scriptACLCheck(p *fsm.ParseContext, sc *scriptScratch, cmd *command, args [][]byte) (fsm.Command, fsm.Reply, bool) {
	var ac *acl.Command
	if cmd != nil {
		ac = s.acl.cmds.Resolve(cmd.name, args)
		if ac != nil && len(ac.Subs) > 0 && len(args) >= 2 {
			ac = nil // a container given an unknown subcommand
		}
	}
	if ac == nil {
		return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyError, Str: "ERR Invalid command passed to redis.acl_check_cmd()"}, true
	}
	ok := int64(1)
	if p.User != "" {
		if res, _ := s.scriptACLResult(p, sc, ac, args); res != acl.OK {
			ok = 0
		}
	}
	return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyBool, Int: ok}, true
}

// scriptClientInfo is the client-info of a script's ACL LOG entry: the
// script's own client, running cmd as user.
func scriptClientInfo(user, cmd string) string {
	return "id=0 addr= laddr= fd=-1 name= age=0 idle=0 flags=S db=0 sub=0 psub=0 ssub=0 multi=-1" +
		" qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r" +
		" cmd=" + cmd + " user=" + user + " redir=-1 resp=2"
}
