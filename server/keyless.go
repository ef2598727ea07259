package server

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"kvs/fsm"
)

// Commands that answer for the whole keyspace on a sharded node: DBSIZE,
// KEYS, SCAN and RANDOMKEY read every group this node leads, and FLUSHALL
// and FLUSHDB empty every one. A Redis Cluster master answers them for its
// own slots, and cluster clients send them to every master and combine
// the answers (go-redis's ClusterClient sums DBSIZE, ForEachMaster
// FLUSHALL); a node answers for the groups it leads, so that each group
// is counted once over the masters. In memory and durable mode the node
// leads its one group and answers for everything, as before.

// acrossGroups reports whether op reads the whole keyspace.
func acrossGroups(op fsm.Op) bool {
	switch op {
	case fsm.OpDBSize, fsm.OpKeys, fsm.OpScan, fsm.OpRandomKey:
		return true
	}
	return false
}

// ledGroups are the groups a keyless command answers for: on a sharded
// node those it leads, in order; otherwise its one group, led or not (a
// follower answers from its copy, as a replica does).
func (r *router) ledGroups() []*groupRef {
	if !r.sharded() {
		return []*groupRef{&r.home}
	}
	var out []*groupRef
	for g := range r.local() {
		if g.leads() {
			out = append(out, g)
		}
	}
	return out
}

// readAcross answers fc, a read of the whole keyspace, from groups (those
// this node leads), combined as the one store would answer it.
func (c *client) readAcross(groups []*groupRef, fc fsm.Command) (fsm.Reply, bool) {
	read := func(g *groupRef, cmd fsm.Command) (fsm.Reply, bool) {
		c.readCmd = cmd
		r, ok := g.store.ReadServing(c.now, &c.readCmd, c.busyServe)
		c.readCmd = fsm.Command{}
		return r, ok
	}
	switch fc.Op {
	case fsm.OpDBSize:
		var n int64
		for _, g := range groups {
			r, ok := read(g, fc)
			if !ok {
				return r, false
			}
			n += r.Int
		}
		return fsm.Reply{Kind: fsm.ReplyInt, Int: n}, true
	case fsm.OpKeys:
		out := []fsm.Reply{}
		for _, g := range groups {
			r, ok := read(g, fc)
			if !ok {
				return r, false
			}
			out = append(out, r.Array...)
		}
		return fsm.Reply{Kind: fsm.ReplyArray, Array: out}, true
	case fsm.OpRandomKey:
		// The groups in a random order, the first key found: a sample of
		// the keyspace that, like Redis's, need not be uniform.
		for _, i := range rand.Perm(len(groups)) {
			r, ok := read(groups[i], fc)
			if !ok || r.Kind != fsm.ReplyNil {
				return r, ok
			}
		}
		return fsm.Reply{Kind: fsm.ReplyNil}, true
	}
	return c.scanAcross(groups, fc, read)
}

// scanAcross answers SCAN over groups. Every store orders its keys by slot
// first (fsm's keyHash), and a group holds runs of consecutive slots, so
// the keyspace is the groups' runs in slot order, and one cursor says where
// in it a scan is: the run whose slots hold the cursor is scanned from it,
// and once that run is done the next cursor is where the next run of a
// group answered for begins. Every key is returned once, as Redis returns
// the keys of a table that does not change.
func (c *client) scanAcross(groups []*groupRef, fc fsm.Command, read func(*groupRef, fsm.Command) (fsm.Reply, bool)) (fsm.Reply, bool) {
	answers := map[*groupRef]bool{}
	for _, g := range groups {
		answers[g] = true
	}
	var runs []slotRun
	for _, run := range c.s.router.slotRuns(c.s.router.slotMap()) {
		if answers[run.g] {
			runs = append(runs, run)
		}
	}
	reply := func(next uint64, keys []fsm.Reply) (fsm.Reply, bool) {
		cursor := strconv.AppendUint(nil, next, 10)
		return fsm.Reply{Kind: fsm.ReplyArray, Array: []fsm.Reply{fsm.BulkReply(cursor), {Kind: fsm.ReplyArray, Array: keys}}}, true
	}
	cursor := uint64(fc.Int)
	slot := fsm.CursorSlot(cursor)
	for i, run := range runs {
		if run.last < slot {
			continue
		}
		cmd := fc
		if slot < run.first {
			cmd.Int = int64(fsm.SlotCursor(run.first))
		}
		r, ok := read(run.g, cmd)
		if !ok || r.Kind != fsm.ReplyArray || len(r.Array) != 2 {
			return r, ok
		}
		next, err := strconv.ParseUint(string(r.Array[0].Bulk), 10, 64)
		if err != nil {
			return fsm.Reply{Kind: fsm.ReplyError, Str: "ERR scan: " + err.Error()}, true
		}
		// The store may hold the group's later runs too: what lies past
		// this run is the next runs' to return.
		keys := r.Array[1].Array[:0]
		for _, k := range r.Array[1].Array {
			if fsm.KeySlot(k.Bulk) <= run.last {
				keys = append(keys, k)
			}
		}
		if keys == nil {
			keys = []fsm.Reply{}
		}
		if next == 0 || fsm.CursorSlot(next) > run.last {
			next = 0
			if i+1 < len(runs) {
				next = fsm.SlotCursor(runs[i+1].first)
			}
		}
		return reply(next, keys)
	}
	return reply(0, []fsm.Reply{})
}

// flushAcross answers FLUSHALL or FLUSHDB (fc) on a sharded node: it
// empties every group this node leads, one after the other, and answers
// the first error met, if any.
func (c *client) flushAcross(fc fsm.Command) {
	if e, r := c.proposeEach(c.s.router.ledGroups(), fc); e != "" {
		c.out = appendError(c.out, e)
	} else if r != nil {
		c.out = appendReply(c.out, r, c.proto)
	} else {
		c.out = appendStatus(c.out, "OK")
	}
}

// proposeEach proposes fc to each of groups in turn, stopping at the first
// that fails: it returns the error text of a proposal that failed, or the
// error reply a group gave, or neither.
func (c *client) proposeEach(groups []*groupRef, fc fsm.Command) (string, *fsm.Reply) {
	for _, g := range groups {
		replies, err := c.s.proposeTo(g, []fsm.Command{fc})
		r, err := firstReply(replies, err)
		if err != nil {
			return errProposal(err, true), nil
		}
		if r.Kind == fsm.ReplyError {
			return "", &r
		}
	}
	return "", nil
}

// everyGroup reports whether op changes what every group's store must
// hold alike: the functions and the scripts loaded, which FCALL and
// EVALSHA find in the store of their keys' group.
func everyGroup(op fsm.Op) bool {
	switch op {
	case fsm.OpFunctionLoad, fsm.OpFunctionDelete, fsm.OpFunctionFlush, fsm.OpFunctionRestore,
		fsm.OpScriptLoad, fsm.OpScriptFlush:
		return true
	}
	return false
}

// everyGroupCommand reports whether the command args (cmd's) writes to
// every group of a sharded node: FLUSHALL and FLUSHDB (every group the
// node leads), and what changes the scripts and functions every group
// holds (everyGroup). Inside MULTI it cannot be queued there: a
// transaction is one entry in one group's log.
func everyGroupCommand(cmd *command, args [][]byte) bool {
	switch cmd.name {
	case "flushall", "flushdb":
		return true
	case "function", "script":
		if len(args) < 2 {
			return false
		}
		switch sub := strings.ToLower(string(args[1])); {
		case cmd.name == "function":
			return sub == "load" || sub == "delete" || sub == "flush" || sub == "restore"
		default:
			return sub == "load" || sub == "flush"
		}
	}
	return false
}

// errEveryGroupInMulti is the queue-time refusal of such a command.
func errEveryGroupInMulti(cmd *command, args [][]byte) string {
	name := cmd.name
	if (name == "function" || name == "script") && len(args) > 1 {
		name += "|" + strings.ToLower(string(args[1]))
	}
	return "ERR '" + name + "' cannot be queued in a transaction on a node of several groups: it writes to every group, and a transaction is applied in one"
}

// writeEveryGroup answers fc, a write every group's store must apply
// (everyGroup), on a sharded node: the home group decides the reply (a
// library that exists already, a script that does not compile), and the
// other groups then apply it too. A group that cannot be reached answers
// the error, and the client may send the command again (FUNCTION LOAD
// REPLACE, SCRIPT LOAD and the flushes may be repeated).
func (c *client) writeEveryGroup(fc fsm.Command) {
	groups := slices.Collect(c.s.router.all())
	replies, err := c.s.proposeTo(groups[0], []fsm.Command{fc})
	first, err := firstReply(replies, err)
	if err != nil {
		c.out = appendError(c.out, errProposal(err, true))
		return
	}
	if first.Kind != fsm.ReplyError {
		if e, r := c.proposeEach(groups[1:], fc); e != "" {
			c.out = appendError(c.out, e)
			return
		} else if r != nil {
			c.out = appendReply(c.out, r, c.proto)
			return
		}
	}
	c.out = appendReply(c.out, &first, c.proto)
}
