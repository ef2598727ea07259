// Package group is one replication group as a value: an fsm store holding
// some of the keyspace's 16384 hash slots (today all of them), and the
// proposer that orders its writes:
//
//   - memory: none; the server applies to the store directly;
//   - durable: kvs's own group-committed append log (package wal); a batch
//     is one record, applied once it is durable under the fsync policy;
//   - raft: a hashicorp/raft group (package cluster); a batch from
//     concurrent connections is one log entry, applied on every replica
//     once committed.
//
// A group also answers for its log: saving (a compaction, or a raft
// snapshot), its leader and read barrier (raft), and closing in order.
//
// The errors a proposal ends with are defined here, one set for every
// kind of group, so the server can tell a client whether a write certainly
// did not apply (ErrNotLeader, ErrNoLeader, ErrLogWrite) or may have
// (ErrUnknownOutcome).
//
// The package knows nothing of RESP or of command syntax; cmd/kvs builds
// groups and hands them to the server.
package group
