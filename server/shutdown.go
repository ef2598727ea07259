package server

import "kvs/fsm"

// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT], as Redis 7.0 parses it.
// kvs stops the way SIGTERM stops it (cmd/kvs: leadership handed over in
// a cluster, connections drained, the log flushed and fsynced), so an
// acknowledged write is never lost to a SHUTDOWN, with or without SAVE.
// SAVE first takes kvs's own snapshot, as the SAVE command does (in
// memory mode, nothing), and fails as Redis's does when the save fails.
// NOW and FORCE
// change nothing: kvs has no replicas to wait for and no save that may
// fail unless asked. ABORT answers that no shutdown is in progress, since
// one is never pending. The client that sent it gets no reply: its
// connection closes, as Redis's does when the process exits.
//
// While a script is busy, SHUTDOWN without NOSAVE is answered BUSY, and
// SHUTDOWN NOSAVE stops the process at once (ShutdownNow), without
// waiting for the script, as Redis exits in the middle of it. A durable
// or cluster node then comes back from its log as after a crash, which
// loses no acknowledged write: an entry the script's is applied again in
// full at the replay.

const errShutdownFailed = "ERR Errors trying to SHUTDOWN. Check logs."

// ShutdownRequested is closed when a client sends SHUTDOWN; the process
// then stops as on SIGTERM.
func (s *Server) ShutdownRequested() <-chan struct{} { return s.shutdownReq }

// ShutdownNow reports whether the SHUTDOWN that closed ShutdownRequested
// asks the process to exit at once: SHUTDOWN NOSAVE while a script was
// busy, which a graceful stop would wait for.
func (s *Server) ShutdownNow() bool { return s.stopNow.Load() }

func runShutdown(c *client, args [][]byte) {
	var save, nosave, abort, other bool
	for _, a := range args[1:] {
		switch {
		case is(a, "nosave"):
			nosave = true
		case is(a, "save"):
			save = true
		case is(a, "now"), is(a, "force"):
			other = true
		case is(a, "abort"):
			abort = true
		default:
			c.out = appendError(c.out, errSyntax)
			return
		}
	}
	if abort && (save || nosave || other) || save && nosave {
		c.out = appendError(c.out, errSyntax)
		return
	}
	if abort {
		c.out = appendError(c.out, "ERR No shutdown in progress.")
		return
	}
	s := c.s
	if busy := s.scriptBusy(); busy != fsm.NotBusy {
		if !nosave {
			c.out = appendError(c.out, errBusy(busy))
			return
		}
		s.cfg.Logger.Warn("server: SHUTDOWN NOSAVE while a script is busy: stopping without waiting for it", "client", c.addr)
		s.stopNow.Store(true)
	}
	if save {
		if err := s.saver().Save(); err != nil {
			s.cfg.Logger.Warn("SHUTDOWN SAVE refused: the snapshot failed", "err", err)
			c.out = appendError(c.out, errShutdownFailed)
			return
		}
	}
	s.cfg.Logger.Info("server: user requested shutdown", "client", c.addr)
	s.shutdownOnce.Do(func() { close(s.shutdownReq) })
	c.quit = true
}
