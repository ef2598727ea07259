package server

import (
	"encoding/binary"
	"errors"
	"fmt"

	"kvs/fsm"
)

// Forwarding: a follower sends a batch of commands to the leader as one
// internal request, KVS.FORWARD <request>, and the leader answers with a
// bulk string holding the replies, or with an error that applies to every
// command of the batch. The follower writes the replies in its own client's
// protocol, so they are the bytes the leader would have sent that client.
//
// Both are fsm's encodings behind a version byte:
//
//	request := version=3  fsm.AppendCommands (reads too: a follower serving
//	           linearizable reads forwards them)
//	replies := version=3  applied u64 (little-endian)  fsm.AppendReplies
//
// applied is the leader's Cluster.AppliedIndex once the batch was applied:
// the follower waits until its own store has applied that much before it
// relays the replies, so a client reads its own writes on the node it
// writes through.
//
// Both come from the network: fsm's decoders validate everything (each
// command must pass fsm.Command.Validate) and return errors, never panic.
// Version 1 had its own command layout, version 2 no applied index; nodes
// of one cluster run one version of kvs.

const forwardVersion = 3

// ErrLeaderUnreachable: the follower could not send a request to the
// leader (no connection, or it failed before any byte was sent), so the
// request certainly did not take effect and may be retried.
var ErrLeaderUnreachable = errors.New("leader unreachable")

// appendCommands appends the request encoding of cmds to dst.
func appendCommands(dst []byte, cmds []fsm.Command) []byte {
	return fsm.AppendCommands(append(dst, forwardVersion), cmds)
}

// decodeCommands decodes a request. The arguments alias b.
func decodeCommands(b []byte) ([]fsm.Command, error) {
	body, err := forwardBody(b, "request")
	if err != nil {
		return nil, err
	}
	cmds, err := fsm.DecodeCommands(body)
	if err != nil {
		return nil, fmt.Errorf("server: forwarded request: %w", err)
	}
	return cmds, nil
}

// appendReplies appends the encoding of replies, applied at the leader's
// index applied, to dst.
func appendReplies(dst []byte, applied uint64, replies []fsm.Reply) []byte {
	dst = binary.LittleEndian.AppendUint64(append(dst, forwardVersion), applied)
	return fsm.AppendReplies(dst, replies)
}

// decodeReplies decodes a reply encoding. Bulk values alias b.
func decodeReplies(b []byte) (applied uint64, replies []fsm.Reply, err error) {
	body, err := forwardBody(b, "replies")
	if err != nil {
		return 0, nil, err
	}
	if len(body) < 8 {
		return 0, nil, errors.New("server: forwarded replies: no applied index")
	}
	replies, err = fsm.DecodeReplies(body[8:])
	if err != nil {
		return 0, nil, fmt.Errorf("server: forwarded replies: %w", err)
	}
	return binary.LittleEndian.Uint64(body), replies, nil
}

// forwardBody checks b's version byte and returns the rest.
func forwardBody(b []byte, what string) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("server: forwarded %s is empty", what)
	}
	if b[0] != forwardVersion {
		return nil, fmt.Errorf("server: forwarded %s version %d, want %d", what, b[0], forwardVersion)
	}
	return b[1:], nil
}
