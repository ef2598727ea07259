// Package cluster runs kvs's Raft layer: hashicorp/raft with its log and
// stable store in one raft-boltdb/v2 file (raft's LogCache in front of it),
// a file snapshot store and raft's network transport on a stream layer of
// kvs's own, plain TCP or, with Config.TLS, mutual TLS (stream.go, tls.go).
// It knows nothing of RESP or of the commands in the log: it is given a
// raft.BatchingFSM and carries opaque []byte entries.
//
// # API
//
//	Open(Config) (*Node, error)        start raft on Config.Dir; bootstrap if asked and new
//	HasState(dir) (bool, error)        does dir hold Raft state already
//	(*Node).Apply(entry) (any, error)  one log entry; the FSM's response
//	(*Node).ReadIndex(ctx) error       linearizable read barrier (leader only)
//	(*Node).AppliedIndex, WaitApplied(ctx, index)   the FSM's position, and waiting for one
//	(*Node).ApplyDelay() ApplyDelay    how long recent writes took to apply here
//	(*Node).AddVoter(id, addr), Remove(id), Members()   membership, via the leader
//	(*Node).IsLeader, Leader, Status, LeaderChanges, TransferLeadership, Addr, Raft
//	(*Node).LogStoreErr, LogStoreFailures   did the last raft log write fail (logstore.go)
//	(*Node).Snapshot() error           a raft snapshot now (SAVE, BGSAVE)
//	(*Node).Close() error
//	Seed(cfg, index, write) error      an empty Dir made a one-node cluster holding a snapshot (kvs restore)
//	Recover(cfg) (Recovered, error)    lost-quorum recovery of a stopped node: RecoverCluster (kvs recover)
//
// # Contract
//
// Entries reach the FSM in log order on every node, after a quorum has
// stored them. Apply returns the FSM's response on the node that submitted
// the entry (the leader). Its errors say what happened to the entry: it
// wraps ErrNotLeader when the entry certainly was not submitted (a client
// may retry it on the leader), ErrUnknownOutcome when it was submitted and
// may or may not take effect, ErrShutdown when the node is closed. An FSM
// response that is an error comes back as Apply's error.
//
// Concurrent Apply calls are batched by raft (BatchApplyCh): the leader
// appends whatever queued, up to MaxAppendEntries entries, with one bolt
// write and fsync, replicates them in one AppendEntries round, and the FSM
// applies them with one ApplyBatch call.
//
// A follower learns of each commit as soon as the leader has applied it:
// the node's transport wraps raft's and pushes the commit index to every
// follower in an empty AppendEntries (commitpush.go), instead of leaving it
// to raft's next entries or CommitTimeout. AppliedIndex and WaitApplied
// let a follower wait for a write the leader applied at a known index.
//
// The same wrapper holds the leader's AppendEntries and InstallSnapshot to
// a follower whose Raft address refuses connections, redialling every
// 50 ms, instead of failing them (reach.go): raft's retry backoff, which
// grows to 10 s with consecutive failures and cannot be woken, then stays
// small however long a follower is down, and a restarted follower gets its
// entries within about 50 ms of listening.
//
// ReadIndex follows the Raft thesis §6.4 (see its doc). Progress of the FSM
// is tracked by wrapping Config.FSM, because raft's AppliedIndex counts what
// it handed to the FSM goroutine, not what that goroutine has applied.
//
// # Goroutines
//
// Besides raft's own goroutines (all stopped and waited for by
// raft.Shutdown), a Node runs one watcher from Open to Close: it forwards
// raft's leadership signal to LeaderChanges and commits a read barrier after
// each election; and one commit pusher per follower it has led (started at
// the first AppendEntries raft sends it, stopped and waited for by Close
// after raft.Shutdown). Apply and the other waiting calls wait for raft's futures
// in a helper goroutine so that they can honour a timeout, a context or
// Close; that goroutine ends when raft answers. raft does not answer entries
// still queued for the leader when it shuts down, so at Close a helper
// waiting for such an entry is left behind (one per stranded entry, at most
// MaxAppendEntries), and its caller gets ErrUnknownOutcome.
//
// # Shutdown
//
// Close runs once, in this order: if this node leads, it transfers
// leadership to another voter and waits a bounded time (so the cluster does
// not wait an election timeout for a new leader); then raft.Shutdown, which
// stops raft's goroutines (an RPC held for an unreachable follower ends
// within 50 ms of it) and closes the transport with its listener and the
// connections it accepted; then the connections it dialled are closed, so
// no goroutine of another node's transport keeps reading from this one;
// then the watcher stops
// and LeaderChanges is closed; then the bolt file is closed. Callers stop
// their client listeners before Close, so that no new writes arrive.
//
// # Files
//
// Dir/raft.db is the bolt file (the log and raft's term and vote);
// Dir/snapshots/ holds the newest two snapshots. A node restarted on its Dir
// restores the newest snapshot, replays the log after it once it learns the
// commit index, and rejoins its cluster; Bootstrap is then ignored.
//
// The log is never compacted past the older of the two snapshots
// (retainingLogs), and Open checks raft.db and the snapshots first
// (CheckState): a damaged newest snapshot is moved to
// Dir/snapshots.broken/ and the older one plus the log replaces it, losing
// nothing; any other damage fails Open with an error wrapping ErrDamaged
// that names the file and says what to do.
package cluster
