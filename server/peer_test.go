package server

import (
	"bufio"
	"errors"
	"strings"
	"testing"

	"kvs/resp"
)

// TestReadPeerReply: a leader's reply is a status, an error or a bulk
// string of at most maxPeerReply bytes; anything else fails the round trip.
func TestReadPeerReply(t *testing.T) {
	cases := []struct {
		in   string
		want peerReply
		err  error
	}{
		{in: "+OK\r\n", want: peerReply{kind: '+', text: "OK"}},
		{in: "-TRYAGAIN not the leader\r\n", want: peerReply{kind: '-', text: "TRYAGAIN not the leader"}},
		{in: "$3\r\na\nb\r\n", want: peerReply{kind: '$', bulk: []byte("a\nb")}},
		{in: "$-1\r\n", want: peerReply{kind: '$'}},
		{in: ":1\r\n", err: errPeerProtocol},
		{in: "*1\r\n$1\r\na\r\n", err: errPeerProtocol},
		{in: "$4294967297\r\n", err: resp.ErrProtocol},
		{in: "$3\r\nabcd\r\n", err: resp.ErrProtocol},
		{in: "+OK\n", err: resp.ErrProtocol},
	}
	for _, tc := range cases {
		got, err := readPeerReply(bufio.NewReader(strings.NewReader(tc.in)))
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%q: error %v, want %v", tc.in, err, tc.err)
		case tc.err == nil && (err != nil || got.kind != tc.want.kind || got.text != tc.want.text ||
			string(got.bulk) != string(tc.want.bulk) || (got.bulk == nil) != (tc.want.bulk == nil)):
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
