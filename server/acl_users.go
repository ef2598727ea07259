package server

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"kvs/fsm"
)

// The server's view of the replicated ACL table. The fsm holds each user
// as a rule line (fsm/acl.go); aclState is the table compiled, rebuilt
// when the store's ACL generation moves (an OpACLSet applied on this node,
// in any mode, or a snapshot restored). Connections compare the generation
// before each command (one atomic load) and look their user up again when
// it moved: a changed user's new rules apply to its connections at once,
// and the connections of a deleted user are closed, as in Redis.

// defaultUserLine is the default user's rules when the table has none:
// Redis's default user, open to all.
const defaultUserLine = "on nopass ~* &* +@all"

// aclState is the compiled table. Immutable.
type aclState struct {
	gen   uint64
	users map[string]*aclUser
	names []string // sorted
	// authRequired: the default user has a password or is off, so a new
	// connection must AUTH (authRequired in Redis's networking.c).
	authRequired bool
}

// aclServer is the server's ACL state.
type aclServer struct {
	cmds *aclCommands

	mu    sync.Mutex // serialises rebuilds of state
	state atomic.Pointer[aclState]

	log aclLog

	// file is --aclfile ("" for none), for ACL LOAD and SAVE.
	file string
	// requirePass is the password this node last set as requirepass
	// (flag or CONFIG SET), for CONFIG GET; the table keeps only hashes.
	requirePass atomic.Pointer[string]
}

// aclState returns the compiled ACL table as of the store's generation.
func (s *Server) aclState() *aclState {
	gen := s.cfg.Store.ACLGen()
	if st := s.acl.state.Load(); st != nil && st.gen == gen {
		return st
	}
	s.acl.mu.Lock()
	defer s.acl.mu.Unlock()
	if st := s.acl.state.Load(); st != nil && st.gen == gen {
		return st
	}
	lines, gen := s.cfg.Store.ACLUsers()
	st := &aclState{gen: gen, users: make(map[string]*aclUser, len(lines)+1)}
	if _, ok := lines["default"]; !ok {
		lines["default"] = defaultUserLine
	}
	for name, line := range lines {
		u, err := parseUserLine(s.acl.cmds, name, line)
		if err != nil {
			// Validated before it was proposed: a line this kvs cannot
			// read came from another version. The user is left out
			// (denied) rather than admitted with wrong rights.
			s.cfg.Logger.Error("server: ACL user not loaded", "user", name, "err", err)
			continue
		}
		st.users[name] = u
		st.names = append(st.names, name)
	}
	sort.Strings(st.names)
	if d := st.users["default"]; d == nil || !d.nopass || !d.on {
		st.authRequired = true
	}
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
func (s *Server) killRevokedSubscribers(old, st *aclState) {
	changed := map[string]*aclUser{}
	for name, u := range old.users {
		if nu := st.users[name]; nu == nil || nu.describe(s.acl.cmds) != u.describe(s.acl.cmds) {
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
				if ok && (u == nil || !u.channelAllowed(name, k == subPattern)) {
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

// parseUserLine compiles a user from its rule line.
func parseUserLine(ac *aclCommands, name, line string) (*aclUser, error) {
	u := newACLUser(ac, name)
	rules, open := mergeSelectorArgs(strings.Fields(line))
	if open >= 0 {
		return nil, fmt.Errorf("unmatched parenthesis in %q", line)
	}
	for _, rule := range rules {
		if e := u.applyRule(ac, rule); e != "" {
			return nil, fmt.Errorf("rule %q: %s", rule, e)
		}
	}
	return u.finish(ac), nil
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
	name   string   // the user's name ("default" until AUTH)
	user   *aclUser // as of gen; nil before the first check
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
	lastACL *aclCmd
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
	u := st.users[c.auth.name]
	if u == nil {
		c.quit = true
		return false
	}
	c.auth.user, c.auth.gen = u, st.gen
	c.auth.mustAuth = st.authRequired && !c.auth.authed
	c.auth.fast = u.unrestricted && !c.auth.mustAuth
	c.setUserName(u.name)
	return true
}

// aclCommand is the ACL identity of cmd run with args: the subcommand's
// for a container. Nil for a command without one (none today).
func (c *client) aclCommand(cmd *command, args [][]byte) *aclCmd {
	var ac *aclCmd
	if cmd == c.auth.lastCmd {
		ac = c.auth.lastACL
	} else {
		ac = c.s.acl.cmds.byName[cmd.name]
		if ac == nil {
			return nil
		}
		c.auth.lastCmd, c.auth.lastACL = cmd, ac
	}
	if len(ac.subs) > 0 {
		ac = c.s.acl.cmds.resolve(cmd.name, args)
	}
	return ac
}

// needsAuth reports whether c must authenticate before it may run ac
// (Redis's NOAUTH): AUTH is required and ac is not one of the commands
// that run before it.
func (c *client) needsAuth(ac *aclCmd) bool {
	return c.auth.mustAuth && !ac.noAuth && !(ac.parent != nil && ac.parent.noAuth)
}

// aclDenial is the error for c's user running ac with args when its rules
// refuse it, the refusal then logged in ACL LOG, or "".
func (c *client) aclDenial(ac *aclCmd, args [][]byte) string {
	res, at := c.auth.user.check(ac, args)
	if res == aclOK {
		return ""
	}
	c.logDenial(res, ac, args, at)
	switch res {
	case aclDeniedCmd:
		return errNoPermCmd(ac.name)
	case aclDeniedKey:
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
	u := c.s.aclState().users[c.auth.name]
	ac := c.s.acl.cmds.resolve(cmd.name, args)
	if u == nil || ac == nil {
		return "" // a deleted user's connection closes at its next command
	}
	res, at := u.check(ac, args)
	var reason string
	switch res {
	case aclOK:
		return ""
	case aclDeniedCmd:
		reason = "no permission to execute the command or subcommand"
	case aclDeniedKey:
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
	u := st.users[string(name)]
	if u == nil || !u.on || !u.checkPassword(password) {
		c.logAuthFailure(string(name), object)
		return false
	}
	c.auth = clientAuth{name: u.name, user: u, gen: st.gen, authed: true,
		fast: u.unrestricted}
	c.setUserName(u.name)
	return true
}

// userLine is the rule line stored for u (ACL LIST without "user name ").
func (s *Server) userLine(u *aclUser) string { return u.describe(s.acl.cmds) }
