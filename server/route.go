package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kvs/fsm"
)

// Cluster-mode routing. A batch of writes (and, on a follower with
// linearizable reads, of reads) goes:
//
//   - on the leader, to the Proposer; reads after Cluster.ReadBarrier;
//   - on a follower, to the leader over the peer pool (KVS.FORWARD), whose
//     replies are relayed; except that a client that sent READONLY (a
//     cluster-aware client) is redirected with MOVED for each keyed write,
//     as a Redis Cluster replica does.
//
// The leader executes a forwarded batch itself and never forwards it again.

// Propose makes a batch of writes happen from any node: through the
// Proposer on the leader (or in standalone mode), forwarded to the leader
// elsewhere. Its errors wrap ErrNotLeader, ErrNoLeader,
// ErrLeaderUnreachable (certainly not applied) or ErrUnknownOutcome (may
// have applied). The replies are the caller's.
func (s *Server) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	return s.proposeTo(&s.router.home, cmds)
}

// ProposeGroup is Propose for the writes of group i of a sharded node
// (Config.Groups), wherever its leader is: the moves of slots between
// groups propose steps to both groups of a move from the source's leader.
func (s *Server) ProposeGroup(i int, cmds []fsm.Command) ([]fsm.Reply, error) {
	g := s.router.group(i)
	if g == nil {
		return nil, fmt.Errorf("server: no group %d", i)
	}
	return s.proposeTo(g, cmds)
}

// proposeTo is Propose for group g's writes.
func (s *Server) proposeTo(g *groupRef, cmds []fsm.Command) ([]fsm.Reply, error) {
	if g.leads() {
		return g.proposer.Propose(cmds)
	}
	return s.forward(g, cmds, "")
}

// remoteError is an error the leader answered a forwarded request with: a
// client-facing text, relayed as it is.
type remoteError struct{ text string }

func (e *remoteError) Error() string { return e.text }

// Is lets callers of Server.Propose branch on what the leader said with
// the sentinels, like on a local error. The prefixes are the ones
// errProposal writes.
func (e *remoteError) Is(target error) bool {
	switch target {
	case ErrNoLeader:
		return strings.HasPrefix(e.text, "CLUSTERDOWN ")
	case ErrNotLeader:
		return strings.HasPrefix(e.text, "TRYAGAIN ")
	case ErrUnknownOutcome:
		return strings.HasPrefix(e.text, "UNCERTAIN ")
	}
	return false
}

// leaderAddr returns the RESP address of g's leader to forward to, or an
// error wrapping ErrNoLeader (none known, or its address not replicated
// yet) or ErrNotLeader (this node is named leader but does not act as one
// yet).
func (s *Server) leaderAddr(g *groupRef) (string, error) {
	l, ok := s.groupLeader(g)
	switch {
	case !ok:
		return "", fmt.Errorf("%w known", ErrNoLeader)
	case l.ID == s.router.cluster.Self().ID:
		return "", fmt.Errorf("%w: leadership is changing", ErrNotLeader)
	case l.RESPAddr == "":
		return "", fmt.Errorf("%w: the leader's client address is not known yet", ErrNoLeader)
	}
	return l.RESPAddr, nil
}

// forward sends cmds, all of group g, to g's leader and returns its
// replies, one per command.
func (s *Server) forward(g *groupRef, cmds []fsm.Command, user string) ([]fsm.Reply, error) {
	if s.cfg.LevelGate != nil {
		if err := s.cfg.LevelGate(cmds); err != nil {
			return nil, err
		}
	}
	addr, err := s.leaderAddr(g)
	if err != nil {
		return nil, err
	}
	s.stats.forwarded.Add(int64(len(cmds)))
	r, err := s.peers.roundTrip(addr, s.cfg.ForwardTimeout, func(pc *peerConn) net.Buffers {
		pc.blob = appendCommands(pc.blob[:0], cmds)
		switch {
		case g.index != 0:
			// KVS.FORWARD <batch> <user or ""> <group>: a home group's
			// batch goes as before groups, which any node understands.
			pc.hdr = append(pc.hdr[:0], "*4\r\n$11\r\nKVS.FORWARD\r\n$"...)
		case user == "":
			pc.hdr = append(pc.hdr[:0], "*2\r\n$11\r\nKVS.FORWARD\r\n$"...)
		default:
			pc.hdr = append(pc.hdr[:0], "*3\r\n$11\r\nKVS.FORWARD\r\n$"...)
		}
		pc.hdr = strconv.AppendInt(pc.hdr, int64(len(pc.blob)), 10)
		pc.hdr = append(pc.hdr, '\r', '\n')
		switch {
		case g.index != 0:
			return net.Buffers{pc.hdr, pc.blob, crlf, encodeBulk(user), encodeBulk(strconv.Itoa(g.index))}
		case user != "":
			return net.Buffers{pc.hdr, pc.blob, crlf, encodeBulk(user)}
		}
		return net.Buffers{pc.hdr, pc.blob, crlf}
	})
	if err != nil {
		return nil, err
	}
	switch r.kind {
	case '-':
		return nil, &remoteError{r.text}
	case '$':
		applied, replies, err := decodeReplies(r.bulk)
		if err == nil && len(replies) != len(cmds) {
			err = fmt.Errorf("%d replies for %d commands", len(replies), len(cmds))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: the leader at %s answered: %v", ErrUnknownOutcome, addr, err)
		}
		if !g.remote() {
			s.catchUp(g, applied)
		}
		return replies, nil
	}
	return nil, fmt.Errorf("%w: the leader at %s answered %c%s", ErrUnknownOutcome, addr, r.kind, r.text)
}

var crlf = []byte("\r\n")

// groupLeader returns g's leader: as its replica here knows it, or, for a
// group this node holds no replica of, as the cluster's metadata says.
func (s *Server) groupLeader(g *groupRef) (Member, bool) {
	if g.remote() {
		return s.router.remote.Leader(g.index)
	}
	return g.raft.Leader()
}

// catchUpTimeout bounds a follower's wait for its store to reach an index
// the leader reported (catchUp, syncReplica). The leader tells followers of
// each commit at once, so the wait is about a round trip between the
// nodes; a follower still behind after this long is cut off from raft's
// traffic or replaying its log, and answers as it is rather than stall
// every client of the node.
const catchUpTimeout = 2 * time.Second

// catchUp waits until this node's store has applied index, the leader's
// position after a forwarded batch, so that the client that sent the batch
// reads its effects here next. If the store does not get there within
// catchUpTimeout, the replies are relayed anyway: the writes happened, and
// an error would invite a retry that repeats them. That case is counted
// (kvs_forwards_relayed_unapplied in INFO stats) and logged, at most once
// per catchUpTimeout.
func (s *Server) catchUp(g *groupRef, index uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), catchUpTimeout)
	defer cancel()
	if err := g.raft.WaitApplied(ctx, index); err != nil {
		s.stats.staleForwards.Add(1)
		if s.behindWarn.allow(time.Now()) {
			s.cfg.Logger.Warn("server: relaying a forwarded write's replies before this node applied it",
				"index", index, "applied", g.raft.AppliedIndex(), "err", err)
		}
	}
}

// rateLimit lets one event through per catchUpTimeout.
type rateLimit struct{ last atomic.Int64 }

func (r *rateLimit) allow(now time.Time) bool {
	last := r.last.Load()
	return now.UnixNano()-last >= int64(catchUpTimeout) && r.last.CompareAndSwap(last, now.UnixNano())
}

// execLocal executes a batch on the leader: each run of writes through the
// Proposer, each run of reads after a read barrier. A batch of writes only
// (the usual case) is one proposal, and its error is returned. In a mixed
// batch each run stands on its own, as consecutive batches of one pipeline
// do, and a run that fails gets error replies.
func (s *Server) execLocal(g *groupRef, dst []fsm.Reply, cmds []fsm.Command) ([]fsm.Reply, error) {
	writes := 0
	for i := range cmds {
		if cmds[i].Op.IsWrite() {
			writes++
		}
	}
	if writes == len(cmds) {
		return s.proposeLocal(g, dst, cmds)
	}
	out := dst[:0]
	for i := 0; i < len(cmds); {
		j := i + 1
		for j < len(cmds) && cmds[j].Op.IsWrite() == cmds[i].Op.IsWrite() {
			j++
		}
		run := cmds[i:j]
		if run[0].Op.IsWrite() {
			replies, err := g.proposer.Propose(run)
			if err == nil && len(replies) != len(run) {
				err = errReplyCount(len(replies), len(run))
			}
			if err != nil {
				out = appendErrorReplies(out, errProposal(err, true), len(run))
			} else {
				out = append(out, replies...)
			}
		} else if err := s.readBarrier(g); err != nil {
			out = appendErrorReplies(out, errProposal(err, false), len(run))
		} else {
			now := time.Now().UnixMilli()
			for k := range run {
				r, ok := g.store.ReadServing(now, &run[k], nil)
				if !ok {
					r = fsm.Reply{Kind: fsm.ReplyError, Str: errBusy(g.store.ScriptBusy())}
				}
				out = append(out, r)
			}
		}
		i = j
	}
	return out, nil
}

// proposeLocal hands a batch of writes to g's Proposer, reusing dst when
// the Proposer can append.
func (s *Server) proposeLocal(g *groupRef, dst []fsm.Reply, cmds []fsm.Command) ([]fsm.Reply, error) {
	p := g.proposer
	if ap, ok := p.(appendProposer); ok {
		return ap.ProposeAppend(dst[:0], cmds)
	}
	return p.Propose(cmds)
}

func errReplyCount(got, want int) error {
	return errors.New("proposer returned " + itoa(got) + " replies for " + itoa(want) + " commands")
}

func appendErrorReplies(out []fsm.Reply, text string, n int) []fsm.Reply {
	for range n {
		out = append(out, fsm.Reply{Kind: fsm.ReplyError, Str: text})
	}
	return out
}

// readBarrier waits until this node may answer reads of group g
// linearizably. The barrier waits for the store to apply the commit index,
// which a script running inside the apply holds up: once that script is
// busy, the wait ends with a busyError.
func (s *Server) readBarrier(g *groupRef) error {
	turned, busy := g.store.ScriptTurnsBusy()
	if busy {
		return s.busyNow()
	}
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, which ends the goroutine
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ForwardTimeout)
	defer cancel()
	wg.Go(func() {
		select {
		case <-turned:
			cancel()
		case <-ctx.Done():
		}
	})
	err := g.raft.ReadBarrier(ctx)
	select {
	case <-turned:
		return s.busyNow()
	default:
	}
	return err
}

// routeBatch executes the client's batch in cluster mode and returns one
// reply per command still in the batch (MOVED redirections are taken out
// of it and answered from pending).
func (c *client) routeBatch() ([]fsm.Reply, error) {
	replies, err := c.routeBatchOnce()
	if err == nil && c.s.router.sharded() {
		replies = c.rerouteRefused(replies)
	}
	return replies, err
}

// routeBatchOnce is routeBatch without the second routing of what a slot
// move refused.
func (c *client) routeBatchOnce() ([]fsm.Reply, error) {
	s, g := c.s, c.batchGrp
	if g.leads() {
		return s.execLocal(g, c.replies[:0], c.batch)
	}
	if c.readonly {
		c.redirectKeyedWrites()
		if len(c.batch) == 0 {
			return nil, nil
		}
	}
	return s.forward(g, c.batch, c.forwardUser())
}

// redirectKeyedWrites answers each write of the batch that names a key
// with MOVED to the leader of the key's group and takes it out of the
// batch. Without a known leader address nothing is redirected: forwarding
// then reports that.
func (c *client) redirectKeyedWrites() {
	// The leader of each group met, looked up once per batch; "" when
	// none is known, or when this node leads it after all.
	leaders := map[*groupRef]string{}
	self := c.s.router.cluster.Self().ID
	leaderOf := func(g *groupRef) string {
		addr, seen := leaders[g]
		if !seen {
			if l, ok := c.s.groupLeader(g); ok && l.ID != self {
				addr = l.RESPAddr
			}
			leaders[g] = addr
		}
		return addr
	}
	kept := c.batch[:0]
	j := 0
	for i := range c.pending {
		if c.pending[i].err != "" || c.pending[i].raw != "" {
			continue // answered without the batch (an error, MULTI's OK, QUEUED)
		}
		cmd := c.batch[j]
		j++
		// An EXEC is forwarded: its WATCH was taken on this
		// connection, and the versions it carries are the same on
		// every node. A redirection would make the client start the
		// transaction over on the leader, and go-redis's Watch hands
		// a MOVED from its callback back to the caller instead.
		if key, ok := writeKey(&cmd); ok && cmd.Op != fsm.OpExec {
			slot := fsm.KeySlot(key)
			if addr := leaderOf(c.s.router.groupOf(slot)); addr != "" {
				c.pending[i].err = errMoved(slot, addr)
				continue
			}
		}
		kept = append(kept, cmd)
	}
	clear(c.batch[len(kept):])
	c.batch = kept
}

// writeKey returns the first key a write names, if it names one: not a
// script's body or function name, nor a script that declares no keys,
// which is forwarded, having no slot to be redirected by.
func writeKey(cmd *fsm.Command) ([]byte, bool) {
	keys, all := cmd.Keys()
	if all || len(keys) == 0 {
		return nil, false
	}
	return keys[0], true
}

// runForward answers KVS.FORWARD <request> [user [group]] on the group's
// leader (the home group's when none is named): it executes the batch
// (each command checked against user's rights when named, acl_peer.go)
// and answers with its encoded replies.
func runForward(c *client, args [][]byte) {
	s := c.s
	if !s.router.clustered() {
		c.out = appendError(c.out, errClusterDisabled)
		return
	}
	cmds, err := decodeCommands(args[1])
	if err != nil {
		c.out = appendError(c.out, errForwardRequest(err))
		return
	}
	g, e := s.router.groupArg(args[min(3, len(args)):])
	if e != "" {
		c.out = appendError(c.out, e)
		return
	}
	if g == nil || !g.leads() {
		write := len(cmds) > 0 && cmds[0].Op.IsWrite()
		c.out = appendError(c.out, errProposal(fmt.Errorf("%w", ErrNotLeader), write))
		return
	}
	var refused []string
	var any bool
	if len(args) > 2 && len(args[2]) > 0 {
		// Checked again here in the name of the user who sent them.
		refused, any = s.checkForwarded(string(args[2]), cmds)
	}
	if s.tooFewReplicas(g) {
		// The leader decides min-replicas-to-write for its followers'
		// clients, after the ACL as admit does.
		refused, any = s.forwardedRefusals(cmds, refused)
	}
	if any {
		kept := cmds[:0:0]
		for i := range cmds {
			if refused[i] == "" {
				kept = append(kept, cmds[i])
			}
		}
		cmds = kept
	} else {
		refused = nil
	}
	var replies []fsm.Reply
	if len(cmds) > 0 {
		replies, err = s.execLocal(g, nil, cmds)
	}
	if err == nil && len(replies) != len(cmds) {
		err = errReplyCount(len(replies), len(cmds))
	}
	if err == nil && refused != nil {
		replies = mergeRefused(refused, replies)
	}
	if err != nil {
		c.out = appendError(c.out, errProposal(err, true))
		return
	}
	c.peerBuf = appendReplies(c.peerBuf[:0], g.raft.AppliedIndex(), replies)
	c.out = appendBulk(c.out, c.peerBuf)
	if cap(c.peerBuf) > 1<<20 {
		c.peerBuf = nil
	}
}
