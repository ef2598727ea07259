package server

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"
)

// WAIT numreplicas timeout and WAITAOF numlocal numreplicas timeout: how
// many replicas hold the connection's writes.
//
// Memory and durable mode have no replicas, so the count is 0, as on a
// redis-server master without replicas: answered at once when it is
// enough (numreplicas 0), else when the timeout has passed (never, for
// 0). WAITAOF's local count is Redis's fsynced append-only file: 1 in
// durable mode once the log holds the connection's writes on disk (at once
// under fsync always, which fsyncs every write before acknowledging it;
// after a sync of the log otherwise), and an error in memory mode, where
// there is no log, as Redis answers with appendonly off.
//
// Cluster mode: the replicas are the members of the group of the
// connection's last write (its home group if it wrote nothing), the
// leader excepted, as Redis counts the replicas of the master. A member
// counts once its store has applied the connection's writes: WAIT counts
// what a read on that member would see, as Redis's replicas ack what they
// have processed. The position to reach is this node's applied index of
// the group when WAIT runs (the leader acknowledges a write once it
// applied it, and a follower relays the acknowledgement once it applied it
// too, so every write acknowledged to the connection through this node is
// at or before it), or, for a group this node holds no replica of, its
// leader's (KVS.SYNC). It may include other connections' writes applied
// before, as Redis's replication offset does. Each member is asked with
// KVS.WAITAPPLIED <group> <index> <ms>, which answers with the member's
// applied index once it reaches index or ms pass; the first round asks
// without waiting, for at most firstAsk (what has applied already, all
// WAIT counts when that is enough), the next ones wait. WAITAOF's replicas are counted the same
// way: a member applies only entries its Raft log holds, and the log is
// fsynced before it acknowledges them, so an applied entry is on its
// disk. Its local count is 1: the leader's Raft log is fsynced before a
// write is committed.
//
// Inside MULTI the count is taken once without waiting: EXEC runs it on
// the event loop, so in cluster mode that round holds the loop up for at
// most firstAsk.

func init() {
	registerCommands([]command{
		{name: "wait", arity: 3, flags: flagNoScript, group: "generic", run: runWait, waits: true, blocks: true, level: 3},
		{name: "waitaof", arity: 4, flags: flagNoScript, group: "generic", run: runWaitAOF, waits: true, blocks: true, level: 3},
		{name: "kvs.waitapplied", arity: 4, flags: flagNoScript | flagLoading | flagStale | flagAllowBusy, group: "server", run: runWaitApplied, waits: true, level: 3},
	}...)
	commandDocs["wait"] = [2]string{"Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", "3.0.0"}
	commandDocs["waitaof"] = [2]string{"Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.", "7.2.0"}
	commandDocs["kvs.waitapplied"] = [2]string{"Waits until this node's store of a group has applied a log index (internal, for WAIT).", "-"}
}

const (
	errWaitTimeout      = "ERR timeout is not an integer or out of range"
	errWaitAOFLocal     = "ERR value is out of range, value must between 0 and 1"
	errWaitAOFReplicas  = "ERR value is out of range, must be positive"
	errWaitAOFNoLog     = "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled."
	waitAppliedMaxChunk = 10 * time.Second
)

// parseWaitTimeout parses WAIT's timeout, in milliseconds, with Redis's
// errors (getTimeoutFromObjectOrReply): 0 is forever, as is a timeout
// past any deadline.
func parseWaitTimeout(arg []byte) (time.Duration, string) {
	ms, ok := parseInt(arg)
	switch {
	case !ok:
		return 0, errWaitTimeout
	case ms < 0:
		return 0, errTimeoutNegative
	case ms > int64(time.Duration(1<<62)/time.Millisecond):
		return 0, ""
	}
	return time.Duration(ms) * time.Millisecond, ""
}

// runWait answers WAIT numreplicas timeout.
func runWait(c *client, args [][]byte) {
	want, ok := parseInt(args[1])
	if !ok {
		c.out = appendError(c.out, errNotInteger)
		return
	}
	timeout, e := parseWaitTimeout(args[2])
	if e != "" {
		c.out = appendError(c.out, e)
		return
	}
	c.out = appendInt(c.out, int64(c.waitReplicas(want, timeout)))
}

// runWaitAOF answers WAITAOF numlocal numreplicas timeout with Redis
// 7.2's checks, in its order.
func runWaitAOF(c *client, args [][]byte) {
	local, ok := parseInt(args[1])
	if !ok {
		c.out = appendError(c.out, errNotInteger)
		return
	}
	if local < 0 || local > 1 {
		c.out = appendError(c.out, errWaitAOFLocal)
		return
	}
	want, ok := parseInt(args[2])
	if !ok {
		c.out = appendError(c.out, errNotInteger)
		return
	}
	if want < 0 {
		c.out = appendError(c.out, errWaitAOFReplicas)
		return
	}
	timeout, e := parseWaitTimeout(args[3])
	if e != "" {
		c.out = appendError(c.out, e)
		return
	}
	logged := c.s.cfg.ConfigParams["appendonly"] == "yes" || c.s.router.clustered()
	if local == 1 && !logged {
		c.out = appendError(c.out, errWaitAOFNoLog)
		return
	}
	acks := 0
	if logged {
		acks = c.syncLocal()
	}
	replicas := 0
	if acks >= int(local) {
		replicas = c.waitReplicas(want, timeout)
	} else if !c.capturing {
		// Only a failed fsync leaves the local count short: Redis's
		// client waits out its timeout then.
		c.waitFor(timeout)
	}
	c.out = appendArrayLen(c.out, 2)
	c.out = appendInt(c.out, int64(acks))
	c.out = appendInt(c.out, int64(replicas))
}

// syncLocal is WAITAOF's local count on a node with a log: 1 once the
// connection's writes are on this node's disk. In cluster mode they are
// (the Raft log is fsynced before an entry commits); in durable mode they
// are under fsync always, and after a sync of the log under the others.
func (c *client) syncLocal() int {
	if c.s.router.clustered() {
		return 1
	}
	ls, ok := c.s.router.home.proposer.(logSyncer)
	if !ok {
		return 1
	}
	if err := ls.SyncUntil(c.s.stopping); err != nil {
		return 0
	}
	return 1
}

// logSyncer is durable mode's proposer: SyncUntil writes and fsyncs
// everything appended to the log so far, or stops waiting once stop is
// closed (wal.Log.SyncUntil).
type logSyncer interface {
	SyncUntil(stop <-chan struct{}) error
}

// waitReplicas is WAIT's count: the replicas holding the connection's
// writes, waiting up to timeout (0: forever) for want of them. It returns
// at once inside a transaction, and when the server stops or the client
// goes.
func (c *client) waitReplicas(want int64, timeout time.Duration) int {
	if !c.s.router.clustered() {
		if want > 0 && !c.capturing {
			c.waitFor(timeout)
		}
		return 0
	}
	g := c.wrote
	if g == nil {
		g = &c.s.router.home
	}
	return c.s.countApplied(g, want, timeout, c.capturing, c.waitGone)
}

// waitFor waits until timeout (0: forever) passes, the server stops or
// the client goes; it reports whether the timeout passed.
func (c *client) waitFor(timeout time.Duration) bool {
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-expired:
		return true
	case <-c.s.stopping:
	case <-c.waitGone:
	}
	return false
}

// beginWait makes the channel the loop closes when the client goes
// (endWait), before a step of WAIT or WAITAOF runs off the loop: the step
// reads the field, which the loop leaves as it is until the step is over.
func (c *client) beginWait() { c.waitGone, c.waitEnded = make(chan struct{}), false }

// endWait ends the wait of a client that has gone, if it waits. Called by
// the loop.
func (c *client) endWait() {
	if c.waitGone != nil && !c.waitEnded {
		close(c.waitGone)
		c.waitEnded = true
	}
}

// countApplied counts the members of group g but its leader whose stores
// have applied this node's applied index of g (its leader's, for a group
// this node holds no replica of), waiting up to timeout (0: forever)
// until want of them have, unless once is set; stop ends the wait early.
func (s *Server) countApplied(g *groupRef, want int64, timeout time.Duration, once bool, gone <-chan struct{}) int {
	var target uint64
	var members []Member
	self := s.router.cluster.Self().ID
	if g.remote() {
		index, err := s.askLeaderIndex(g)
		if err != nil {
			return 0
		}
		target, members = index, s.router.remote.Members(g.index)
	} else {
		ms, err := g.raft.Members()
		if err != nil {
			return 0
		}
		target, members = g.raft.AppliedIndex(), ms
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	go func() {
		select {
		case <-gone:
		case <-s.stopping:
		case <-ctx.Done():
		}
		cancel()
	}()

	acked := 0
	var asks []Member
	for _, m := range members {
		switch {
		case m.Leader:
		case m.ID == self:
			// This node applied target: it is its own applied index.
			acked++
		case m.RESPAddr != "":
			asks = append(asks, m)
		}
	}
	if len(asks) == 0 {
		return acked
	}
	var wg sync.WaitGroup
	defer func() {
		cancel() // the questions still out stop at once
		wg.Wait()
	}()
	// ask asks the members which (indexes of asks) until ctx ends, each
	// once or (wait) until it has applied, and returns which have.
	ask := func(ctx context.Context, which []int, wait bool) []bool {
		acks := make([]bool, len(asks))
		results := make(chan int, len(which))
		for _, i := range which {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if s.askApplied(ctx, asks[i].RESPAddr, g.index, target, wait) {
					results <- i
				} else {
					results <- -1
				}
			}()
		}
		for range which {
			i := <-results
			if i >= 0 {
				acks[i] = true
				acked++
			}
			if wait && int64(acked) >= want {
				// Enough: Redis answers with the acks it has when its
				// wait ends, not waiting for the others.
				break
			}
		}
		return acks
	}
	// First what has applied already, within firstAsk: all a
	// transaction's WAIT counts, and all WAIT counts when that is enough.
	all := make([]int, len(asks))
	for i := range all {
		all[i] = i
	}
	firstCtx, firstCancel := context.WithTimeout(ctx, firstAsk)
	first := ask(firstCtx, all, false)
	firstCancel()
	if once || int64(acked) >= want {
		return acked
	}
	var rest []int
	for i, ok := range first {
		if !ok {
			rest = append(rest, i)
		}
	}
	ask(ctx, rest, true)
	return acked
}

// firstAsk bounds WAIT's first round of questions, which do not wait:
// a member that does not answer within it (frozen, unreachable) is asked
// again, waiting, if WAIT waits.
const firstAsk = 100 * time.Millisecond

// askApplied reports whether the member at addr has applied index of
// group, asking it with KVS.WAITAPPLIED on a connection of its own; with
// wait, until it has or ctx ends, else once, answered at once.
func (s *Server) askApplied(ctx context.Context, addr string, group int, index uint64, wait bool) bool {
	p := newPeerPool(s.cfg.ForwardTimeout, s.dialNode, s.peerLogin)
	defer p.close()
	// A question in flight fails at once when ctx ends.
	defer context.AfterFunc(ctx, p.close)()
	chunk := time.Duration(0)
	for {
		if ctx.Err() != nil {
			return false
		}
		if wait {
			chunk = waitAppliedMaxChunk
			if d, ok := ctx.Deadline(); ok {
				chunk = max(min(chunk, time.Until(d)), time.Millisecond)
			}
		}
		req := encodeArgs("KVS.WAITAPPLIED", strconv.Itoa(group), strconv.FormatUint(index, 10),
			strconv.FormatInt(chunk.Milliseconds(), 10))
		r, err := p.roundTrip(addr, chunk+s.cfg.ForwardTimeout, func(*peerConn) net.Buffers { return net.Buffers{req} })
		if err == nil && r.kind == '+' {
			if applied, perr := strconv.ParseUint(r.text, 10, 64); perr == nil && applied >= index {
				return true
			}
		}
		if !wait {
			return false
		}
		if err != nil || r.kind != '+' {
			// Unreachable or refusing: ask again in a while.
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}

// runWaitApplied answers KVS.WAITAPPLIED group index ms: this node's
// applied index of the group once it reaches index, or when ms have
// passed, as a status reply.
func runWaitApplied(c *client, args [][]byte) {
	g, e := c.s.router.groupArg(args[1:2])
	if e != "" {
		c.out = appendError(c.out, e)
		return
	}
	index, err1 := strconv.ParseUint(string(args[2]), 10, 64)
	ms, ok := parseInt(args[3])
	switch {
	case err1 != nil || !ok || ms < 0:
		c.out = appendError(c.out, errNotInteger)
		return
	case g == nil || g.remote():
		c.out = appendError(c.out, errProposal(ErrNotLeader, false))
		return
	case g.raft == nil:
		c.out = appendError(c.out, errClusterDisabled)
		return
	}
	if g.raft.AppliedIndex() < index && ms > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), min(time.Duration(ms)*time.Millisecond, waitAppliedMaxChunk))
		err := g.raft.WaitApplied(ctx, index)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			c.s.cfg.Logger.Debug("server: KVS.WAITAPPLIED", "err", err)
		}
	}
	c.out = append(c.out, '+')
	c.out = strconv.AppendUint(c.out, g.raft.AppliedIndex(), 10)
	c.out = append(c.out, '\r', '\n')
}
