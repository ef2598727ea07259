package server

import (
	"kvs/fsm"
)

// DUMP and RESTORE: a key's value in Redis 7.0's payload format
// (fsm/dump_value.go).

func init() {
	registerCommands([]command{
		{name: "dump", arity: 2, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", level: 3,
			parse: parseDump},
		{name: "restore", arity: -4, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", level: 3,
			parse: parseRestore},
	}...)
	commandDocs["dump"] = [2]string{"Returns a serialized representation of the value stored at a key.", "2.6.0"}
	commandDocs["restore"] = [2]string{"Creates a key from the serialized representation of a value.", "2.6.0"}
}

func parseDump(c *client, args [][]byte) (fsm.Command, string) {
	return fsm.Command{Op: fsm.OpDump, Args: args[1:2]}, ""
}

const (
	errRestoreIdle = "ERR Invalid IDLETIME value, must be >= 0"
	errRestoreFreq = "ERR Invalid FREQ value, must be >= 0 and <= 255"
)

// parseRestore parses RESTORE key ttl serialized-value [REPLACE] [ABSTTL]
// [IDLETIME seconds] [FREQ frequency] in Redis's order: the options
// (IDLETIME and FREQ exclude each other, as a syntax error), then, after
// the key's existence (BUSYKEY, decided by the store), the TTL and the
// payload. Their refusals are a read (fsm.OpRestoreRefused) that answers
// BUSYKEY for an existing key without REPLACE, as Redis checks the key
// first. A relative TTL becomes a deadline here, from this node's clock.
func parseRestore(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpRestore, Args: args[1:3:3]}
	absTTL := false
	for j := 4; j < len(args); j++ {
		more := len(args) - j - 1
		switch {
		case is(args[j], "replace"):
			cmd.Flags |= fsm.FlagReplace
		case is(args[j], "absttl"):
			absTTL = true
		case is(args[j], "idletime") && more >= 1 && cmd.Flags&fsm.FlagRestoreFreq == 0:
			v, ok := parseInt(args[j+1])
			if !ok {
				return fsm.Command{}, errNotInteger
			}
			if v < 0 {
				return fsm.Command{}, errRestoreIdle
			}
			cmd.Flags |= fsm.FlagRestoreIdle
			cmd.Int2 = v
			j++
		case is(args[j], "freq") && more >= 1 && cmd.Flags&fsm.FlagRestoreIdle == 0:
			v, ok := parseInt(args[j+1])
			if !ok {
				return fsm.Command{}, errNotInteger
			}
			if v < 0 || v > 255 {
				return fsm.Command{}, errRestoreFreq
			}
			cmd.Flags |= fsm.FlagRestoreFreq
			cmd.Int2 = v
			j++
		default:
			return fsm.Command{}, errSyntax
		}
	}
	refuse := func(why int64, text string) (fsm.Command, string) {
		if cmd.Flags&fsm.FlagReplace != 0 {
			return fsm.Command{}, text
		}
		return fsm.Command{Op: fsm.OpRestoreRefused, Args: args[1:2], Int: why}, ""
	}
	ttl, ok := parseInt(args[2])
	switch {
	case !ok:
		return refuse(fsm.RestoreNotInteger, errNotInteger)
	case ttl < 0:
		return refuse(fsm.RestoreNegativeTTL, fsm.ErrRestoreTTL)
	case !fsm.VerifyDumpPayload(args[3]):
		return refuse(fsm.RestoreBadChecksum, fsm.ErrRestoreChecksum)
	case !fsm.CheckDumpPayload(args[3]):
		return refuse(fsm.RestoreBadData, fsm.ErrRestoreBadData)
	}
	if ttl != 0 && !absTTL {
		ttl += c.clockMs() // wraps past the largest deadline, as in Redis: already expired
	}
	if ttl < 0 {
		ttl = 1
	}
	cmd.Args = [][]byte{args[1], args[3]}
	cmd.Int = ttl
	return cmd, ""
}
