package cluster

import "github.com/hashicorp/raft"

// raft handles a heartbeat on the transport's connection goroutine, not its
// own (NetworkTransport's fast path calls processHeartbeat directly). That
// goroutine checks raft's shutdown once, at the start, and then may save a
// new term to the stable store. Shutdown does not wait for it, and closing
// the transport does not either, so a heartbeat from a new leader racing a
// node's Close could reach bolt after Close had closed it, and raft panics
// on any error saving its term ("failed to save current term: database not
// open"). The transport therefore counts the heartbeats in flight, and
// Close ends them (endHeartbeats) before it closes the stores.

// SetHeartbeatHandler is raft's hook (NewRaft sets it): the handler runs
// only while heartbeats have not been ended, and endHeartbeats waits for
// each that began.
func (t *pushTransport) SetHeartbeatHandler(fn func(raft.RPC)) {
	if fn == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(t.guardBeats(fn))
}

func (t *pushTransport) guardBeats(fn func(raft.RPC)) func(raft.RPC) {
	return func(rpc raft.RPC) {
		t.beats.RLock()
		defer t.beats.RUnlock()
		if t.beatsEnded {
			// As raft does once shut down: no answer; the transport's
			// connection ends with its own shutdown.
			return
		}
		fn(rpc)
	}
}

// endHeartbeats waits for the heartbeats being handled and lets no other
// reach raft. Close calls it after raft's Shutdown, before the stores close.
func (t *pushTransport) endHeartbeats() {
	t.beats.Lock()
	t.beatsEnded = true
	t.beats.Unlock()
}
