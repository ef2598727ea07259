package server

import (
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Lazy freeing, as INFO reports it. Redis frees what UNLINK and FLUSHALL
// or FLUSHDB ASYNC delete on a background thread when it is large
// (lazyfree_pending_objects until the thread has freed it, then
// lazyfreed_objects). kvs's store counts the same objects as it applies
// those commands (fsm.Store.LazyFreed); their memory goes to Go's
// collector, and the cron loop has it collected soon after, at most once
// a second, so that used_memory falls as Redis's does once the thread is
// done, rather than at whatever collection the allocation rate brings.
// Until then the objects are pending.

// lazyCollectEvery bounds how often lazy freeing forces a collection.
const lazyCollectEvery = time.Second

// lazyFree is the server's side of lazy freeing.
type lazyFree struct {
	// collected is the store's LazyFreed when the cron loop last had the
	// memory collected; base, that count at the last CONFIG RESETSTAT.
	collected, base atomic.Int64
	last            time.Time // the last collection; the cron loop's
}

// collectLazyFreed has the objects freed lazily since the last call
// collected, if a second has passed since then; the cron loop calls it.
func (s *Server) collectLazyFreed(now time.Time) {
	lf := &s.lazy
	total := s.cfg.Store.LazyFreed()
	if total == lf.collected.Load() || now.Sub(lf.last) < lazyCollectEvery {
		return
	}
	debug.FreeOSMemory()
	lf.last = now
	lf.collected.Store(total)
	s.mem.refresh(s.cfg.Store.DataBytes)
}

// lazyFreeInfo returns INFO memory's lazyfree_pending_objects and
// lazyfreed_objects.
func (s *Server) lazyFreeInfo() (pending, freed int64) {
	collected := s.lazy.collected.Load()
	return s.cfg.Store.LazyFreed() - collected, collected - s.lazy.base.Load()
}

// resetLazyFreed is CONFIG RESETSTAT's: lazyfreed_objects counts from 0.
func (s *Server) resetLazyFreed() { s.lazy.base.Store(s.lazy.collected.Load()) }
