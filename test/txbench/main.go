// Command txbench measures MULTI/EXEC throughput, which redis-benchmark
// cannot send: each client connection sends transactions of MULTI, n SETs
// of random keys and EXEC, pipeline transactions at a time, and waits for
// their replies before sending more. It prints transactions a second.
//
//	go run ./test/txbench -addr 127.0.0.1:6379 -c 50 -P 16 -sets 3 -d 5s
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "server address")
	clients := flag.Int("c", 50, "connections")
	pipeline := flag.Int("P", 1, "transactions in flight per connection")
	sets := flag.Int("sets", 3, "SETs per transaction")
	keys := flag.Int("keys", 100000, "key range")
	size := flag.Int("data-size", 3, "value size in bytes")
	dur := flag.Duration("d", 5*time.Second, "how long to run")
	flag.Parse()

	var done atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, *clients)
	value := make([]byte, *size)
	for i := range value {
		value[i] = 'x'
	}
	for i := 0; i < *clients; i++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			if err := run(*addr, *pipeline, *sets, *keys, value, seed, stop, &done); err != nil {
				errs <- err
			}
		}(uint64(i))
	}
	start := time.Now()
	time.Sleep(*dur)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, "txbench:", err)
		os.Exit(1)
	}
	fmt.Printf("%.0f transactions/s (%d in %v, -c %d -P %d, %d SETs each)\n",
		float64(done.Load())/elapsed.Seconds(), done.Load(), elapsed.Round(time.Millisecond), *clients, *pipeline, *sets)
}

func run(addr string, pipeline, sets, keys int, value []byte, seed uint64, stop <-chan struct{}, done *atomic.Int64) error {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	r := bufio.NewReaderSize(nc, 64<<10)
	rng := rand.New(rand.NewPCG(seed, 1))
	var req []byte
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		req = req[:0]
		for range pipeline {
			req = append(req, "*1\r\n$5\r\nMULTI\r\n"...)
			for range sets {
				k := "key:" + strconv.Itoa(rng.IntN(keys))
				req = fmt.Appendf(req, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(value), value)
			}
			req = append(req, "*1\r\n$4\r\nEXEC\r\n"...)
		}
		if _, err := nc.Write(req); err != nil {
			return err
		}
		// +OK, +QUEUED per SET, then *n and n +OK.
		for range pipeline {
			for range 2 + 2*sets {
				line, err := r.ReadSlice('\n')
				if err != nil {
					return err
				}
				if line[0] == '-' {
					return fmt.Errorf("error reply %q", line)
				}
			}
		}
		done.Add(int64(pipeline))
	}
}
