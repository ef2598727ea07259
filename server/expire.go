package server

import (
	"time"

	"kvs/fsm"
)

// Active expiry, after Redis's active expire cycle: reads already hide
// expired keys, but a key nobody reads would stay in memory forever, so a
// background loop looks for expired keys every tick and proposes their
// deletion like any other write (so that durable and cluster modes log it).
const (
	cronInterval = 100 * time.Millisecond
	// expireBatch is how many expired keys one proposal deletes.
	expireBatch = 20
	// expireBudget bounds the time one tick spends deleting; while a tick
	// keeps finding full batches it goes on, up to this long.
	expireBudget = 25 * time.Millisecond
)

// cron runs until stop is closed: every tick it samples the command rate
// and, unless disabled, runs an active expiry cycle.
func (s *Server) cron(stop <-chan struct{}) {
	t := time.NewTicker(cronInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.evictKick:
			s.evictCycle(stop)
		case now := <-t.C:
			s.stats.sampleOps(now.UnixNano())
			s.collectFreed()
			s.collectLazyFreed()
			s.checkOutputLimits()
			for _, lp := range s.loops {
				lp.clientsCronSoon()
			}
			s.mem.refresh(s.cfg.Store.DataBytes)
			s.evictCycle(stop)
			s.memPeak.note(uint64(s.usedMemory()))
			s.refreshLinks(now)
			// A client pause stops active expiry too, as in Redis, so
			// that a paused node's data does not change.
			if s.activeExpiry.Load() && s.mayExpire() && s.pauseMode.Load() == pauseNone {
				s.expireCycle(stop)
			}
		}
	}
}

// mayExpire reports whether this node may propose deletions: in a cluster
// only the leader does (followers' proposals would only be forwarded to it,
// doubling its work), whatever SetActiveExpiry said last.
func (s *Server) mayExpire() bool {
	return s.cfg.Cluster == nil || s.cfg.Cluster.Self().Leader
}

// expireCycle proposes deletions of expired keys until a batch comes back
// short (few keys left expired) or the budget is spent.
func (s *Server) expireCycle(stop <-chan struct{}) {
	start := time.Now()
	for {
		select {
		case <-stop:
			return
		default:
		}
		keys := s.cfg.Store.ExpiredKeys(time.Now().UnixMilli(), expireBatch)
		if len(keys) == 0 {
			return
		}
		replies, err := s.cfg.Proposer.Propose([]fsm.Command{{Op: fsm.OpDelExpired, Args: keys}})
		if err != nil {
			// In a cluster this is expected while leadership moves; the
			// next tick tries again.
			s.cfg.Logger.Debug("server: active expiry", "err", err)
			return
		}
		if len(replies) == 1 && replies[0].Kind == fsm.ReplyInt {
			s.stats.expiredKeys.Add(replies[0].Int)
		}
		if len(keys) < expireBatch || time.Since(start) > expireBudget {
			return
		}
	}
}
