package test

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestPubsubGoRedis: go-redis's PubSub (Subscribe, PSubscribe, SSubscribe,
// Channel, ReceiveTimeout) in RESP2 and RESP3, against redis-server and
// every kvs mode.
func TestPubsubGoRedis(t *testing.T) {
	onTargets(t, allTargets, func(t *testing.T, n *Node) {
		for _, proto := range []int{2, 3} {
			t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
				ctx := testCtx(t)
				o := func(o *redis.Options) { o.Protocol = proto }
				pub, sub := newClient(t, n, o), newClient(t, n, o)
				prefix := fmt.Sprintf("p%d:", proto)
				ps := sub.Subscribe(ctx, prefix+"news")
				defer ps.Close()
				if err := ps.PSubscribe(ctx, prefix+"n*"); err != nil {
					t.Fatal(err)
				}
				waitSubscribers(t, pub, prefix+"news", 2)
				ch := ps.Channel()
				const msgs = 100
				for i := range msgs {
					if n, err := pub.Publish(ctx, prefix+"news", fmt.Sprint(i)).Result(); err != nil || n != 2 {
						t.Fatalf("PUBLISH: %d, %v", n, err)
					}
				}
				// Each message comes twice (channel, pattern), in order on each.
				next := map[string]int{}
				for range 2 * msgs {
					m := receive(t, ch)
					want := next[m.Pattern]
					if m.Payload != fmt.Sprint(want) || m.Channel != prefix+"news" {
						t.Fatalf("message %+v, want payload %d", m, want)
					}
					next[m.Pattern]++
				}
				if err := ps.Ping(ctx); err != nil {
					t.Fatal(err)
				}
				ss := sub.SSubscribe(ctx, prefix+"shard")
				defer ss.Close()
				if _, err := ss.ReceiveTimeout(ctx, 10*time.Second); err != nil {
					t.Fatal(err)
				}
				if n, err := pub.SPublish(ctx, prefix+"shard", "s").Result(); err != nil || n != 1 {
					t.Fatalf("SPUBLISH: %d, %v", n, err)
				}
				m, err := ss.ReceiveTimeout(ctx, 10*time.Second)
				if msg, ok := m.(*redis.Message); err != nil || !ok || msg.Payload != "s" {
					t.Fatalf("shard message: %v, %v", m, err)
				}
			})
		}
	})
}

// waitSubscribers waits until the node c talks to counts at least want
// subscriptions (channel plus patterns) for channel.
func waitSubscribers(t testing.TB, c *redis.Client, channel string, want int64) {
	t.Helper()
	ctx := testCtx(t)
	pollFor(t, "subscriptions on "+channel, clusterWait, 5*time.Millisecond, func() error {
		subs, err := c.PubSubNumSub(ctx, channel).Result()
		if err != nil {
			return err
		}
		pats, err := c.PubSubNumPat(ctx).Result()
		if err != nil {
			return err
		}
		if got := subs[channel] + pats; got < want {
			return fmt.Errorf("%d subscriptions, want %d", got, want)
		}
		return nil
	})
}

func receive(t testing.TB, ch <-chan *redis.Message) *redis.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(clusterWait):
		t.Fatal("no message")
		return nil
	}
}

// TestClusterPubsub: subscribers on all three nodes receive every message
// published on any node once each, in each publisher's order; PUBLISH
// counts the receivers on the node it was sent to, as Redis Cluster does.
func TestClusterPubsub(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	ctx := testCtx(t)
	var chans []<-chan *redis.Message
	var clients []*redis.Client
	for _, n := range nodes {
		c := newClient(t, n, nil)
		clients = append(clients, c)
		ps := c.Subscribe(ctx, "events")
		t.Cleanup(func() { ps.Close() })
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ps.Channel())
	}
	// Until every node links to the others (they learn the membership
	// within a second), a probe may miss some subscribers: publish probes
	// from every node until each subscriber has seen one from each node.
	seen := make([]map[string]bool, len(nodes))
	for i := range seen {
		seen[i] = map[string]bool{}
	}
	pollFor(t, "every node's messages reaching every subscriber", clusterWait, 20*time.Millisecond, func() error {
		for i, c := range clients {
			if n, err := c.Publish(ctx, "events", fmt.Sprintf("probe %d", i)).Result(); err != nil || n != 1 {
				return fmt.Errorf("PUBLISH on %s: %d, %v (want 1: its own subscriber)", nodes[i].Name, n, err)
			}
		}
		for i, ch := range chans {
		drain:
			for {
				select {
				case m := <-ch:
					seen[i][m.Payload] = true
				default:
					break drain
				}
			}
			if len(seen[i]) < len(nodes) {
				return fmt.Errorf("subscriber on %s saw %v", nodes[i].Name, seen[i])
			}
		}
		return nil
	})
	// A marker from each node: once a subscriber has them all, no probe
	// is still on its way to it (each node's messages keep their order).
	for i, c := range clients {
		c.Publish(ctx, "events", fmt.Sprintf("marker %d", i))
	}
	for i := range chans {
		got := map[string]bool{}
		for len(got) < len(clients) {
			if m := receive(t, chans[i]); strings.HasPrefix(m.Payload, "marker ") {
				got[m.Payload] = true
			}
		}
	}
	const perNode = 200
	for i, c := range clients {
		for k := range perNode {
			if err := c.Publish(ctx, "events", fmt.Sprintf("m %d %d", i, k)).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, ch := range chans {
		next := make([]int, len(clients))
		for range perNode * len(clients) {
			m := receive(t, ch)
			var from, k int
			if _, err := fmt.Sscanf(m.Payload, "m %d %d", &from, &k); err != nil {
				t.Fatalf("subscriber on %s: unexpected %q", nodes[i].Name, m.Payload)
			}
			if k != next[from] {
				t.Fatalf("subscriber on %s: message %d from %s, want %d (lost, doubled or reordered)",
					nodes[i].Name, k, nodes[from].Name, next[from])
			}
			next[from]++
		}
		select {
		case m := <-ch:
			t.Fatalf("subscriber on %s: extra message %q", nodes[i].Name, m.Payload)
		case <-time.After(200 * time.Millisecond):
			// Nothing more came while we looked (not an assertion on timing:
			// a late duplicate would fail the test, an absent one cannot).
		}
	}
}

// TestPubsubSlowSubscriber: a subscriber that never reads is disconnected
// at client-output-buffer-limit pubsub, and the node goes on serving.
func TestPubsubSlowSubscriber(t *testing.T) {
	onTargets(t, allTargets, func(t *testing.T, n *Node) {
		ctl := dialRaw(t, n.Addr)
		if v := ctl.Do("CONFIG", "SET", "client-output-buffer-limit", "pubsub 2mb 1mb 60"); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("CONFIG SET: %q", v.Raw)
		}
		slow := dialRaw(t, n.Addr)
		slow.send("SUBSCRIBE", "flood") // and never read again
		ctx := testCtx(t)
		pub := newClient(t, n, nil)
		waitSubscribers(t, pub, "flood", 1)
		payload := strings.Repeat("x", 64<<10)
		pollFor(t, "the slow subscriber disconnected", clusterWait, time.Millisecond, func() error {
			n, err := pub.Publish(ctx, "flood", payload).Result()
			if err != nil {
				return err
			}
			if n != 0 {
				return fmt.Errorf("%d receivers", n)
			}
			return nil
		})
		if err := pub.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	})
}

var flagSubPubRounds = flag.Int("pubsub.order.rounds", 400, "subscribe-then-publish rounds per target in TestPubsubSubscribeThenPublish")

// TestPubsubSubscribeThenPublish: a SUBSCRIBE sent on one connection and,
// without waiting for its confirmation, a PUBLISH on another, as go-redis's
// Subscribe and its own tests do: redis-server serves both in the order
// they arrived, so the message always reaches the new subscriber and
// PUBLISH counts it. kvs's event loops read the two connections on
// different threads; each round below uses a fresh subscriber connection,
// so the two land on different loops about half the time. The same goes
// for an UNSUBSCRIBE without arguments before a PUBLISH, which must count
// no receiver. A PING on the subscriber after each PUBLISH tells a
// delivered message (it comes before the PONG) from a lost one, without
// waiting on time.
func TestPubsubSubscribeThenPublish(t *testing.T) {
	onTargets(t, []target{targetRedis, targetMemory, targetDurable}, func(t *testing.T, n *Node) {
		ctx := testCtx(t)
		pub := newClient(t, n, nil)
		var lost, miscounted, unsubCounted int
		for i := range *flagSubPubRounds {
			ch := fmt.Sprintf("order:%d", i)
			ps := pub.Subscribe(ctx, ch) // sends SUBSCRIBE, does not wait
			got, err := pub.Publish(ctx, ch, "m").Result()
			if err != nil {
				t.Fatal(err)
			}
			if got != 1 {
				miscounted++
			}
			if err := ps.Ping(ctx, "mark"); err != nil {
				t.Fatal(err)
			}
			delivered := false
			for {
				msg, err := ps.ReceiveTimeout(ctx, ioTimeout)
				if err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
				if m, ok := msg.(*redis.Message); ok && m.Payload == "m" {
					delivered = true
				}
				if p, ok := msg.(*redis.Pong); ok && p.Payload == "mark" {
					break
				}
			}
			if !delivered {
				lost++
			}
			// UNSUBSCRIBE without arguments, not waited for either.
			if err := ps.Unsubscribe(ctx); err != nil {
				t.Fatal(err)
			}
			if got, err := pub.Publish(ctx, ch, "after").Result(); err != nil || got != 0 {
				if err != nil {
					t.Fatal(err)
				}
				unsubCounted++
			}
			ps.Close()
		}
		if lost+miscounted+unsubCounted > 0 {
			t.Fatalf("of %d rounds: %d messages lost, %d PUBLISH counts other than 1, %d PUBLISH counts after UNSUBSCRIBE other than 0",
				*flagSubPubRounds, lost, miscounted, unsubCounted)
		}
	})
}
