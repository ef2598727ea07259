package server

import "sync/atomic"

// Lazy freeing, as INFO reports it. Redis frees what UNLINK and FLUSHALL
// or FLUSHDB ASYNC delete on a background thread when it is large
// (lazyfree_pending_objects until the thread has freed it, then
// lazyfreed_objects). kvs's store counts the same objects as it applies
// those commands (fsm.Store.LazyFreed); their memory goes to Go's
// collector, and the cron loop has it collected soon after (memGauge's
// collect, at most once a second), so that used_memory falls as Redis's does once the thread is
// done, rather than at whatever collection the allocation rate brings.
// Until then the objects are pending.

// lazyFree is the server's side of lazy freeing.
type lazyFree struct {
	// collected is the store's LazyFreed when the cron loop last had the
	// memory collected; base, that count at the last CONFIG RESETSTAT.
	collected, base atomic.Int64
}

// collectLazyFreed has the objects freed lazily since the last call
// collected; the cron loop calls it.
func (s *Server) collectLazyFreed() {
	lf := &s.lazy
	total := s.lazyFreedObjects()
	if total == lf.collected.Load() || !s.mem.collect(s.dataBytes) {
		return
	}
	lf.collected.Store(total)
}

// lazyFreeInfo returns INFO memory's lazyfree_pending_objects and
// lazyfreed_objects.
func (s *Server) lazyFreeInfo() (pending, freed int64) {
	collected := s.lazy.collected.Load()
	return s.lazyFreedObjects() - collected, collected - s.lazy.base.Load()
}

// resetLazyFreed is CONFIG RESETSTAT's: lazyfreed_objects counts from 0.
func (s *Server) resetLazyFreed() { s.lazy.base.Store(s.lazy.collected.Load()) }
