package server

import (
	"math/rand/v2"
	"strings"

	"kvs/fsm"
)

// Functions: FCALL, FCALL_RO and FUNCTION LOAD / DELETE / FLUSH / LIST /
// STATS / KILL / DUMP / RESTORE. FCALL of a function that may write is
// proposed as one OpFCall write, with a seed and an instruction budget as
// EVAL's; FCALL_RO and FCALL of a no-writes function are OpFCallRO reads.
// The libraries live in the store (fsm/function.go); LOAD, DELETE, FLUSH
// and RESTORE are writes through the log, so every node has the same ones.

func init() {
	const script = flagNoScript | flagStale | flagSkipMonitor | flagNoMandatoryKeys | flagDeclared
	registerCommands(
		command{name: "fcall", arity: -3, flags: script | flagMayReplicate, group: "scripting", parse: parseFCall},
		command{name: "fcall_ro", arity: -3, flags: script | flagReadonly, group: "scripting", parse: parseFCall},
		command{name: "function", arity: -2, flags: flagNoScript, group: "scripting",
			subs: "delete dump flush kill list load restore stats", parse: parseFunction, runs: functionSubcommands},
	)
	commandDocs["fcall"] = [2]string{"Invokes a function.", "7.0.0"}
	commandDocs["fcall_ro"] = [2]string{"Invokes a read-only function.", "7.0.0"}
	commandDocs["function"] = [2]string{"A container for function commands.", "7.0.0"}
}

// parseFCall parses FCALL function numkeys key... arg... and FCALL_RO.
// Whether the function exists, and whether it may write, is decided where
// the call runs (apply, or the read), not here: earlier commands of the
// same pipeline may load or delete it. Here the node's current libraries
// decide only whether FCALL is a read (a no-writes function) or a write;
// a bad key count is a read too, answered "Function not found" first, as
// Redis looks for the function first.
func parseFCall(c *client, args [][]byte) (fsm.Command, string) {
	ro := len(args[0]) == len("fcall_ro")
	found, noWrites, allowOOM := c.s.cfg.Store.Function(string(args[1]))
	n, ok := parseInt(args[2])
	e := ""
	switch {
	case !ok:
		e = "ERR Bad number of keys provided"
	case n > int64(len(args)-3):
		e = errTooManyKeys
	case n < 0:
		e = errNegativeKeys
	}
	if e != "" {
		// Which error it is depends on the libraries where it runs.
		return fsm.Command{Op: fsm.OpFCallRO, Flags: fsm.FlagFCallBadKeys, Args: [][]byte{args[1], []byte(e)}}, ""
	}
	cmd := fsm.Command{Op: fsm.OpFCall, Int: n, Int2: rand.Int64()}
	switch {
	case ro:
		cmd.Op, cmd.Flags = fsm.OpFCallRO, fsm.FlagFCallRO
	case found && noWrites:
		cmd.Op = fsm.OpFCallRO
	default:
		// Only a function that runs inside the log's apply has a budget.
		cmd.Float = c.s.scriptBudget()
	}
	if found && cmd.Op == fsm.OpFCall && c.s.maxMemory.Load() > 0 {
		if e := c.scriptOOM(scriptFlags{shebang: true, allowOOM: allowOOM}); e != "" {
			return fsm.Command{}, e
		}
	}
	cmd.Args = append([][]byte{args[1]}, args[3:]...)
	c.setScriptUser(&cmd)
	return cmd, ""
}

// parseFunction parses the FUNCTION subcommands but KILL
// (functionSubcommands answers it).
func parseFunction(c *client, args [][]byte) (fsm.Command, string) {
	sub := args[1]
	switch {
	case is(sub, "load"):
		return parseFunctionLoad(c, args)
	case is(sub, "delete"):
		return fsm.Command{Op: fsm.OpFunctionDelete, Args: args[2:3]}, ""
	case is(sub, "flush") && len(args) <= 3:
		if len(args) == 3 && !is(args[2], "sync") && !is(args[2], "async") {
			return fsm.Command{}, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option"
		}
		return fsm.Command{Op: fsm.OpFunctionFlush}, ""
	case is(sub, "flush"):
		return fsm.Command{}, errSubcommandSyntax(sub, "FUNCTION")
	case is(sub, "list"):
		return parseFunctionList(args)
	case is(sub, "stats"):
		return fsm.Command{Op: fsm.OpFunctionStats}, ""
	case is(sub, "dump"):
		return fsm.Command{Op: fsm.OpFunctionDump}, ""
	case is(sub, "restore"):
		return parseFunctionRestore(c, args)
	}
	// KILL: a function never runs past its instruction budget, and never
	// while another command waits for it on the same node.
	return fsm.Command{}, "NOTBUSY No scripts in execution right now."
}

// parseFunctionLoad parses FUNCTION LOAD [REPLACE] code and checks its
// header, which Redis checks first. The rest (whether the library exists,
// whether the code loads, whether its function names are free) is
// decided at apply, against the libraries as the log has them there.
func parseFunctionLoad(c *client, args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpFunctionLoad}
	last := len(args) - 1
	for _, opt := range args[2:last] {
		if !is(opt, "replace") {
			return fsm.Command{}, "ERR Unknown option given: " + spacedArg(opt)
		}
		cmd.Flags = fsm.FlagFunctionReplace
	}
	if e := fsm.CheckLibraryHeader(args[last]); e != "" {
		return fsm.Command{}, e
	}
	cmd.Args = args[last:]
	return cmd, ""
}

// parseFunctionRestore parses FUNCTION RESTORE payload [FLUSH|APPEND|
// REPLACE] and checks the payload's version and checksum, in Redis's
// order. Reading the libraries, and whether they collide with the ones
// loaded, is decided at apply.
func parseFunctionRestore(c *client, args [][]byte) (fsm.Command, string) {
	if len(args) > 4 {
		return fsm.Command{}, "ERR unknown subcommand or wrong number of arguments for '" + spacedArg(args[1]) + "'. Try FUNCTION HELP."
	}
	cmd := fsm.Command{Op: fsm.OpFunctionRestore, Int: fsm.RestoreAppend, Args: args[2:3]}
	if len(args) == 4 {
		switch {
		case is(args[3], "append"):
		case is(args[3], "replace"):
			cmd.Int = fsm.RestoreReplace
		case is(args[3], "flush"):
			cmd.Int = fsm.RestoreFlush
		default:
			return fsm.Command{}, "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
		}
	}
	if !fsm.VerifyDumpPayload(args[2]) {
		return fsm.Command{}, "ERR DUMP payload version or checksum are wrong"
	}
	return cmd, ""
}

// parseFunctionList parses FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE],
// each option at most once, as Redis does.
func parseFunctionList(args [][]byte) (fsm.Command, string) {
	cmd := fsm.Command{Op: fsm.OpFunctionList}
	for i := 2; i < len(args); i++ {
		switch {
		case cmd.Flags&fsm.FlagFunctionWithCode == 0 && is(args[i], "withcode"):
			cmd.Flags |= fsm.FlagFunctionWithCode
		case cmd.Flags&fsm.FlagFunctionPattern == 0 && is(args[i], "libraryname"):
			if i == len(args)-1 {
				return fsm.Command{}, "ERR library name argument was not given"
			}
			i++
			cmd.Flags |= fsm.FlagFunctionPattern
			cmd.Args = args[i : i+1]
		default:
			return fsm.Command{}, "ERR Unknown argument " + spacedArg(args[i])
		}
	}
	return cmd, ""
}

// spacedArg is an argument quoted in an error as Redis's
// addReplyErrorFormat quotes it: trailing CR and LF cut, the others made
// spaces, since an error reply is one line.
func spacedArg(arg []byte) string {
	s := strings.TrimRight(string(arg), "\r\n")
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
