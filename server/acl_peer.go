package server

import (
	"fmt"
	"strings"

	"kvs/acl"
	"kvs/cmdspec"
	"kvs/fsm"
)

// Between nodes. A node's pool connections to the leader (forwarding,
// KVS.SYNC) and its pub/sub links authenticate as a user of the cluster's
// own table, as a Redis replica authenticates to its master: KVS.PEER user
// password on the pool, AUTH user password on a link. The user is
// masteruser ("" for the default user) and the password masterauth, or,
// while masterauth is empty, the requirepass last set on this node (by
// --requirepass or CONFIG SET requirepass here): the table replicates
// passwords as SHA-256 hashes only, so a node knows no password it was not
// given. --masteruser, --masterauth ($KVS_MASTERAUTH) and CONFIG SET
// masteruser / masterauth set them; a change applies at once: idle pool
// connections and link connections that logged in otherwise are closed,
// and busy ones are closed when their request is answered, so no request
// is cut off or sent twice. That user needs the rights of the internal
// commands (kvs.forward, kvs.sync, kvs.publish, kvs.waitapplied: @admin; the default user
// has them). With no password set in the cluster, every node is let in,
// as every client is.
//
// A forwarded batch carries the name of the user who sent it. The node that
// received the command checked it with the full arguments; the leader
// checks each command again, from what an fsm.Command holds: its keys
// against the user's write (for writes) or read key patterns, and, for the
// ops that change users or the whole keyspace, the commands that make them
// (checkCommandAs). The leader trusts the name because the pool
// connection authenticated as a user allowed to forward.

// peerLogin is a user and password this node logs in to the others with.
type peerLogin struct{ user, password string }

// hello is the request that announces a pool connection logged in as l.
func (l peerLogin) hello() []byte {
	if l.password == "" {
		return encodeArgs("KVS.PEER")
	}
	return encodeArgs("KVS.PEER", l.user, l.password)
}

// auth is the request that logs a link in as l; nil without a password.
func (l peerLogin) auth() []byte {
	if l.password == "" {
		return nil
	}
	return encodeArgs("AUTH", l.user, l.password)
}

// SetPeerAuth sets masteruser and masterauth, the user and password this
// node authenticates with to the other nodes ("" user: the default user;
// "" password: this node's requirepass). It may be called at any time.
func (s *Server) SetPeerAuth(user, password string) {
	s.params.Set("masteruser", user)
	s.params.Set("masterauth", password)
	s.peerLoginChanged()
}

// PeerLogin returns the user and password this node logs in to the other
// nodes with now (password "" when it has none).
func (s *Server) PeerLogin() (user, password string) {
	l := s.peerLogin()
	return l.user, l.password
}

func (s *Server) peerLogin() peerLogin {
	l := peerLogin{user: s.params.Get("masteruser"), password: s.params.Get("masterauth")}
	if l.user == "" {
		l.user = "default"
	}
	if l.password == "" {
		if p := s.acl.requirePass.Load(); p != nil {
			l.password = *p
		}
	}
	return l
}

// peerLoginChanged replaces the connections to other nodes that logged in
// otherwise than this node now does.
func (s *Server) peerLoginChanged() {
	s.peers.expire()
	s.bcast.relogin()
}

func isPeerAuthParam(name string) bool { return name == "masteruser" || name == "masterauth" }

// checkPeerAuthParam is CONFIG SET masteruser and masterauth: any string,
// taken at once.
func (s *Server) checkPeerAuthParam(name string, val []byte) (func(), string) {
	v := string(val)
	return func() {
		s.params.Set(name, v)
		s.peerLoginChanged()
	}, ""
}

// peerLoginRefusal is the error of a login the leader at addr refused
// with text, saying what the operator must do.
func peerLoginRefusal(addr string, l peerLogin, text string) error {
	return &loginRefused{fmt.Sprintf("the leader at %s refused this node's login as user '%s' (%s): give this node that user's password in the cluster with CONFIG SET masterauth <password> (CONFIG SET masteruser <user> to log in as another user), or restart it with --masterauth",
		addr, l.user, text)}
}

// loginRefused is a refused peer login: the request was not sent, as with
// any ErrLeaderUnreachable, and the client is told why in full.
type loginRefused struct{ text string }

func (e *loginRefused) Error() string { return e.text }
func (e *loginRefused) Unwrap() error { return ErrLeaderUnreachable }

// runPeer answers KVS.PEER [user password], with which another node's pool
// connection announces itself (and authenticates): requests on it are
// never relayed again.
func runPeer(c *client, args [][]byte) {
	switch len(args) {
	case 1:
	case 3:
		if !c.authenticate(args[1], args[2], string(args[0])) {
			c.out = appendError(c.out, errWrongPass)
			return
		}
	default:
		c.out = appendError(c.out, errWrongArgs("kvs.peer"))
		return
	}
	if c.authRequired() {
		c.out = appendError(c.out, errNoAuth)
		return
	}
	c.peer = true
	c.out = appendStatus(c.out, "OK")
}

// forwardUser is the name a forwarded batch carries: "" for the default
// user, whose rights the leader then takes from the pool connection's.
func (c *client) forwardUser() string {
	if c.auth.name == "default" {
		return ""
	}
	return c.auth.name
}

// checkForwarded returns, for each forwarded command, "" or the NOPERM
// error the leader answers it with in user's name.
func (s *Server) checkForwarded(user string, cmds []fsm.Command) ([]string, bool) {
	st := s.aclState()
	u := st.Users[user]
	errs := make([]string, len(cmds))
	if u == nil {
		for i := range errs {
			errs[i] = errNoAuth
		}
		return errs, true
	}
	if u.Unrestricted() {
		return nil, false
	}
	any := false
	for i := range cmds {
		// A script runs its calls as the user who sent it, whatever
		// the forwarding node put in it.
		s.scriptUserOn(&cmds[i], user, st)
		if e := s.checkCommandAs(u, &cmds[i]); e != "" {
			errs[i], any = e, true
		}
	}
	return errs, any
}

// checkCommandAs checks one forwarded command as u. An op stands for
// several commands (OpIncrBy for INCR, DECR, INCRBY, DECRBY), so the
// command itself is checked only where the op says it: the user table
// (ACL SETUSER and friends) and the whole keyspace (FLUSHALL, FLUSHDB);
// keys always are.
func (s *Server) checkCommandAs(u *acl.User, fc *fsm.Command) string {
	var names []string
	switch fc.Op {
	case fsm.OpACLSet:
		names = []string{"acl|setuser", "acl|deluser", "acl|load", "config|set"}
	case fsm.OpFlushAll:
		names = []string{"flushall", "flushdb"}
	}
	cmds := make([]*acl.Command, len(names))
	for i, name := range names {
		cmds[i] = s.acl.cmds.Lookup(name)
	}
	keys, all := fc.Keys()
	flags := cmdspec.Update
	if !fc.Op.IsWrite() {
		flags = cmdspec.Access
		keys = fc.Args[:min(1, len(fc.Args))]
	}
	switch u.CheckEntry(cmds, keys, all, flags) {
	case acl.DeniedCmd:
		return errNoPermCmd(names[0])
	case acl.DeniedKey:
		return errNoPermKey
	}
	return ""
}

// mergeRefused puts the leader's refusals back among the replies of the
// commands it executed, in the batch's order.
func mergeRefused(refused []string, replies []fsm.Reply) []fsm.Reply {
	out := make([]fsm.Reply, len(refused))
	j := 0
	for i, e := range refused {
		if e != "" {
			out[i] = fsm.Reply{Kind: fsm.ReplyError, Str: e}
			continue
		}
		out[i] = replies[j]
		j++
	}
	return out
}

// encodeBulk is a RESP bulk string.
func encodeBulk(s string) []byte { return appendBulkString(nil, s) }

// peerLoginRefused reports whether KVS.PEER's error says the node's login
// failed.
func peerLoginRefused(text string) bool {
	return strings.HasPrefix(text, "WRONGPASS ") || strings.HasPrefix(text, "NOAUTH ")
}
