package server

import (
	"fmt"
	"os"
	"strings"

	"kvs/config"
	"kvs/fsm"
)

// The ACL file (--aclfile), in Redis's format: one "user <name> <rule>..."
// line per user, blank lines ignored. ACL LOAD reads it on the node that
// runs the command and proposes its users as the whole table (every node
// then has them); ACL SAVE writes the table to this node's file.

// parseACLFile parses an ACL file's text into user names and rule lines,
// or returns Redis's error text (every error found, as ACLLoadFromFile
// lists them).
func parseACLFile(ac *aclCommands, file, text string) ([]string, string) {
	var errs strings.Builder
	var pairs []string
	seen := map[string]bool{}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.Trim(line, " \t\r\n")
		if line == "" {
			continue
		}
		argv := strings.Fields(line)
		if argv[0] != "user" || len(argv) < 2 {
			errs.WriteString(aclFileNotUser(file, n))
			continue
		}
		name := argv[1]
		if seen[name] {
			errs.WriteString(aclFileDuplicate(name, n))
			continue
		}
		seen[name] = true
		u := newACLUser(ac, name)
		reported := false
		rules, open := mergeSelectorArgs(argv[2:])
		if open >= 0 {
			errs.WriteString(aclFileUnmatched(file, n))
		}
		for _, rule := range rules {
			e := u.applyRule(ac, rule)
			switch {
			case e == "":
			case e == aclErrUnknown:
				errs.WriteString(aclFileUnknown(file, n, rule, e))
			case !reported:
				errs.WriteString(aclFileRule(file, n, e))
				reported = true
			}
		}
		if errs.Len() == 0 {
			pairs = append(pairs, name, u.finish(ac).describe(ac))
		}
	}
	if errs.Len() > 0 {
		return nil, errs.String() + aclFileUnchanged
	}
	if !seen["default"] {
		pairs = append(pairs, "default", defaultUserLine)
	}
	return pairs, ""
}

// readACLFile reads and parses the ACL file.
func (s *Server) readACLFile() ([]string, string) {
	b, err := os.ReadFile(s.acl.file)
	if err != nil {
		return nil, aclFileOpen(s.acl.file, osErrText(err))
	}
	return parseACLFile(s.acl.cmds, s.acl.file, string(b))
}

func osErrText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		err = pe.Err
	}
	s := err.Error()
	if s != "" {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

func (c *client) aclLoad() {
	pairs, e := c.s.readACLFile()
	if e != "" {
		c.out = appendError(c.out, errACLLoad(e))
		return
	}
	c.answerACLProposal(c.proposeACL(fsm.ACLReplace, pairs...))
}

// aclSave writes the users to the ACL file: a temporary file beside it,
// fsynced, renamed over it.
func (c *client) aclSave() {
	if err := c.s.saveACLFile(); err != nil {
		c.s.cfg.Logger.Warn("server: ACL SAVE failed", "file", c.s.acl.file, "err", err)
		c.out = appendError(c.out, errACLSave)
		return
	}
	c.out = appendStatus(c.out, "OK")
}

func (s *Server) saveACLFile() error {
	st := s.aclState()
	var b strings.Builder
	for _, name := range st.names {
		b.WriteString("user " + name + " " + s.userLine(st.users[name]) + "\n")
	}
	mode := os.FileMode(0o600) // it holds password hashes
	if fi, err := os.Stat(s.acl.file); err == nil {
		mode = fi.Mode().Perm()
	}
	return config.WriteFileAtomic(s.acl.file, []byte(b.String()), mode)
}

// ACLSeed returns the OpACLSet that seeds the replicated ACL table at
// startup from --aclfile (its users) or --requirepass (the default user's
// password), or false when neither is configured. Applied, it changes the
// table only if no ACL change was ever applied (fsm.ACLSeed): the flags
// initialise a new data dir or cluster, and later changes, made with ACL
// and CONFIG SET, win over them.
func (s *Server) ACLSeed() (fsm.Command, bool, error) {
	var pairs []string
	switch {
	case s.acl.file != "":
		p, e := s.readACLFile()
		if e != "" {
			return fsm.Command{}, false, fmt.Errorf("server: --aclfile: %s", e)
		}
		pairs = p
	case s.cfg.RequirePass != "":
		pairs = []string{"default", s.requirePassLine(s.cfg.RequirePass)}
	default:
		return fsm.Command{}, false, nil
	}
	cmd := fsm.Command{Op: fsm.OpACLSet, Int: fsm.ACLSeed}
	for _, p := range pairs {
		cmd.Args = append(cmd.Args, []byte(p))
	}
	return cmd, true, nil
}

// requirePassLine is the default user's line with password as its only
// password ("" for none), as requirepass sets it
// (ACLUpdateDefaultUserPassword: resetpass, then >password or nopass).
func (s *Server) requirePassLine(password string) string {
	u := s.aclState().users["default"]
	if u == nil {
		u, _ = parseUserLine(s.acl.cmds, "default", defaultUserLine)
	}
	u = u.clone()
	u.applyRule(s.acl.cmds, "resetpass")
	if password == "" {
		u.applyRule(s.acl.cmds, "nopass")
	} else {
		u.applyRule(s.acl.cmds, ">"+password)
	}
	return s.userLine(u.finish(s.acl.cmds))
}

// requirePass is CONFIG GET requirepass: the password set on this node,
// while it is still the default user's only one; else "" (the replicated
// table holds hashes only).
func (s *Server) requirePass() string {
	d := s.aclState().users["default"]
	p := s.acl.requirePass.Load()
	if d == nil || p == nil || *p == "" || len(d.passwords) != 1 || d.passwords[0] != hashPassword([]byte(*p)) {
		return ""
	}
	return *p
}

// setRequirePass is CONFIG SET requirepass: the default user's password
// becomes password alone (none when empty), through the log.
func (s *Server) setRequirePass(password string) error {
	if err := s.proposeACL(fsm.ACLUpdate, "default", s.requirePassLine(password)); err != nil {
		return err
	}
	s.acl.requirePass.Store(&password)
	// A node without masterauth logs in to the others with it.
	s.peerLoginChanged()
	return nil
}
