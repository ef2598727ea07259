package server

import (
	"strconv"
	"strings"
)

// KVS.GROUPS ADD [n] | EMPTY id | REMOVE id | LIST: the data groups of a
// sharded cluster, added and removed while it runs (docs/cluster.md,
// "Adding and removing groups"). The server parses and answers;
// Config.GroupAdmin (cmd/kvs) keeps the list of the cluster's groups in
// the meta group, so any node takes the command. LIST is answered from
// what this node knows: its groups, the slot map it routes by, and each
// group's leader and members.

// GroupAdmin adds and removes the data groups of a sharded cluster
// (Config.GroupAdmin). Its methods may wait for the meta group's leader;
// errors are told as SlotMover's are.
type GroupAdmin interface {
	// Add creates n new data groups, without slots, and returns their
	// ids.
	Add(n int) ([]int, error)
	// Empty starts the moves that take data group id's slots to the
	// other groups, and returns their ids (none when it has no slots).
	Empty(id int) ([]uint64, error)
	// Remove deletes data group id, which owns no slot and takes part in
	// no move in flight.
	Remove(id int) error
}

// errNoGroupAdmin answers KVS.GROUPS on a node whose slots are not spread
// over several groups.
const errNoGroupAdmin = "ERR groups are added to and removed from a cluster started with --groups"

func runGroupsCmd(c *client, args [][]byte) {
	ga := c.s.cfg.GroupAdmin
	if ga == nil || !c.s.router.sharded() {
		c.out = appendError(c.out, errNoGroupAdmin)
		return
	}
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "add" && len(args) <= 3:
		n := int64(1)
		if len(args) == 3 {
			var ok bool
			if n, ok = parseInt(args[2]); !ok {
				c.out = appendError(c.out, errNotInteger)
				return
			}
			if n < 1 {
				c.out = appendError(c.out, "ERR the number of groups to add must be positive")
				return
			}
		}
		ids, err := ga.Add(int(min(n, 1<<16)))
		if err != nil {
			c.out = appendError(c.out, errProposal(err, true))
			return
		}
		c.out = appendArrayLen(c.out, len(ids))
		for _, id := range ids {
			c.out = appendInt(c.out, int64(id))
		}
	case (sub == "empty" || sub == "remove") && len(args) == 3:
		id, ok := parseInt(args[2])
		if !ok {
			c.out = appendError(c.out, errNotInteger)
			return
		}
		if id == 0 {
			c.out = appendError(c.out, "ERR group 0 is the meta group: it holds no slots and is on every node, and cannot be removed")
			return
		}
		if sub == "remove" {
			if err := ga.Remove(int(id)); err != nil {
				c.out = appendError(c.out, errProposal(err, true))
				return
			}
			c.out = appendStatus(c.out, "OK")
			return
		}
		moves, err := ga.Empty(int(id))
		if err != nil {
			c.out = appendError(c.out, errProposal(err, true))
			return
		}
		c.out = appendArrayLen(c.out, len(moves))
		for _, m := range moves {
			c.out = appendInt(c.out, int64(m))
		}
	case sub == "list" && len(args) == 2:
		c.groupsList()
	default:
		c.out = appendError(c.out, "ERR unknown subcommand or wrong number of arguments for '"+
			string(args[1])+"'. Try KVS.GROUPS ADD [n], KVS.GROUPS EMPTY id, KVS.GROUPS REMOVE id or KVS.GROUPS LIST.")
	}
}

// groupsList answers KVS.GROUPS LIST: a map for each data group, by id:
// id, slots (how many the slot map in force gives it), ranges (them, as
// "first-last,..."; "" for none), leader (its node id, "" while none is
// known), leader_addr (its client address) and replicas (the members'
// node ids, each non-voter's followed by "(nonvoter)").
func (c *client) groupsList() {
	r := &c.s.router
	m := r.slotMap()
	counts := map[int]int{}
	ranges := map[int][]string{}
	for _, run := range r.slotRuns(m) {
		counts[run.g.index] += run.last - run.first + 1
		ranges[run.g.index] = append(ranges[run.g.index], strconv.Itoa(run.first)+"-"+strconv.Itoa(run.last))
	}
	var groups []*groupRef
	for g := range r.all() {
		if g.index > 0 {
			groups = append(groups, g)
		}
	}
	b := appendArrayLen(c.out, len(groups))
	for _, g := range groups {
		var members []Member
		var leader Member
		var hasLeader bool
		if g.remote() && r.remote != nil {
			members = r.remote.Members(g.index)
			leader, hasLeader = r.remote.Leader(g.index)
		} else if g.raft != nil {
			members, _ = g.raft.Members()
			leader, hasLeader = g.raft.Leader()
		}
		var replicas []string
		for _, mb := range members {
			id := mb.ID
			if !mb.Voter {
				id += "(nonvoter)"
			}
			replicas = append(replicas, id)
		}
		if !hasLeader {
			leader = Member{}
		}
		b = appendMapLen(b, 6, c.proto)
		b = appendBulkString(b, "id")
		b = appendInt(b, int64(g.index))
		b = appendBulkString(b, "slots")
		b = appendInt(b, int64(counts[g.index]))
		b = appendBulkString(b, "ranges")
		b = appendBulkString(b, strings.Join(ranges[g.index], ","))
		b = appendBulkString(b, "leader")
		b = appendBulkString(b, leader.ID)
		b = appendBulkString(b, "leader_addr")
		b = appendBulkString(b, leader.RESPAddr)
		b = appendBulkString(b, "replicas")
		b = appendArrayLen(b, len(replicas))
		for _, id := range replicas {
			b = appendBulkString(b, id)
		}
	}
	c.out = b
}
