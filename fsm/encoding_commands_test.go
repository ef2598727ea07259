package fsm

import (
	"errors"
	"strings"
	"testing"
)

// A command list carries reads as well as writes; a log entry only writes.
func TestDecodeCommandsAcceptsReads(t *testing.T) {
	cmds := []Command{
		{Op: OpGet, Args: [][]byte{[]byte("k")}},
		{Op: OpSet, Args: [][]byte{[]byte("k"), []byte("v")}, Int: 1500},
	}
	got, err := DecodeCommands(AppendCommands(nil, cmds))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Op != OpGet || got[1].Int != 1500 || string(got[1].Args[1]) != "v" {
		t.Fatalf("decoded %+v", got)
	}
	if _, _, err := DecodeEntry(EncodeEntry(nil, 1, cmds)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an entry holding a read decoded: %v", err)
	}
	// Flags just in range decode; one bit wider is refused.
	if _, err := DecodeCommands([]byte{1, byte(OpFlushAll), 0, 0, 0}); err != nil {
		t.Fatalf("FLUSHALL: %v", err)
	}
	if _, err := DecodeCommands([]byte{1, byte(OpFlushAll), 0x80, 0x80, 0x04, 0, 0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flags past 16 bits: %v", err)
	}
}

func TestDecodeRepliesRoundTrip(t *testing.T) {
	in := []Reply{
		{Kind: ReplyNil},
		{Kind: ReplyStatus, Str: "OK"},
		{Kind: ReplyError, Str: "ERR no"},
		{Kind: ReplyInt, Int: -7},
		{Kind: ReplyBulk, Bulk: []byte{}},
		{Kind: ReplyArray, Array: []Reply{{Kind: ReplyBulk, Bulk: []byte("0")}, {Kind: ReplyArray}}},
	}
	out, err := DecodeReplies(AppendReplies(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) || out[1].Str != "OK" || out[3].Int != -7 || out[4].Bulk == nil ||
		string(out[5].Array[0].Bulk) != "0" || out[5].Array[1].Kind != ReplyArray {
		t.Fatalf("round trip gave %+v", out)
	}
	if _, err := DecodeReplies([]byte{1, byte(ReplyStatus), 3, 'a', '\n', 'b'}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a status with a line break decoded: %v", err)
	}
}

func TestCommandKeys(t *testing.T) {
	for _, tc := range []struct {
		cmd  Command
		want string
		all  bool
	}{
		{c(OpSet, "k", "v"), "k", false},
		{c(OpMSet, "a", "1", "b", "2"), "a b", false},
		{c(OpDel, "a", "b", "c"), "a b c", false},
		{c(OpRename, "a", "b"), "a b", false},
		{c(OpFlushAll), "", true},
		{c(OpMetaSet, "name", "v"), "", false},
		{c(OpGet, "k"), "", false},
	} {
		keys, all := tc.cmd.Keys()
		var got []string
		for _, k := range keys {
			got = append(got, string(k))
		}
		if strings.Join(got, " ") != tc.want || all != tc.all {
			t.Errorf("%v: Keys = %q, %v; want %q, %v", tc.cmd.Op, got, all, tc.want, tc.all)
		}
	}
}
