package server

import (
	"errors"
	"net"
	"strconv"
)

// CONFIG SET port, which Redis applies at once (changeListenPort): the
// plain listener is bound anew on the new port and the old one closed;
// connections already made stay. Port 0 closes the listener, as in
// Redis: only connections already made (and TLS ones) are served until
// another port is set. A cluster node's address is announced to the
// others, which reach it there, so a node keeps the one it started with.

// errListenPort is Redis's CONFIG SET port error when the port cannot be
// bound; the server's log says why.
const errListenPort = "Unable to listen on this port. Check server logs."

// bindPort binds the plain listener's host on port, for setConfig to put
// in force once every other parameter has passed (installListener), and
// returns it (nil for port 0), or Redis's error text.
func (s *Server) bindPort(port int64) (net.Listener, string) {
	if s.router.clustered() {
		return nil, "a cluster node keeps the address it announced (--addr)"
	}
	if s.cfg.PlainDisabled {
		return nil, "the plain port is disabled (TLS only)"
	}
	if port == 0 {
		return nil, ""
	}
	host, _, _ := splitHostPort(s.cfg.Addr)
	s.mu.Lock()
	if s.ln != nil {
		host, _, _ = splitHostPort(s.ln.Addr().String())
	}
	s.mu.Unlock()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.FormatInt(port, 10)))
	if err != nil {
		s.cfg.Logger.Warn("server: CONFIG SET port: cannot listen", "port", port, "err", err)
		return nil, errListenPort
	}
	return ln, ""
}

// installListener puts ln (nil: none) in the old plain listener's place
// and closes that; the accept loop moves to ln.
func (s *Server) installListener(ln net.Listener) {
	s.mu.Lock()
	old := s.ln
	s.ln = ln
	s.portClosed = ln == nil
	closed := s.closed
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
	if closed && ln != nil {
		ln.Close() // stopped meanwhile: nothing will accept on it
		return
	}
	if ln != nil {
		s.warnExposed(ln.Addr())
		stampArrivals(s, ln)
	}
	select {
	case s.lnChanged <- struct{}{}:
	default:
	}
}

// nextListener returns the listener that replaced old after old was
// closed, waiting while there is none (port 0); false when the server is
// stopping.
func (s *Server) nextListener(old net.Listener) (net.Listener, bool) {
	for {
		s.mu.Lock()
		ln, closed, stop := s.ln, s.closed, s.cronStop
		s.mu.Unlock()
		switch {
		case closed || s.shutdown.Load():
			return nil, false
		case ln != nil && ln != old:
			return ln, true
		case ln == old:
			return nil, false // closed by something else: stop, as before
		}
		select {
		case <-s.lnChanged:
		case <-stop:
			return nil, false
		}
	}
}

// acceptErrClosed reports whether err is the accept error of a closed
// listener.
func acceptErrClosed(err error) bool { return errors.Is(err, net.ErrClosed) }
