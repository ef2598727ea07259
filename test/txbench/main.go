// Command txbench measures MULTI/EXEC throughput, which redis-benchmark
// cannot send: each client connection sends transactions of MULTI, n SETs
// of random keys and EXEC, pipeline transactions at a time, and waits for
// their replies before sending more. It prints transactions a second and,
// given the server's process id (-pid, Linux), the server's CPU time per
// transaction, which on a busy machine is steadier than the rate.
//
//	go run ./test/txbench -addr 127.0.0.1:6379 -c 50 -P 16 -sets 3 -d 5s -pid 1234
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
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
	pid := flag.Int("pid", 0, "the server's process id: also print its CPU time per transaction (reads /proc/PID/stat)")
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
	cpu0, cpuErr := cpuTime(*pid)
	start := time.Now()
	time.Sleep(*dur)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := cpuTime(*pid)
	if cpuErr == nil {
		cpuErr = err
	}
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, "txbench:", err)
		os.Exit(1)
	}
	fmt.Printf("%.0f transactions/s (%d in %v, -c %d -P %d, %d SETs each)\n",
		float64(done.Load())/elapsed.Seconds(), done.Load(), elapsed.Round(time.Millisecond), *clients, *pipeline, *sets)
	if *pid != 0 {
		if cpuErr != nil {
			fmt.Fprintln(os.Stderr, "txbench: server CPU time:", cpuErr)
			os.Exit(1)
		}
		if n := done.Load(); n > 0 {
			fmt.Printf("%.2f µs of server CPU per transaction\n", float64(cpu1-cpu0)/float64(time.Microsecond)/float64(n))
		}
	}
}

// clockTick is the unit of /proc/PID/stat's times, USER_HZ, 100 on every
// Linux kvs runs on.
const clockTick = 10 * time.Millisecond

// cpuTime returns the user and system CPU time process pid has used, or 0
// for pid 0.
func cpuTime(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count the fields after its closing one. utime and stime are fields
	// 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times %q %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
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
