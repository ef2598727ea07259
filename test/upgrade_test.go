package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// upgradeFrom is the kvs the rolling upgrade starts from: the last commit
// before a node could hold several replication groups, whose data dirs are
// testdata/legacy-v2.
const upgradeFrom = "57d4740"

// buildOldKVS builds kvs as it was at commit from, out of the repository's
// own history, into dir. A copy of the tree without that history (a
// shallow clone, an unpacked archive) cannot run the test, and skips it
// saying so; a build that fails fails it.
func buildOldKVS(t *testing.T, from, dir string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", from+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("kvs at %s is not in this tree's history (a clone without --depth has it): %v %s", from, err, out)
	}
	archive := exec.Command("sh", "-c", "git -C \"$1\" archive \"$2\" | tar -x -C \"$3\"", "sh", root, from, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("unpacking kvs at %s: %v\n%s", from, err, out)
	}
	bin := filepath.Join(dir, "kvs-"+from)
	build := exec.Command("go", "build", "-o", bin, "./cmd/kvs")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kvs at %s: %v\n%s", from, err, out)
	}
	return bin
}

// TestRollingUpgrade starts a three-node cluster on the kvs of upgradeFrom,
// then upgrades it one node at a time to today's, as an operator would:
// stop a node, start today's binary on its data dir, wait until it is back
// among the members, go on to the next. Writes go on throughout, from
// clients of every node: while a node is down the other two take them,
// and after the last upgrade every acknowledged write is on every node.
func TestRollingUpgrade(t *testing.T) {
	old := buildOldKVS(t, upgradeFrom, t.TempDir())
	nodes := make([]*Node, 0, 3)
	for i := 1; i <= 3; i++ {
		var extra []string
		if i == 1 {
			extra = []string{"--bootstrap"}
		}
		n := newClusterNode(t, fmt.Sprintf("n%d", i), extra...)
		n.Bin = old
		n.Start()
		if i > 1 {
			if out, code := runKVS(t, clusterWait, "join", nodes[0].Addr, n.Addr); code != 0 {
				t.Fatalf("kvs join %s: exit %d\n%s", n.Name, code, out)
			}
		}
		nodes = append(nodes, n)
	}
	waitMembers(t, nodes, 3)

	ctx := context.Background()
	var (
		acked   sync.Map // key -> value, every write a node acknowledged
		nAcked  atomic.Int64
		stop    = make(chan struct{})
		writers sync.WaitGroup
	)
	for w, n := range nodes {
		// One client per node, created up front: a node down refuses
		// its connections, and its writer waits for it to come back.
		c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: clusterWait})
		t.Cleanup(func() { c.Close() })
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key, val := fmt.Sprintf("w%d:%d", w, i), fmt.Sprintf("v%d", i)
				// A failed write (the node down, a leader change, an
				// UNCERTAIN) is not acknowledged and is not checked;
				// the next write takes a new key.
				if c.Set(ctx, key, val, 0).Err() != nil {
					time.Sleep(10 * time.Millisecond) // the node is down or electing
					continue
				}
				acked.Store(key, val)
				nAcked.Add(1)
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		writers.Wait()
	}()
	// progress waits until writers have had more writes acknowledged.
	progress := func(what string) {
		t.Helper()
		from := nAcked.Load()
		waitFor(t, what, func() error {
			if nAcked.Load() < from+50 {
				return fmt.Errorf("%d writes acknowledged since", nAcked.Load()-from)
			}
			return nil
		})
	}
	progress("writes on the old cluster")
	for _, n := range nodes {
		n.Stop()
		progress("writes while " + n.Name + " is down")
		n.Bin = kvsBin
		n.Start()
		waitMembers(t, nodes, 3)
		progress("writes after " + n.Name + " was upgraded")
	}
	close(stop)
	writers.Wait()

	for _, n := range nodes {
		c := newClient(t, n, nil)
		checked := 0
		acked.Range(func(k, v any) bool {
			key, want := k.(string), v.(string)
			waitFor(t, key+" on "+n.Name, func() error {
				got, err := c.Get(ctx, key).Result()
				if err != nil || got != want {
					return fmt.Errorf("GET %s = %q, %v; want %q", key, got, err, want)
				}
				return nil
			})
			checked++
			return true
		})
		t.Logf("%s: %d acknowledged writes read back", n.Name, checked)
	}
}
