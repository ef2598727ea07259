package server

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"kvs/acl"
	"kvs/cmdspec"
	"kvs/fsm"
)

// The server's view of the replicated ACL table. The fsm holds each user
// as a rule line (fsm/acl.go); an acl.Table is the table compiled, rebuilt
// when the store's ACL generation moves (an OpACLSet applied on this node,
// in any mode, or a snapshot restored). Connections compare the generation
// before each command (one atomic load) and look their user up again when
// it moved: a changed user's new rules apply to its connections at once,
// and the connections of a deleted user are closed, as in Redis.

// kvsOwnCategories are the categories of the commands Redis does not have.
var kvsOwnCategories = map[string]string{
	"kvs.join":    "admin slow dangerous",
	"kvs.remove":  "admin slow dangerous",
	"kvs.status":  "admin slow",
	"kvs.slots":   "admin slow dangerous",
	"kvs.groups":  "admin slow dangerous",
	"kvs.peer":    "admin fast dangerous",
	"kvs.forward": "admin slow dangerous",
	"kvs.sync":    "admin fast dangerous",
	// WAIT's question to the other members (wait.go), and Redis 7.2's
	// WAITAOF with its categories.
	"kvs.waitapplied": "admin slow dangerous",
	"waitaof":         "slow connection",
	"kvs.publish":     "pubsub admin fast dangerous",
	// Valkey's subcommands of CLUSTER that kvs answers (clustermoves.go),
	// with Valkey's categories.
	"cluster|migrateslots":         "admin slow dangerous",
	"cluster|getslotmigrations":    "admin slow dangerous",
	"cluster|cancelslotmigrations": "admin slow dangerous",
}

// newACLCommands describes the command table to the ACL: every command,
// and every subcommand Redis has of those commands (the ones of a later
// Redis that kvs answers, laterSubcommands, are checked as their
// container), with Redis's categories and key specs (package cmdspec).
func newACLCommands(table map[string]*command) *acl.Commands {
	specs := make([]acl.Spec, 0, len(table)+len(cmdspec.Categories))
	add := func(name string) {
		cats, ok := cmdspec.Categories[name]
		if !ok {
			cats = kvsOwnCategories[name]
		}
		var noAuth bool
		switch name {
		case "auth", "hello", "quit", "reset", "kvs.peer":
			noAuth = true
		}
		specs = append(specs, acl.Spec{Name: name, Categories: cats, Keys: cmdspec.FinderOf(name),
			Channels: cmdspec.ChannelsOf(name), NoAuth: noAuth})
	}
	for name := range table {
		add(name)
	}
	for name := range cmdspec.Categories {
		if i := strings.IndexByte(name, '|'); i > 0 && table[name[:i]] != nil {
			add(name)
		}
	}
	for name := range kvsOwnCategories {
		if i := strings.IndexByte(name, '|'); i > 0 && table[name[:i]] != nil {
			add(name)
		}
	}
	return acl.NewCommands(specs)
}

// aclServer is the server's ACL state.
type aclServer struct {
	cmds *acl.Commands

	mu    sync.Mutex // serialises rebuilds of state
	state atomic.Pointer[acl.Table]

	log acl.Log

	// file is --aclfile ("" for none), for ACL LOAD and SAVE.
	file string
	// requirePass is the password this node last set as requirepass
	// (flag or CONFIG SET), for CONFIG GET; the table keeps only hashes.
	requirePass atomic.Pointer[string]
}

// aclState returns the compiled ACL table as of the store's generation.
func (s *Server) aclState() *acl.Table {
	gen := s.cfg.Store.ACLGen()
	if st := s.acl.state.Load(); st != nil && st.Gen == gen {
		return st
	}
	s.acl.mu.Lock()
	defer s.acl.mu.Unlock()
	if st := s.acl.state.Load(); st != nil && st.Gen == gen {
		return st
	}
	lines, gen := s.cfg.Store.ACLUsers()
	st := acl.Compile(s.acl.cmds, gen, lines, func(name string, err error) {
		s.cfg.Logger.Error("server: ACL user not loaded", "user", name, "err", err)
	})
	old := s.acl.state.Load()
	s.acl.state.Store(st)
	if old != nil {
		s.killRevokedSubscribers(old, st)
	}
	return st
}

// killRevokedSubscribers closes the subscribed connections whose user
// was deleted or may no longer use one of their channels or patterns, as
// Redis does on ACL SETUSER and DELUSER (ACLKillPubsubClientsIfNeeded): a
// subscriber in RESP2 sends no command that would meet the new rules.
func (s *Server) killRevokedSubscribers(old, st *acl.Table) {
	changed := map[string]*acl.User{}
	for name, u := range old.Users {
		if nu := st.Users[name]; nu == nil || nu.Describe(s.acl.cmds) != u.Describe(s.acl.cmds) {
			changed[name] = nu // nil: deleted
		}
	}
	if len(changed) == 0 {
		return
	}
	var kill []*client
	r := &s.pubsub
	r.mu.RLock()
	for k := subChannel; k <= subShard; k++ {
		for name, subs := range *r.table(k) {
			for c := range subs {
				p := c.userName.Load()
				if p == nil {
					continue
				}
				u, ok := changed[*p]
				if ok && (u == nil || !u.ChannelAllowed(name, k == subPattern)) {
					kill = append(kill, c)
				}
			}
		}
	}
	r.mu.RUnlock()
	for _, c := range kill {
		c.s.killSubscriber(c)
	}
}

// killSubscriber closes a subscribed connection from another goroutine,
// the way a publisher closes one over its output limit: marked killed,
// then closed by its owner (its event loop, or its goroutine's read
// failing).
func (s *Server) killSubscriber(c *client) {
	ps := c.ps
	ps.mu.Lock()
	if ps.killed {
		ps.mu.Unlock()
		return
	}
	ps.killed = true
	ps.buf, ps.spare = nil, nil
	ps.mu.Unlock()
	if c.fd >= 0 {
		c.lp.pushReady(c)
	} else {
		c.nc.Close()
	}
}

// proposeACL makes a change to the ACL table through the write path (the
// log in durable and cluster mode) and waits for it to apply here.
func (c *client) proposeACL(mode int64, pairs ...string) error {
	return c.s.proposeACL(mode, pairs...)
}

// proposeACL is client.proposeACL for changes that come from no client's
// own command line (CONFIG SET requirepass through setConfig).
func (s *Server) proposeACL(mode int64, pairs ...string) error {
	cmd := fsm.Command{Op: fsm.OpACLSet, Int: mode, Args: make([][]byte, len(pairs))}
	for i, p := range pairs {
		cmd.Args[i] = []byte(p)
	}
	replies, err := s.Propose([]fsm.Command{cmd})
	if err == nil && len(replies) == 1 && replies[0].Kind == fsm.ReplyError {
		err = errors.New(replies[0].Str)
	}
	if err == nil {
		// Compiled now, not at the next command, so that subscribers
		// who lost their rights are closed at once. A follower relays
		// the leader's reply once its own store has applied the entry
		// (forward.go).
		s.aclState()
	}
	return err
}

// clientAuth is a connection's user.
type clientAuth struct {
	name   string    // the user's name ("default" until AUTH)
	user   *acl.User // as of gen; nil before the first check
	gen    uint64
	authed bool // AUTH or HELLO AUTH succeeded
	// fast: the user may run anything and needs no AUTH, so the check
	// before each command is skipped while gen stays the store's.
	fast bool
	// mustAuth: AUTH is required and has not succeeded, as of gen.
	mustAuth bool
	// The last command checked and its ACL identity: a pipeline usually
	// repeats one command.
	lastCmd *command
	lastACL *acl.Command
}

// refreshUser brings c's user up to date with the ACL table (on the first
// command, and after any change to the table), and reports false when the
// user was deleted: Redis closes the connections of a deleted user,
// answering nothing more.
func (c *client) refreshUser() bool {
	if c.auth.user != nil && c.auth.gen == c.s.cfg.Store.ACLGen() {
		return true
	}
	st := c.s.aclState()
	u := st.Users[c.auth.name]
	if u == nil {
		c.quit = true
		return false
	}
	c.auth.user, c.auth.gen = u, st.Gen
	c.auth.mustAuth = st.AuthRequired && !c.auth.authed
	c.auth.fast = u.Unrestricted() && !c.auth.mustAuth
	c.setUserName(u.Name())
	return true
}

// aclCommand is the ACL identity of cmd run with args: the subcommand's
// for a container. Nil for a command without one (none today).
func (c *client) aclCommand(cmd *command, args [][]byte) *acl.Command {
	var ac *acl.Command
	if cmd == c.auth.lastCmd {
		ac = c.auth.lastACL
	} else {
		ac = c.s.acl.cmds.Lookup(cmd.name)
		if ac == nil {
			return nil
		}
		c.auth.lastCmd, c.auth.lastACL = cmd, ac
	}
	if len(ac.Subs) > 0 {
		ac = c.s.acl.cmds.Resolve(cmd.name, args)
	}
	return ac
}

// needsAuth reports whether c must authenticate before it may run ac
// (Redis's NOAUTH): AUTH is required and ac is not one of the commands
// that run before it.
func (c *client) needsAuth(ac *acl.Command) bool {
	return c.auth.mustAuth && !ac.NoAuth()
}

// aclDenial is the error for c's user running ac with args when its rules
// refuse it, the refusal then logged in ACL LOG, or "".
func (c *client) aclDenial(ac *acl.Command, args [][]byte) string {
	res, at := c.auth.user.Check(ac, args)
	if res == acl.OK {
		return ""
	}
	c.logDenial(res, ac, args, at)
	switch res {
	case acl.DeniedCmd:
		return errNoPermCmd(ac.Name)
	case acl.DeniedKey:
		return errNoPermKey
	}
	return errNoPermChannel
}

// execRefusal checks a queued command again at EXEC, as Redis does for
// rules changed since it was queued, and returns the error its slot of
// EXEC's reply gets instead of its own, or "".
func (c *client) execRefusal(cmd *command, args [][]byte) string {
	if c.auth.fast && c.auth.gen == c.s.cfg.Store.ACLGen() {
		return ""
	}
	u := c.s.aclState().Users[c.auth.name]
	ac := c.s.acl.cmds.Resolve(cmd.name, args)
	if u == nil || ac == nil {
		return "" // a deleted user's connection closes at its next command
	}
	res, at := u.Check(ac, args)
	var reason string
	switch res {
	case acl.OK:
		return ""
	case acl.DeniedCmd:
		reason = "no permission to execute the command or subcommand"
	case acl.DeniedKey:
		reason = "no permission to touch the specified keys"
	default:
		reason = "no permission to access one of the channels used as arguments"
	}
	c.logDenial(res, ac, args, at)
	return errExecACLChanged + reason
}

func (c *client) setUserName(name string) {
	if p := c.userName.Load(); p == nil || *p != name {
		c.userName.Store(&name)
	}
}

// resetAuth makes c the default user again, logged in only if that needs
// no password (RESET's clientSetDefaultAuth).
func (c *client) resetAuth() {
	c.auth = c.s.newClientAuth()
	c.setUserName(c.auth.name)
}

// authenticate checks a user name and password (ACLAuthenticateUser); on
// success c runs as that user from the next command on.
func (c *client) authenticate(name, password []byte, object string) bool {
	st := c.s.aclState()
	u := st.Users[string(name)]
	if u == nil || !u.On() || !u.CheckPassword(password) {
		c.logAuthFailure(string(name), object)
		return false
	}
	c.auth = clientAuth{name: u.Name(), user: u, gen: st.Gen, authed: true,
		fast: u.Unrestricted()}
	c.setUserName(u.Name())
	return true
}

// userLine is the rule line stored for u (ACL LIST without "user name ").
func (s *Server) userLine(u *acl.User) string { return u.Describe(s.acl.cmds) }
