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
//
// # Connections
//
// Server runs its own accept loop and one goroutine per connection (not
// tidwall/redcon's Server, whose Close drops connections without letting
// them finish, and whose parser enforces no request limits). Each
// connection's reqReader parses requests in place in its read buffer, with
// no allocation per request, and enforces proto-max-bulk-len and Redis's
// framing limits as it parses (answered with Redis's "Protocol error"
// texts, then the connection is closed). It skips empty requests as Redis
// does and splits inline (telnet-style) requests with Redis's quoting rules.
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
//     summary, since and group; CLIENT LIST reports only the fields kvs
//     knows (no fd, qbuf, memory figures).
//   - A request line holding a NUL byte is cut there; Redis waits for more
//     input.
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
// tick). Only a cluster leader may do so: SetActiveExpiry switches it as
// leadership changes.
package server
