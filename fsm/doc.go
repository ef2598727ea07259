// Package fsm is kvs's state machine: the in-memory store (one lock over the
// whole keyspace), the binary encoding of log entries, the deterministic
// apply of write commands, reads, and snapshot and restore.
//
// # API
//
//	NewStore() *Store
//	(*Store).Apply(index uint64, now int64, cmds []Command) []Reply
//	    applies a batch under one write lock; index is the log position of
//	    the batch (0 in memory mode) and becomes AppliedIndex; a non-zero
//	    index must grow strictly (Apply panics otherwise); now is the
//	    proposer's clock reading (Unix ms) and the only clock apply uses.
//	(*Store).ApplyTo(dst []Reply, index, now, cmds) []Reply   Apply appending to dst
//	(*Store).Read(now int64, cmd Command) Reply      under the shared lock
//	(*Store).AppliedIndex() uint64
//	(*Store).ExpiredKeys(now int64, max int) [][]byte
//	(*Store).Stats(now int64) Stats                  keys, keys with TTL, bytes
//	(*Store).Snapshot() *Snapshot                    point-in-time, O(1)
//	(*Snapshot).Index() uint64; (*Snapshot).WriteTo(w io.Writer) (int64, error); (*Snapshot).Release()
//	(*Store).Restore(r io.Reader) (index uint64, err error)
//	EncodeEntry(dst []byte, now int64, cmds []Command) []byte
//	DecodeEntry(b []byte) (now int64, cmds []Command, err error)   Args alias b
//	(*Command).Validate() error
//
// # Invariants
//
// Apply is deterministic: no clock reads, no randomness, no map-iteration
// order. The same entries applied in the same order give the same store, the
// same replies and byte-identical snapshots on every replica and at every
// replay. Anything non-deterministic (deadlines from relative TTLs) is
// decided by the proposer and carried in the Command.
//
// A key whose deadline is not after now (deadline <= now) is absent: reads
// hide it and every write treats it as missing (SET NX succeeds, INCR starts
// from 0, EXPIRE answers 0, RENAME says no such key). It stays in memory
// until an OpDelExpired entry, proposed by the active-expiry loop (the leader
// in a cluster) from ExpiredKeys, or another write removes it.
//
// Reply texts match redis-server 7.x exactly; the error strings are the Err*
// constants in reply.go. Data-dependent errors (WRONGTYPE, not an integer,
// overflow) are replies; a command that fails Validate, or a write op that
// Apply does not know, is a bug in whoever built it, and Apply panics: a
// committed entry the store cannot apply must stop the node, not diverge it.
//
// Bulk replies alias the store's memory. That is safe because stored bytes
// are never modified below their length; replies must be treated as
// read-only.
//
// # Keyspace
//
// Keys live in a copy-on-write B-tree (tidwall/btree) ordered by
// (hash(key), key), with the hash fixed (xxhash64, shifted to 63 bits, never
// 0). The order gives SCAN an integer cursor, the hash of the next key to
// visit, that returns every key present for the whole scan; and the tree's
// O(1) Copy gives Snapshot a point-in-time view without stopping writers. A
// second tree orders the keys that have a TTL by deadline for ExpiredKeys.
//
// Encodings (entries in encoding.go, snapshots in snapshot.go) start with a
// version byte and are validated when read: corrupt bytes give an error
// wrapping ErrCorrupt, never a panic.
package fsm
