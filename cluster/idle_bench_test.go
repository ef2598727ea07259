package cluster

import (
	"fmt"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"kvs/fsm"
)

// BenchmarkIdleGroups measures what idle groups cost: three nodes (one
// cluster.Mux each, in this process) hold G groups of three replicas,
// with the default timing, and do nothing. Each op is one second of
// idleness; it reports the CPU the three nodes used (%core/node, and per
// group replica, %core/group) and the goroutines per node. Run with
// -benchtime=5x for five seconds.
func BenchmarkIdleGroups(b *testing.B) {
	for _, groups := range []int{1, 16, 64} {
		b.Run(strconv.Itoa(groups), func(b *testing.B) {
			before := runtime.NumGoroutine()
			muxes := make([]*Mux, 3)
			for i := range muxes {
				m, err := ListenMux("127.0.0.1:0", nil)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				muxes[i] = m
			}
			ids := []string{"a", "b", "c"}
			var nodes []*Node
			for g := range groups {
				var lead *Node
				for i, m := range muxes {
					cfg := Config{NodeID: ids[i], RaftAddr: m.Addr().String(), Dir: b.TempDir(), Bootstrap: i == 0,
						FSM: fsm.NewRaftFSM(fsm.NewStore()), Logger: testLogger(), Mux: m, Group: uint32(g)}
					n, err := Open(cfg)
					if err != nil {
						b.Fatal(err)
					}
					defer n.Close()
					nodes = append(nodes, n)
					if i == 0 {
						lead = n
						eventually(b, fmt.Sprintf("group %d electing", g), func() error {
							if !n.IsLeader() {
								return fmt.Errorf("no leader yet")
							}
							return nil
						})
						continue
					}
					if err := lead.AddVoter(ids[i], m.Addr().String()); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := lead.Apply(setEntry("k", "v")); err != nil {
					b.Fatal(err)
				}
			}
			time.Sleep(2 * time.Second) // the joins' catch-up traffic ends
			goroutines := runtime.NumGoroutine() - before
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			for range b.N {
				time.Sleep(time.Second)
			}
			wall, cpu := time.Since(start), cpuTime()-cpu0
			b.StopTimer()
			perNode := 100 * cpu.Seconds() / wall.Seconds() / 3
			b.ReportMetric(perNode, "%core/node")
			b.ReportMetric(perNode/float64(groups), "%core/group")
			b.ReportMetric(float64(goroutines)/3, "goroutines/node")
		})
	}
}

// cpuTime is the CPU (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
