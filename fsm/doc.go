// Package fsm is kvs's state machine: the in-memory store (one lock over the
// whole keyspace), the binary encoding of commands and log entries, the
// deterministic apply of write commands, reads, and snapshot and restore.
//
// Contract (implemented in store.go, apply.go, read.go, encoding.go,
// snapshot.go):
//
//	NewStore() *Store
//	(*Store).Apply(index uint64, now int64, cmds []Command) []Reply
//	    applies a batch under one write lock; index is the log position of
//	    the batch (0 in memory mode) and becomes AppliedIndex; now is the
//	    proposer's clock reading (Unix ms) and the only clock apply uses.
//	(*Store).Read(now int64, cmd Command) Reply      under the shared lock
//	(*Store).AppliedIndex() uint64
//	(*Store).ExpiredKeys(now int64, max int) [][]byte
//	(*Store).Stats(now int64) Stats                  keys, keys with TTL, bytes
//	(*Store).Snapshot() *Snapshot                    point-in-time, cheap
//	(*Snapshot).Index() uint64; (*Snapshot).WriteTo(w io.Writer) (int64, error); (*Snapshot).Release()
//	(*Store).Restore(r io.Reader) (index uint64, err error)
//	EncodeEntry(dst []byte, now int64, cmds []Command) []byte
//	DecodeEntry(b []byte) (now int64, cmds []Command, err error)
//
// Apply is deterministic: no clock reads, no randomness, no map-iteration
// order. The same entries applied in the same order give the same store and
// the same replies on every replica and at every replay.
package fsm
