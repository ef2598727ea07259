package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// publishScript publishes ARGV[2] on the channel ARGV[1] and keeps what
// PUBLISH answered in the key KEYS[1].
const publishScript = `local n = redis.call('publish', ARGV[1], ARGV[2]) redis.call('set', KEYS[1], n) return n`

// subscribe subscribes a new client of n to channel and returns its
// messages.
func subscribe(t testing.TB, n *Node, channel string) <-chan *redis.Message {
	t.Helper()
	ctx := testCtx(t)
	ps := newClient(t, n, nil).Subscribe(ctx, channel)
	t.Cleanup(func() { ps.Close() })
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	return ps.Channel()
}

// expectMessages receives the payloads want from ch, in order, and fails
// on anything else.
func expectMessages(t testing.TB, where string, ch <-chan *redis.Message, want ...string) {
	t.Helper()
	for _, w := range want {
		if m := receive(t, ch); m.Payload != w {
			t.Fatalf("subscriber on %s got %q, want %q (lost, doubled or reordered)", where, m.Payload, w)
		}
	}
}

// TestScriptPublish: a script's PUBLISH reaches the node's subscribers
// once and answers 0; in durable mode a restart replays the script (the
// answer it stored is back) without delivering its message again.
func TestScriptPublish(t *testing.T) {
	onTargets(t, []target{targetMemory, targetDurable, targetDurableGoroutines}, func(t *testing.T, n *Node) {
		ctx := testCtx(t)
		c := newClient(t, n, nil)
		msgs := subscribe(t, n, "news")
		for i := range 3 {
			got, err := c.Eval(ctx, publishScript, []string{"answer"}, "news", fmt.Sprint("script ", i)).Result()
			if err != nil || got != int64(0) {
				t.Fatalf("EVAL publishing: %v, %v; want 0", got, err)
			}
		}
		c.Publish(ctx, "news", "marker")
		expectMessages(t, n.Name, msgs, "script 0", "script 1", "script 2", "marker")
		if !strings.Contains(n.Name, "durable") {
			return
		}

		n.Stop()
		n.Start()
		msgs = subscribe(t, n, "news")
		if v, err := c.Get(ctx, "answer").Result(); err != nil || v != "0" {
			t.Fatalf("after the restart GET answer = %q, %v; want the 0 the replayed script stored", v, err)
		}
		c.Eval(ctx, publishScript, []string{"answer"}, "news", "after the restart")
		expectMessages(t, n.Name, msgs, "after the restart")
	})
}

// TestClusterScriptPublish: a script that publishes, sent to the leader or
// to a follower, delivers its message once to the subscribers of every
// node, each node delivering to its own as it applies the script. A
// follower that restarts replays the scripts in its log without
// delivering their messages again to subscribers that connect meanwhile.
func TestClusterScriptPublish(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	ctx := testCtx(t)
	chans := make([]<-chan *redis.Message, len(nodes))
	for i, n := range nodes {
		chans[i] = subscribe(t, n, "events")
	}
	var sent []string
	for k := range 10 {
		via := nodes[k%len(nodes)]
		msg := fmt.Sprintf("m %d via %s", k, via.Name)
		got, err := newClient(t, via, nil).Eval(ctx, publishScript, []string{"answer"}, "events", msg).Result()
		if err != nil || got != int64(0) {
			t.Fatalf("EVAL on %s: %v, %v; want 0", via.Name, got, err)
		}
		sent = append(sent, msg)
	}
	for i, ch := range chans {
		expectMessages(t, nodes[i].Name, ch, sent...)
		select {
		case m := <-ch:
			t.Fatalf("subscriber on %s: extra message %q", nodes[i].Name, m.Payload)
		case <-time.After(200 * time.Millisecond):
			// Nothing more came while we looked (not an assertion on timing:
			// a late duplicate would fail the test, an absent one cannot).
		}
	}

	leader := waitLeader(t, nodes)
	f := followers(nodes, leader)[0]
	f.Stop()
	f.Start()
	replayed := subscribe(t, f, "events")
	fc := newClient(t, f, nil)
	// The follower answers LOADING until it has replayed its log.
	pollFor(t, "the restarted follower to catch up", clusterWait, 20*time.Millisecond, func() error {
		v, err := fc.Get(ctx, "answer").Result()
		if err != nil {
			return err
		}
		if v != "0" {
			return fmt.Errorf("answer = %q", v)
		}
		return nil
	})
	if _, err := fc.Eval(ctx, publishScript, []string{"answer"}, "events", "after the restart").Result(); err != nil {
		t.Fatal(err)
	}
	expectMessages(t, f.Name, replayed, "after the restart")
}
