package server

import (
	"time"

	"kvs/acl"
)

// ACLDenials returns the denials counted since start, by reason
// ("command", "key", "channel", "auth"), for metrics. ACL LOG RESET does
// not reset them.
func (s *Server) ACLDenials() map[string]int64 { return s.acl.log.Denials() }

func (c *client) logContext() string {
	if c.multi != nil {
		return "multi"
	}
	return "toplevel"
}

// logDenial records a refused command in ACL LOG: what was refused is
// the command's name, or the key or channel at args[at].
func (c *client) logDenial(res acl.Result, cmd *acl.Command, args [][]byte, at int) {
	now := time.Now()
	c.s.acl.log.AddDenial(c.logContext(), c.auth.name, c.describe(now, true), now, res, cmd, args, at)
}

// logAuthFailure records a failed AUTH or HELLO AUTH as user name; object
// is the command as the client spelled it.
func (c *client) logAuthFailure(name, object string) {
	now := time.Now()
	c.s.acl.log.Add(&acl.Entry{Reason: "auth", Context: c.logContext(), Object: object,
		Username: name, Updated: now, ClientInfo: c.describe(now, true)})
}
