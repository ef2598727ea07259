package test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClusterOpsOnFollower: on a follower of a three-node cluster, MONITOR
// shows a write the follower forwards, from the client that sent it, and
// the leader's MONITOR does not; CLIENT PAUSE WRITE on the follower holds
// its clients' writes (not its reads), not the leader's clients, and
// UNPAUSE releases the held write.
func TestClusterOpsOnFollower(t *testing.T) {
	requireKVS(t)
	nodes := startCluster(t, 3)
	leader := waitLeader(t, nodes)
	f := followers(nodes, leader)[0]

	fmon, lmon := dialRaw(t, f.Addr), dialRaw(t, leader.Addr)
	for _, m := range []*rawConn{fmon, lmon} {
		if got := string(m.Do("MONITOR").Raw); got != "+OK\r\n" {
			t.Fatalf("MONITOR: %q", got)
		}
	}
	fc, lc := dialRaw(t, f.Addr), dialRaw(t, leader.Addr)
	if v := fc.DoRetry("SET", "fk", "fv"); v.IsError() {
		t.Fatalf("SET on the follower: %v", v)
	}
	want := fmt.Sprintf(`[0 %s] "SET" "fk" "fv"`, fc.c.LocalAddr())
	if line := fmon.Read().Str; !strings.HasSuffix(line, want) {
		t.Errorf("follower's MONITOR: %q, want it to end %q", line, want)
	}
	// The leader shows the marker sent to it, and nothing before it.
	lc.Do("PING", "marker")
	if line := lmon.Read().Str; !strings.HasSuffix(line, `"PING" "marker"`) {
		t.Errorf("leader's MONITOR: %q, want the marker first", line)
	}

	admin, writer := dialRaw(t, f.Addr), dialRaw(t, f.Addr)
	if got := string(admin.Do("CLIENT", "PAUSE", "60000", "WRITE").Raw); got != "+OK\r\n" {
		t.Fatalf("CLIENT PAUSE: %q", got)
	}
	writer.Write(string(encodeCommand("SET", "paused", "1")))
	waitFor(t, "the follower to receive the SET", func() error {
		if l := admin.Do("CLIENT", "LIST").Str; !strings.Contains(l, "cmd=set") {
			return fmt.Errorf("CLIENT LIST: %s", l)
		}
		return nil
	})
	// A read on the follower and a write on the leader go on.
	if v := admin.Do("GET", "fk"); v.Str != "fv" {
		t.Errorf("GET on the paused follower: %v", v)
	}
	if v := lc.DoRetry("SET", "leaderkey", "1"); v.IsError() {
		t.Errorf("SET on the leader during the follower's pause: %v", v)
	}
	if v := lc.Do("GET", "paused"); !v.Null {
		t.Fatalf("the held SET ran: GET on the leader = %v", v)
	}
	if got := string(admin.Do("CLIENT", "UNPAUSE").Raw); got != "+OK\r\n" {
		t.Fatalf("CLIENT UNPAUSE: %q", got)
	}
	if got := string(writer.Read().Raw); got != "+OK\r\n" {
		t.Fatalf("held SET answered %q", got)
	}
	waitValue(t, leader, "paused", "1")
}

// TestVersionConsistent: INFO's redis_version, HELLO's version and the
// scripts' redis.REDIS_VERSION and REDIS_VERSION_NUM name one version.
func TestVersionConsistent(t *testing.T) {
	requireKVS(t)
	t.Parallel()
	n := startKVS(t, KVSOptions{})
	c := dialRaw(t, n.Addr)
	info := c.Do("INFO", "server").Str
	_, rest, ok := strings.Cut(info, "redis_version:")
	if !ok {
		t.Fatalf("INFO server has no redis_version: %q", info)
	}
	version, _, _ := strings.Cut(rest, "\r\n")
	hello := c.Do("HELLO", "2")
	helloVersion := ""
	for i := 0; i+1 < len(hello.Elems); i += 2 {
		if hello.Elems[i].Str == "version" {
			helloVersion = hello.Elems[i+1].Str
		}
	}
	script := c.Do("EVAL", "return redis.REDIS_VERSION", "0").Str
	var major, minor, patch int
	if _, err := fmt.Sscanf(version, "%d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("redis_version %q: %v", version, err)
	}
	num := c.Do("EVAL", "return redis.REDIS_VERSION_NUM", "0").Str
	wantNum := strconv.Itoa(major<<16 | minor<<8 | patch)
	if helloVersion != version || script != version || num != wantNum {
		t.Fatalf("INFO %q, HELLO %q, redis.REDIS_VERSION %q, REDIS_VERSION_NUM %s (want %s)",
			version, helloVersion, script, num, wantNum)
	}
}

// TestShutdownCommand: SHUTDOWN stops kvs as SIGTERM does, with exit
// status 0 and no reply, and a durable node comes back with every write;
// SHUTDOWN SAVE in memory mode, where a save writes nothing, stops it as
// well; in a cluster the leader that is shut down hands over and the
// others go on.
func TestShutdownCommand(t *testing.T) {
	requireKVS(t)
	t.Parallel()
	shutdown := func(t *testing.T, n *Node, args ...string) {
		t.Helper()
		c := dialRaw(t, n.Addr)
		if r, err := c.do(append([]string{"SHUTDOWN"}, args...)...); err == nil {
			t.Fatalf("SHUTDOWN %v answered %q", args, r.Raw)
		}
		select {
		case <-n.exited:
		case <-time.After(stopTimeout):
			t.Fatalf("%s still running after SHUTDOWN", n.Name)
		}
		if err := n.exitErr(); err != nil {
			t.Fatalf("%s exited after SHUTDOWN with %v\n%s", n.Name, err, n.LogTail(20))
		}
	}
	t.Run("durable", func(t *testing.T) {
		n := startKVS(t, KVSOptions{Durable: true})
		c := dialRaw(t, n.Addr)
		for i := range 100 {
			if r := c.Do("SET", fmt.Sprint("k", i), fmt.Sprint(i)); string(r.Raw) != "+OK\r\n" {
				t.Fatal(r)
			}
		}
		shutdown(t, n, "SAVE", "NOW")
		n.Start()
		c = dialRaw(t, n.Addr)
		for i := range 100 {
			if r := c.Do("GET", fmt.Sprint("k", i)); r.Str != fmt.Sprint(i) {
				t.Fatalf("k%d after SHUTDOWN and restart = %s", i, r)
			}
		}
	})
	t.Run("memory", func(t *testing.T) {
		n := startKVS(t, KVSOptions{})
		shutdown(t, n, "SAVE")
	})
	t.Run("cluster-leader", func(t *testing.T) {
		nodes := startCluster(t, 3)
		leader := waitLeader(t, nodes)
		shutdown(t, leader)
		rest := followers(nodes, leader)
		next := waitLeader(t, rest)
		if r := dialRaw(t, next.Addr).DoRetry("SET", "after", "shutdown"); string(r.Raw) != "+OK\r\n" {
			t.Fatalf("SET on the new leader = %s", r)
		}
	})
}
