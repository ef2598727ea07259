package server

import (
	"sync"
	"time"

	"kvs/fsm"
)

// Expiry deletes keys only through the proposer, like any other write, so
// that durable and cluster modes log it, and only on the node that may
// write: the server in memory and durable mode, a cluster's leader
// (mayExpire). While clients are paused nothing expires, as in Redis: a
// paused node's data stays as it is, and reads only hide expired keys.
//
// Passive expiry, after Redis's expireIfNeeded: the store reports the
// expired keys a read's lookups met (fsm.Store.SetExpiredHook), and
// expireMet proposes their deletion (fsm.OpDelExpired, which leaves a key
// rewritten meanwhile alone) right after the command. In memory mode that
// is done before the connection's next command, as Redis's is; where a
// proposal waits (a durable log's fsync, a consensus round) the keys are
// queued for the cron loop, so that the read does not wait.
//
// Active expiry, after Redis's active expire cycle: a key nobody reads
// would stay in memory forever, so the cron loop looks for expired keys
// every tick and proposes their deletion.
const (
	cronInterval = 100 * time.Millisecond
	// expireBatch is how many expired keys one proposal deletes.
	expireBatch = 20
	// expireBudget bounds the time one tick spends deleting; while a tick
	// keeps finding full batches it goes on, up to this long.
	expireBudget = 25 * time.Millisecond
	// maxPassiveQueue bounds the keys queued for passive expiry; past it
	// reads queue no more, and active expiry deletes the rest.
	maxPassiveQueue = 1024
)

// cron runs until stop is closed: every tick it samples the command rate
// and, unless disabled, runs an active expiry cycle; between ticks it
// evicts when woken, and deletes the expired keys reads queued.
func (s *Server) cron(stop <-chan struct{}) {
	t := time.NewTicker(cronInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.evictKick:
			s.evictCycle(stop)
		case <-s.passive.kick:
			s.passiveCycle()
		case now := <-t.C:
			s.stats.sampleOps(now.UnixNano())
			s.collectFreed()
			s.collectLazyFreed()
			s.checkOutputLimits()
			for _, lp := range s.loops {
				lp.clientsCronSoon()
			}
			s.mem.refresh(s.dataBytes)
			s.evictCycle(stop)
			s.memPeak.note(uint64(s.usedMemory()))
			s.refreshLinks(now)
			s.migrates.closeIdle(now, false)
			// A client pause stops active expiry too, as in Redis, so
			// that a paused node's data does not change.
			if s.activeExpiry.Load() && s.mayExpire() && s.pauseMode.Load() == pauseNone {
				s.expireCycle(stop)
			}
		}
	}
}

// mayExpire reports whether this node may propose deletions in some group:
// in a cluster only a group's leader does (followers' proposals would only
// be forwarded to it, doubling its work), whatever SetActiveExpiry said
// last.
func (s *Server) mayExpire() bool {
	for g := range s.router.local() {
		if g.leads() {
			return true
		}
	}
	return false
}

// expireCycle runs an expiry cycle in each group this node leads.
func (s *Server) expireCycle(stop <-chan struct{}) {
	for g := range s.router.local() {
		if g.leads() {
			s.expireGroup(g, stop)
		}
	}
}

// expireGroup proposes deletions of g's expired keys until a batch comes
// back short (few keys left expired) or the budget is spent.
func (s *Server) expireGroup(g *groupRef, stop <-chan struct{}) {
	start := time.Now()
	if !s.expireDB(g, 0, start, stop) {
		return
	}
	for _, db := range g.store.OtherDBs() {
		if !s.expireDB(g, db, start, stop) {
			return
		}
	}
}

// expireDB is expireGroup for one database: false when the budget is
// spent or the loop stops.
func (s *Server) expireDB(g *groupRef, db int, start time.Time, stop <-chan struct{}) bool {
	for {
		select {
		case <-stop:
			return false
		default:
		}
		var keys [][]byte
		if db == 0 {
			keys = g.store.ExpiredKeys(time.Now().UnixMilli(), expireBatch)
		} else {
			keys = g.store.ExpiredKeysInDB(db, time.Now().UnixMilli(), expireBatch)
		}
		if len(keys) == 0 {
			return true
		}
		if err := s.deleteExpired(g, db, keys); err != nil {
			// In a cluster this is expected while leadership moves; the
			// next tick tries again.
			s.cfg.Logger.Debug("server: active expiry", "err", err)
			return false
		}
		if time.Since(start) > expireBudget {
			return false
		}
		if len(keys) < expireBatch {
			return true
		}
	}
}

// deleteExpired proposes the deletion of those of keys that are expired
// and counts them in INFO's expired_keys: OpDelExpired deletes a key only
// if it is still there and expired, so a key deleted twice over (by
// active and passive expiry, or two reads) counts, and is announced, once.
func (s *Server) deleteExpired(g *groupRef, db int, keys [][]byte) error {
	replies, err := g.proposer.Propose([]fsm.Command{{Op: fsm.OpDelExpired, DB: uint16(db), Args: keys}})
	if err != nil {
		return err
	}
	if len(replies) == 1 && replies[0].Kind == fsm.ReplyInt {
		s.stats.expiredKeys.Add(replies[0].Int)
	}
	return nil
}

// expireMet is the store's expired hook: it deletes the expired keys a
// read met, at once in memory mode, else (or while a script is busy)
// through the cron loop. A cluster
// follower's keys are dropped there (mayExpire), and so are all while a
// client pause is on: the next read after it meets them again.
func (s *Server) expireMet(keys [][]byte) {
	if s.pauseMode.Load() != pauseNone {
		return
	}
	db, first := fsm.SplitDBKey(string(keys[0]))
	g := s.router.groupOf(fsm.KeySlot([]byte(first)))
	if mp, memory := g.proposer.(MemoryProposer); memory && !g.replicated() {
		// The read's connection deletes them itself, unless a script
		// that took the store meanwhile turns busy: then it must go on
		// answering BUSY, and the cron loop deletes them after the script.
		cmds := []fsm.Command{{Op: fsm.OpDelExpired, Args: keys}}
		if db != 0 {
			// A read of another database: its keys, named by DBKey.
			args := make([][]byte, len(keys))
			for i, k := range keys {
				_, key := fsm.SplitDBKey(string(k))
				args[i] = []byte(key)
			}
			cmds[0] = fsm.Command{Op: fsm.OpDelExpired, DB: db, Args: args}
		}
		if replies, ok := mp.Store.ApplyServing(nil, time.Now().UnixMilli(), cmds, nil); ok {
			if len(replies) == 1 && replies[0].Kind == fsm.ReplyInt {
				s.stats.expiredKeys.Add(replies[0].Int)
			}
			return
		}
	}
	if s.passive.add(keys) {
		select {
		case s.passive.kick <- struct{}{}:
		default:
		}
	}
}

// passiveCycle proposes the deletion of the keys reads queued, if this
// node may delete them now.
func (s *Server) passiveCycle() {
	keys := s.passive.take()
	if len(keys) == 0 {
		return
	}
	defer s.passive.done(keys)
	if s.pauseMode.Load() != pauseNone {
		return
	}
	byGroup := map[*groupRef][][]byte{}
	var others map[uint16][][]byte // keys of other databases (one group)
	for _, k := range keys {
		if db, key := fsm.SplitDBKey(string(k)); db != 0 {
			if others == nil {
				others = map[uint16][][]byte{}
			}
			others[db] = append(others[db], []byte(key))
			continue
		}
		g := s.router.groupOf(fsm.KeySlot(k))
		byGroup[g] = append(byGroup[g], k)
	}
	for g := range s.router.local() {
		if ks := byGroup[g]; len(ks) > 0 && g.leads() {
			if err := s.deleteExpired(g, 0, ks); err != nil {
				s.cfg.Logger.Debug("server: passive expiry", "err", err)
			}
		}
	}
	if g := &s.router.home; len(others) > 0 && g.leads() {
		for db, ks := range others {
			if err := s.deleteExpired(g, int(db), ks); err != nil {
				s.cfg.Logger.Debug("server: passive expiry", "err", err)
			}
		}
	}
}

// passiveQueue holds the expired keys reads met until the cron loop
// proposes their deletion. A key is queued once until its proposal is
// answered, so a hot key read many times meanwhile costs one deletion.
type passiveQueue struct {
	kick chan struct{} // wakes the cron loop; capacity 1

	mu     sync.Mutex // guards the fields below
	keys   [][]byte
	queued map[string]struct{} // keys, and those being proposed
}

// add queues those of keys not queued yet, up to maxPassiveQueue, and
// reports whether it queued any.
func (q *passiveQueue) add(keys [][]byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued == nil {
		q.queued = make(map[string]struct{})
	}
	added := false
	for _, k := range keys {
		if len(q.queued) >= maxPassiveQueue {
			break
		}
		if _, ok := q.queued[string(k)]; !ok {
			q.queued[string(k)] = struct{}{}
			q.keys = append(q.keys, k)
			added = true
		}
	}
	return added
}

// take returns the keys queued; they stay marked queued until done.
func (q *passiveQueue) take() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	keys := q.keys
	q.keys = nil
	return keys
}

// done forgets keys, which take returned.
func (q *passiveQueue) done(keys [][]byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, k := range keys {
		delete(q.queued, string(k))
	}
}
