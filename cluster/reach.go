package cluster

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Holding replication to a follower that cannot be reached.
//
// hashicorp/raft's leader replicates to each follower from a goroutine of
// its own. After each failed AppendEntries or InstallSnapshot that
// goroutine sleeps before its next try: 10 ms, doubling with every failure
// up to about 10 s (its failureWait and maxFailureScale), and nothing wakes
// it early. While a follower's process is down every RPC to it fails at
// once (connection refused), so within about ten seconds the sleeps reach
// their ceiling, and a follower restarted after that waited up to 10 s for
// its first entries, answering LOADING meanwhile (8.5 s and 9.8 s measured
// by TestClusterRestartServes).
//
// The transport keeps the failures from piling up instead. An
// AppendEntries (replication or heartbeat) or InstallSnapshot whose
// connection cannot be made does not fail: nothing of it has left this
// node, so it is dialled again every followerRedial and sent once the
// follower accepts the connection. raft then counts the few failures of
// the moment the follower went down (its pooled connections failing one
// after another) rather than one per sleep, its sleeps stay in the tens of
// milliseconds, and a restarted follower gets its entries within about
// followerRedial of listening again.
//
// A held RPC gives up, returning the dial's error to raft as before, as
// soon as raft no longer wants it sent: this node no longer leads in the
// request's term (it stepped down, or shut down: raft's Shutdown sets its
// state before it waits for its goroutines, so Close is held at most
// followerRedial more), the follower left the configuration or moved to
// another address (a removed node), the transport closed, or, for a
// snapshot, a newer one was taken (raft sends that one next). Votes,
// pre-votes and TimeoutNow are never held: an election or a leadership
// transfer does not wait for a node that is down.
const followerRedial = 50 * time.Millisecond

// dialFailed reports whether err is a failure to connect, before any byte
// of an RPC was written: net's dialers (and so raft's TCP stream layer and
// tls.Dialer, for the TCP part of its dial) report those as an OpError of
// "dial"; a failed TLS handshake, write or read is not one.
func dialFailed(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// AppendEntries is raft's synchronous AppendEntries, watched (commitpush.go)
// and held while the follower cannot be reached.
func (t *pushTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	t.observe(id, target, args)
	err := t.holdUnreachable(id, target, args.Term, nil, func() error {
		return t.NetworkTransport.AppendEntries(id, target, args, resp)
	})
	if err == nil {
		if p := t.peer(id); p != nil {
			p.answered()
			p.reported(resp.LastLog)
		}
	}
	return err
}

// InstallSnapshot is raft's InstallSnapshot, held while the follower cannot
// be reached. A dial that failed read nothing of data, so the call can be
// made again with it.
func (t *pushTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	stale := func() bool { return t.newestSnapshot() > args.LastLogIndex }
	return t.holdUnreachable(id, target, args.Term, stale, func() error {
		return t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
	})
}

// holdUnreachable makes the call rpc, and again every followerRedial while
// it fails to connect and raft still wants it sent (see wanted; stale,
// when set, says the request itself has been overtaken).
func (t *pushTransport) holdUnreachable(id raft.ServerID, target raft.ServerAddress, term uint64, stale func() bool, rpc func() error) error {
	err := rpc()
	if err == nil || !dialFailed(err) {
		return err
	}
	p := t.peer(id)
	if p == nil {
		return err // stopping
	}
	start := time.Now()
	p.holding(t, target, err)
	defer func() { p.released(t, target, start, err) }()
	timer := time.NewTimer(followerRedial)
	defer timer.Stop()
	for {
		if !t.wanted(id, target, term) || (stale != nil && stale()) {
			return err
		}
		select {
		case <-timer.C:
		case <-t.stopCh:
			return err
		}
		if err = rpc(); err == nil || !dialFailed(err) {
			return err
		}
		timer.Reset(followerRedial)
	}
}

// wanted reports whether raft would still send an RPC of term to the
// follower id at target: this node leads in that term, and the follower is
// in the configuration at that address.
func (t *pushTransport) wanted(id raft.ServerID, target raft.ServerAddress, term uint64) bool {
	r := t.raft.Load()
	if r == nil || t.IsShutdown() || r.State() != raft.Leader || r.CurrentTerm() != term {
		return false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == id {
			return s.Address == target
		}
	}
	return false
}

// newestSnapshot is the last index of the newest snapshot in the store,
// 0 if none can be listed.
func (t *pushTransport) newestSnapshot() uint64 {
	if t.snaps == nil {
		return 0
	}
	metas, err := t.snaps.List()
	if err != nil || len(metas) == 0 {
		return 0
	}
	return metas[0].Index
}

// holding and released log when the first RPC to the follower starts to be
// held and when the last held one ends (the replication and the heartbeat
// goroutine hold one each), so an outage is two lines.
func (p *pushPeer) holding(t *pushTransport, target raft.ServerAddress, err error) {
	if p.held.Add(1) == 1 {
		t.log.Warn("follower unreachable; holding replication to it until it answers", "peer", p.id, "raft_addr", target, "err", err)
	}
}

func (p *pushPeer) released(t *pushTransport, target raft.ServerAddress, start time.Time, err error) {
	if p.held.Add(-1) != 0 {
		return
	}
	held := time.Since(start).Round(time.Millisecond)
	if err != nil && dialFailed(err) {
		t.log.Info("no longer holding replication to the unreachable follower", "peer", p.id, "raft_addr", target, "held", held)
		return
	}
	t.log.Info("follower reachable again", "peer", p.id, "raft_addr", target, "held", held)
}
