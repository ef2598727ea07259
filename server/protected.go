package server

import (
	"net"
	"time"
)

// Protected mode, as Redis 7 has it: while the default user has no
// password and protected-mode is yes (the default), a connection from
// anywhere but the loopback interface gets Redis's DENIED message and is
// closed. The check runs once, at accept, after maxclients (Redis's order),
// and counts the refusal in rejected_connections as Redis does. In a cluster
// the other members' addresses are let through: their forwarding pools and
// KVS.PEER links connect to this port.

// errProtectedMode is Redis 7.0's message (networking.c), sent raw.
const errProtectedMode = "-DENIED Redis is running in protected mode because protected " +
	"mode is enabled and no password is set for the default user. " +
	"In this mode connections are only accepted from the loopback interface. " +
	"If you want to connect from external computers to Redis you " +
	"may adopt one of the following solutions: " +
	"1) Just disable protected mode sending the command " +
	"'CONFIG SET protected-mode no' from the loopback interface " +
	"by connecting to Redis from the same host the server is " +
	"running, however MAKE SURE Redis is not publicly accessible " +
	"from internet if you do so. Use CONFIG REWRITE to make this " +
	"change permanent. " +
	"2) Alternatively you can just disable the protected mode by " +
	"editing the Redis configuration file, and setting the protected " +
	"mode option to 'no', and then restarting the server. " +
	"3) If you started the server manually just for testing, restart " +
	"it with the '--protected-mode no' option. " +
	"4) Setup a an authentication password for the default user. " +
	"NOTE: You only need to do one of the above things in order for " +
	"the server to start accepting connections from the outside.\r\n"

// defaultUserHasPassword reports whether the default user needs a
// password to authenticate (it is not nopass); protected mode stands down
// when it does, as Redis's does.
func (s *Server) defaultUserHasPassword() bool {
	d := s.aclState().Users["default"]
	return d != nil && !d.NoPass()
}

// protectedRefuses reports whether protected mode refuses a connection from
// remote.
func (s *Server) protectedRefuses(remote net.Addr) bool {
	if !s.protectedMode.Load() || s.defaultUserHasPassword() {
		return false
	}
	ip := addrIP(remote)
	if ip == nil || isLocalIP(ip) {
		return false // not TCP (a test's pipe): nothing to judge
	}
	return !s.isMemberIP(ip)
}

// isLocalIP is Redis's islocalClient for TCP: 127.0.0.1 or ::1 exactly,
// not the rest of 127/8.
func isLocalIP(ip net.IP) bool {
	return ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)
}

func addrIP(a net.Addr) net.IP {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP
	}
	return nil
}

// isMemberIP reports whether ip is the host of a cluster member's Raft or
// client address (literal IPs only: names are not resolved at accept).
func (s *Server) isMemberIP(ip net.IP) bool {
	cl := s.router.cluster
	if cl == nil {
		return false
	}
	ms, err := cl.Members()
	if err != nil {
		return false
	}
	for _, m := range ms {
		for _, a := range []string{m.RaftAddr, m.RESPAddr} {
			if host, _, err := net.SplitHostPort(a); err == nil && ip.Equal(net.ParseIP(host)) {
				return true
			}
		}
	}
	return false
}

// refuseProtected tells c it is refused and closes it (best effort, as
// Redis: the client may not read it).
func (s *Server) refuseProtected(c *client) {
	s.stats.rejectedConnections.Add(1)
	c.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	c.nc.Write([]byte(errProtectedMode))
	c.nc.Close()
	s.unregister(c)
}

// warnExposed logs, once the listener is bound, that the port is reachable
// beyond loopback while the default user has no password.
func (s *Server) warnExposed(bound net.Addr) {
	ip := addrIP(bound)
	if ip == nil || ip.IsLoopback() || s.defaultUserHasPassword() {
		return
	}
	if s.protectedMode.Load() {
		s.cfg.Logger.Warn("server: listening beyond loopback with no password set; protected mode "+
			"refuses clients that are not on the loopback interface (set a password, or --protected-mode no)",
			"addr", bound.String())
		return
	}
	s.cfg.Logger.Warn("server: listening beyond loopback with no password set and protected mode off: "+
		"anyone who can reach this port can run any command", "addr", bound.String())
}
