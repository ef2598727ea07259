// Package fsm is kvs's state machine: the in-memory store (one lock over the
// whole keyspace), the binary encoding of log entries, the deterministic
// apply of write commands, reads, and snapshot and restore.
//
// # API
//
//	NewStore() *Store
//	(*Store).Apply(index uint64, now int64, cmds []Command) []Reply
//	    applies one log entry (a batch) under one write lock; index is the
//	    entry's log position (0 in memory mode) and becomes AppliedIndex;
//	    a non-zero index must be greater than the last one (Apply panics
//	    otherwise: applying an entry twice corrupts the store); now is the
//	    proposer's clock reading (Unix ms) and the only clock apply uses.
//	(*Store).ApplyTo(dst []Reply, index uint64, now int64, cmds []Command) []Reply
//	    Apply appending to dst
//	(*Store).ApplyBatch(entries []Entry) [][]Reply
//	    several entries (Entry{Index, Now, Cmds}) under one write lock
//	(*Store).Read(now int64, cmd Command) Reply      under the shared lock
//	(*Store).SetExpiredHook(fn func(keys [][]byte))
//	    receives the expired keys reads met, for passive expiry (expire.go)
//	(*Store).SetNotifyHook(fn func([]Event)); SetNotifyClasses(c NotifyClass)
//	    receives each applied entry's keyspace events and the messages its
//	    scripts published (notify.go, publish.go)
//	(*Store).SetReplayedThrough(index uint64)
//	    entries up to index are replays: they announce nothing
//	(*Store).AppliedIndex() uint64
//	(*Store).ExpiredKeys(now int64, max int) [][]byte   earliest deadline first
//	(*Store).Stats(now int64) Stats                  keys, keys with TTL, bytes
//	(*Store).Snapshot() *Snapshot                    point-in-time, microseconds
//	(*Snapshot).Index() uint64; Len() int; WriteTo(w io.Writer) (int64, error); Release()
//	(*Store).Restore(r io.Reader) (index uint64, err error)
//	    reads snapshot versions 1 to 6
//	(*Store).WatchKey(now int64, key []byte) KeyVersion   what WATCH records
//	ExecCommand(keys [][]byte, seen []KeyVersion, cmds []Command) Command   EXEC's OpExec
//	(*ExecBuilder).Build(keys, seen, cmds) Command; Reset()   the same in reused memory
//	(*Store).Meta(name string) (string, bool); MetaAll() map[string]string
//	    replicated cluster metadata, written by OpMetaSet, or by OpMetaCAS
//	    only while a name holds the value expected (compare and set), or
//	    by OpMetaTxn (MetaTxn) only while several names hold theirs
//	ApplyLevel; Level(cmds []Command) int
//	    the level of entries this kvs applies, and the level an entry
//	    needs: an op a kvs before it cannot apply raises it (level.go)
//	(*Store).SetMetaHook(fn func())
//	    told after an apply or restore that changed the metadata (meta.go)
//	(*Store).ACLUsers() (map[string]string, uint64); ACLGen() uint64
//	    the replicated ACL table (user -> rule line), written by OpACLSet
//	(*Store).ReadServing, ApplyServing, WatchKeyServing, StatsServing,
//	    ScriptStatsServing,
//	    EvictableServing, SetLimitsServing, SnapshotServing
//	    the same for a connection's goroutine, which gives up (ok false,
//	    nothing done) once a script turns busy while it waits for the lock
//	(*Store).SetBusyThreshold(ms); ScriptBusy() Busy; KillScript(function)
//	    (KillResult, Busy); BusyFunctionStats() (Reply, Busy);
//	    ScriptTurnsBusy() (<-chan struct{}, bool); ScriptRunning() bool
//	    scripts past busy-reply-threshold (script_state.go, serving.go)
//	SlotRange{Lo, Hi}; AppendSlotRanges(dst, ranges) []byte
//	SlotsAssign(ranges) Command; SlotsPurge(ranges, max) Command
//	    OpSlotsAssign, OpSlotsPurge: the slots the store owns (slots.go)
//	MoveBegin(id, ranges), MoveDrain(id, maxBytes), MoveFence(id),
//	    MoveRelease(id), MoveCancel(id) Command   a move out (move.go)
//	MoveStage(id, ranges, chunk), MoveActivate(id), MoveAbort(id) Command
//	    a move in; DrainReply(r) (chunk, more, err) reads a drain's reply
//	(*Store).ExportSlots(ranges) (*SlotExport, error)
//	(*SlotExport).Next(maxBytes) (chunk []byte, done bool); Index(); Release()
//	    a copy-on-write view of moving slots, for the bulk copy
//	(*Store).SlotsOwned() []SlotRange; Moves() []MoveInfo
//	SlotMoving(r Reply) (slot, ok); SlotNotOwned(r Reply) (slot, ok)
//	    recognise the refusals of commands for slots the store does not serve
//	NewRaftFSM(s *Store) *RaftFSM      raft.FSM and raft.BatchingFSM
//	EncodeEntry(dst []byte, now int64, cmds []Command) []byte
//	EntrySize(now int64, cmds []Command) int
//	DecodeEntry(b []byte) (now int64, cmds []Command, err error)   Args alias b
//	(*Command).Validate() error
//	ErrCorrupt; ErrWrongType, ErrNotInteger, ... (reply texts); MaxStringLen
//
// # Invariants
//
// Apply is deterministic: no clock reads, no randomness, no map-iteration
// order. The same entries applied in the same order give the same replies
// and byte-identical snapshots on every replica and at every replay.
// Anything non-deterministic (deadlines from relative TTLs) is decided by
// the proposer and carried in the Command.
//
// A key whose deadline is not after now (deadline <= now) is absent: reads
// hide it and every write treats it as missing (SET NX succeeds, INCR starts
// from 0, EXPIRE answers 0, RENAME says no such key). It stays in memory
// until another write replaces it or an OpDelExpired entry removes it: the
// server proposes one for the keys ExpiredKeys lists (active expiry) and
// for those reads report to the expired hook (passive expiry), on the node
// that may write. A read never deletes. DBSIZE and Stats.Keys count only
// keys not expired at now.
//
// Reply texts match redis-server 7.x exactly; client-facing error strings
// are the Err* constants in reply.go and nowhere else. Data-dependent errors
// (WRONGTYPE, not an integer, overflow) are replies. A command that fails
// Validate, or a write Apply does not know, is a bug in whoever built it,
// and Apply and Read panic: a committed entry the store cannot apply must
// stop the node, not let replicas diverge.
//
// Apply copies what it keeps, so Args may alias the caller's buffers. Bulk
// replies alias the store's memory; that is safe because stored bytes are
// never modified below their length (APPEND may write past it, which no
// alias can see). Treat replies as read-only. Long arrays of bulks (LRANGE,
// counted pops) come as one ReplyBulks, their elements in one buffer,
// rather than a Reply per element; Expanded gives the ReplyArray it stands
// for.
//
// # Keyspace
//
// Keys live in copy-on-write B+trees of kvs's own (keyspace.go) ordered by
// (keyHash(key), key), split into 1024 shards by the top bits of the hash.
// The hash is fixed: the key's Redis Cluster slot in the top 14 of 63 bits,
// then 49 bits of xxhash64 with the low bit set, so never 0. Each slot's
// keys are one range of the order (CLUSTER COUNTKEYSINSLOT and
// GETKEYSINSLOT are rank and range lookups), and the order fixes snapshots
// and SCAN cursors, which therefore survive restarts and can move between
// replicas. The order gives SCAN an integer cursor,
// the hash of the next key to visit, that returns every key present for the
// whole scan (a batch never ends inside a run of equal hashes). Snapshot
// copies the array of shard roots and starts a new generation; a node of an
// older generation is copied before it is changed, so WriteTo streams a
// frozen view without the lock while writers go on. The trees are the TTL
// index too: each inner node records its children's earliest deadlines, so
// ExpiredKeys descends only where a key is due, and a deadline set or moved
// is a change to one item, not to a second structure.
//
// Beside the keyspace the store keeps cluster metadata, a small map of
// names to values (a node's client address, for one) written only by
// OpMetaSet, OpMetaCAS and OpMetaTxn entries: it is replicated and snapshotted like the keys, but no
// key command sees it and FLUSHALL leaves it alone. The ACL table (acl.go)
// is kept the same way, written only by OpACLSet; the fsm stores each
// user's rule line as opaque text, which the server parses.
//
// Values carry a type tag (a kind: string, hash, list, set, sorted set) so
// WRONGTYPE is exact (lookupLocked); the tags appear in snapshots. Each
// type's file registers its ops in the op table (ops.go) and its kind in
// the kind table (kinds.go): its name, OBJECT ENCODING, and how a value is
// written to a snapshot and read back. A collection is packed in item.val
// while small and held in item.obj, copy-on-write, once large (store.go).
//
// # Hashes
//
// A hash (hash.go) is packed into the item's val while small (at most
// Limits.HashMaxListpackEntries fields, none longer than
// Limits.HashMaxListpackValue): a count, then length-prefixed fields and
// values, immutable, rebuilt by each write. Past either limit it becomes a
// hashObj, a copy-on-write B-tree of entries holding field and value in one
// allocation, and stays one. Both forms order fields by (memberHash(field),
// field), so replies, HSCAN's cursor (the hash of the next field) and
// snapshots are the same on every replica whatever form each holds. A
// snapshot record says which form it had, so a restart keeps it.
//
// # Sets
//
// A set (set.go, set_repr.go) is packed into item.val while small: one
// immutable buffer of member offsets and bytes, an intset (Redis's
// encoding name, kept sticky as Redis keeps it) while it holds only
// integers and at most set-max-intset-entries of them, or at most
// set-max-listpack-entries members of at most set-max-listpack-value
// bytes. Past that it is a copy-on-write B-tree in item.obj. Both forms
// order the members by (memberHash, member), so iteration, SSCAN's cursor
// and SPOP's picks (by rank, from a PCG seeded by the command) are the same
// on every replica whatever thresholds each runs with; the set algebra
// merges in that order and stores its results without sorting.
//
// # Sorted sets
//
// A sorted set (zset.go) is ordered by (score, member), scores as float64
// (-0 equal to 0) and members bytewise. While small (Limits'
// zset-max-listpack-entries and -value) it is packed in the item's buffer
// as a count and (member, score) entries in order, rebuilt on each write;
// past that it is a zsetObj of two copy-on-write B+trees of its own
// (zset_tree.go), one by (score, member) whose counted nodes give ranks,
// one by (memberHash, member) for scores and ZSCAN's cursor. Their nodes
// hold members in flat append-only buffers, not as Go strings, so the
// garbage collector traces a few objects per 59 members, not one per
// member. Snapshots keep the form, and a snapshot streams a big set
// yielding its goroutine every 1024 members so writers are not kept from
// a P. Writes that can wake
// a blocked pop (ZADD, ZINCRBY, the STORE commands) signal their key when
// they create it, as Redis 7.0 signals the keys it adds and not those it
// adds to or overwrites.
//
// # Bitmaps, COPY, slots
//
// Bitmaps are strings (bits.go): bit 0 is the top bit of the first byte, as
// in Redis. A bit write that changes bytes inside the string builds a new
// buffer, since replies and snapshots share the old one without the lock;
// one that only grows the string writes past its length into spare
// capacity, which nothing else can see, so a bitmap built at rising offsets
// costs amortised O(1) per SETBIT. A string remembers (item.enc, not kept in
// snapshots) whether it was last written in place or by INCRBYFLOAT, only
// for OBJECT ENCODING's sake. COPY shares a string's bytes with its source
// but not their spare capacity, and clones a large collection (O(1),
// copy-on-write). CLUSTER COUNTKEYSINSLOT counts a slot's keys by rank in
// the slot-ordered keyspace, without visiting them.
//
// # Lists
//
// A list (list.go, list_quicklist.go) is packed into item.val while it is
// within list-max-listpack-size (Limits.ListMaxListpackSize: 8 KiB of
// entries by default), as a count and length-prefixed entries; a write
// builds a new buffer. Past that it becomes a copy-on-write B-tree of
// chunks of about 1 KiB of entries each (each entry readable from either
// end, as in a listpack), keyed by sequence numbers with room between
// neighbours: pushes and pops change one end chunk in place (pushes into
// room left at the chunk's front or back), LINDEX, LSET and LRANGE walk
// chunks from the nearer end, and a snapshot or COPY shares every chunk.
// Only the quicklist a chunk names as its owner changes it in place, and a
// clone leaves both sides owning nothing they share; bytes that were once
// an entry are never written again, since replies alias them. It is
// packed again once it shrinks to half the limit. Snapshots hold a list as
// its length and elements, whatever its form. Pushes that create their
// list (and LMOVE, RENAME onto a key) signal it ready for blocked
// clients, and a woken client's pop (FlagListReady, FlagZReady for sorted
// sets) passes over a key that holds another type by then, as Redis
// serves a key only to clients of its type; LMPOP and LMOVE with a token
// in Int2 report their reply through the ready hook (ResultOf), so a
// server can learn the outcome of a blocked client's pop from its own
// replica.
//
// # Moving slots
//
// A store owns every hash slot until an entry says otherwise (slots.go):
// OpSlotsAssign, or a move. Store.slots is then a table of each slot's
// mode (owned, exporting, fenced, not owned, importing); without one,
// every command pays a nil check and nothing more. A command with a key
// of a slot not owned (a write: or fenced) is refused whole before it
// runs, with SlotNotOwned's or SlotMoving's reply; active expiry and
// eviction pass over such keys instead. Keys of slots not owned stay in
// the keyspace, invisible to every read (SCAN, KEYS, RANDOMKEY, DBSIZE,
// Stats, ExpiredKeys, eviction, the slot commands, SORT's lookups), until
// OpSlotsPurge deletes them in bounded steps.
//
// A move of slots from store A to store B (move.go) is entries in both
// logs, so every replica and replay agrees on its phase: on A, OpMoveOut's
// begin makes the slots exporting, and the keyspace records every key of
// them written or deleted in the move's dirty set; ExportSlots's view and
// OpMoveDrain's chunks (the dirty keys' current records, or tombstones,
// in keyspace order) carry them to B, where OpMoveIn's stage stores them
// in place, in slots B does not own, so no read sees them; A's fence
// refuses writes, the last drains empty the set, B's activation makes the
// slots owned (one change of the table, however many keys), and A's
// release makes them not owned and its keys invisible at once. Cancel and
// abort undo a move before the activation. Chunks are snapshot records
// without versions; staged keys are stamped with B's versions as any
// write there is, announce no keyspace event, and the activation signals
// the lists and sorted sets among them ready. Why the view and the drains
// give B the slots' final state, and in which order they must be staged,
// is argued at the top of move.go. Snapshots keep the table, the moves in
// flight with their dirty sets, and the finished moves, so a repeated
// entry of a finished move is told from a new one.
//
// # Formats
//
// Entries (encoding.go) and snapshots (snapshot.go) start with a version
// byte; the layouts are drawn there. Both are validated when read: corrupt
// bytes give an error wrapping ErrCorrupt, never a panic, and a failed
// Restore leaves the store unchanged. A snapshot ends with a CRC-32C.
//
// # Scripts that run long
//
// A script's run calls its state's checkpoint every so many instructions
// (script_state.go): the budget, the busy threshold (read from the clock,
// which decides only what other clients are told), SCRIPT KILL. A run
// that may write inside a logged entry's apply (index != 0) is never
// killed: every replica and replay runs it to the end or its budget. A
// busy run calls back its caller's whileBusy, with the lock held, so that
// an event loop answers its other clients meanwhile. Connections' calls
// (the *Serving methods) never wait the plain way behind a script for the
// lock: a gate of two counters (serving.go) tells them a script may hold
// it, and they then wait on a goroutine they abandon once it is busy.
//
// # Raft
//
// RaftFSM (raft.go) implements hashicorp/raft's FSM and BatchingFSM:
// ApplyBatch decodes every command log with DecodeEntry and applies them all
// with ApplyBatch (one lock for the whole batch), log.Index becoming
// AppliedIndex; other log types get a nil response. FSMSnapshot.Persist is
// WriteTo on the sink and Release is Release; FSM.Restore is Restore. A
// committed command log that does not decode makes ApplyBatch panic.
package fsm
