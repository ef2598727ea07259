package server

import (
	"math/rand/v2"

	"kvs/fsm"
)

// The HyperLogLog commands came with cluster level 3 (their ops are of
// that level), and PFSELFTEST with them.
func init() {
	registerCommands([]command{
		{name: "pfadd", arity: -2, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "hyperloglog", level: 3,
			parse: parsePFAdd},
		// PFCOUNT is a read to Redis that may write the key's cached
		// cardinality and propagate it (may_replicate): of one key it is
		// a write here (fsm.OpPFCount), of several a read.
		{name: "pfcount", arity: -2, flags: r | flagMayReplicate, firstKey: 1, lastKey: -1, keyStep: 1,
			group: "hyperloglog", level: 3, parse: parsePFCount},
		{name: "pfmerge", arity: -2, flags: w, firstKey: 1, lastKey: -1, keyStep: 1, group: "hyperloglog", level: 3,
			parse: parsePFMerge},
		{name: "pfdebug", arity: 3, flags: w | flagAdmin, firstKey: 2, lastKey: 2, keyStep: 1, group: "hyperloglog",
			level: 3, parse: parsePFDebug},
		{name: "pfselftest", arity: 1, flags: flagAdmin, group: "hyperloglog", level: 3, run: runPFSelfTest},
	}...)
	for name, doc := range map[string][2]string{
		"pfadd":      {"Adds the specified elements to the specified HyperLogLog.", "2.8.9"},
		"pfcount":    {"Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).", "2.8.9"},
		"pfmerge":    {"Merge N different HyperLogLogs into a single one.", "2.8.9"},
		"pfdebug":    {"Internal commands for debugging HyperLogLog values", "2.8.9"},
		"pfselftest": {"An internal command for testing HyperLogLog values", "2.8.9"},
	} {
		commandDocs[name] = doc
	}
}

// The adds and merges carry hll-sparse-max-bytes as it is when they are
// proposed: the store promotes a HyperLogLog to dense by it, and every
// replica must do so at the same add.

func parsePFAdd(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpPFAdd, Args: args[1:], Int: c.s.hllSparseMax.Load()}, ""
}

func parsePFCount(c *client, args [][]byte) (fsm.Command, string) {
	if len(args) == 2 {
		return fsm.Command{Op: fsm.OpPFCount, Args: args[1:2]}, ""
	}
	return fsm.Command{Op: fsm.OpPFCountUnion, Args: args[1:]}, ""
}

func parsePFMerge(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpPFMerge, Args: args[1:], Int: c.s.hllSparseMax.Load()}, ""
}

// parsePFDebug passes the subcommand on unchecked: Redis looks the key up
// first, so a missing key answers before an unknown subcommand.
func parsePFDebug(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpPFDebug, Args: [][]byte{args[2], args[1]}}, ""
}

// runPFSelfTest runs Redis's self test of the HyperLogLog registers and
// estimate, which touches no key (about a second of CPU, as in Redis).
func runPFSelfTest(c *client, _ [][]byte) {
	if e := fsm.HLLSelfTest(c.s.hllSparseMax.Load(), rand.Uint32); e != "" {
		c.out = appendError(c.out, e)
		return
	}
	c.out = appendStatus(c.out, "OK")
}
