package server

import (
	"kvs/fsm"
	"strings"
)

// maxCommandName bounds the command names the table can hold; longer names
// are unknown without a lookup.
const maxCommandName = 32

// cmdFlags are Redis's command flags, reported by COMMAND.
type cmdFlags uint16

const (
	flagWrite cmdFlags = 1 << iota
	flagReadonly
	flagDenyOOM
	flagFast
	flagAdmin
	flagNoScript
	flagLoading
	flagStale
	// flagAllowBusy: the command runs while a script is busy (busy.go).
	flagAllowBusy
)

var flagNames = []struct {
	f    cmdFlags
	name string
}{
	{flagWrite, "write"}, {flagReadonly, "readonly"}, {flagDenyOOM, "denyoom"},
	{flagAdmin, "admin"}, {flagNoScript, "noscript"}, {flagLoading, "loading"},
	{flagStale, "stale"}, {flagFast, "fast"}, {flagAllowBusy, "allow_busy"},
}

// command is one entry of the command table.
type command struct {
	name  string // lowercase
	arity int    // Redis's convention: n exactly, -n at least n (name included)
	flags cmdFlags
	// Key positions for COMMAND INFO: first, last (-1: the last argument),
	// step; 0, 0, 0 when the command takes no keys.
	firstKey, lastKey, keyStep int
	group                      string // for COMMAND DOCS

	// A data command has parse: it turns the arguments into an fsm.Command
	// or into an error text; the server proposes writes and reads reads.
	// Every other command has run, which writes its own reply.
	parse func(c *client, args [][]byte) (fsm.Command, string)
	run   func(c *client, args [][]byte)
	// A blocking command (BLPOP, BZPOPMIN, ...) has block instead: it
	// parses the arguments into the command's non-blocking form, its keys
	// and its timeout (blocking.go).
	block func(c *client, args [][]byte) (blockReq, string)
	// runs, of a command with parse, returns the run of a subcommand
	// the server answers itself (SCRIPT KILL), or nil.
	runs func(c *client, args [][]byte) func(*client, [][]byte)
	// A transaction's control command (MULTI, EXEC, DISCARD, WATCH) has
	// tx instead: it manages the pipeline's batch itself (multi.go) and,
	// like executeOne, reports false, having done nothing, when it first
	// had to propose the batch and that was handed to a roundProposer.
	tx func(c *client, id int, args [][]byte) bool

	// container: Redis has subcommands of it ("config|get"), counted
	// apart in INFO commandstats. Set by commandTable.
	container bool
}

// Flag sets the command-table rows use.
const (
	w    = flagWrite | flagDenyOOM
	wf   = flagWrite | flagDenyOOM | flagFast
	wd   = flagWrite
	wdf  = flagWrite | flagFast
	r    = flagReadonly
	rf   = flagReadonly | flagFast
	conn = flagNoScript | flagLoading | flagStale | flagFast
)

// typeCommands are the rows each data type's file (cmd_string.go,
// cmd_hash.go, ...) adds from its init function with registerCommands.
var typeCommands []command

// registerCommands adds a type's rows to the command table.
func registerCommands(rows ...command) { typeCommands = append(typeCommands, rows...) }

func commandTable() map[string]*command {
	list := []command{
		// server
		{name: "dbsize", arity: 1, flags: rf, group: "server", parse: parseDBSize},
		{name: "flushdb", arity: -1, flags: wd, group: "server", parse: parseFlush},
		{name: "flushall", arity: -1, flags: wd, group: "server", parse: parseFlush},
		{name: "memory", arity: -2, flags: r, group: "server", run: runMemory},

		// connection and server, answered by the server itself
		{name: "ping", arity: -1, flags: flagFast, group: "connection", run: runPing},
		{name: "echo", arity: 2, flags: flagFast, group: "connection", run: runEcho},
		{name: "hello", arity: -1, flags: conn | flagAllowBusy, group: "connection", run: runHello},
		{name: "auth", arity: -2, flags: conn | flagAllowBusy, group: "connection", run: runAuth},
		{name: "acl", arity: -2, flags: flagNoScript | flagLoading | flagStale, group: "server", run: runACL},
		{name: "quit", arity: -1, flags: conn | flagAllowBusy, group: "connection", run: runQuit},
		{name: "select", arity: 2, flags: flagLoading | flagStale | flagFast, group: "connection", run: runSelect},
		{name: "client", arity: -2, flags: flagNoScript | flagLoading | flagStale, group: "connection", run: runClient},
		{name: "command", arity: -1, flags: flagLoading | flagStale, group: "server", run: runCommand},
		{name: "time", arity: 1, flags: flagLoading | flagStale | flagFast, group: "server", run: runTime},
		{name: "info", arity: -1, flags: flagLoading | flagStale, group: "server", run: runInfo},
		{name: "config", arity: -2, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server", run: runConfig},
		{name: "slowlog", arity: -2, flags: flagAdmin | flagLoading | flagStale, group: "server", run: runSlowlog},
		{name: "monitor", arity: 1, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server", run: runMonitor},
		{name: "latency", arity: -2, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server", run: runLatency},
		{name: "role", arity: 1, flags: conn, group: "server", run: runRole},

		// Redis Cluster's topology (cluster mode; standalone answers as
		// redis-server without cluster support does)
		{name: "cluster", arity: -2, group: "cluster", run: runCluster},
		{name: "readonly", arity: 1, flags: flagLoading | flagStale | flagFast, group: "cluster", run: runReadonly},
		{name: "readwrite", arity: 1, flags: flagLoading | flagStale | flagFast, group: "cluster", run: runReadwrite},

		// kvs's own cluster administration, and the internal requests of
		// one node to another (KVS.PEER, KVS.FORWARD, KVS.SYNC). Those that
		// do not touch the store run while a script is busy, as Redis
		// Cluster's bus goes on; KVS.FORWARD's batches are answered BUSY.
		{name: "kvs.join", arity: 4, flags: flagAdmin | flagNoScript, group: "server", run: runJoin},
		{name: "kvs.remove", arity: 2, flags: flagAdmin | flagNoScript, group: "server", run: runRemove},
		{name: "kvs.status", arity: 1, flags: flagLoading | flagStale | flagAllowBusy, group: "server", run: runStatus},
		{name: "kvs.peer", arity: -1, flags: conn | flagAllowBusy, group: "server", run: runPeer},
		{name: "kvs.forward", arity: -2, flags: flagAdmin | flagNoScript, group: "server", run: runForward},
		{name: "kvs.sync", arity: 1, flags: flagLoading | flagStale | flagFast | flagAllowBusy, group: "server", run: runSync},
		{name: "kvs.backup", arity: 1, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server", run: runBackup},

		// snapshots (backup.go)
		{name: "save", arity: 1, flags: flagAdmin | flagNoScript, group: "server", run: runSave},
		{name: "bgsave", arity: -1, flags: flagAdmin | flagNoScript, group: "server", run: runBgsave},
		{name: "lastsave", arity: 1, flags: flagLoading | flagStale | flagFast, group: "server", run: runLastsave},
		{name: "shutdown", arity: -1, flags: flagAdmin | flagNoScript | flagLoading | flagStale | flagAllowBusy, group: "server", run: runShutdown},
	}
	list = append(list, typeCommands...)
	m := make(map[string]*command, len(list))
	for i := range list {
		if len(list[i].name) > maxCommandName {
			panic("server: command name too long: " + list[i].name)
		}
		if m[list[i].name] != nil {
			panic("server: command registered twice: " + list[i].name)
		}
		m[list[i].name] = &list[i]
	}
	for name := range redisCategories {
		if i := strings.IndexByte(name, '|'); i > 0 && m[name[:i]] != nil {
			m[name[:i]].container = true
		}
	}
	return m
}
