package server

import (
	"slices"
	"strconv"
	"time"

	"kvs/fsm"
)

// Commands a slot move refused. While slots move from one group to
// another (docs/cluster.md, "Moving slots"), a group's store refuses, whole
// and before it runs, a write to a slot it has fenced for the hand-over
// (fsm.SlotMoving) and any command on a slot it no longer owns
// (fsm.SlotNotOwned). Such a refusal changed nothing, so the command may be
// sent again, and only such a command is: a write to a fenced slot once
// this node's slot map names the slot's new group (after a bounded wait:
// the hand-over is short), a command on a slot the group gave up to the
// group the map names now. A cluster-aware client (READONLY) is sent there
// with MOVED unless this node leads that group; a plain client's command is
// executed there, forwarded to its leader. What is still refused when the
// wait is over is answered with a TRYAGAIN error, which clients retry.

// scriptOp reports whether op runs a script, whose reply may be any error
// its author wrote, a refusal's text too: a script's refusal is not told
// from its run, so it is answered as it is and never sent again.
func scriptOp(op fsm.Op) bool {
	switch op {
	case fsm.OpEval, fsm.OpEvalRO, fsm.OpFCall, fsm.OpFCallRO:
		return true
	}
	return false
}

// fenceRetry is how often a write to a fenced slot is tried again on its
// group while the map has not moved the slot.
const fenceRetry = 100 * time.Millisecond

// errSlotUnknown answers a command on a slot its group gave up while this
// node's slot map does not name the new group yet.
func errSlotUnknown(slot int) string {
	return "TRYAGAIN slot " + strconv.Itoa(slot) + " has moved, and this node does not know where to yet"
}

// rerouteRefused routes again each command of the batch (c.batch, sent to
// c.batchGrp) that a slot move refused, and returns the replies with
// theirs in place of the refusals.
func (c *client) rerouteRefused(replies []fsm.Reply) []fsm.Reply {
	copied := false
	for i := range replies {
		if scriptOp(c.batch[i].Op) {
			continue
		}
		slot, ok := fsm.SlotMoving(replies[i])
		if !ok {
			if slot, ok = fsm.SlotNotOwned(replies[i]); !ok {
				continue
			}
		}
		if !copied {
			// The proposer's slice, or one aliasing a peer's buffer.
			replies, copied = slices.Clone(replies), true
		}
		replies[i] = c.reroute(c.batchGrp, c.batch[i], slot, replies[i])
	}
	return replies
}

// reroute sends cmd, refused by group from for a move of slot, to the
// slot's group by the map in force, waiting up to Config.RerouteWait for the map
// to move it, and returns the reply.
func (c *client) reroute(from *groupRef, cmd fsm.Command, slot int, refusal fsm.Reply) fsm.Reply {
	s := c.s
	deadline := time.Now().Add(s.cfg.RerouteWait)
	for {
		m := s.router.slotMap()
		g := s.router.groupIn(m, slot)
		if g.index == from.index {
			// A fenced slot's write is tried again now and then: a move
			// cancelled lifts the fence without a new map.
			_, moving := fsm.SlotMoving(refusal)
			until := deadline
			if next := time.Now().Add(fenceRetry); moving && next.Before(deadline) {
				until = next
			}
			if s.router.waitSlotMap(m, until) {
				continue
			}
			if time.Now().After(deadline) {
				if moving {
					return refusal // the fsm's own TRYAGAIN
				}
				return fsm.Reply{Kind: fsm.ReplyError, Str: errSlotUnknown(slot)}
			}
		}
		if g.index != from.index {
			s.stats.rerouted.Add(1)
		}
		if c.readonly && !c.peer && !g.leads() {
			return fsm.Reply{Kind: fsm.ReplyError, Str: s.movedTo(g, slot)}
		}
		one := []fsm.Command{cmd}
		var rs []fsm.Reply
		var err error
		if g.leads() {
			rs, err = s.execLocal(g, nil, one)
		} else {
			rs, err = s.forward(g, one, c.forwardUser())
		}
		if err == nil && len(rs) != 1 {
			err = errReplyCount(len(rs), 1)
		}
		if err != nil {
			return fsm.Reply{Kind: fsm.ReplyError, Str: errProposal(err, cmd.Op.IsWrite())}
		}
		r := rs[0]
		_, moving := fsm.SlotMoving(r)
		_, notOwned := fsm.SlotNotOwned(r)
		if !moving && !notOwned || time.Now().After(deadline) {
			if notOwned {
				return fsm.Reply{Kind: fsm.ReplyError, Str: errSlotUnknown(slot)}
			}
			return r
		}
		from, refusal = g, r
	}
}

// waitSlotMap waits until a newer version of the slot map than m is
// installed, or deadline; it reports whether one is.
func (r *router) waitSlotMap(m *slotMap, deadline time.Time) bool {
	r.mapMu.Lock()
	if r.mapChanged == nil {
		r.mapChanged = make(chan struct{})
	}
	ch := r.mapChanged
	r.mapMu.Unlock()
	if r.slotMap() != m {
		return true // installed before the channel was taken
	}
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// readRefused turns a local read's refusal for a slot its group no longer
// owns (this node's slot map is behind the move) into MOVED to the slot's
// group by the map in force, for a cluster-aware client, or a TRYAGAIN
// error, which clients retry; a read runs on the event loop, which must
// not wait for the map.
func (c *client) readRefused(op fsm.Op, r *fsm.Reply) {
	slot, ok := fsm.SlotNotOwned(*r)
	if !ok || scriptOp(op) {
		return
	}
	if g := c.s.router.groupOf(slot); g.index != c.grp.index && c.readonly && !g.leads() {
		r.Str = c.s.movedTo(g, slot)
		return
	}
	r.Str = errSlotUnknown(slot)
}
