// Package server is kvs's RESP front end: it accepts Redis clients, parses
// their commands, and answers them with the bytes redis-server 7 would send.
//
// # Contract
//
//   - Every data command is parsed here into an fsm.Command. All syntax and
//     range errors (arity, options, integers, expiry overflow) are decided
//     here, in Redis's order of checks, so the store only ever sees valid
//     commands; errors that depend on the data (WRONGTYPE, not an integer)
//     come back from the store as error replies. Relative expiries (EX, PX,
//     EXPIRE, SETEX, ...) become absolute Unix-millisecond deadlines here,
//     because apply must not read the clock.
//   - Writes reach the store only through the Proposer, which decides how
//     durable they are (memory, append log, Raft). Reads go straight to
//     Store.Read with the current time.
//   - One pipeline (every request that has arrived on a connection when the
//     server reads it) is executed in order: consecutive writes are proposed
//     as one batch, one Propose call and one durability wait; any other
//     command first proposes the writes before it, so effects and replies
//     keep the client's order. If Propose fails, every command of the batch
//     is answered "-ERR <error text>".
//   - Replies are written in the connection's protocol, RESP2 until the
//     client sends HELLO 3.
//   - Client-facing error texts are built in errors.go only.
//   - Redis's parameters, their checks, config files and CONFIG REWRITE
//     are package config's. CONFIG SET (configcmd.go) checks every pair
//     there first, then applies them here, where what a change does is
//     known (maxmemory, the store's thresholds, TLS, the port, ...); a
//     change that fails to apply is undone, as in Redis.
//   - Every command a client sends passes the checks of Redis's
//     processCommand, in its order, in one place (admit.go), before it
//     is either run or queued in MULTI: its name, its subcommand and
//     arity, authentication, the ACL, maxmemory, the log's health, RESP2's
//     subscribed mode, a client pause. A refusal inside MULTI makes EXEC
//     fail with EXECABORT.
//   - Before a command runs, its connection's user must be authenticated
//     (when the default user has a password) and allowed to run it on its
//     keys and channels (package acl; acl*.go here). The users are the
//     store's replicated ACL table, compiled when its generation changes; while a connection's
//     user may run anything the check is one atomic load. Until it has
//     logged in, a connection that must is held to Redis's limits for an
//     unauthenticated client: 10 arguments and 16 KiB bulks per request
//     (reader.go) and 16 KiB of pending output (outbuf.go).
//   - Used memory, which maxmemory and INFO memory report, counts the
//     data and the clients' read buffers as they change and the rest as
//     of the last garbage collection, never garbage (memory.go).
//
// # Connections
//
// Server runs its own accept loop (not tidwall/redcon's Server, whose
// Close drops connections without letting them finish, and whose parser
// enforces no request limits). In memory mode on Linux, connections are
// served by event loops, one per CPU, as redis-server serves them
// (loop_linux.go): a loop waits on an edge-triggered epoll set, reads each
// ready connection once, executes what it read, and writes the round's
// replies back to back. That saves the read that finds a socket empty and
// the park and wake-up of a goroutine per request, and wakes a client once
// for many replies. A Proposer that works in rounds (roundProposer:
// durable mode) is served by loops too: a round's write batches are
// enqueued without waiting and kicked together at the end of the round,
// and the pipelines that waited (suspended at the command that needed
// their batch answered, see client.execute) continue when the proposer
// answers.
// In cluster mode, where a write waits for Raft, the loops run each step
// that waits (a batch's proposal or forward, a pop, a read barrier) on a
// goroutine of its own while the client is suspended (loop.offLoop). With
// Config.ConnGoroutines each connection has a goroutine of its own, which
// waits without holding up the others. Each
// connection's resp.Reader parses requests in place in its read buffer,
// with no allocation per request, and enforces proto-max-bulk-len and
// Redis's framing limits as it parses (answered with Redis's "Protocol
// error" texts, then the connection is closed). It skips empty requests as
// Redis does and splits inline (telnet-style) requests with Redis's quoting
// rules. Replies are written with package resp's writer.
//
// With Config.TLS a second listener serves TLS (tls.go): its connections
// always have a goroutine each, which runs the handshake (bounded by a
// deadline) and then serves as above. Every handshake reads the TLS
// material in force, which CONFIG SET of the tls-* parameters replaces
// only once the new files have loaded. With the tls-cluster parameter the
// node's own connections to other nodes (forwarding pool, PUBLISH links)
// dial TLS with its certificate, and the node commands (KVS.PEER,
// KVS.FORWARD, KVS.SYNC, KVS.PUBLISH, KVS.JOIN, KVS.REMOVE) are refused on
// connections that presented no certificate the CA signed.
//
// # Cluster mode
//
// With Config.Cluster set, the server is one node of a Raft cluster (the
// Proposer is the Raft-backed one). Where a command runs is the router's
// to say (router.go), the one place that knows whether there is a cluster
// and which group holds a slot. A batch of writes goes:
//
//   - on the leader, to the Proposer;
//   - on a follower, to a client that sent READONLY (a cluster-aware
//     client such as go-redis's ClusterClient), "-MOVED <slot> <leader>"
//     for each write that names a key, to the leader of the slot's group,
//     the slot computed as Redis Cluster
//     does (CRC16 of the key or its {hashtag}, mod 16384);
//   - on a follower otherwise, to the leader: the batch is sent as one
//     KVS.FORWARD request over a pool of connections to the leader's RESP
//     address (forward.go draws the encoding, peer.go the pool) and the
//     leader's replies are written in the client's protocol, byte for
//     byte what the leader would have sent, once this node's store has
//     applied the leader's applied index sent with them (read your
//     writes). The leader executes a forwarded batch itself and never
//     forwards it again.
//
// Server.Propose routes the same way, for the wiring's own writes, and
// Server.ProposeGroup for another group's (a move of slots' steps).
//
// While slots move between groups (KVS.SLOTS, slotmoves.go; the moves
// themselves are cmd/kvs's), a group's store refuses a write to a slot it
// has fenced and any command on a slot it gave up, whole and before it
// runs; such a command, which changed nothing, is sent again to the
// slot's group once this node's slot map names it (reroute.go).
//
// The groups themselves change too (KVS.GROUPS, groupscmd.go; the list
// of groups is cmd/kvs's): Server.SetGroups adds a group as one held
// elsewhere until SetLocalGroup hands a replica of it over, and removes
// one once no slot map in force names it and no replica of it is served
// here; the router's table of groups is replaced whole each time.
//
// Reads are answered from the node's store, possibly stale on a follower
// for writes other connections made. A READONLY connection's reads on a
// follower first wait for the leader's applied index (KVS.SYNC, once per
// run of reads, shared across connections: replicasync.go). With Config.LinearizableReads the leader first passes
// Cluster.ReadBarrier (once per run of consecutive reads in a pipeline),
// and followers forward reads along with the writes around them.
//
// A command that could not be executed gets one of these errors; the
// retryable prefixes (which go-redis retries by itself) are used only when
// the command certainly did not take effect:
//
//   - "CLUSTERDOWN no leader": no leader is known (ErrNoLeader).
//   - "TRYAGAIN not the leader, the write was not applied": the node
//     asked is not the leader (ErrNotLeader); for a read, "TRYAGAIN not
//     the leader".
//   - "TRYAGAIN the leader could not be reached, the write was not
//     applied: <detail>": forwarding failed before anything was sent.
//   - "LOADING kvs is loading the dataset in memory": a read on a node that
//     has not caught up with what it held before it restarted
//     (Cluster.CaughtUp), which would otherwise answer from an older state.
//   - "MISCONF Errors writing to the AOF file: <OS error>": the node
//     cannot write its log (ErrLogWrite from the Proposer: durable mode
//     on a full disk); the write was not applied. Reads go on.
//   - "NOREPLICAS Not enough good replicas to write.": min-replicas-to-write
//     is on and the leader (outside a cluster, the node, which has no
//     replicas) has fewer good replicas (replicas.go); the write was not
//     applied.
//   - "UNCERTAIN the write may or may not have been applied: <detail>":
//     the write was submitted but its fate is unknown (ErrUnknownOutcome
//     from the Proposer, or the connection to the leader failed after the
//     request was written). A read is never uncertain: it gets "TRYAGAIN
//     the leader could not be reached: <detail>".
//
// CLUSTER SLOTS, SHARDS, NODES, INFO, MYID, KEYSLOT, REPLICAS and HELP,
// ROLE and INFO replication describe one shard owning all 16384 slots,
// the leader its master and the other members (those whose client address
// is known) its replicas, with node ids hex(sha1(member ID)); on a sharded
// node, a shard per group holding slots, and ROLE and INFO replication say
// of the node what CLUSTER NODES does (clustershards.go). KVS.JOIN,
// KVS.REMOVE (relayed to the leader from a follower) and KVS.STATUS
// administer the cluster. Only the leader runs active expiry. Without a
// Cluster, CLUSTER, READONLY, READWRITE and the cluster's KVS.* commands
// answer "ERR This instance has cluster support disabled", as redis-server
// does.
//
// # Backups and saves
//
// KVS.BACKUP, in every mode, streams a backup file (package backup) of an
// O(1) snapshot of the store on the connection, without the store's lock,
// and closes the connection; a follower first catches up with the leader's
// applied index. On a node of several groups KVS.BACKUP GROUPS writes the
// groups named, for a backup put together from several nodes. SAVE and BGSAVE ask Config.Saver (the wal's compaction, a
// raft snapshot) and LASTSAVE reports the last success; backup.go.
//
// # Pub/sub
//
// Subscriptions are per node and per connection (pubsub.go draws how
// messages reach subscribers on other event loops and goroutines, and how
// client-output-buffer-limit pubsub bounds a slow one). A PUBLISH waits
// until the other event loops have run what they received before it, so
// a SUBSCRIBE sent first on another connection counts, as in Redis
// (order.go); in cluster mode a
// PUBLISH is also sent to every other member over one ordered link each
// (pubsub_cluster.go), at most once. Keyspace notifications are emitted by
// the store's apply through a hook (notify.go), and so are the messages a
// script or function publishes: every node delivers them to its own
// subscribers as it applies the script, never over the links.
//
// # Scripts that run long
//
// Once a script has run busy-reply-threshold milliseconds, every command
// but Redis's allow_busy ones is answered BUSY, SCRIPT KILL and FUNCTION
// KILL stop it unless it wrote or runs inside a logged entry's apply, and
// an event loop running it answers its other clients from inside it
// (busy.go, loop_linux.go's serveBusy). script-write-budget bounds a
// script that may write in durable and cluster mode (config_script.go).
//
// # Limits
//
// Protected mode refuses clients from outside loopback at accept while no
// password is set (protected.go). client-output-buffer-limit bounds what a
// client may have pending: the normal class on the event loops by running
// pipelines in slices and on goroutines by blocking writes (outbuf.go),
// the pubsub class where messages are queued (pubsub.go).
// client-query-buffer-limit bounds a request being received (the resp
// Reader). maxmemory refuses denyoom commands or evicts keys through the
// proposer, only on the leader in a cluster (evict.go).
//
// # Caveats
//
// Where kvs answers differently from redis-server 7, on purpose:
//
//   - One database: SELECT accepts only database 0 ("databases 1"
//     in CONFIG GET); SELECT 1 is "ERR DB index is out of range".
//   - SCAN cursors are kvs's own; a cursor of 2^63 or more (never handed
//     out) ends the scan instead of being reinterpreted.
//   - COMMAND INFO has no key specs or tips, and COMMAND DOCS only
//     summary, since and group; CLIENT LIST prints Redis's fields, the
//     buffer and memory figures kvs does not keep per connection as 0.
//   - A command's duration (SLOWLOG, LATENCY, commandstats) is, for a
//     write, its batch's time, which includes the wait for fsync or
//     consensus (slowlog.go). CLIENT PAUSE holds only this node's clients
//     (cmd_client.go); MONITOR shows what this node executes (monitor.go).
//   - A request line holding a NUL byte is cut there; Redis waits for more
//     input.
//   - In cluster mode a follower forwards a plain client's writes instead
//     of redirecting them, and serves reads without READONLY. CLUSTER
//     NODES reports no ping times, its cluster-bus port is the Raft port,
//     and replicas' replication offsets are the commit index this node
//     knows. Slot-management subcommands (ADDSLOTS, MEET, ...) are not
//     supported. Keys of a multi-key command need not share a slot.
//
// # Lifecycle
//
// New validates the Config. Listen binds (so a taken port is reported before
// serving), Serve accepts until Shutdown or Close. Shutdown stops accepting,
// lets each connection finish the pipeline it is executing and write its
// replies, then closes it; Close closes everything at once. Both wait for
// every goroutine the Server started (accept loop, connections, the cron
// loop that samples stats and runs active expiry) and are idempotent.
//
// Active expiry proposes OpDelExpired batches through the Proposer every
// 100 ms, for as long as it keeps finding full batches (up to 25 ms a
// tick). Passive expiry proposes the deletion of the expired keys a read
// found (the store's expired hook) right after the read: at once in
// memory mode, from the cron loop where a proposal waits. Only a cluster
// leader may do either: in cluster mode a follower skips the cycle,
// whatever SetActiveExpiry said, and drops what its reads found; and
// neither runs while a client pause is on (expire.go).
package server
