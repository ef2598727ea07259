package server

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"kvs/fsm"
)

// newGoRedis returns a go-redis client with its default options (RESP3
// handshake with HELLO 3, CLIENT SETINFO, ...), plus any changes opt makes.
func newGoRedis(tb testing.TB, s *Server, opt func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.Addr().String()}
	if opt != nil {
		opt(o)
	}
	c := redis.NewClient(o)
	tb.Cleanup(func() { c.Close() })
	return c
}

func TestGoRedis(t *testing.T) {
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			s := startServer(t, Config{})
			ctx := context.Background()
			c := newGoRedis(t, s, func(o *redis.Options) {
				o.Protocol = proto
				o.ClientName = "tester"
			})
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
				t.Fatalf("GET: %q, %v", v, err)
			}
			if err := c.Get(ctx, "nokey").Err(); err != redis.Nil {
				t.Fatalf("GET missing key: %v, want redis.Nil", err)
			}
			if err := c.Set(ctx, "t", "v", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if d, err := c.TTL(ctx, "t").Result(); err != nil || d != time.Minute {
				t.Fatalf("TTL: %v, %v", d, err)
			}
			if f, err := c.IncrByFloat(ctx, "f", 0.5).Result(); err != nil || f != 0.5 {
				t.Fatalf("INCRBYFLOAT: %v, %v", f, err)
			}
			if name, err := c.ClientGetName(ctx).Result(); err != nil || name != "tester" {
				t.Fatalf("CLIENT GETNAME: %q, %v", name, err)
			}

			cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i := 0; i < 100; i++ {
					p.Set(ctx, fmt.Sprintf("p%03d", i), i, 0)
				}
				p.Get(ctx, "p042")
				p.Incr(ctx, "p042")
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if v := cmds[100].(*redis.StringCmd).Val(); v != "42" {
				t.Fatalf("pipelined GET: %q", v)
			}
			if v := cmds[101].(*redis.IntCmd).Val(); v != 43 {
				t.Fatalf("pipelined INCR: %d", v)
			}

			var keys []string
			iter := c.Scan(ctx, 0, "p*", 7).Iterator()
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			if err := iter.Err(); err != nil {
				t.Fatal(err)
			}
			sort.Strings(keys)
			if len(keys) != 100 || keys[0] != "p000" || keys[99] != "p099" {
				t.Fatalf("SCAN found %d keys", len(keys))
			}
			if n, err := c.DBSize(ctx).Result(); err != nil || n != 103 {
				t.Fatalf("DBSIZE: %d, %v", n, err)
			}
			if _, err := c.Info(ctx, "keyspace").Result(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Do(ctx, "COMMAND", "DOCS").Result(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGoRedisSelectDB checks go-redis's DB option (SELECT on connect): each
// client sees its own database, and one past the last is refused.
func TestGoRedisSelectDB(t *testing.T) {
	s := startServer(t, Config{})
	ctx := context.Background()
	c0 := newGoRedis(t, s, func(o *redis.Options) { o.DB = 0 })
	c5 := newGoRedis(t, s, func(o *redis.Options) { o.DB = 5 })
	if err := c0.Set(ctx, "k", "zero", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c5.Set(ctx, "k", "five", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		c    *redis.Client
		want string
	}{{c0, "zero"}, {c5, "five"}} {
		if v, err := x.c.Get(ctx, "k").Result(); err != nil || v != x.want {
			t.Errorf("GET k: %q %v, want %q", v, err, x.want)
		}
	}
	if n, err := c5.DBSize(ctx).Result(); err != nil || n != 1 {
		t.Errorf("DBSIZE in db 5: %d %v", n, err)
	}
	info, err := c0.Info(ctx, "keyspace").Result()
	if err != nil || !strings.Contains(info, "db0:keys=1,expires=0,avg_ttl=0") || !strings.Contains(info, "db5:keys=1,expires=0,avg_ttl=0") {
		t.Errorf("INFO keyspace: %q %v", info, err)
	}
	err = newGoRedis(t, s, func(o *redis.Options) { o.DB = 16 }).Ping(ctx).Err()
	if err == nil || err.Error() != "ERR DB index is out of range" {
		t.Fatalf("DB 16: %v", err)
	}
	s1 := startServer(t, Config{Databases: 1})
	err = newGoRedis(t, s1, func(o *redis.Options) { o.DB = 1 }).Ping(ctx).Err()
	if err == nil || err.Error() != "ERR DB index is out of range" {
		t.Fatalf("DB 1 of databases 1: %v", err)
	}
}

// The benchmarks measure a go-redis client over loopback against a
// memory-mode server, one request at a time per connection.

func benchServer(b *testing.B) (*Server, *redis.Client) {
	s := startServer(b, Config{Store: fsm.NewStore(), DisableActiveExpiry: true})
	c := newGoRedis(b, s, func(o *redis.Options) { o.PoolSize = 64 })
	return s, c
}

func BenchmarkRESPSet(b *testing.B) {
	_, c := benchServer(b)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := c.Set(ctx, "key", "value", 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRESPGet(b *testing.B) {
	_, c := benchServer(b)
	ctx := context.Background()
	if err := c.Set(ctx, "key", "value", 0).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Get(ctx, "key").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRESPSetParallel(b *testing.B) {
	_, c := benchServer(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.Set(ctx, "key", "value", 0).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRESPPipelined measures the server alone: one raw connection
// sending pipelines of 100 SETs or GETs, so client cost stays small.
func BenchmarkRESPPipelined(b *testing.B) {
	for _, cmd := range []string{"SET", "GET"} {
		b.Run(cmd, func(b *testing.B) {
			s := startServer(b, Config{Store: fsm.NewStore(), DisableActiveExpiry: true})
			rc := dialRaw(b, s)
			rc.do("SET", "key", "value")
			args := []string{cmd, "key"}
			if cmd == "SET" {
				args = append(args, "value")
			}
			var req []byte
			for i := 0; i < 100; i++ {
				req = append(req, encodeCommand(args...)...)
			}
			reply := "+OK\r\n"
			if cmd == "GET" {
				reply = "$5\r\nvalue\r\n"
			}
			buf := make([]byte, 100*len(reply))
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			for b.Loop() {
				rc.send(req)
				if _, err := io.ReadFull(rc.br, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/cmd")
		})
	}
}

// BenchmarkRESPMultiExec measures the server alone on transactions: one
// raw connection sending pipelines of 16 transactions, each MULTI, 3 SETs
// and EXEC, as test/txbench's -P 16 does.
func BenchmarkRESPMultiExec(b *testing.B) {
	s := startServer(b, Config{Store: fsm.NewStore(), DisableActiveExpiry: true})
	rc := dialRaw(b, s)
	const txs, sets = 16, 3
	var req []byte
	for i := 0; i < txs; i++ {
		req = append(req, encodeCommand("MULTI")...)
		for j := 0; j < sets; j++ {
			req = append(req, encodeCommand("SET", "key:"+strconv.Itoa(i*sets+j), "xxx")...)
		}
		req = append(req, encodeCommand("EXEC")...)
	}
	var reply []byte
	for i := 0; i < txs; i++ {
		reply = append(reply, "+OK\r\n"...)
		for j := 0; j < sets; j++ {
			reply = append(reply, "+QUEUED\r\n"...)
		}
		reply = append(reply, "*3\r\n+OK\r\n+OK\r\n+OK\r\n"...)
	}
	buf := make([]byte, len(reply))
	b.ReportAllocs()
	for b.Loop() {
		rc.send(req)
		if _, err := io.ReadFull(rc.br, buf); err != nil {
			b.Fatal(err)
		}
	}
	if string(buf) != string(reply) {
		b.Fatalf("replies %q, want %q", buf, reply)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*txs), "ns/tx")
}
