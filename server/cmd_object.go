package server

import (
	"kvs/fsm"
)

// COPY, OBJECT and the slot queries of CLUSTER: commands on keys of every
// type.

func init() {
	registerCommands([]command{
		{name: "copy", arity: -3, flags: w, firstKey: 1, lastKey: 2, keyStep: 1, group: "generic", parse: parseCopy},
		{name: "move", arity: 3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", level: 4, parse: parseMove},
		{name: "swapdb", arity: 3, flags: wdf, group: "server", level: 4, parse: parseSwapDB},
		{name: "object", arity: -2, flags: r, group: "generic", subs: "encoding freq help idletime refcount", run: runObject},
	}...)
	commandDocs["copy"] = [2]string{"Copies the value of a key to a new key.", "6.2.0"}
	commandDocs["move"] = [2]string{"Moves a key to another database.", "1.0.0"}
	commandDocs["swapdb"] = [2]string{"Swaps two Redis databases.", "4.0.0"}
	commandDocs["object"] = [2]string{"A container for object introspection commands.", "2.2.3"}
}

// parseCopy parses COPY source destination [DB n] [REPLACE] in Redis's
// order: the options, then whether source and destination are one key.
// DB n names the destination's database (OpCopyDB when it is not the
// client's); a cluster of several groups has database 0 alone.
func parseCopy(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpCopy, Args: args[1:3]}
	db := int64(c.db)
	for j := 3; j < len(args); j++ {
		switch {
		case is(args[j], "replace"):
			cmd.Flags |= fsm.FlagReplace
		case is(args[j], "db") && j+1 < len(args):
			n, ok := parseInt(args[j+1])
			if !ok {
				return fsm.Command{}, errNotInteger
			}
			if n != int64(int32(n)) {
				return fsm.Command{}, errIntRange
			}
			if !c.s.validDB(n) {
				return fsm.Command{}, errDBIndex
			}
			db = n
			j++
		default:
			return fsm.Command{}, errSyntax
		}
	}
	if c.s.router.sharded() && (c.db != 0 || db != 0) {
		return fsm.Command{}, "ERR Copying to another database is not allowed in cluster mode"
	}
	if db == int64(c.db) && string(args[1]) == string(args[2]) {
		return fsm.Command{}, errSameObject
	}
	if db != int64(c.db) {
		cmd.Op, cmd.Int = fsm.OpCopyDB, db
	}
	return cmd, ""
}

// objectReads are the store's reads of the OBJECT subcommands but HELP.
var objectReads = map[string]int64{
	"encoding": fsm.ObjectEncoding,
	"freq":     fsm.ObjectFreq,
	"idletime": fsm.ObjectIdleTime,
	"refcount": fsm.ObjectRefCount,
}

// runObject answers OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key and OBJECT
// HELP from the node's store, as MEMORY USAGE does.
func runObject(c *client, args [][]byte) {
	sub, ok := objectReads[lowerName(args[1])]
	if !ok {
		c.out = appendHelp(c.out, objectHelp)
		return
	}
	c.readNow(fsm.Command{Op: fsm.OpObject, Args: args[2:3], Int: sub})
}

var objectHelp = []string{
	"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"ENCODING <key>",
	"    Return the kind of internal representation used in order to store the value",
	"    associated with a <key>.",
	"FREQ <key>",
	"    Return the access frequency index of the <key>. The returned integer is",
	"    proportional to the logarithm of the recent access frequency of the key.",
	"IDLETIME <key>",
	"    Return the idle time of the <key>, that is the approximated number of",
	"    seconds elapsed since the last access to the key.",
	"REFCOUNT <key>",
	"    Return the number of references of the value associated with the specified",
	"    <key>.",
	"HELP",
	"    Prints this help.",
}

// clusterKeysInSlot answers CLUSTER COUNTKEYSINSLOT slot and CLUSTER
// GETKEYSINSLOT slot count (cluster mode) from the slot's group's store, with
// Redis's checks: the keys of one slot are one range of the keyspace.
func (c *client) clusterKeysInSlot(name string, args [][]byte) {
	slot, ok := parseInt(args[2])
	if !ok {
		c.out = appendError(c.out, errNotInteger)
		return
	}
	cmd := fsm.Command{Op: fsm.OpCountKeysInSlot, Int: slot}
	if name == "getkeysinslot" {
		n, ok := parseInt(args[3])
		if !ok {
			c.out = appendError(c.out, errNotInteger)
			return
		}
		if slot < 0 || slot >= fsm.ClusterSlots || n < 0 {
			c.out = appendError(c.out, errInvalidSlotKey)
			return
		}
		cmd.Op, cmd.Int2 = fsm.OpGetKeysInSlot, n
	} else if slot < 0 || slot >= fsm.ClusterSlots {
		c.out = appendError(c.out, errInvalidSlot)
		return
	}
	// The slot's group, which holds its keys on a sharded node.
	c.grp = c.s.router.groupOf(int(slot))
	if c.grp.remote() {
		// A slot this node does not serve has no keys here, as on a
		// Redis Cluster node.
		if cmd.Op == fsm.OpGetKeysInSlot {
			c.out = appendArrayLen(c.out, 0)
		} else {
			c.out = appendInt(c.out, 0)
		}
		return
	}
	c.readNow(cmd)
}
