package server

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"kvs/fsm"
)

// TestHLLCommands checks the HyperLogLog commands through the server, byte
// for byte (replies taken from redis-server 7.0.15).
func TestHLLCommands(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	abc := "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80`\xf3\x80P\xb1\x84K\xfb\x80BZ"
	counted := "HYLL\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00`\xf3\x80P\xb1\x84K\xfb\x80BZ"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"PFADD"}, "-" + errWrongArgs("pfadd") + "\r\n"},
		{[]string{"PFCOUNT"}, "-" + errWrongArgs("pfcount") + "\r\n"},
		{[]string{"PFMERGE"}, "-" + errWrongArgs("pfmerge") + "\r\n"},
		{[]string{"PFDEBUG", "getreg"}, "-" + errWrongArgs("pfdebug") + "\r\n"},
		{[]string{"PFSELFTEST", "x"}, "-" + errWrongArgs("pfselftest") + "\r\n"},
		{[]string{"PFADD", "k", "a", "b", "c"}, ":1\r\n"},
		{[]string{"GET", "k"}, "$27\r\n" + abc + "\r\n"},
		{[]string{"TYPE", "k"}, "+string\r\n"},
		{[]string{"OBJECT", "ENCODING", "k"}, "$3\r\nraw\r\n"},
		{[]string{"PFCOUNT", "k"}, ":3\r\n"},
		{[]string{"GET", "k"}, "$27\r\n" + counted + "\r\n"},
		{[]string{"PFADD", "k", "a"}, ":0\r\n"},
		{[]string{"PFCOUNT", "k", "nokey"}, ":3\r\n"},
		{[]string{"PFDEBUG", "DECODE", "k"}, "$44\r\nZ:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603\r\n"},
		{[]string{"PFDEBUG", "ENCODING", "k"}, "+sparse\r\n"},
		{[]string{"PFDEBUG", "bogus", "nokey"}, "-ERR The specified key does not exist\r\n"},
		{[]string{"PFDEBUG", "bogus", "k"}, "-ERR Unknown PFDEBUG subcommand 'bogus'\r\n"},
		{[]string{"PFMERGE", "m", "k", "nokey"}, "+OK\r\n"},
		{[]string{"PFCOUNT", "m"}, ":3\r\n"},
		{[]string{"SET", "s", "HYLL"}, "+OK\r\n"},
		{[]string{"PFADD", "s", "a"}, "-" + fsm.ErrNotHLL + "\r\n"},
		{[]string{"PFCOUNT", "s", "k"}, "-" + fsm.ErrNotHLL + "\r\n"},
		{[]string{"LPUSH", "l", "a"}, ":1\r\n"},
		{[]string{"PFMERGE", "l", "k"}, "-" + fsm.ErrWrongType + "\r\n"},
		{[]string{"SET", "c", "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xfe"}, "+OK\r\n"},
		{[]string{"PFCOUNT", "c"}, "-" + fsm.ErrHLLCorrupt + "\r\n"},
		// hll-sparse-max-bytes decides when PFADD promotes.
		{[]string{"CONFIG", "GET", "hll-sparse-max-bytes"}, "*2\r\n$20\r\nhll-sparse-max-bytes\r\n$4\r\n3000\r\n"},
		{[]string{"CONFIG", "SET", "hll-sparse-max-bytes", "-1"}, "-ERR CONFIG SET failed (possibly related to argument 'hll-sparse-max-bytes') - argument must be a memory value\r\n"},
		{[]string{"CONFIG", "SET", "hll-sparse-max-bytes", "1kb"}, "+OK\r\n"},
		{[]string{"CONFIG", "GET", "hll-sparse-max-bytes"}, "*2\r\n$20\r\nhll-sparse-max-bytes\r\n$4\r\n1024\r\n"},
		{[]string{"CONFIG", "SET", "hll-sparse-max-bytes", "20"}, "+OK\r\n"},
		{[]string{"PFADD", "k", "d", "e", "f", "g"}, ":1\r\n"},
		{[]string{"PFDEBUG", "ENCODING", "k"}, "+dense\r\n"},
		{[]string{"STRLEN", "k"}, ":12304\r\n"},
		{[]string{"PFDEBUG", "TODENSE", "k"}, ":0\r\n"},
		{[]string{"PFCOUNT", "k"}, ":7\r\n"},
		// A read-only script may not call PFCOUNT, which may replicate.
		{[]string{"EVAL_RO", "return redis.call('pfcount', KEYS[1])", "1", "k"},
			"-ERR Write commands are not allowed from read-only scripts. script: 555e6dad1394c7f70b9c2c36655e0441257b3a78, on @user_script:1.\r\n"},
		{[]string{"EVAL", "return redis.call('pfcount', KEYS[1])", "1", "k"}, ":7\r\n"},
	} {
		if got := rc.do(tt.args...); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.args, got, tt.want)
		}
	}
	if got := rc.do("PFDEBUG", "GETREG", "m"); len(got) < 16384*4 || got[:8] != "*16384\r\n" {
		t.Errorf("PFDEBUG GETREG: %.40q", got)
	}
}

func TestPFSelfTest(t *testing.T) {
	if testing.Short() {
		t.Skip("ten million adds")
	}
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	if got := rc.do("PFSELFTEST"); got != "+OK\r\n" {
		t.Errorf("PFSELFTEST: %q", got)
	}
}

// TestShardedHLL: on a node of several groups, PFMERGE and PFCOUNT of keys
// of different slots get CROSSSLOT, and PFMERGE of its destination alone,
// in which Redis's key specs find no key, runs in the key's group.
func TestShardedHLL(t *testing.T) {
	const n = 3
	s, stores := startSharded(t, n)
	rc := dialRaw(t, s)
	a, b := keyIn(1, n, 0), keyIn(2, n, 0)
	cross := "-" + errCrossSlot + "\r\n"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"PFADD", a, "x"}, ":1\r\n"},
		{[]string{"PFADD", b, "y"}, ":1\r\n"},
		{[]string{"PFCOUNT", a, b}, cross},
		{[]string{"PFMERGE", a, b}, cross},
		{[]string{"PFMERGE", b}, "+OK\r\n"},
		{[]string{"PFCOUNT", b}, ":1\r\n"},
		{[]string{"LPUSH", "l", "v"}, ":1\r\n"},
		{[]string{"PFMERGE", "l"}, "-" + fsm.ErrWrongType + "\r\n"},
		{[]string{"PFMERGE", "{t}d", "{t}s1", "{t}s2"}, "+OK\r\n"},
	} {
		if got := rc.do(tt.args...); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.args, got, tt.want)
		}
	}
	for g, st := range stores {
		if got := keysOf(st); slices.Contains(got, "l") != (fsm.KeySlot([]byte("l"))*n/fsm.ClusterSlots == g) {
			t.Errorf("group %d holds %q: l is in the wrong group", g, got)
		}
	}
}

// TestGoRedisHLL: go-redis's HyperLogLog calls, in a pipeline and in a
// transaction, and a value moved with GET and SET keeps its count.
func TestGoRedisHLL(t *testing.T) {
	s := startServer(t, Config{})
	ctx := context.Background()
	c := newGoRedis(t, s, nil)
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.PFAdd(ctx, "{h}a", "x", "y", "z")
		p.PFAdd(ctx, "{h}b", "z", "w")
		p.PFCount(ctx, "{h}a")
		p.PFCount(ctx, "{h}a", "{h}b")
		p.PFMerge(ctx, "{h}m", "{h}a", "{h}b")
		p.PFCount(ctx, "{h}m")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"pfadd {h}a x y z: 1", "pfadd {h}b z w: 1", "pfcount {h}a: 3", "pfcount {h}a {h}b: 4",
		"pfmerge {h}m {h}a {h}b: OK", "pfcount {h}m: 4"}
	for i, cmd := range cmds {
		if got := cmd.String(); got != want[i] {
			t.Errorf("pipeline %d: %q, want %q", i, got, want[i])
		}
	}
	v, err := c.Get(ctx, "{h}m").Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "copy", v, 0)
		p.PFAdd(ctx, "copy", "x")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.PFCount(ctx, "copy").Result(); err != nil || n != 4 {
		t.Errorf("PFCOUNT of the copy: %d, %v", n, err)
	}
	if err := c.PFAdd(ctx, "copy").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.LPush(ctx, "l", "v").Err(); err == nil {
		if err := c.PFCount(ctx, "l").Err(); err == nil || err.Error() != fsm.ErrWrongType {
			t.Errorf("PFCOUNT of a list: %v", err)
		}
	}
}
