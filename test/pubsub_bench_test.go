package test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkPublish100: PUBLISH to 100 subscribers of one channel, from 8
// concurrent publishers, against redis-server and kvs (memory mode), and in
// a three-node cluster with the subscribers spread over the nodes and the
// publishers too. An operation is one PUBLISH, timed until all 100
// subscribers have received it; deliveries/s is reported.
//
//	go test -run '^$' -bench BenchmarkPublish100 -benchtime 20000x ./test/
func BenchmarkPublish100(b *testing.B) {
	b.Run("redis", func(b *testing.B) { benchPublish(b, []*Node{startRedis(b)}) })
	b.Run("kvs-memory", func(b *testing.B) { benchPublish(b, []*Node{startKVS(b, KVSOptions{})}) })
	b.Run("kvs-cluster", func(b *testing.B) { benchPublish(b, startCluster(b, 3)) })
}

func benchPublish(b *testing.B, nodes []*Node) {
	const subscribers, publishers = 100, 8
	ctx := context.Background()
	var received atomic.Int64
	var wg sync.WaitGroup
	var clients []*redis.Client
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, PoolSize: subscribers + publishers})
		b.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	done := make(chan struct{})
	for i := range subscribers {
		ps := clients[i%len(clients)].Subscribe(ctx, "bench")
		if _, err := ps.Receive(ctx); err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := ps.Channel(redis.WithChannelSize(1 << 16))
			for {
				select {
				case <-ch:
					received.Add(1)
				case <-done:
					ps.Close()
					return
				}
			}
		}()
	}
	// Every node links to the others within a second: wait until a probe
	// from each reaches every subscriber.
	pollFor(b, "probes reaching every subscriber", clusterWait, 20*time.Millisecond, func() error {
		received.Store(0)
		for _, c := range clients {
			c.Publish(ctx, "bench", "probe")
		}
		deadline := time.Now().Add(time.Second)
		for received.Load() < int64(subscribers*len(clients)) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := received.Load(); got != int64(subscribers*len(clients)) {
			return fmt.Errorf("%d deliveries", got)
		}
		return nil
	})
	received.Store(0)
	payload := make([]byte, 64)
	b.ResetTimer()
	var pwg sync.WaitGroup
	var next atomic.Int64
	for p := range publishers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			c := clients[p%len(clients)]
			for next.Add(1) <= int64(b.N) {
				if err := c.Publish(ctx, "bench", payload).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	pwg.Wait()
	want := int64(b.N) * subscribers
	for received.Load() < want {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(want)/b.Elapsed().Seconds(), "deliveries/s")
	close(done)
	wg.Wait()
}
