package server

import (
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"kvs/fsm"
)

// maxmemory and maxmemory-policy. Used memory is Go's live heap as of the
// last collection (runtime/metrics /gc/heap/live:bytes, the honest figure
// of what the process holds, where Redis counts its allocator's bytes)
// plus what the store's data grew or shrank by since (fsm.Store.DataBytes,
// which moves with every write), so the figure follows writes and
// evictions at once rather than at the next collection. INFO memory's
// used_memory reports it.
//
// When used memory is over maxmemory, a command flagged denyoom is refused
// with Redis's OOM error under noeviction, and under an evicting policy
// when the policy has nothing left to evict (volatile-* with no key that
// has a TTL); otherwise the command runs and the evictor is woken. The
// evictor runs in the cron loop, on the node that decides writes of its
// own (the server in memory and durable mode, only the leader in a
// cluster, as for expiry): it asks the store for keys by the policy and
// proposes their deletion (fsm.OpEvict) through the proposer, so replicas
// delete the same keys, until used memory is under maxmemory or its budget
// for the tick is spent. Evicted keys fire the "evicted" notification and
// count in INFO stats evicted_keys. Each node refuses denyoom commands by
// its own used memory; a follower's forwarded writes are not refused by the
// leader's.
//
// The LRU and LFU policies use the store's key access records
// (fsm/access.go), kept only while such a policy is in force; each key
// evicted is the best of maxmemory-samples picked at random, as in Redis.

// evictPolicies are the policies CONFIG SET maxmemory-policy accepts.
// evictPolicies are the policies, in the order Redis's error lists them.
var evictPolicies = []struct {
	name   string
	policy fsm.EvictPolicy
}{
	{"volatile-lru", fsm.EvictVolatileLRU},
	{"volatile-lfu", fsm.EvictVolatileLFU},
	{"volatile-random", fsm.EvictVolatileRandom},
	{"volatile-ttl", fsm.EvictVolatileTTL},
	{"allkeys-lru", fsm.EvictAllKeysLRU},
	{"allkeys-lfu", fsm.EvictAllKeysLFU},
	{"allkeys-random", fsm.EvictAllKeysRandom},
	{"noeviction", fsm.EvictNone},
}

func policyName(p fsm.EvictPolicy) string {
	for _, e := range evictPolicies {
		if e.policy == p {
			return e.name
		}
	}
	return "noeviction"
}

const (
	errOOM = "OOM command not allowed when used memory > 'maxmemory'."
	// evictBatch is how many keys one proposal evicts at most, and
	// evictBudget bounds the time one wake-up spends evicting.
	evictBatch  = 64
	evictBudget = 25 * time.Millisecond
	// DefaultMaxmemorySamples is Redis's maxmemory-samples.
	DefaultMaxmemorySamples = 5
)

// memGauge computes used memory; see the file comment.
type memGauge struct {
	mu       sync.Mutex // guards the fields below
	samples  []metrics.Sample
	cycles   uint64 // GC cycles when live and data were taken
	live     int64  // live heap after the last GC
	dataAtGC int64  // the store's DataBytes when live was taken
}

// refresh takes the live heap anew once a collection has run since the
// last refresh; the cron loop calls it every tick.
func (g *memGauge) refresh(data func() int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.samples == nil {
		g.samples = []metrics.Sample{
			{Name: "/gc/cycles/total:gc-cycles"},
			{Name: "/gc/heap/live:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"},
		}
	}
	metrics.Read(g.samples)
	cycles := uint64Sample(g.samples[0])
	if cycles == g.cycles && g.live != 0 {
		return
	}
	live := int64(uint64Sample(g.samples[1]))
	if cycles == 0 || live == 0 {
		live = int64(uint64Sample(g.samples[2])) // no collection yet
	}
	g.cycles, g.live, g.dataAtGC = cycles, live, data()
}

func uint64Sample(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

// usedMemory is INFO's used_memory and what maxmemory is held to.
func (s *Server) usedMemory() int64 {
	s.mem.mu.Lock()
	live, at := s.mem.live, s.mem.dataAtGC
	s.mem.mu.Unlock()
	if live == 0 {
		s.mem.refresh(s.cfg.Store.DataBytes)
		s.mem.mu.Lock()
		live, at = s.mem.live, s.mem.dataAtGC
		s.mem.mu.Unlock()
	}
	return max(0, live+s.cfg.Store.DataBytes()-at)
}

// oomRefusal is the error a denyoom command gets now, or "".
func (c *client) oomRefusal() string {
	s := c.s
	limit := s.maxMemory.Load()
	if limit <= 0 || s.usedMemory() <= limit {
		return ""
	}
	p := fsm.EvictPolicy(s.evictPolicy.Load())
	if p == fsm.EvictNone {
		return errOOM
	}
	evictable, ok := s.cfg.Store.EvictableServing(p)
	switch {
	case !ok:
		return errBusy(s.cfg.Store.ScriptBusy())
	case !evictable:
		return errOOM
	}
	s.wakeEvictor()
	return ""
}

// oomInMulti is the error a command being queued in MULTI gets now, or
// "": over maxmemory Redis refuses to queue any command (queuing takes
// memory), not only denyoom ones.
func (c *client) oomInMulti() string {
	if c.s.maxMemory.Load() <= 0 {
		return ""
	}
	return c.oomRefusal()
}

// oomAtExec is EXEC's error when its transaction holds a denyoom command
// and memory is over maxmemory now, as Redis answers it, or "".
func (c *client) oomAtExec(m *multiState) string {
	if c.s.maxMemory.Load() <= 0 {
		return ""
	}
	for _, q := range m.queued {
		if q.cmd.flags&flagDenyOOM != 0 {
			if e := c.oomRefusal(); e != "" {
				return "EXECABORT Transaction discarded because of: " + e
			}
			return ""
		}
	}
	return ""
}

// wakeEvictor asks the cron loop to evict now rather than at its next tick.
func (s *Server) wakeEvictor() {
	select {
	case s.evictKick <- struct{}{}:
	default:
	}
}

// evictCycle evicts until used memory is under maxmemory, nothing is left
// to evict or the budget is spent; the cron loop runs it on the node that
// decides writes.
func (s *Server) evictCycle(stop <-chan struct{}) {
	limit := s.maxMemory.Load()
	p := fsm.EvictPolicy(s.evictPolicy.Load())
	if limit <= 0 || p == fsm.EvictNone || !s.mayExpire() {
		return
	}
	start := time.Now()
	for time.Since(start) < evictBudget {
		select {
		case <-stop:
			return
		default:
		}
		if limit = s.maxMemory.Load(); limit <= 0 {
			return // CONFIG SET maxmemory 0 meanwhile
		}
		over := s.usedMemory() - limit
		if over <= 0 {
			return
		}
		keys, _ := s.cfg.Store.EvictionCandidates(p, int(s.evictSamples.Load()), evictBatch, over)
		if len(keys) == 0 {
			return
		}
		replies, err := s.cfg.Proposer.Propose([]fsm.Command{{Op: fsm.OpEvict, Args: keys}})
		if err != nil {
			s.cfg.Logger.Debug("server: eviction", "err", err)
			return
		}
		if len(replies) == 1 && replies[0].Kind == fsm.ReplyInt {
			s.stats.evictedKeys.Add(replies[0].Int)
		}
	}
}

// Configuration: maxmemory, maxmemory-policy, maxmemory-samples.

func isEvictParam(name string) bool {
	return name == "maxmemory" || name == "maxmemory-policy" || name == "maxmemory-samples"
}

func (s *Server) addEvictParams(p map[string]string) {
	p["maxmemory"] = strconv.FormatInt(s.maxMemory.Load(), 10)
	p["maxmemory-policy"] = s.policyName()
	p["maxmemory-samples"] = strconv.FormatInt(s.evictSamples.Load(), 10)
}

func (s *Server) checkEvictParam(name string, val []byte) (apply func(), e string) {
	switch name {
	case "maxmemory":
		v, ok := parseMemory(val)
		if !ok {
			return nil, errConfigSetFailed(name, "argument must be a memory value")
		}
		return func() {
			s.maxMemory.Store(v)
			s.wakeEvictor()
		}, ""
	case "maxmemory-policy":
		p, ok := parsePolicy(val)
		if !ok {
			names := make([]string, len(evictPolicies))
			for i, e := range evictPolicies {
				names[i] = e.name
			}
			return nil, errConfigSetFailed(name, "argument(s) must be one of the following: "+strings.Join(names, ", "))
		}
		return func() {
			s.setPolicy(p)
			s.wakeEvictor()
		}, ""
	default:
		v, ok := parseInt(val)
		if !ok {
			return nil, errConfigSetFailed(name, "argument couldn't be parsed into an integer")
		}
		if v < 1 || v > 1<<31-1 {
			return nil, errConfigSetFailed(name, "argument must be between 1 and 2147483647 inclusive")
		}
		return func() { s.evictSamples.Store(v) }, ""
	}
}

// ParseMemory parses a size as Redis's configuration does: digits and an
// optional unit (b, k, kb, m, mb, g, gb; k is 1000, kb 1024).
func ParseMemory(s string) (int64, bool) {
	v, ok := parseMemory([]byte(s))
	return v, ok && v >= 0
}

// ValidPolicy reports whether name is a maxmemory-policy kvs has.
func ValidPolicy(name string) bool {
	_, ok := parsePolicy([]byte(name))
	return ok
}

func parsePolicy(v []byte) (fsm.EvictPolicy, bool) {
	for _, e := range evictPolicies {
		if strings.EqualFold(e.name, string(v)) {
			return e.policy, true
		}
	}
	return 0, false
}

// setPolicy puts policy in force, with the key access records it needs.
func (s *Server) setPolicy(p fsm.EvictPolicy) {
	s.evictPolicy.Store(uint32(p))
	s.cfg.Store.SetAccessTracking(p.Tracks())
}

// policyName is maxmemory-policy's value now.
func (s *Server) policyName() string { return policyName(fsm.EvictPolicy(s.evictPolicy.Load())) }
