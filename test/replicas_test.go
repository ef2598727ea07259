package test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestClusterMinReplicas: with min-replicas-to-write 3 and a lag of one
// second on every node of a five-node cluster, the leader takes writes
// while its four followers answer it; with two followers stopped (the
// other three still a majority) it has two good replicas and refuses
// writes with NOREPLICAS, from its own clients and from the followers'
// (which forward them), while reads and no-writes scripts run and a
// script that declares no flags is refused at its first write. Asking
// for two good replicas, or restarting a follower, lets writes through
// again.
func TestClusterMinReplicas(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 5)
	ctx := testCtx(t)
	clients := map[*Node]*redis.Client{}
	for _, n := range nodes {
		clients[n] = newClient(t, n, func(o *redis.Options) { o.MaxRetries = -1 })
	}
	setAll := func(param, value string) {
		t.Helper()
		for _, n := range nodes {
			if n.isExited() {
				continue
			}
			if v := dialRaw(t, n.Addr).Do("CONFIG", "SET", param, value); string(v.Raw) != "+OK\r\n" {
				t.Fatalf("%s: CONFIG SET %s %s: %s", n.Name, param, value, v)
			}
		}
	}
	setAll("min-replicas-max-lag", "1")
	setAll("min-replicas-to-write", "3")
	leader := waitLeader(t, nodes)
	stopped := followers(nodes, leader)[:2]
	running := followers(nodes, leader)[2]
	// write sends SET to every running node: nil once each answered
	// want ("" for OK, else the error's text).
	write := func(want string) func() error {
		return func() error {
			for _, n := range nodes {
				if n.isExited() {
					continue
				}
				got := ""
				if err := clients[n].Set(ctx, "k", n.Name, 0).Err(); err != nil {
					got = err.Error()
				}
				if got != want {
					return fmt.Errorf("SET on %s: %q, want %q", n.Name, got, want)
				}
			}
			return nil
		}
	}
	const refused = "NOREPLICAS Not enough good replicas to write."
	waitFor(t, "writes taken with four good replicas", write(""))

	for _, n := range stopped {
		n.Stop()
	}
	waitFor(t, "writes refused with two good replicas", write(refused))
	leader = waitLeader(t, nodes)
	setScript := "return redis.call('set', 'k', 'script')"
	for _, n := range []*Node{leader, running} {
		rc := dialRaw(t, n.Addr)
		for _, tc := range []respCase{
			c("-NOREPLICAS Not enough good replicas to write. script: "+scriptSHA(setScript)+", on @user_script:1.\r\n",
				"EVAL", setScript, "0"),
			c("-NOREPLICAS Not enough good replicas to write.\r\n", "EVAL", "#!lua\nreturn 1", "0"),
			c("$4\r\nread\r\n", "EVAL", "#!lua flags=no-writes\nreturn 'read'", "0"),
			c(":0\r\n", "EVAL", "return redis.call('publish', 'ch', 'm')", "0"),
		} {
			if v := rc.Do(tc.cmd...); string(v.Raw) != tc.want {
				t.Fatalf("%s: %s: %s, want %q", n.Name, showCommand(tc.cmd), v, tc.want)
			}
		}
		if v := rc.Do("GET", "k"); v.IsError() {
			t.Fatalf("GET on %s: %s", n.Name, v)
		}
	}
	// A running follower that missed the leader's heartbeats for a second
	// on a busy machine, or a new leader, is counted anew: polled.
	waitFor(t, "the leader's INFO counting two good replicas", func() error {
		lead, err := leaderNow(nodes)
		if err != nil {
			return err
		}
		if info := dialRaw(t, lead.Addr).Do("INFO", "replication"); !strings.Contains(info.Str, "min_slaves_good_slaves:2\r\n") {
			return fmt.Errorf("%s: INFO replication: %s", lead.Name, info)
		}
		return nil
	})

	setAll("min-replicas-to-write", "2")
	waitFor(t, "writes taken asking for two good replicas", write(""))
	setAll("min-replicas-to-write", "3")
	waitFor(t, "writes refused again asking for three", write(refused))
	stopped[0].Start()
	// The restarted node has the default parameters; it is a follower,
	// which leaves the check to the leader.
	waitFor(t, "writes taken once a follower is back", write(""))
}

// TestMinReplicasReplay: a script refused its write for want of good
// replicas is refused the same write when a durable node replays its log
// after a restart, though the restarted node has the check off: the
// refusal travels in the log entry, so every replay decides as the first
// run did.
func TestMinReplicasReplay(t *testing.T) {
	t.Parallel()
	n := startKVS(t, KVSOptions{Durable: true})
	script := "local r = redis.pcall('set', 'k', 'written') return r['err']"
	want := "$45\r\nNOREPLICAS Not enough good replicas to write.\r\n"
	rc := dialRaw(t, n.Addr)
	for _, tc := range []respCase{
		c("+OK\r\n", "SET", "before", "1"),
		c("+OK\r\n", "CONFIG", "SET", "min-replicas-to-write", "1"),
		c(want, "EVAL", script, "0"),
		c("$-1\r\n", "GET", "k"),
	} {
		if v := rc.Do(tc.cmd...); string(v.Raw) != tc.want {
			t.Fatalf("%s: %s, want %q", showCommand(tc.cmd), v, tc.want)
		}
	}
	n.Restart()
	rc = dialRaw(t, n.Addr)
	for _, tc := range []respCase{
		c("$1\r\n1\r\n", "GET", "before"),
		c("$-1\r\n", "GET", "k"),
		c("*2\r\n$21\r\nmin-replicas-to-write\r\n$1\r\n0\r\n", "CONFIG", "GET", "min-replicas-to-write"),
	} {
		if v := rc.Do(tc.cmd...); string(v.Raw) != tc.want {
			t.Fatalf("after the restart: %s: %s, want %q", showCommand(tc.cmd), v, tc.want)
		}
	}
}
