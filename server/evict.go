package server

import (
	"strconv"
	"strings"
	"time"

	"kvs/config"
	"kvs/fsm"
)

// maxmemory and maxmemory-policy, held to used memory (memory.go), which
// INFO memory's used_memory reports.
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

// oomRefusal is the error a denyoom command gets now, or "".
func (c *client) oomRefusal() string {
	s := c.s
	limit := s.maxMemory.Load()
	if limit <= 0 || s.usedMemory() <= limit {
		return ""
	}
	p := fsm.EvictPolicy(s.evictPolicy.Load())
	evictable := false
	if p != fsm.EvictNone {
		for g := range s.router.local() {
			e, ok := g.store.EvictableServing(p)
			if !ok {
				return errBusy(g.store.ScriptBusy())
			}
			evictable = evictable || e
		}
	}
	if !evictable {
		if s.mem.unaccounted.Load() > 0 {
			s.wakeEvictor() // which collects first: the excess may be garbage
		}
		return errOOM
	}
	s.wakeEvictor()
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
	if limit <= 0 {
		return
	}
	if s.mem.unaccounted.Load() > 0 && s.usedMemory() > limit {
		// Buffers let go since the last collection may be what puts
		// memory over the limit: collect before deciding anything.
		s.mem.collect(s.dataBytes)
	}
	p := fsm.EvictPolicy(s.evictPolicy.Load())
	if p == fsm.EvictNone || !s.mayExpire() || s.pauseMode.Load() != pauseNone {
		// A client pause keeps the data as it is: no eviction either, as
		// in Redis.
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
		// Bytes let go that no collection has taken out yet (one ran
		// less than collectInterval ago) are not counted: a key is
		// never evicted for garbage.
		over := s.usedMemory() - s.mem.unaccounted.Load() - limit
		if over <= 0 {
			return
		}
		g := s.evictionGroup()
		keys, _ := g.store.EvictionCandidates(p, int(s.evictSamples.Load()), evictBatch, over)
		db := 0
		if len(keys) == 0 {
			// Database 0 has nothing to give: the others, in order.
			for _, db = range g.store.OtherDBs() {
				if keys, _ = g.store.EvictionCandidatesInDB(db, p, int(s.evictSamples.Load()), evictBatch, over); len(keys) > 0 {
					break
				}
			}
		}
		if len(keys) == 0 {
			return
		}
		replies, err := g.proposer.Propose([]fsm.Command{{Op: fsm.OpEvict, DB: uint16(db), Args: keys}})
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
		v, ok := config.ParseMemory(val)
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
	v, ok := config.ParseMemory([]byte(s))
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
	now := time.Now().UnixMilli()
	s.router.everyStore(func(st *fsm.Store) { st.SetAccessTracking(p.Tracks(), now) })
}

// applyLFUParams puts lfu-log-factor and lfu-decay-time, as stored, in
// force in every store. CONFIG SET calls it once the values are stored.
func (s *Server) applyLFUParams() {
	s.router.everyStore(s.setLFUParams)
}

func (s *Server) setLFUParams(st *fsm.Store) {
	f, _ := strconv.ParseInt(s.params.Get("lfu-log-factor"), 10, 64)
	d, _ := strconv.ParseInt(s.params.Get("lfu-decay-time"), 10, 64)
	st.SetLFUParams(f, d)
}

// policyName is maxmemory-policy's value now.
func (s *Server) policyName() string { return policyName(fsm.EvictPolicy(s.evictPolicy.Load())) }

// evictionGroup is the group the next eviction takes keys from: of the
// groups this node leads, the one holding the most data, so that a node
// of several groups evicts from them about in proportion.
func (s *Server) evictionGroup() *groupRef {
	var best *groupRef
	var most int64 = -1
	for g := range s.router.local() {
		if n := g.store.DataBytes(); g.leads() && n > most {
			best, most = g, n
		}
	}
	return best
}
