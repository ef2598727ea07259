package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"kvs/fsm"
)

// KVS.SLOTS MOVE first last group | STATUS | CANCEL id: the moves of slots
// between the data groups of a sharded cluster (docs/cluster.md, "Moving
// slots"). The server parses and answers; Config.Mover (cmd/kvs) keeps the
// moves in the meta group, where the leader of each move's source group
// drives it, so any node takes the command. KVS.SLOTS SIZES first last
// answers what the slots hold (keys and bytes, for kvs rebalance) from
// this node's replica of their group.

// SlotMover runs the moves of slots between a sharded cluster's groups
// (Config.Mover). Its methods may wait for the meta group's leader;
// errors wrapping ErrNoLeader, ErrNotLeader or ErrUnknownOutcome are told
// as a write's are, any other is a refusal whose text the client gets
// after "ERR ".
type SlotMover interface {
	// Move records a move of slots first to last to data group target,
	// and returns its id.
	Move(first, last, target int) (uint64, error)
	// Moves lists the moves in flight, and those finished lately, by id.
	Moves() ([]SlotMove, error)
	// Cancel asks for move id to be rolled back.
	Cancel(id uint64) error
}

// SlotMove describes one move of slots (KVS.SLOTS STATUS).
type SlotMove struct {
	ID             uint64
	Source, Target int
	Slots          string // "first-last[,first-last...]"
	Phase          string
	// Attempts is the copies begun: a copy cut short (its source's leader
	// lost) starts over.
	Attempts int64
	// Keys and Bytes are the keys and bytes copied so far, of TotalKeys
	// the bulk copy's view held (0 before it was taken).
	Keys, Bytes, TotalKeys int64
	// Left is the bulk copy's expected time left at the pace set, -1
	// when unknown or over.
	Left time.Duration
	// Note says why a move was cancelled, if it was not asked to be.
	Note string
}

// errNoMover answers KVS.SLOTS on a node whose slots are not spread over
// several groups.
const errNoMover = "ERR slots move between the groups of a cluster started with --groups"

func runSlotsCmd(c *client, args [][]byte) {
	mv := c.s.cfg.Mover
	if mv == nil {
		c.out = appendError(c.out, errNoMover)
		return
	}
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "move" && len(args) == 5:
		first, ok1 := parseInt(args[2])
		last, ok2 := parseInt(args[3])
		target, ok3 := parseInt(args[4])
		if !ok1 || !ok2 || !ok3 {
			c.out = appendError(c.out, errNotInteger)
			return
		}
		id, err := mv.Move(int(first), int(last), int(target))
		if err != nil {
			c.out = appendError(c.out, errProposal(err, true))
			return
		}
		c.out = appendInt(c.out, int64(id))
	case sub == "cancel" && len(args) == 3:
		id, err := strconv.ParseUint(string(args[2]), 10, 64)
		if err != nil {
			c.out = appendError(c.out, errNotInteger)
			return
		}
		if err := mv.Cancel(id); err != nil {
			c.out = appendError(c.out, errProposal(err, true))
			return
		}
		c.out = appendStatus(c.out, "OK")
	case sub == "sizes" && len(args) == 4:
		c.slotSizes(args[2], args[3])
	case sub == "status" && len(args) == 2:
		moves, err := mv.Moves()
		if err != nil {
			c.out = appendError(c.out, errProposal(err, false))
			return
		}
		c.out = appendArrayLen(c.out, len(moves))
		for _, m := range moves {
			c.out = appendSlotMove(c.out, &m, c.proto)
		}
	default:
		c.out = appendError(c.out, "ERR unknown subcommand or wrong number of arguments for '"+
			string(args[1])+"'. Try KVS.SLOTS MOVE first last group, KVS.SLOTS STATUS, KVS.SLOTS CANCEL id or KVS.SLOTS SIZES first last.")
	}
}

// slotSizes answers KVS.SLOTS SIZES first last: a flat array of slot,
// keys, bytes for each slot of the range holding keys, from this node's
// replica of the group the slots are in, which must be one (a stale
// read, as a replica's reads are). A node without a replica of it says so
// rather than answering nothing, which would read as empty slots.
func (c *client) slotSizes(a, b []byte) {
	first, ok1 := parseInt(a)
	last, ok2 := parseInt(b)
	if !ok1 || !ok2 {
		c.out = appendError(c.out, errNotInteger)
		return
	}
	if first < 0 || last < first || last >= fsm.ClusterSlots {
		c.out = appendError(c.out, errInvalidSlot)
		return
	}
	m := c.s.router.slotMap()
	g := c.s.router.groupIn(m, int(first))
	for slot := int(first) + 1; slot <= int(last); slot++ {
		if c.s.router.groupIn(m, slot) != g {
			c.out = appendError(c.out, fmt.Sprintf("ERR slots %d-%d are not all in one group", first, last))
			return
		}
	}
	if g.remote() {
		c.out = appendError(c.out, fmt.Sprintf("ERR this node holds no replica of the group of slots %d-%d: ask its leader", first, last))
		return
	}
	c.grp = g
	c.readNow(fsm.Command{Op: fsm.OpSlotSizes, Int: first, Int2: last})
}

// appendSlotMove appends m as a map of its fields.
func appendSlotMove(b []byte, m *SlotMove, proto int) []byte {
	b = appendMapLen(b, 11, proto)
	num := func(name string, v int64) {
		b = appendBulkString(b, name)
		b = appendInt(b, v)
	}
	str := func(name, v string) {
		b = appendBulkString(b, name)
		b = appendBulkString(b, v)
	}
	num("id", int64(m.ID))
	num("source", int64(m.Source))
	num("target", int64(m.Target))
	str("slots", m.Slots)
	str("phase", m.Phase)
	num("attempts", m.Attempts)
	b = appendSlotMoveProgress(b, m)
	str("note", m.Note)
	return b
}

// appendSlotMoveProgress appends m's progress as four fields of a map:
// keys, bytes, total_keys and left_ms (-1 when unknown or over).
func appendSlotMoveProgress(b []byte, m *SlotMove) []byte {
	left := int64(-1)
	if m.Left >= 0 {
		left = m.Left.Milliseconds()
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"keys", m.Keys}, {"bytes", m.Bytes}, {"total_keys", m.TotalKeys}, {"left_ms", left}} {
		b = appendBulkString(b, f.name)
		b = appendInt(b, f.v)
	}
	return b
}
