package server

import (
	"fmt"

	"kvs/cmdspec"
	"kvs/fsm"
)

// Routing a command to its group on a sharded node (router.sharded): the
// keys of a command must share a slot, and the command runs on that slot's
// group, here or, for a group held elsewhere, on its leader (router.go).
// Redis Cluster checks this in processCommand after the ACL and before
// maxmemory (getNodeByQuery), and so does admit. In a transaction
// each command is checked as it is queued, and EXEC checks that all of
// them share one slot: it runs on one group. A command without keys runs
// on the home group, unless it answers for the whole node (keyless.go) or
// runs scripts (scriptGroup).

// errCrossSlot is Redis Cluster's refusal of keys in different slots.
const errCrossSlot = "CROSSSLOT Keys in request don't hash to the same slot"

// noSlot is the slot of a command without keys.
const noSlot = -1

// commandSlot returns the slot the keys of spec's args share, noSlot when
// it names none, or ok false when they do not share one. *keys is where
// the keys are found, kept by the caller so that routing a command
// allocates nothing.
func commandSlot(spec *command, args [][]byte, keys *[]cmdspec.Key) (slot int, ok bool) {
	slot = noSlot
	same := func(key []byte) bool {
		s := fsm.KeySlot(key)
		if slot != noSlot && s != slot {
			return false
		}
		slot = s
		return true
	}
	// Shard channels are not keys, but Redis Cluster routes them as keys
	// (its legacy key range names them): one slot for all.
	var channels [][]byte
	switch spec.name {
	case "spublish":
		channels = args[1:2]
	case "ssubscribe", "sunsubscribe":
		channels = args[1:]
	}
	if channels != nil {
		for _, ch := range channels {
			if !same(ch) {
				return noSlot, false
			}
		}
		return slot, true
	}
	*keys = spec.keys.FindRouted(args, (*keys)[:0])
	if len(*keys) == 0 && spec.name == "pfmerge" && len(args) == 2 {
		// PFMERGE destkey alone: Redis's key specs find no key (the
		// sources' range is empty), and Redis Cluster runs it on the
		// node it was sent to, which answers for the key as for any
		// other. kvs runs it in the group of the key's slot.
		return fsm.KeySlot(args[1]), true
	}
	for _, k := range *keys {
		if !same(args[k.Pos]) {
			return noSlot, false
		}
	}
	return slot, true
}

// routeCommand sets the group the command runs on, c.grp, or returns the
// refusal: CROSSSLOT for keys in different slots, in one command or in the
// transaction an EXEC ends.
func (c *client) routeCommand(cmd, spec *command, args [][]byte) string {
	r := &c.s.router
	m := r.slotMap()
	if c.multi != nil && cmd.name == "exec" {
		// The watched keys are checked in the transaction's store, as
		// it applies: they must be in its slot too.
		slot := c.multi.slot
		for _, w := range c.watched {
			s := fsm.KeySlot(w.key)
			if slot != noSlot && s != slot {
				return errCrossSlot
			}
			slot = s
		}
		if c.multi.crossSlot {
			return errCrossSlot
		}
		c.grp = r.groupIn(m, slot)
		if slot == noSlot {
			// The scripts it may hold touch the node's own keys, as a
			// keyless script does outside one.
			c.grp = r.scriptGroupIn(m)
		}
		return ""
	}
	if c.multi != nil && queuesInMulti(cmd) && everyGroupCommand(cmd, args) {
		return errEveryGroupInMulti(cmd, args)
	}
	slot, ok := commandSlot(spec, args, &c.slotKeys)
	if !ok {
		return errCrossSlot
	}
	if c.multi != nil && queuesInMulti(cmd) && slot != noSlot {
		switch c.multi.slot {
		case noSlot:
			c.multi.slot = slot
		case slot:
		default:
			c.multi.crossSlot = true
		}
	}
	c.grp = r.groupIn(m, slot)
	if slot == noSlot && cmd.group == "scripting" {
		// A script without keys runs on this node's own keys.
		c.grp = r.scriptGroupIn(m)
	}
	if slot != noSlot && c.grp.remote() && (c.readonly && !c.peer || cmd.parse == nil) {
		return c.s.movedTo(c.grp, slot)
	}
	return ""
}

// movedTo is the redirection of a command on slot, of group g, which this
// node holds no replica of: MOVED to g's leader. A cluster-aware client
// (READONLY) gets it for every keyed command, as from a Redis Cluster node
// that does not serve the slot; a plain client for the commands that are
// not forwarded, because they block, watch or read the store themselves
// (a plain client then fails, as it would against Redis Cluster). Without
// a known leader it is the error a forwarded command would get.
func (s *Server) movedTo(g *groupRef, slot int) string {
	l, ok := s.groupLeader(g)
	if !ok || l.RESPAddr == "" {
		return errProposal(fmt.Errorf("%w known for slot %d's group", ErrNoLeader, slot), false)
	}
	return errMoved(slot, l.RESPAddr)
}

// scriptGroup is the group in which a sharded node runs what touches
// scripts without naming keys: EVAL, EVALSHA, FCALL and their _RO forms
// with no keys, the SCRIPT and
// FUNCTION subcommands that are not written to every group (SCRIPT
// EXISTS, FUNCTION LIST, DUMP and STATS), and a transaction whose
// commands name no key. A Redis Cluster node runs such a script on its
// own slots; a kvs node runs it in one group, its first: of the groups
// it leads, the one holding the lowest slot; else, of those it holds a
// replica of, the one holding the lowest slot (a script that may write is
// then forwarded to that group's leader, as any write); else, holding no
// data group, the group of slot 0, on its leader. A call on a key of
// another group fails as a keyed script's does (errScriptNonLocal). The
// script's entry is in that group's log, whose store refuses the same
// keys wherever and whenever it applies it.
func (r *router) scriptGroup() *groupRef { return r.scriptGroupIn(r.slotMap()) }

// scriptGroupIn is scriptGroup by slot map m.
func (r *router) scriptGroupIn(m *slotMap) *groupRef {
	var held *groupRef
	for _, i := range m.bySlot {
		g := r.group(i)
		if g.leads() {
			return g
		}
		if held == nil && !g.remote() {
			held = g
		}
	}
	if held != nil {
		return held
	}
	return r.group(m.bySlot[0])
}

// scriptStore is the store whose scripts and functions INFO memory counts:
// on a sharded node, that of the group its keyless scripts run in, which
// caches what they EVAL besides what every group holds, when the node
// holds it; otherwise the home's.
func (s *Server) scriptStore() *fsm.Store {
	if s.router.sharded() {
		if g := s.router.scriptGroup(); !g.remote() {
			return g.store
		}
	}
	return s.cfg.Store
}

// leadsSlots reports whether this node leads a group that holds slots:
// whether ROLE, HELLO and CLUSTER NODES call it a master.
func (r *router) leadsSlots() bool {
	if !r.sharded() {
		return r.home.leads()
	}
	return r.scriptGroup().leads()
}
