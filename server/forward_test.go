package server

import (
	"math"
	"reflect"
	"testing"

	"kvs/fsm"
)

func b(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = []byte(s[i])
	}
	return out
}

var forwardCommands = [][]fsm.Command{
	{},
	{{Op: fsm.OpSet, Flags: fsm.FlagNX | fsm.FlagGet, Int: 1_700_000_000_123, Args: b("k", "v")}},
	{
		{Op: fsm.OpIncrBy, Int: math.MinInt64, Args: b("n")},
		{Op: fsm.OpIncrByFloat, Float: -0.1, Args: b("f", "-0.1")},
		{Op: fsm.OpGetRange, Int: -3, Int2: math.MaxInt64, Args: b("k")},
		{Op: fsm.OpMSet, Args: b("a", "", "b", "\x00\r\n")},
		{Op: fsm.OpFlushAll},
		{Op: fsm.OpScan, Int: 42, Int2: 10, Args: b("p*", "string")},
		{Op: fsm.OpDBSize},
	},
}

func TestForwardCommandsRoundTrip(t *testing.T) {
	for _, cmds := range forwardCommands {
		enc := appendCommands(nil, cmds)
		got, err := decodeCommands(enc)
		if err != nil {
			t.Fatalf("%v: %v", cmds, err)
		}
		if len(cmds) == 0 && len(got) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, cmds) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, cmds)
		}
	}
}

var forwardReplies = [][]fsm.Reply{
	{},
	{{Kind: fsm.ReplyNil}},
	{
		{Kind: fsm.ReplyStatus, Str: "OK"},
		{Kind: fsm.ReplyError, Str: fsm.ErrWrongType},
		{Kind: fsm.ReplyInt, Int: -1},
		{Kind: fsm.ReplyInt, Int: math.MaxInt64},
		{Kind: fsm.ReplyBulk, Bulk: []byte{}},
		{Kind: fsm.ReplyBulk, Bulk: []byte("a\r\nb\x00")},
		{Kind: fsm.ReplyArray},
		{Kind: fsm.ReplyArray, Array: []fsm.Reply{
			{Kind: fsm.ReplyBulk, Bulk: []byte("0")},
			{Kind: fsm.ReplyArray, Array: []fsm.Reply{{Kind: fsm.ReplyBulk, Bulk: []byte("k")}, {Kind: fsm.ReplyNil}}},
		}},
	},
	{
		bulksReply("a", "", "b\r\nc"),
		{Kind: fsm.ReplyArray, Array: []fsm.Reply{{Kind: fsm.ReplyBulk, Bulk: []byte("k")}, bulksReply("v")}},
	},
}

// bulksReply is the flat array of bulks (fsm.ReplyBulks) of elems.
func bulksReply(elems ...string) fsm.Reply {
	var buf []byte
	for _, e := range elems {
		buf = fsm.AppendBulks(buf, []byte(e))
	}
	return fsm.BulksReply(buf, len(elems))
}

func TestForwardRepliesRoundTrip(t *testing.T) {
	for i, replies := range forwardReplies {
		applied := uint64(i) << 40
		enc := appendReplies(nil, applied, replies)
		index, got, err := decodeReplies(enc)
		if err != nil {
			t.Fatalf("%v: %v", replies, err)
		}
		if index != applied {
			t.Errorf("applied index %d, want %d", index, applied)
		}
		// Compare as the client sees them: the RESP bytes.
		for _, proto := range []int{2, 3} {
			var g, w []byte
			for i := range got {
				g = appendReply(g, &got[i], proto)
			}
			for i := range replies {
				w = appendReply(w, &replies[i], proto)
			}
			if string(g) != string(w) {
				t.Errorf("RESP%d: got %q, want %q", proto, g, w)
			}
		}
	}
}

func TestForwardDecodeRejects(t *testing.T) {
	set := appendCommands(nil, []fsm.Command{{Op: fsm.OpSet, Args: b("k", "v")}})
	cases := map[string][]byte{
		"empty":          nil,
		"old version":    {1, 0},
		"truncated":      set[:len(set)-1],
		"trailing":       append(append([]byte(nil), set...), 0),
		"huge count":     {forwardVersion, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"invalid op":     appendCommands(nil, []fsm.Command{{Op: 200}}),
		"wrong arity":    appendCommands(nil, []fsm.Command{{Op: fsm.OpSet, Args: b("k")}}),
		"unknown flags":  appendCommands(nil, []fsm.Command{{Op: fsm.OpSet, Flags: 1 << 15, Args: b("k", "v")}}),
		"flags too wide": {forwardVersion, 1, byte(fsm.OpFlushAll), 0x80, 0x80, 0x04, 0, 0},
	}
	for name, in := range cases {
		if _, err := decodeCommands(in); err == nil {
			t.Errorf("%s: decoded %x", name, in)
		}
	}
	deep := []byte{forwardVersion, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	for range 50 { // past fsm's bound on reply nesting
		deep = append(deep, byte(fsm.ReplyArray), 1)
	}
	deep = append(deep, byte(fsm.ReplyNil))
	replyCases := map[string][]byte{
		"empty":         nil,
		"old version":   {1, 0},
		"old version 2": {2, 1, byte(fsm.ReplyNil)},
		"no index":      {forwardVersion, 1, 0, 0},
		"unknown kind":  {forwardVersion, 0, 0, 0, 0, 0, 0, 0, 0, 1, 99},
		"too deep":      deep,
		"line break":    appendReplies(nil, 1, []fsm.Reply{{Kind: fsm.ReplyError, Str: "ERR a\r\n+OK"}}),
		"truncated":     {forwardVersion, 0, 0, 0, 0, 0, 0, 0, 0, 1, byte(fsm.ReplyBulk), 5, 'a'},
	}
	for name, in := range replyCases {
		if _, _, err := decodeReplies(in); err == nil {
			t.Errorf("replies %s: decoded %x", name, in)
		}
	}
}

// FuzzDecodeForward feeds both decoders arbitrary bytes: they must return
// errors, never panic, and what they accept must encode back to the same
// bytes.
func FuzzDecodeForward(f *testing.F) {
	for _, cmds := range forwardCommands {
		f.Add(appendCommands(nil, cmds))
	}
	for _, replies := range forwardReplies {
		f.Add(appendReplies(nil, 7, replies))
	}
	f.Add([]byte{forwardVersion, 0, 0, 0, 0, 0, 0, 0, 0, 1, byte(fsm.ReplyArray), 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		if cmds, err := decodeCommands(in); err == nil {
			// A varint written with redundant continuation bytes decodes
			// to the same value and re-encodes shorter; anything else
			// must re-encode to the very same bytes.
			if enc := appendCommands(nil, cmds); len(enc) == len(in) && string(enc) != string(in) {
				t.Errorf("commands re-encode to %x, from %x", enc, in)
			}
			for i := range cmds {
				if err := cmds[i].Validate(); err != nil {
					t.Errorf("decoded an invalid command: %v", err)
				}
			}
		}
		if applied, replies, err := decodeReplies(in); err == nil {
			appendReplies(nil, applied, replies)
			for i := range replies {
				appendReply(nil, &replies[i], 3)
			}
		}
	})
}
