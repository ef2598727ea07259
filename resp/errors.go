package resp

import "errors"

// The error texts of request framing violations, in Redis 7's exact
// wording (networking.c). They carry no leading '-' and no CRLF.
const (
	MsgInvalidBulkLength      = "ERR Protocol error: invalid bulk length"
	MsgInvalidMultiBulkLength = "ERR Protocol error: invalid multibulk length"
	MsgInlineTooBig           = "ERR Protocol error: too big inline request"
	MsgUnbalancedQuotes       = "ERR Protocol error: unbalanced quotes in request"
	MsgMultiBulkCountTooBig   = "ERR Protocol error: too big mbulk count string"
	MsgBulkCountTooBig        = "ERR Protocol error: too big bulk count string"
	// A client that must authenticate and has not is held to tighter
	// limits (see Reader.SetAuthRequired).
	MsgUnauthMultiBulkLength = "ERR Protocol error: unauthenticated multibulk length"
	MsgUnauthBulkLength      = "ERR Protocol error: unauthenticated bulk length"
)

// msgExpectedDollar is the error for an argument that does not start with
// '$'; got is the byte found instead.
func msgExpectedDollar(got byte) string {
	return "ERR Protocol error: expected '$', got '" + string([]byte{got}) + "'"
}

// ProtocolError is a request framing violation. Text is the error reply a
// client gets for it (one of the Msg constants), after which Redis closes
// the connection: the stream cannot be resynchronised.
type ProtocolError struct{ Text string }

func (e *ProtocolError) Error() string { return e.Text }

// ErrQueryBufferLimit ends a stream whose unparsed bytes (the request
// being received) grew past the Reader's query buffer limit; Redis closes
// such a client without a reply.
var ErrQueryBufferLimit = errors.New("resp: client query buffer limit reached")

// ErrAgain is what a non-blocking connection's Read returns when it has
// nothing to read now (EAGAIN); ReadReady then returns without waiting.
var ErrAgain = errors.New("resp: read would block")
