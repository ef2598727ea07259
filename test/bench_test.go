package test

import (
	"bufio"
	"fmt"
	"math"
	"math/rand"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks of the real binary over real sockets: what a client of each
// mode gets. One op is one command answered. Run them with
//
//	go test ./test/ -run XXX -bench . -benchtime 20000x
//
// BenchmarkClusterSet compares one connection with fifty writing to a
// three-node cluster's leader (batching at work); BenchmarkMixed runs the
// reference workload shape (1 SET to 10 GETs, random keys of 100,000,
// 32-byte values, 50 connections) against a durable node and a cluster.

const (
	benchKeys     = 100000
	benchValueLen = 32
)

var benchValue = strings.Repeat("v", benchValueLen)

// prefill writes every key once, pipelined, so GETs hit.
func prefill(b *testing.B, addr string) {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	const depth = 1000
	for i := 0; i < benchKeys; i += depth {
		var req []byte
		for j := i; j < min(i+depth, benchKeys); j++ {
			req = append(req, encodeCommand("SET", fmt.Sprintf("key:%d", j), benchValue)...)
		}
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		for j := i; j < min(i+depth, benchKeys); j++ {
			if v, err := readValue(r); err != nil || v.IsError() {
				b.Fatalf("prefill SET: %v %s", err, v)
			}
		}
	}
}

// drive runs b.N commands over conns connections to addr, one command at a
// time per connection; every ratio-th command is a SET, the rest GETs
// (ratio 1: only SETs). It reports ops/s.
func drive(b *testing.B, addr string, conns, ratio int) {
	b.Helper()
	driveAfter(b, addr, conns, ratio, nil)
}

// driveAfter is drive with the commands in setup sent first on every
// connection (READONLY, say), their replies read and not counted.
func driveAfter(b *testing.B, addr string, conns, ratio int, setup [][]string) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for w := 0; w < conns; w++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(c)
		for _, cmd := range setup {
			if _, err := c.Write(encodeCommand(cmd...)); err != nil {
				b.Fatal(err)
			}
			if v, err := readValue(r); err != nil || v.IsError() {
				b.Fatalf("%q: %v %s", cmd, err, v)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				key := fmt.Sprintf("key:%d", rng.Intn(benchKeys))
				var req []byte
				if i%int64(ratio) == 0 {
					req = encodeCommand("SET", key, benchValue)
				} else {
					req = encodeCommand("GET", key)
				}
				if _, err := c.Write(req); err != nil {
					failed.Store(err)
					return
				}
				if v, err := readValue(r); err != nil || v.IsError() {
					failed.Store(fmt.Errorf("%v %s", err, v))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

func BenchmarkClusterSet(b *testing.B) {
	nodes := startCluster(b, 3)
	leader := waitLeader(b, nodes)
	for _, conns := range []int{1, 50} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			drive(b, leader.Addr, conns, 1)
		})
	}
}

// BenchmarkReplicaReads: 50 connections GET random keys on a follower of
// three nodes, as plain connections (answered from the store) and after
// READONLY (each pipeline first catches up with the leader's applied index,
// one KVS.SYNC shared by the reads that arrive meanwhile).
func BenchmarkReplicaReads(b *testing.B) {
	nodes := startCluster(b, 3)
	leader := waitLeader(b, nodes)
	prefill(b, leader.Addr)
	f := followers(nodes, leader)[0]
	for _, mode := range []string{"plain", "readonly"} {
		b.Run(mode, func(b *testing.B) {
			var setup [][]string
			if mode == "readonly" {
				setup = [][]string{{"READONLY"}}
			}
			driveAfter(b, f.Addr, 50, math.MaxInt, setup)
		})
	}
}

func BenchmarkMixed(b *testing.B) {
	b.Run("durable", func(b *testing.B) {
		n := newKVS(b, "kvs-durable", KVSOptions{Durable: true})
		n.Start()
		prefill(b, n.Addr)
		b.ResetTimer()
		drive(b, n.Addr, 50, 11)
	})
	b.Run("cluster", func(b *testing.B) {
		nodes := startCluster(b, 3)
		leader := waitLeader(b, nodes)
		prefill(b, leader.Addr)
		b.ResetTimer()
		drive(b, leader.Addr, 50, 11)
	})
}
