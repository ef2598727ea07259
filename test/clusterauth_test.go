package test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The README's cluster recipe with a password, followed as written: the
// password given at start (--requirepass on every node, REDISCLI_AUTH for
// the admin commands), and given later to a running cluster (CONFIG SET
// masterauth on every node, then CONFIG SET requirepass once). Either way
// every node takes writes (a follower forwards them) and reads, PUBLISH
// reaches the subscribers of the other nodes, kvs join, status and remove
// work, and a node restarted as the recipe says serves again.

const recipePassword = "s3cret"

// TestClusterPasswordAtStart is the recipe with --requirepass on every
// node from the start.
func TestClusterPasswordAtStart(t *testing.T) {
	t.Parallel()
	auth := []string{"REDISCLI_AUTH=" + recipePassword}
	var nodes []*Node
	for i := 1; i <= 3; i++ {
		extra := []string{"--requirepass", recipePassword}
		if i == 1 {
			extra = append(extra, "--bootstrap")
		}
		n := newClusterNode(t, fmt.Sprintf("n%d", i), extra...)
		n.Password = recipePassword
		n.Start()
		nodes = append(nodes, n)
	}
	for _, n := range nodes[1:] {
		kvsAdmin(t, auth, "join", nodes[0].Addr, n.Addr)
	}
	waitMembers(t, nodes, 3)
	checkPasswordCluster(t, nodes, auth)
	// The leader asks each member its level, logged in as it forwards,
	// before it records the cluster's.
	for _, n := range nodes {
		waitClusterLevel(t, n, kvsLevel)
	}

	// A node restarted with its command line serves again, the leader too.
	for _, n := range []*Node{followers(nodes, waitLeader(t, nodes))[0], waitLeader(t, nodes)} {
		n.Stop()
		n.Start()
		waitMembers(t, nodes, 3)
		checkWrites(t, nodes, "restart-"+n.Name)
	}
	removeWithPassword(t, nodes, auth)
}

// TestClusterPasswordLater is the recipe for a running cluster without a
// password: masterauth on every node, then requirepass once. A node then
// restarted without masterauth has its forwarded writes refused with an
// error that says what to do, and doing it is enough: no restart.
func TestClusterPasswordLater(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	ctx := testCtx(t)
	for _, n := range nodes {
		if err := newClient(t, n, nil).ConfigSet(ctx, "masterauth", recipePassword).Err(); err != nil {
			t.Fatalf("%s: CONFIG SET masterauth: %v", n.Name, err)
		}
	}
	if err := newClient(t, nodes[0], nil).ConfigSet(ctx, "requirepass", recipePassword).Err(); err != nil {
		t.Fatalf("CONFIG SET requirepass: %v", err)
	}
	for _, n := range nodes {
		n.Password = recipePassword
	}
	auth := []string{"REDISCLI_AUTH=" + recipePassword}
	checkPasswordCluster(t, nodes, auth)

	// Restarted without --masterauth, a follower knows no password.
	late := followers(nodes, waitLeader(t, nodes))[0]
	late.Stop()
	late.Start()
	waitMembers(t, nodes, 3)
	lc := passwordClient(t, late)
	err := lc.Set(ctx, "k", "v", 0).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN ") || !strings.Contains(err.Error(), "CONFIG SET masterauth <password>") {
		t.Fatalf("a write on a node without masterauth: %v; want TRYAGAIN saying to set masterauth", err)
	}
	t.Logf("a write on a node without masterauth: %v", err)
	// Its pub/sub links are refused too, which its log says.
	other := followers(nodes, late)[0]
	sub := passwordClient(t, other).Subscribe(ctx, "late")
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused link logged on "+late.Name, func() error {
		if err := lc.Publish(ctx, "late", "refused").Err(); err != nil {
			return err
		}
		if b, _ := os.ReadFile(late.LogPath()); !bytes.Contains(b, []byte("refused this node's login on its pub/sub link")) {
			return errors.New("not logged yet")
		}
		return nil
	})
	if err := lc.ConfigSet(ctx, "masterauth", recipePassword).Err(); err != nil {
		t.Fatal(err)
	}
	msgs := sub.Channel()
	pollFor(t, "a message published on "+late.Name, clusterWait, 50*time.Millisecond, func() error {
		if err := lc.Publish(ctx, "late", "accepted").Err(); err != nil {
			return err
		}
		for {
			select {
			case m := <-msgs:
				if m.Payload == "accepted" {
					return nil
				}
			default:
				return errors.New("not received yet")
			}
		}
	})
	if v, err := lc.ConfigGet(ctx, "masterauth").Result(); err != nil || v["masterauth"] != recipePassword {
		t.Fatalf("CONFIG GET masterauth: %v, %v", v, err)
	}
	if err := lc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("a write on the node once it has masterauth: %v", err)
	}
	checkWrites(t, nodes, "relogged")

	// As the recipe says, from then on a node starts with --masterauth.
	args := late.Args
	late.Args = func(n *Node) []string { return append(args(n), "--masterauth", recipePassword) }
	late.Stop()
	late.Start()
	waitMembers(t, nodes, 3)
	checkWrites(t, nodes, "restarted")
	removeWithPassword(t, nodes, auth)
}

// checkPasswordCluster checks a three-node cluster with the password: the
// clients' commands, PUBLISH across nodes, and kvs status.
func checkPasswordCluster(t *testing.T, nodes []*Node, auth []string) {
	t.Helper()
	ctx := testCtx(t)
	for _, n := range nodes {
		// The password is a write through the log: a node has it once it
		// applied it.
		waitFor(t, "the password on "+n.Name, func() error {
			if err := newClient(t, n, nil).Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH ") {
				return fmt.Errorf("PING without the password: %v", err)
			}
			return nil
		})
	}
	checkWrites(t, nodes, "first")

	// A subscriber on the last node gets what the others publish.
	sub := passwordClient(t, nodes[2]).Subscribe(ctx, "news")
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := sub.Channel()
	for _, from := range nodes[:2] {
		pub := passwordClient(t, from)
		want := "from " + from.Name
		// Delivery between nodes is at most once, and a link may still be
		// logging in: publish until one arrives.
		pollFor(t, "a message published on "+from.Name, clusterWait, 50*time.Millisecond, func() error {
			if err := pub.Publish(ctx, "news", want).Err(); err != nil {
				return err
			}
			for {
				select {
				case m := <-msgs:
					if m.Payload == want {
						return nil
					}
				default:
					return fmt.Errorf("no %q on %s yet", want, nodes[2].Name)
				}
			}
		})
	}

	out := kvsAdmin(t, auth, "status", nodes[1].Addr)
	if strings.Contains(out, "unreachable") || strings.Count(out, "127.0.0.1:") < 7 {
		t.Fatalf("kvs status:\n%s", out)
	}
}

// checkWrites writes a key through every node and reads every key back on
// every node.
func checkWrites(t *testing.T, nodes []*Node, tag string) {
	t.Helper()
	ctx := testCtx(t)
	for _, n := range nodes {
		key := tag + ":" + n.Name
		if err := retryLeaderChange(t, func() error { return passwordClient(t, n).Set(ctx, key, n.Name, 0).Err() }); err != nil {
			t.Fatalf("SET %s on %s: %v", key, n.Name, err)
		}
	}
	for _, r := range nodes {
		c := passwordClient(t, r)
		for _, n := range nodes {
			key := tag + ":" + n.Name
			waitFor(t, key+" on "+r.Name, func() error {
				v, err := c.Get(ctx, key).Result()
				if err != nil || v != n.Name {
					return fmt.Errorf("GET %s = %q, %v", key, v, err)
				}
				return nil
			})
		}
	}
}

// removeWithPassword takes the last node out with kvs remove.
func removeWithPassword(t *testing.T, nodes []*Node, auth []string) {
	t.Helper()
	gone := nodes[len(nodes)-1]
	kvsAdmin(t, auth, "remove", nodes[0].Addr, gone.Name)
	gone.Stop()
	waitMembers(t, nodes[:len(nodes)-1], len(nodes)-1)
}

func passwordClient(t *testing.T, n *Node) *redis.Client {
	return newClient(t, n, func(o *redis.Options) { o.Password, o.MaxRetries = recipePassword, -1 })
}

// kvsAdmin runs a kvs admin subcommand with env added to the environment,
// as the recipe's shell does, and fails t unless it exits 0.
func kvsAdmin(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(requireKVS(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = time.Second
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kvs %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	case <-time.After(2 * clusterWait):
		cmd.Process.Kill()
		<-done
		t.Fatalf("kvs %s still running after %v:\n%s", strings.Join(args, " "), 2*clusterWait, out.String())
	}
	return out.String()
}
