// Package resp is kvs's codec for the Redis serialization protocol, RESP2
// and RESP3: the request parser, the reply writer and the reply reader. It
// knows bytes only: nothing of sockets (it reads an io.Reader or a
// bufio.Reader it is given) and nothing of commands.
//
// # Requests
//
// A Reader parses the requests of one connection in place, with Redis's
// framing rules and limits and Redis 7's exact error texts (the Msg
// constants, carried by *ProtocolError, after which the connection must be
// closed). A client that must authenticate and has not is held to
// Redis's tighter limits (Reader.SetAuthRequired). A Reader can report the
// size of its read buffer as it changes (SetBufferAccount), so a server can
// count what its clients hold. A pipeline of small requests costs no
// allocation: the arguments alias the read buffer until the next call. A
// non-blocking connection's Read reports ErrAgain when it has nothing to
// give, and ReadReady returns without waiting.
//
// # Replies
//
// The Append functions write one reply, or the header of an aggregate
// whose elements follow, to a byte slice, with no allocation beyond its
// growth. Functions that take proto write the RESP3 type for proto 3 and
// the form redis-server falls back to in RESP2: a map becomes a flat array
// of its pairs, a set or push an array, a double or a big number or a
// verbatim string a bulk string, a boolean the integer 1 or 0, null the
// null bulk string ("$-1") or the null array ("*-1"). Doubles are
// formatted as redis-server 7.0 formats them ("%.17g", "inf", "-inf").
//
// # Reading replies
//
// ReadReply reads one reply of any RESP2 or RESP3 type into a Value, a
// copy that outlives the buffer; SkipReply reads one and reports only its
// kind, size, nullness and error text, allocating nothing. Both validate
// every byte: lengths, counts and nesting are bounded by Limits, memory
// grows only as bytes arrive, and bad input is an error wrapping
// ErrProtocol, never a panic. RESP3 attributes are dropped; streamed
// strings and aggregates are not supported.
//
// Nothing here is safe for concurrent use; nothing starts a goroutine.
package resp
