package server

import (
	"sort"
	"sync"
	"sync/atomic"
)

// stats are the counters INFO stats, commandstats and errorstats report.
// They are atomics updated once per pipeline, or per run of one command in
// a pipeline (metrics.go), not once per command, on the hot path.
type stats struct {
	connectionsReceived atomic.Int64
	rejectedConnections atomic.Int64
	commands            atomic.Int64
	expiredKeys         atomic.Int64
	hits                atomic.Int64
	misses              atomic.Int64
	forwarded           atomic.Int64 // commands a follower sent to the leader
	// staleForwards counts forwarded batches relayed before this node
	// applied them, unsyncedReplicaReads replica reads served without the
	// leader's index (route.go, replicasync.go).
	staleForwards        atomic.Int64
	unsyncedReplicaReads atomic.Int64
	// rerouted counts commands a slot move refused that were sent again
	// to the slot's new group (reroute.go).
	rerouted atomic.Int64
	// outputLimitKills counts clients closed for their output buffer
	// (INFO's client_output_buffer_limit_disconnections, as Redis 7.4
	// names it; pubsub.go, outbuf.go).
	outputLimitKills atomic.Int64
	// queryLimitKills counts clients closed for their query buffer
	// (client_query_buffer_limit_disconnections, Redis 7.4's name).
	queryLimitKills atomic.Int64
	// evictedKeys counts keys this node evicted (evict.go).
	evictedKeys atomic.Int64

	cmds   commandStats // per command (metrics.go)
	errors errorStats   // error replies by prefix (metrics.go)

	// ops samples total commands every cron tick for
	// instantaneous_ops_per_sec, as Redis samples it.
	ops struct {
		sync.Mutex // guards the fields below
		samples    [16]float64
		idx        int
		lastCount  int64
		lastNanos  int64
	}
}

// reset is CONFIG RESETSTAT.
func (st *stats) reset() {
	st.connectionsReceived.Store(0)
	st.rejectedConnections.Store(0)
	st.commands.Store(0)
	st.expiredKeys.Store(0)
	st.hits.Store(0)
	st.misses.Store(0)
	st.forwarded.Store(0)
	st.staleForwards.Store(0)
	st.unsyncedReplicaReads.Store(0)
	st.rerouted.Store(0)
	st.outputLimitKills.Store(0)
	st.queryLimitKills.Store(0)
	st.evictedKeys.Store(0)
	st.cmds.reset()
	st.errors.reset()
	st.ops.Lock()
	st.ops.samples = [16]float64{}
	st.ops.lastCount = 0
	st.ops.Unlock()
}

// sampleOps records the command rate since the previous sample.
func (st *stats) sampleOps(nowNanos int64) {
	count := st.commands.Load()
	st.ops.Lock()
	defer st.ops.Unlock()
	if st.ops.lastNanos != 0 && nowNanos > st.ops.lastNanos {
		d := count - st.ops.lastCount
		if d < 0 {
			d = 0 // reset by CONFIG RESETSTAT
		}
		st.ops.samples[st.ops.idx] = float64(d) * 1e9 / float64(nowNanos-st.ops.lastNanos)
		st.ops.idx = (st.ops.idx + 1) % len(st.ops.samples)
	}
	st.ops.lastCount = count
	st.ops.lastNanos = nowNanos
}

func (st *stats) opsPerSec() int64 {
	st.ops.Lock()
	defer st.ops.Unlock()
	var sum float64
	for _, v := range st.ops.samples {
		sum += v
	}
	return int64(sum / float64(len(st.ops.samples)))
}

// Stats are the server's counters, for metrics exporters.
type Stats struct {
	ConnectedClients    int
	ConnectionsReceived int64 // since start or CONFIG RESETSTAT, as all below
	RejectedConnections int64 // refused by MaxClients
	CommandsProcessed   int64 // every command received, rejected ones included: the sum of CommandStats' Calls+Rejected
	ExpiredKeys         int64 // deleted by active and passive expiry
	KeyspaceHits        int64 // GET and MGET keys found
	KeyspaceMisses      int64
	ErrorReplies        int64 // every error reply (Redis's total_error_replies)
	ForwardedCommands   int64 // commands this follower sent to the leader
	// OutputLimitDisconnections counts clients closed for their output
	// buffer (client-output-buffer-limit).
	OutputLimitDisconnections int64
	EvictedKeys               int64 // keys this node evicted for maxmemory
}

// Stats returns the current counters; INFO reports the same numbers.
func (s *Server) Stats() Stats {
	return Stats{
		ConnectedClients:    s.connectedClients(),
		ConnectionsReceived: s.stats.connectionsReceived.Load(),
		RejectedConnections: s.stats.rejectedConnections.Load(),
		CommandsProcessed:   s.stats.commands.Load(),
		ExpiredKeys:         s.stats.expiredKeys.Load(),
		KeyspaceHits:        s.stats.hits.Load(),
		KeyspaceMisses:      s.stats.misses.Load(),
		ErrorReplies:        s.stats.errors.total.Load(),
		ForwardedCommands:   s.stats.forwarded.Load(),

		OutputLimitDisconnections: s.stats.outputLimitKills.Load(),
		EvictedKeys:               s.stats.evictedKeys.Load(),
	}
}

// clientsByID lists the connected clients in connection order.
func (s *Server) clientsByID() []*client {
	s.mu.Lock()
	list := make([]*client, 0, len(s.clients))
	for c := range s.clients {
		// A killed client is gone for CLIENT LIST and CLIENT KILL at
		// once, as Redis frees it in the command, though its loop may
		// not have closed it yet.
		if !c.killReq.Load() {
			list = append(list, c)
		}
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	return list
}
