package server

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"kvs/internal/testwait"
)

// ioModes runs f with connections on event loops and on goroutines of
// their own: delivery differs between the two (pubsub.go).
func ioModes(t *testing.T, f func(t *testing.T, cfg Config)) {
	for _, goroutines := range []bool{false, true} {
		name := "loop"
		if goroutines {
			name = "goroutines"
		}
		t.Run(name, func(t *testing.T) { f(t, Config{ConnGoroutines: goroutines}) })
	}
}

func subReply(proto int, kind, ch string, n int) string {
	h := "*3\r\n"
	if proto == 3 {
		h = ">3\r\n"
	}
	return h + bulk(kind) + bulk(ch) + fmt.Sprintf(":%d\r\n", n)
}

func TestPubsubReplies(t *testing.T) {
	ioModes(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		sub := dialRaw(t, s)
		pub := dialRaw(t, s)
		if got, want := sub.do("SUBSCRIBE", "c1", "c2"), subReply(2, "subscribe", "c1", 1); got != want {
			t.Fatalf("SUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := sub.reply(), subReply(2, "subscribe", "c2", 2); got != want {
			t.Fatalf("SUBSCRIBE second: %q, want %q", got, want)
		}
		if got, want := sub.do("PSUBSCRIBE", "c*"), subReply(2, "psubscribe", "c*", 3); got != want {
			t.Fatalf("PSUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := sub.do("GET", "k"), "-"+errSubscribedMode("get")+"\r\n"; got != want {
			t.Fatalf("GET while subscribed: %q, want %q", got, want)
		}
		if got, want := sub.do("PING"), "*2\r\n$4\r\npong\r\n$0\r\n\r\n"; got != want {
			t.Fatalf("PING while subscribed: %q, want %q", got, want)
		}
		if got := pub.do("PUBLISH", "c1", "hello"); got != ":2\r\n" {
			t.Fatalf("PUBLISH: %q, want :2", got)
		}
		if got, want := sub.reply(), "*3\r\n"+bulk("message")+bulk("c1")+bulk("hello"); got != want {
			t.Fatalf("message: %q, want %q", got, want)
		}
		if got, want := sub.reply(), "*4\r\n"+bulk("pmessage")+bulk("c*")+bulk("c1")+bulk("hello"); got != want {
			t.Fatalf("pmessage: %q, want %q", got, want)
		}
		if got := pub.do("PUBSUB", "NUMSUB", "c1", "nope"); got != "*4\r\n"+bulk("c1")+":1\r\n"+bulk("nope")+":0\r\n" {
			t.Fatalf("PUBSUB NUMSUB: %q", got)
		}
		if got := pub.do("PUBSUB", "NUMPAT"); got != ":1\r\n" {
			t.Fatalf("PUBSUB NUMPAT: %q", got)
		}
		if got := pub.do("PUBSUB", "CHANNELS"); got != "*2\r\n"+bulk("c1")+bulk("c2") {
			t.Fatalf("PUBSUB CHANNELS: %q", got)
		}
		if got := sub.do("RESET"); got != "+RESET\r\n" {
			t.Fatalf("RESET: %q", got)
		}
		if got := sub.do("GET", "k"); got != "$-1\r\n" {
			t.Fatalf("GET after RESET: %q", got)
		}
		if got := pub.do("PUBLISH", "c1", "x"); got != ":0\r\n" {
			t.Fatalf("PUBLISH after RESET: %q, want :0", got)
		}
		if got := sub.do("UNSUBSCRIBE"); got != "*3\r\n"+bulk("unsubscribe")+"$-1\r\n:0\r\n" {
			t.Fatalf("UNSUBSCRIBE with nothing subscribed: %q", got)
		}
	})
}

// A RESP3 subscriber runs any command, and a message to itself comes
// before PUBLISH's reply, as in Redis.
func TestPubsubRESP3(t *testing.T) {
	ioModes(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		c := dialRaw(t, s)
		c.do("HELLO", "3")
		if got, want := c.do("SSUBSCRIBE", "s"), subReply(3, "ssubscribe", "s", 1); got != want {
			t.Fatalf("SSUBSCRIBE: %q, want %q", got, want)
		}
		if got, want := c.do("SUBSCRIBE", "c"), subReply(3, "subscribe", "c", 1); got != want {
			t.Fatalf("SUBSCRIBE: %q, want %q", got, want)
		}
		if got := c.do("GET", "k"); got != "_\r\n" {
			t.Fatalf("GET: %q", got)
		}
		if got, want := c.do("PUBLISH", "c", "m"), ">3\r\n"+bulk("message")+bulk("c")+bulk("m"); got != want {
			t.Fatalf("own message: %q, want %q", got, want)
		}
		if got := c.reply(); got != ":1\r\n" {
			t.Fatalf("PUBLISH reply: %q", got)
		}
		if got, want := c.do("SPUBLISH", "s", "m"), ">3\r\n"+bulk("smessage")+bulk("s")+bulk("m"); got != want {
			t.Fatalf("own shard message: %q, want %q", got, want)
		}
		if got := c.reply(); got != ":1\r\n" {
			t.Fatalf("SPUBLISH reply: %q", got)
		}
	})
}

// TestPubsubReplyOff: CLIENT REPLY OFF and SKIP silence replies but not
// pub/sub frames (confirmations, messages), as in Redis 7.0, in RESP2 and
// RESP3; RESET turns replies back on and answers +RESET.
func TestPubsubReplyOff(t *testing.T) {
	ioModes(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		for _, proto := range []int{2, 3} {
			c, pub := dialRaw(t, s), dialRaw(t, s)
			if proto == 3 {
				c.do("HELLO", "3")
			}
			push := "*"
			if proto == 3 {
				push = ">"
			}
			c.send(encodeCommand("CLIENT", "REPLY", "OFF"))
			c.send(encodeCommand("UNSUBSCRIBE"))
			want := push + "3\r\n" + bulk("unsubscribe") + map[int]string{2: "$-1\r\n", 3: "_\r\n"}[proto] + ":0\r\n"
			if got := c.reply(); got != want {
				t.Fatalf("RESP%d UNSUBSCRIBE with replies off: %q, want %q", proto, got, want)
			}
			c.send(encodeCommand("SUBSCRIBE", "ch"))
			if got, want := c.reply(), subReply(proto, "subscribe", "ch", 1); got != want {
				t.Fatalf("RESP%d SUBSCRIBE with replies off: %q, want %q", proto, got, want)
			}
			if got := pub.do("PUBLISH", "ch", "m"); got != ":1\r\n" {
				t.Fatalf("PUBLISH: %q", got)
			}
			if got, want := c.reply(), push+"3\r\n"+bulk("message")+bulk("ch")+bulk("m"); got != want {
				t.Fatalf("RESP%d message with replies off: %q, want %q", proto, got, want)
			}
			if proto == 3 {
				// A RESP3 subscriber may publish: its own message comes,
				// PUBLISH's reply does not.
				c.send(encodeCommand("PUBLISH", "ch", "self"))
				if got, want := c.reply(), push+"3\r\n"+bulk("message")+bulk("ch")+bulk("self"); got != want {
					t.Fatalf("own message with replies off: %q, want %q", got, want)
				}
			}
			c.send(encodeCommand("PING"))
			if got := c.do("RESET"); got != "+RESET\r\n" {
				t.Fatalf("RESP%d RESET with replies off: %q", proto, got)
			}
			if got := c.do("PING"); got != "+PONG\r\n" {
				t.Fatalf("RESP%d PING after RESET: %q", proto, got)
			}
		}
	})
}

// Every message published after SUBSCRIBE's reply reaches the subscriber,
// in order, while another connection publishes as fast as it can.
func TestPubsubOrder(t *testing.T) {
	ioModes(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		ctx := context.Background()
		pub := newGoRedis(t, s, nil)
		sub := newGoRedis(t, s, nil)
		ps := sub.Subscribe(ctx, "ch")
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil { // the confirmation
			t.Fatal(err)
		}
		const n = 2000
		go func() {
			for i := range n {
				pub.Publish(ctx, "ch", fmt.Sprint(i))
			}
		}()
		ch := ps.Channel()
		for i := range n {
			select {
			case m := <-ch:
				if m.Payload != fmt.Sprint(i) {
					t.Fatalf("message %d: %q", i, m.Payload)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("message %d never came", i)
			}
		}
	})
}

func TestPubsubGoRedis(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			ioModes(t, func(t *testing.T, cfg Config) {
				s := startServer(t, cfg)
				ctx := context.Background()
				o := func(o *redis.Options) { o.Protocol = proto }
				pub := newGoRedis(t, s, o)
				sub := newGoRedis(t, s, o)
				ps := sub.Subscribe(ctx, "news")
				defer ps.Close()
				if err := ps.PSubscribe(ctx, "n*"); err != nil {
					t.Fatal(err)
				}
				eventually(t, "two subscriptions", func() bool {
					n, _ := pub.PubSubNumPat(ctx).Result()
					m, _ := pub.PubSubNumSub(ctx, "news").Result()
					return n == 1 && m["news"] == 1
				})
				if n, err := pub.Publish(ctx, "news", "hi").Result(); err != nil || n != 2 {
					t.Fatalf("PUBLISH: %d, %v", n, err)
				}
				got := map[string]bool{}
				for len(got) < 2 {
					m, err := ps.ReceiveTimeout(ctx, 10*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					switch m := m.(type) {
					case *redis.Subscription:
					case *redis.Message:
						got[m.Pattern+"|"+m.Channel+"|"+m.Payload] = true
					default:
						t.Fatalf("unexpected %T %v", m, m)
					}
				}
				if !got["|news|hi"] || !got["n*|news|hi"] {
					t.Fatalf("messages: %v", got)
				}
				if err := ps.Ping(ctx); err != nil {
					t.Fatalf("PING while subscribed: %v", err)
				}
				ss := sub.SSubscribe(ctx, "shard")
				defer ss.Close()
				if _, err := ss.Receive(ctx); err != nil {
					t.Fatal(err)
				}
				if n, err := pub.SPublish(ctx, "shard", "x").Result(); err != nil || n != 1 {
					t.Fatalf("SPUBLISH: %d, %v", n, err)
				}
				m, err := ss.ReceiveMessage(ctx)
				if err != nil || m.Channel != "shard" || m.Payload != "x" {
					t.Fatalf("shard message: %v, %v", m, err)
				}
			})
		})
	}
}

// A subscriber that never reads is disconnected once its pending output
// passes the hard limit; the publisher goes on.
func TestPubsubOutputLimit(t *testing.T) {
	ioModes(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		ctl := dialRaw(t, s)
		if got := ctl.do("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 0 0"); got != "+OK\r\n" {
			t.Fatalf("CONFIG SET: %q", got)
		}
		slow := dialRaw(t, s)
		slow.do("SUBSCRIBE", "flood")
		payload := strings.Repeat("x", 64<<10)
		eventually(t, "the slow subscriber closed", func() bool {
			got := ctl.do("PUBLISH", "flood", payload)
			return got == ":0\r\n"
		})
		if n := s.stats.outputLimitKills.Load(); n != 1 {
			t.Fatalf("output limit kills: %d, want 1", n)
		}
		slow.readEOF() // ends: the server closed the connection
	})
}

// Keyspace notifications: Redis's events for a write, on both channels,
// and none once notify-keyspace-events is empty.
func TestKeyspaceNotifications(t *testing.T) {
	ioModes(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		sub := dialRaw(t, s)
		w := dialRaw(t, s)
		if got := w.do("CONFIG", "SET", "notify-keyspace-events", "KEA"); got != "+OK\r\n" {
			t.Fatalf("CONFIG SET: %q", got)
		}
		if got := w.do("CONFIG", "GET", "notify-keyspace-events"); got != "*2\r\n"+bulk("notify-keyspace-events")+bulk("AKE") {
			t.Fatalf("CONFIG GET: %q", got)
		}
		sub.do("PSUBSCRIBE", "__key*")
		pm := func(ch, msg string) string {
			return "*4\r\n" + bulk("pmessage") + bulk("__key*") + bulk(ch) + bulk(msg)
		}
		w.do("SET", "k", "v", "EX", "100")
		w.do("HDEL", "nohash", "f") // no event: nothing deleted
		w.do("HSET", "h", "f", "v")
		w.do("HDEL", "h", "f")
		for _, want := range []string{
			pm("__keyspace@0__:k", "set"), pm("__keyevent@0__:set", "k"),
			pm("__keyspace@0__:k", "expire"), pm("__keyevent@0__:expire", "k"),
			pm("__keyspace@0__:h", "hset"), pm("__keyevent@0__:hset", "h"),
			pm("__keyspace@0__:h", "hdel"), pm("__keyevent@0__:hdel", "h"),
			pm("__keyspace@0__:h", "del"), pm("__keyevent@0__:del", "h"),
		} {
			if got := sub.reply(); got != want {
				t.Fatalf("event %q, want %q", got, want)
			}
		}
		w.do("CONFIG", "SET", "notify-keyspace-events", "")
		w.do("SET", "k", "v2")
		w.do("PUBLISH", "__keyspace@0__:marker", "m")
		if got, want := sub.reply(), pm("__keyspace@0__:marker", "m"); got != want {
			t.Fatalf("after turning notifications off: %q, want only the marker %q", got, want)
		}
	})
}

// Active expiry's deletion is an expired event.
func TestKeyspaceExpired(t *testing.T) {
	s := startServer(t, Config{})
	sub := dialRaw(t, s)
	w := dialRaw(t, s)
	w.do("CONFIG", "SET", "notify-keyspace-events", "Ex")
	sub.do("SUBSCRIBE", "__keyevent@0__:expired")
	w.do("SET", "k", "v", "PX", "1")
	if got, want := sub.reply(), "*3\r\n"+bulk("message")+bulk("__keyevent@0__:expired")+bulk("k"); got != want {
		t.Fatalf("expired event: %q, want %q", got, want)
	}
}

// TestPubsubArrivalOrder: a SUBSCRIBE or an UNSUBSCRIBE sent on one
// connection counts for a PUBLISH sent after it on another, whichever
// event loops read the two (order.go); neither waits for the other's
// reply. Fresh subscriber connections land on the loops in turn. (A
// connection not yet accepted is not ordered: see compatibility.md.) Each
// change is in the server's socket before the PUBLISH is sent (delivered):
// the server has not read it, but it has arrived.
func TestPubsubArrivalOrder(t *testing.T) {
	if runtime.NumCPU() < 2 || os.Getenv("KVS_TEST_CONN_GOROUTINES") != "" {
		t.Skip("one event loop or none: nothing to overtake (order.go)")
	}
	s := startServer(t, Config{})
	pub := dialRaw(t, s)
	for i := range 300 {
		ch := fmt.Sprint("ch", i)
		sub := dialRaw(t, s)
		sub.do("PING") // accepted and on its loop, as go-redis's HELLO makes it
		sub.send(encodeCommand("SUBSCRIBE", ch))
		testwait.Delivered(t, sub.nc)
		if got := pub.do("PUBLISH", ch, "m"); got != ":1\r\n" {
			t.Fatalf("round %d: PUBLISH after SUBSCRIBE on another connection: %q, want :1", i, got)
		}
		sub.send(encodeCommand("UNSUBSCRIBE"))
		testwait.Delivered(t, sub.nc)
		if got := pub.do("PUBLISH", ch, "m"); got != ":0\r\n" {
			t.Fatalf("round %d: PUBLISH after UNSUBSCRIBE on another connection: %q, want :0", i, got)
		}
		if got, want := sub.reply(), subReply(2, "subscribe", ch, 1); got != want {
			t.Fatalf("round %d: %q, want %q", i, got, want)
		}
		if got, want := sub.reply(), "*3\r\n"+bulk("message")+bulk(ch)+bulk("m"); got != want {
			t.Fatalf("round %d: %q, want %q", i, got, want)
		}
		if got, want := sub.reply(), subReply(2, "unsubscribe", ch, 0); got != want {
			t.Fatalf("round %d: %q, want %q", i, got, want)
		}
		sub.nc.Close()
	}
}
