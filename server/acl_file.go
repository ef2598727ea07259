package server

import (
	"fmt"
	"os"

	"kvs/acl"
	"kvs/config"
	"kvs/fsm"
)

// The ACL file (--aclfile), in Redis's format (package acl). ACL LOAD
// reads it on the node that runs the command and proposes its users as the
// whole table (every node then has them); ACL SAVE writes the table to
// this node's file.

// readACLFile reads and parses the ACL file.
func (s *Server) readACLFile() ([]string, error) { return acl.ReadFile(s.acl.cmds, s.acl.file) }

func (c *client) aclLoad() {
	pairs, err := c.s.readACLFile()
	if err != nil {
		c.out = appendError(c.out, errACLLoad(err.Error()))
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
	text := s.aclState().FileText(s.acl.cmds)
	mode := os.FileMode(0o600) // it holds password hashes
	if fi, err := os.Stat(s.acl.file); err == nil {
		mode = fi.Mode().Perm()
	}
	return config.WriteFileAtomic(s.acl.file, text, mode)
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
		p, err := s.readACLFile()
		if err != nil {
			return fsm.Command{}, false, fmt.Errorf("server: --aclfile: %s", err)
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
// password ("" for none), as requirepass sets it.
func (s *Server) requirePassLine(password string) string {
	return s.aclState().RequirePassLine(s.acl.cmds, password)
}

// requirePass is CONFIG GET requirepass: the password set on this node,
// while it is still the default user's only one; else "" (the replicated
// table holds hashes only).
func (s *Server) requirePass() string {
	p := s.acl.requirePass.Load()
	if p == nil || !s.aclState().RequirePass(*p) {
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
