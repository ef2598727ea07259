package cluster

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Errors returned by Node, wrapped with detail; test with errors.Is. Every
// error about a submitted entry wraps exactly one of them, so a caller can
// tell a client whether its write certainly did not happen or may have.
var (
	// ErrNotLeader: this node is not the leader (or is handing leadership
	// over). The entry or request was not submitted to the log, so it
	// certainly was not applied; retry on the leader.
	ErrNotLeader = errors.New("cluster: not the leader")
	// ErrUnknownOutcome: the entry was submitted to the leader's log but
	// its fate is unknown (leadership lost before commit, a timeout after
	// submission, shutdown mid-round). It may have been applied, or may
	// still be applied later.
	ErrUnknownOutcome = errors.New("cluster: outcome unknown")
	// ErrShutdown: the node is shut down (Close was called, or raft shut
	// itself down after this node was removed). Nothing was submitted.
	ErrShutdown = errors.New("cluster: node is shut down")
)

// classify maps an error from a raft future onto the errors above.
// dispatched says whether the leader gave the entry a log index (the
// future's Index is non-zero), that is, wrote it to its log or tried to.
//
// raft's api.go and raft.go decide each case:
//   - ErrNotLeader comes from a follower or candidate loop draining the apply
//     queue, or a leader stepping down before it dispatched the batch;
//     ErrLeadershipTransferInProgress from a leader refusing new entries
//     while it hands over; ErrEnqueueTimeout from Apply when the queue did
//     not take the entry in time. None of them reached the log.
//   - ErrLeadershipLost answers every in-flight entry when a leader steps
//     down: it is in the old leader's log and may survive into the next
//     term, or not.
//   - ErrRaftShutdown before dispatch means the node was already shut down
//     at Apply; after dispatch the entry was in the log when raft stopped.
//   - Anything else after dispatch (a log store write failing, a restore
//     aborting the entry) leaves the log's content uncertain.
func classify(err error, dispatched bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader),
		errors.Is(err, raft.ErrLeadershipTransferInProgress),
		errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown) && !dispatched:
		return fmt.Errorf("%w: %v", ErrShutdown, err)
	}
	return fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
}
