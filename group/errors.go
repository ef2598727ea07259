package group

import (
	"errors"
	"fmt"

	"kvs/cluster"
	"kvs/wal"
)

// Errors a proposal (and a raft group's administration) returns, wrapped
// with detail. A client must retry the first three and must not blindly
// retry the last.
var (
	// ErrNotLeader: this node is not the group's leader; the write was
	// not submitted, so it certainly did not apply.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader: no leader is known; the write certainly did not apply.
	ErrNoLeader = errors.New("no leader")
	// ErrLogWrite: the node cannot write its log (a full disk, an I/O
	// error) and so refused the write: it was not applied.
	ErrLogWrite = errors.New("log write failed")
	// ErrUnknownOutcome: the write was submitted but its fate is unknown
	// (leadership lost mid-round, timed out after submission, the
	// leader's connection dropped after the request was sent). It may
	// have applied.
	ErrUnknownOutcome = errors.New("outcome unknown")
)

// RaftErr turns the cluster package's errors into the group's kinds,
// keeping the detail.
func RaftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cluster.ErrNotLeader):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, cluster.ErrUnknownOutcome):
		return fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
	case errors.Is(err, cluster.ErrShutdown):
		return fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
	}
	return err
}

// logErr tells which of the log's errors mean it cannot write (the write
// refused, Redis's MISCONF).
func logErr(err error) error {
	if errors.Is(err, wal.ErrWriteFailed) {
		return fmt.Errorf("%w: %w", ErrLogWrite, err)
	}
	return err
}
