package server

import (
	"testing"

	"kvs/fsm"
)

// TestBitCommandsParse checks what the server answers itself, and the
// errors Redis 7.0 gives only once the key is found, byte for byte
// (replies taken from redis-server 7.0.15).
func TestBitCommandsParse(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "s", "foobar"}, "+OK\r\n"},
		{[]string{"SETBIT", "b", "-1", "1"}, "-" + errBitOffset + "\r\n"},
		{[]string{"SETBIT", "b", "x", "1"}, "-" + errBitOffset + "\r\n"},
		{[]string{"SETBIT", "b", "4294967296", "1"}, "-" + errBitOffset + "\r\n"},
		{[]string{"SETBIT", "b", "1", "2"}, "-" + errBitValue + "\r\n"},
		{[]string{"SETBIT", "b", "1", "-1"}, "-" + errBitValue + "\r\n"},
		{[]string{"GETBIT", "b", "a"}, "-" + errBitOffset + "\r\n"},
		{[]string{"SETBIT", "b", "7", "1"}, ":0\r\n"},
		{[]string{"BITCOUNT", "nokey", "a", "b"}, ":0\r\n"},
		{[]string{"BITCOUNT", "s", "1"}, "-" + errSyntax + "\r\n"},
		{[]string{"BITCOUNT", "s", "a", "1"}, "-" + errNotInteger + "\r\n"},
		{[]string{"BITCOUNT", "s", "0", "1", "bogus"}, "-" + errSyntax + "\r\n"},
		{[]string{"BITCOUNT", "s", "-1", "-2", "bogus"}, ":0\r\n"},
		{[]string{"BITCOUNT", "s", "5", "30", "bit"}, ":17\r\n"},
		{[]string{"BITPOS", "nokey", "2"}, "-" + errBitPosBit + "\r\n"},
		{[]string{"BITPOS", "nokey", "0", "1", "2", "bogus"}, ":0\r\n"},
		{[]string{"BITPOS", "nokey", "1", "0", "1", "2", "3"}, ":-1\r\n"},
		{[]string{"BITPOS", "s", "1", "a"}, "-" + errNotInteger + "\r\n"},
		{[]string{"BITPOS", "s", "0", "0", "x", "bogus"}, "-" + errSyntax + "\r\n"},
		{[]string{"BITPOS", "s", "0", "2", "-1", "bit"}, ":3\r\n"},
		{[]string{"BITOP", "not", "d", "s", "b"}, "-" + errBitOpNot + "\r\n"},
		{[]string{"BITOP", "nand", "d", "s"}, "-" + errSyntax + "\r\n"},
		{[]string{"BITOP", "AND", "d", "s", "b"}, ":6\r\n"},
		{[]string{"BITFIELD", "bf", "overflow", "bogus"}, "-" + errBitFieldOver + "\r\n"},
		{[]string{"BITFIELD", "bf", "get"}, "-" + errSyntax + "\r\n"},
		{[]string{"BITFIELD", "bf", "get", "x8", "0"}, "-" + errBitFieldType + "\r\n"},
		{[]string{"BITFIELD", "bf", "get", "u64", "0"}, "-" + errBitFieldType + "\r\n"},
		{[]string{"BITFIELD", "bf", "get", "u8", "-1"}, "-" + errBitOffset + "\r\n"},
		{[]string{"BITFIELD", "bf", "set", "u8", "0", "a"}, "-" + errNotInteger + "\r\n"},
		{[]string{"BITFIELD", "bf", "set", "u8", "#2", "7", "get", "u8", "#2"}, "*2\r\n:0\r\n:7\r\n"},
		{[]string{"BITFIELD", "bf", "get", "u8", "16", "get", "i64", "#1"}, "*2\r\n:7\r\n:0\r\n"},
		{[]string{"BITFIELD", "nk"}, "*0\r\n"},
		{[]string{"BITFIELD_RO", "bf", "set", "u8", "0", "1"}, "-" + errBitFieldRO + "\r\n"},
		{[]string{"BITFIELD_RO", "bf", "get", "u8", "#2"}, "*1\r\n:7\r\n"},
		{[]string{"BITFIELD", "bf", "overflow", "fail", "set", "u2", "0", "9"}, "*1\r\n$-1\r\n"},
		{[]string{"MSET", "a", "ohmytext", "c", "mynewtext"}, "+OK\r\n"},
		{[]string{"LCS", "a", "c"}, "$6\r\nmytext\r\n"},
		{[]string{"LCS", "a", "c", "len", "idx"}, "-" + errLCSLenAndIdx + "\r\n"},
		{[]string{"LCS", "a", "c", "minmatchlen"}, "-" + errSyntax + "\r\n"},
		{[]string{"LCS", "a", "c", "minmatchlen", "x"}, "-" + errNotInteger + "\r\n"},
		{[]string{"LCS", "a", "c", "IDX", "MINMATCHLEN", "4"}, "*4\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n"},
		{[]string{"COPY", "a", "a"}, "-" + errSameObject + "\r\n"},
		{[]string{"COPY", "a", "a", "bogus"}, "-" + errSyntax + "\r\n"},
		{[]string{"COPY", "a", "z", "db"}, "-" + errSyntax + "\r\n"},
		{[]string{"COPY", "a", "z", "db", "x"}, "-" + errNotInteger + "\r\n"},
		{[]string{"COPY", "a", "z", "db", "16"}, "-" + errDBIndex + "\r\n"},
		{[]string{"COPY", "a", "z", "DB", "0", "REPLACE"}, ":1\r\n"},
		{[]string{"OBJECT", "ENCODING", "z"}, "$6\r\nembstr\r\n"},
		{[]string{"OBJECT", "ENCODING", "b"}, "$3\r\nraw\r\n"},
		{[]string{"OBJECT", "ENCODING", "nokey"}, "$-1\r\n"},
		{[]string{"OBJECT", "ENCODING"}, "-" + errWrongArgs("object|encoding") + "\r\n"},
		{[]string{"OBJECT", "BOGUS", "a"}, "-ERR unknown subcommand 'BOGUS'. Try OBJECT HELP.\r\n"},
		{[]string{"OBJECT", "HELP", "x"}, "-" + errWrongArgs("object|help") + "\r\n"},
		{[]string{"OBJECT", "FREQ", "a"}, "-" + fsm.ErrNoLFU + "\r\n"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "1"}, "-" + errClusterDisabled + "\r\n"},
		{[]string{"CONFIG", "SET", "proto-max-bulk-len", "1048576"}, "+OK\r\n"},
		{[]string{"SETBIT", "big", "8388608", "1"}, "-" + errBitOffset + "\r\n"},
		{[]string{"SETBIT", "big", "8388607", "1"}, ":0\r\n"},
	} {
		if got := rc.do(tt.args...); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestConfigLimits(t *testing.T) {
	store := fsm.NewStore()
	s := startServer(t, Config{Store: store})
	rc := dialRaw(t, s)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"CONFIG", "GET", "hash-max-*-entries"},
			"*4\r\n$25\r\nhash-max-listpack-entries\r\n$3\r\n512\r\n$24\r\nhash-max-ziplist-entries\r\n$3\r\n512\r\n"},
		{[]string{"CONFIG", "SET", "hash-max-ziplist-entries", "100", "zset-max-listpack-value", "1kb",
			"list-max-listpack-size", "-5", "list-compress-depth", "2", "set-max-intset-entries", "7"}, "+OK\r\n"},
		{[]string{"CONFIG", "GET", "hash-max-listpack-entries"}, "*2\r\n$25\r\nhash-max-listpack-entries\r\n$3\r\n100\r\n"},
		{[]string{"CONFIG", "SET", "hash-max-listpack-entries", "-1"},
			"-ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-entries') - argument must be between 0 and 9223372036854775807 inclusive\r\n"},
		{[]string{"CONFIG", "SET", "hash-max-listpack-entries", "1k"},
			"-ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-entries') - argument couldn't be parsed into an integer\r\n"},
		{[]string{"CONFIG", "SET", "hash-max-listpack-value", "-1"},
			"-ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-value') - argument must be a memory value\r\n"},
		{[]string{"CONFIG", "SET", "list-compress-depth", "2147483648"},
			"-ERR CONFIG SET failed (possibly related to argument 'list-compress-depth') - argument must be between 0 and 2147483647 inclusive\r\n"},
		{[]string{"CONFIG", "SET", "hash-max-listpack-entries", "1", "hash-max-listpack-entries", "2"},
			"-ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-entries') - duplicate parameter\r\n"},
		// Nothing of a refused CONFIG SET is applied.
		{[]string{"CONFIG", "SET", "set-max-intset-entries", "9", "bogus", "2"},
			"-ERR Unknown option or number of arguments for CONFIG SET - 'bogus'\r\n"},
	} {
		if got := rc.do(tt.args...); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.args, got, tt.want)
		}
	}
	want := fsm.DefaultLimits()
	want.HashMaxListpackEntries, want.ZSetMaxListpackValue, want.ListMaxListpackSize = 100, 1024, -5
	want.ListCompressDepth, want.SetMaxIntsetEntries = 2, 7
	if got := store.Limits(); got != want {
		t.Errorf("limits %+v, want %+v", got, want)
	}
}

// TestConfigSetOrder: names are checked before values, as in Redis 7.0.
func TestConfigSetOrder(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"CONFIG", "SET", "hash-max-listpack-entries", "abc", "bogus", "1"},
			"-ERR Unknown option or number of arguments for CONFIG SET - 'bogus'\r\n"},
		{[]string{"CONFIG", "SET", "hash-max-listpack-entries", "abc", "maxclients", "1", "maxclients", "2"},
			"-ERR CONFIG SET failed (possibly related to argument 'maxclients') - duplicate parameter\r\n"},
		{[]string{"CONFIG", "SET", "hash-max-listpack-entries", "abc", "maxclients", "x"},
			"-ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-entries') - argument couldn't be parsed into an integer\r\n"},
		{[]string{"CONFIG", "SET", "hash-max-listpack-entries", "1", "hash-max-ziplist-entries", "2"}, "+OK\r\n"},
	} {
		if got := rc.do(tt.args...); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.args, got, tt.want)
		}
	}
}
