package server

import (
	"testing"

	"kvs/fsm"
	"kvs/group"
	"kvs/wal"
)

// WAIT and WAITAOF without replicas: Redis's errors, in its order, and
// the counts of a master with none.
func TestWaitWithoutReplicas(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"WAIT", "0", "0"}, ":0\r\n"},
		{[]string{"WAIT", "-3", "0"}, ":0\r\n"},
		{[]string{"WAIT", "1", "5"}, ":0\r\n"}, // after its timeout
		{[]string{"WAIT", "x", "0"}, "-" + errNotInteger + "\r\n"},
		{[]string{"WAIT", "x", "y"}, "-" + errNotInteger + "\r\n"},
		{[]string{"WAIT", "0", "y"}, "-" + errWaitTimeout + "\r\n"},
		{[]string{"WAIT", "0", "1.5"}, "-" + errWaitTimeout + "\r\n"},
		{[]string{"WAIT", "0", "-1"}, "-" + errTimeoutNegative + "\r\n"},
		{[]string{"WAITAOF", "0", "0", "0"}, "*2\r\n:0\r\n:0\r\n"},
		{[]string{"WAITAOF", "1", "0", "0"}, "-" + errWaitAOFNoLog + "\r\n"},
		{[]string{"WAITAOF", "2", "0", "0"}, "-" + errWaitAOFLocal + "\r\n"},
		{[]string{"WAITAOF", "-1", "x", "0"}, "-" + errWaitAOFLocal + "\r\n"},
		{[]string{"WAITAOF", "x", "0", "0"}, "-" + errNotInteger + "\r\n"},
		{[]string{"WAITAOF", "0", "-1", "0"}, "-" + errWaitAOFReplicas + "\r\n"},
		{[]string{"WAITAOF", "0", "x", "0"}, "-" + errNotInteger + "\r\n"},
		{[]string{"WAITAOF", "1", "0", "-1"}, "-" + errTimeoutNegative + "\r\n"},
		{[]string{"WAITAOF", "0", "1", "5"}, "*2\r\n:0\r\n:0\r\n"},
		{[]string{"WAIT", "0"}, "-ERR wrong number of arguments for 'wait' command\r\n"},
		{[]string{"EVAL", "return redis.call('wait', 0, 0)", "0"}, "-ERR This Redis command is not allowed from script script: 09c741d9d86c54b89b6c904a627c276a73679c40, on @user_script:1.\r\n"},
	} {
		if got := rc.do(tc.args...); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.args, got, tc.want)
		}
	}
	// In a transaction WAIT does not block, whatever it asks for.
	rc.do("MULTI")
	rc.do("WAIT", "5", "0")
	rc.do("WAITAOF", "0", "5", "0")
	if got := rc.do("EXEC"); got != "*2\r\n:0\r\n*2\r\n:0\r\n:0\r\n" {
		t.Errorf("EXEC: %q", got)
	}
}

// A WAIT that blocks forever holds up neither the other clients nor the
// server's stop, and ends when its client goes.
func TestWaitBlocksOnlyItsClient(t *testing.T) {
	s := startServer(t, Config{})
	waiter := dialRaw(t, s)
	waiter.send(encodeCommand("WAIT", "1", "0"))
	other := dialRaw(t, s)
	if got := other.do("SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET while another client waits: %q", got)
	}
	// The blocked client goes; the server stops at the test's end, which
	// would hang on a wait that outlived its client.
	waiter.nc.Close()
	if got := other.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}
}

// In durable mode WAITAOF's local count is 1: every acknowledged write is
// on disk, at once under fsync always, after a sync under everysec.
func TestWaitAOFDurable(t *testing.T) {
	for _, policy := range []wal.Policy{wal.FsyncAlways, wal.FsyncEverySec} {
		st := fsm.NewStore()
		g, err := group.OpenDurable(st, group.DurableOptions{Dir: t.TempDir(), Fsync: policy})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		s := startServer(t, Config{Store: st, Proposer: g.Proposer(), ConfigParams: map[string]string{"appendonly": "yes"}})
		rc := dialRaw(t, s)
		rc.do("SET", "k", "v")
		if got := rc.do("WAITAOF", "1", "0", "0"); got != "*2\r\n:1\r\n:0\r\n" {
			t.Errorf("policy %v: WAITAOF 1 0 0: %q", policy, got)
		}
		if got := rc.do("WAITAOF", "1", "1", "5"); got != "*2\r\n:1\r\n:0\r\n" {
			t.Errorf("policy %v: WAITAOF 1 1 5: %q", policy, got)
		}
		if got := rc.do("WAIT", "0", "0"); got != ":0\r\n" {
			t.Errorf("policy %v: WAIT 0 0: %q", policy, got)
		}
	}
}
