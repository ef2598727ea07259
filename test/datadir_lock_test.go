package test

import (
	"strconv"
	"strings"
	"testing"
)

// TestDataDirLock: while a kvs process serves a data dir, a second
// `kvs serve` on it exits at once with an error naming the holder's pid,
// and leaves the holder and its data alone, in durable and cluster mode.
// After kill -9 of the holder the lock is gone with it: a new process
// starts on the dir, keeps its data and holds the lock in turn.
func TestDataDirLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		node func(t *testing.T) *Node
		// second is the command line of another process on n's data dir:
		// every address its own, so that only the dir is shared.
		second func(t *testing.T, n *Node) []string
	}{
		{"durable", func(t *testing.T) *Node {
			return newKVS(t, "kvs-durable", KVSOptions{Durable: true})
		}, func(t *testing.T, n *Node) []string {
			return []string{"serve", "--addr", freeAddr(t), "--data-dir", n.DataDir()}
		}},
		{"cluster", func(t *testing.T) *Node {
			return newClusterNode(t, "n1", "--bootstrap")
		}, func(t *testing.T, n *Node) []string {
			// Its bolt file is locked too, but only after a timeout; the
			// data dir's lock must answer first, and say why.
			return []string{"serve", "--addr", freeAddr(t), "--data-dir", n.DataDir(),
				"--node-id", "n1", "--raft-addr", freeAddr(t), "--bootstrap"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := tc.node(t)
			n.Start()
			if tc.name == "cluster" {
				waitLeader(t, []*Node{n})
			}
			rc := dialRaw(t, n.Addr)
			if v := rc.Do("SET", "k", "before"); string(v.Raw) != "+OK\r\n" {
				t.Fatalf("SET: %s", v)
			}
			requireInUse(t, n, tc.second(t, n))
			if v := dialRaw(t, n.Addr).Do("GET", "k"); v.Str != "before" {
				t.Fatalf("the holder after a second process tried its dir: GET k = %s", v)
			}

			n.Kill()
			n.Start()
			if tc.name == "cluster" {
				waitLeader(t, []*Node{n})
			}
			waitValue(t, n, "k", "before")
			requireInUse(t, n, tc.second(t, n))
		})
	}
}

// requireInUse runs `kvs args`, which must fail because n holds the data
// dir, with a message naming n's pid.
func requireInUse(t *testing.T, n *Node, args []string) {
	t.Helper()
	// The deadline bounds a process that wrongly starts serving; the
	// expected one exits before it binds anything.
	out, code := runKVS(t, startTimeout, args...)
	if code == 0 {
		t.Fatalf("a second kvs on %s exited 0:\n%s", n.DataDir(), out)
	}
	want := "data dir " + n.DataDir() + " is in use by another kvs process (pid " + strconv.Itoa(n.Pid()) + ")"
	if !strings.Contains(out, want) {
		t.Fatalf("a second kvs on %s (exit %d) does not say %q:\n%s", n.DataDir(), code, want, out)
	}
	if strings.Contains(out, "kvs serving") {
		t.Fatalf("the second kvs served before it failed:\n%s", out)
	}
}

// Pid is the process id of n's latest start.
func (n *Node) Pid() int {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		n.t.Fatalf("%s: never started", n.Name)
	}
	return n.cmd.Process.Pid
}
