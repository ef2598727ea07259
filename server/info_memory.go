package server

import (
	"bufio"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"

	"kvs/fsm"
)

// INFO memory. used_memory is memory.go's figure; the fields around it
// are derived from it as Redis derives them, so they stay consistent:
// used_memory_peak is the largest used_memory seen by the cron loop (every
// 100 ms, as Redis's cron samples it) or by INFO, and like Redis 7.0,
// CONFIG RESETSTAT does not reset it; used_memory_dataset is the store's
// estimate of its keys and values, never more than used_memory;
// used_memory_overhead is the rest; used_memory_startup is used memory
// when the server was made. used_memory_rss is what the Go runtime holds
// from the OS and has not returned, and mem_clients_normal the clients'
// read buffers.

// memPeak is the largest used_memory seen.
type memPeak struct{ v atomic.Uint64 }

func (p *memPeak) note(n uint64) uint64 {
	for {
		old := p.v.Load()
		if n <= old {
			return old
		}
		if p.v.CompareAndSwap(old, n) {
			return n
		}
	}
}

// memoryInfo is INFO memory's fields, in Redis's order.
func (s *Server) memoryInfo(scripts fsm.ScriptStats) []InfoField {
	used := s.usedMemory()
	peak := int64(s.memPeak.note(uint64(used)))
	dataset := min(s.dataBytes(), used)
	startup := min(s.mem.startup.Load(), used-dataset)
	net := used - startup
	if net <= 0 {
		net = 1
	}
	rss := residentBytes()
	sys := totalSystemMemory()
	maxmem := s.maxMemory.Load()
	var fs []InfoField
	add := func(name string, v int64) { fs = append(fs, InfoField{name, strconv.FormatInt(v, 10)}) }
	human := func(name string, v int64) { fs = append(fs, InfoField{name, humanBytes(uint64(max(v, 0)))}) }
	str := func(name, v string) { fs = append(fs, InfoField{name, v}) }
	add("used_memory", used)
	human("used_memory_human", used)
	add("used_memory_rss", rss)
	human("used_memory_rss_human", rss)
	add("used_memory_peak", peak)
	human("used_memory_peak_human", peak)
	str("used_memory_peak_perc", percent(used, peak))
	add("used_memory_overhead", used-dataset)
	add("used_memory_startup", startup)
	add("used_memory_dataset", dataset)
	str("used_memory_dataset_perc", percent(dataset, net))
	add("total_system_memory", int64(sys))
	human("total_system_memory_human", int64(sys))
	s.addScriptMemory(scripts, func(name string, v any) { fs = append(fs, InfoField{name, fmt.Sprint(v)}) })
	add("maxmemory", maxmem)
	human("maxmemory_human", maxmem)
	str("maxmemory_policy", s.policyName())
	ratio := 0.0
	if used > 0 {
		ratio = float64(rss) / float64(used)
	}
	str("mem_fragmentation_ratio", strconv.FormatFloat(ratio, 'f', 2, 64))
	add("mem_fragmentation_bytes", rss-used)
	add("mem_not_counted_for_evict", 0)
	add("mem_clients_normal", s.mem.clients.Load())
	str("mem_allocator", "go")
	pending, freed := s.lazyFreeInfo()
	add("lazyfree_pending_objects", pending)
	add("lazyfreed_objects", freed)
	return fs
}

// percent is part as a percentage of whole, as Redis prints it ("%.2f%%").
func percent(part, whole int64) string {
	p := 0.0
	if whole > 0 {
		p = float64(part) * 100 / float64(whole)
	}
	return strconv.FormatFloat(p, 'f', 2, 64) + "%"
}

// residentBytes is what the Go runtime has mapped and not returned to the
// OS (runtime.MemStats' Sys - HeapReleased), read without stopping the
// world.
func residentBytes() int64 {
	sm := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(sm)
	return int64(uint64Sample(sm[0])) - int64(uint64Sample(sm[1]))
}

// totalSystemMemory is the machine's memory (MemTotal in /proc/meminfo),
// or 0 where it cannot be read, as Redis reports it.
func totalSystemMemory() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
