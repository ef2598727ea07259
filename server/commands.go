package server

import (
	"kvs/fsm"
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
)

var flagNames = []struct {
	f    cmdFlags
	name string
}{
	{flagWrite, "write"}, {flagReadonly, "readonly"}, {flagDenyOOM, "denyoom"},
	{flagAdmin, "admin"}, {flagNoScript, "noscript"}, {flagLoading, "loading"},
	{flagStale, "stale"}, {flagFast, "fast"},
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
}

func commandTable() map[string]*command {
	const (
		w    = flagWrite | flagDenyOOM
		wf   = flagWrite | flagDenyOOM | flagFast
		wd   = flagWrite
		wdf  = flagWrite | flagFast
		r    = flagReadonly
		rf   = flagReadonly | flagFast
		conn = flagNoScript | flagLoading | flagStale | flagFast
	)
	list := []command{
		// strings
		{name: "get", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGet},
		{name: "set", arity: -3, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseSet},
		{name: "setnx", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseSetNX},
		{name: "setex", arity: 4, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseSetEx},
		{name: "psetex", arity: 4, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseSetEx},
		{name: "getset", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGetSet},
		{name: "getdel", arity: 2, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGetDel},
		{name: "getex", arity: -2, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGetEx},
		{name: "mget", arity: -2, flags: rf, firstKey: 1, lastKey: -1, keyStep: 1, group: "string", parse: parseMGet},
		{name: "mset", arity: -3, flags: w, firstKey: 1, lastKey: -1, keyStep: 2, group: "string", parse: parseMSet},
		{name: "msetnx", arity: -3, flags: w, firstKey: 1, lastKey: -1, keyStep: 2, group: "string", parse: parseMSet},
		{name: "append", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseAppend},
		{name: "strlen", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseStrLen},
		{name: "getrange", arity: 4, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGetRange},
		{name: "substr", arity: 4, flags: r, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseGetRange},
		{name: "setrange", arity: 4, flags: w, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseSetRange},
		{name: "incr", arity: 2, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseIncr},
		{name: "decr", arity: 2, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseIncr},
		{name: "incrby", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseIncrBy},
		{name: "decrby", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseIncrBy},
		{name: "incrbyfloat", arity: 3, flags: wf, firstKey: 1, lastKey: 1, keyStep: 1, group: "string", parse: parseIncrByFloat},

		// keys
		{name: "del", arity: -2, flags: wd, firstKey: 1, lastKey: -1, keyStep: 1, group: "generic", parse: parseDel},
		{name: "unlink", arity: -2, flags: wdf, firstKey: 1, lastKey: -1, keyStep: 1, group: "generic", parse: parseDel},
		{name: "exists", arity: -2, flags: rf, firstKey: 1, lastKey: -1, keyStep: 1, group: "generic", parse: parseExists},
		{name: "touch", arity: -2, flags: rf, firstKey: 1, lastKey: -1, keyStep: 1, group: "generic", parse: parseExists},
		{name: "type", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseType},
		{name: "rename", arity: 3, flags: wd, firstKey: 1, lastKey: 2, keyStep: 1, group: "generic", parse: parseRename},
		{name: "renamenx", arity: 3, flags: wdf, firstKey: 1, lastKey: 2, keyStep: 1, group: "generic", parse: parseRename},
		{name: "keys", arity: 2, flags: r, group: "generic", parse: parseKeys},
		{name: "scan", arity: -2, flags: r, group: "generic", parse: parseScan},
		{name: "randomkey", arity: 1, flags: r, group: "generic", parse: parseRandomKey},
		{name: "expire", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseExpire},
		{name: "pexpire", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseExpire},
		{name: "expireat", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseExpire},
		{name: "pexpireat", arity: -3, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseExpire},
		{name: "ttl", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseTTL},
		{name: "pttl", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseTTL},
		{name: "expiretime", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseTTL},
		{name: "pexpiretime", arity: 2, flags: rf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parseTTL},
		{name: "persist", arity: 2, flags: wdf, firstKey: 1, lastKey: 1, keyStep: 1, group: "generic", parse: parsePersist},

		// server
		{name: "dbsize", arity: 1, flags: rf, group: "server", parse: parseDBSize},
		{name: "flushdb", arity: -1, flags: wd, group: "server", parse: parseFlush},
		{name: "flushall", arity: -1, flags: wd, group: "server", parse: parseFlush},
		{name: "memory", arity: -2, flags: r, group: "server", run: runMemory},

		// connection and server, answered by the server itself
		{name: "ping", arity: -1, flags: flagFast, group: "connection", run: runPing},
		{name: "echo", arity: 2, flags: flagFast, group: "connection", run: runEcho},
		{name: "hello", arity: -1, flags: conn, group: "connection", run: runHello},
		{name: "auth", arity: -2, flags: conn, group: "connection", run: runAuth},
		{name: "quit", arity: -1, flags: conn, group: "connection", run: runQuit},
		{name: "select", arity: 2, flags: flagLoading | flagStale | flagFast, group: "connection", run: runSelect},
		{name: "client", arity: -2, flags: flagNoScript | flagLoading | flagStale, group: "connection", run: runClient},
		{name: "command", arity: -1, flags: flagLoading | flagStale, group: "server", run: runCommand},
		{name: "time", arity: 1, flags: flagLoading | flagStale | flagFast, group: "server", run: runTime},
		{name: "info", arity: -1, flags: flagLoading | flagStale, group: "server", run: runInfo},
		{name: "config", arity: -2, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server", run: runConfig},
		{name: "role", arity: 1, flags: conn, group: "server", run: runRole},

		// Redis Cluster's topology (cluster mode; standalone answers as
		// redis-server without cluster support does)
		{name: "cluster", arity: -2, group: "cluster", run: runCluster},
		{name: "readonly", arity: 1, flags: flagLoading | flagStale | flagFast, group: "cluster", run: runReadonly},
		{name: "readwrite", arity: 1, flags: flagLoading | flagStale | flagFast, group: "cluster", run: runReadwrite},

		// kvs's own cluster administration, and the internal requests of
		// one node to another (KVS.PEER, KVS.FORWARD, KVS.SYNC)
		{name: "kvs.join", arity: 4, flags: flagAdmin | flagNoScript, group: "server", run: runJoin},
		{name: "kvs.remove", arity: 2, flags: flagAdmin | flagNoScript, group: "server", run: runRemove},
		{name: "kvs.status", arity: 1, flags: flagLoading | flagStale, group: "server", run: runStatus},
		{name: "kvs.peer", arity: 1, flags: conn, group: "server", run: runPeer},
		{name: "kvs.forward", arity: 2, flags: flagAdmin | flagNoScript, group: "server", run: runForward},
		{name: "kvs.sync", arity: 1, flags: flagLoading | flagStale | flagFast, group: "server", run: runSync},
	}
	m := make(map[string]*command, len(list))
	for i := range list {
		if len(list[i].name) > maxCommandName {
			panic("server: command name too long: " + list[i].name)
		}
		m[list[i].name] = &list[i]
	}
	return m
}
