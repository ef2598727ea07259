package server

import (
	"sort"
	"strings"

	"kvs/cmdspec"
	"kvs/fsm"
)

// maxCommandName bounds the command names the table can hold; longer names
// are unknown without a lookup.
const maxCommandName = 32

// cmdFlags are Redis's command flags, reported by COMMAND.
type cmdFlags uint32

const (
	flagWrite cmdFlags = 1 << iota
	flagReadonly
	flagDenyOOM
	flagFast
	flagAdmin
	flagNoScript
	flagLoading
	flagStale
	flagPubsub
	flagBlocking
	flagSkipMonitor
	flagSkipSlowlog
	flagAsking
	flagNoAuth
	flagNoMandatoryKeys
	flagNoAsyncLoading
	flagNoMulti
	flagMovableKeys
	flagAllowBusy
	// flagMayReplicate: a command that is not a write but may still be
	// propagated (PUBLISH, a script that may write), which a pause of
	// writes holds. COMMAND does not list it, as Redis does not.
	flagMayReplicate
	// flagDeclared: a command that runs a script or function, whose flags
	// are those it declares when it declares any (commandFlags). kvs's
	// own, not listed by COMMAND.
	flagDeclared
)

// flagNames are the flags' names in the order COMMAND lists them
// (addReplyFlagsForCommand).
var flagNames = []struct {
	f    cmdFlags
	name string
}{
	{flagWrite, "write"}, {flagReadonly, "readonly"}, {flagDenyOOM, "denyoom"},
	{flagAdmin, "admin"}, {flagPubsub, "pubsub"}, {flagNoScript, "noscript"},
	{flagBlocking, "blocking"}, {flagLoading, "loading"}, {flagStale, "stale"},
	{flagSkipMonitor, "skip_monitor"}, {flagSkipSlowlog, "skip_slowlog"},
	{flagAsking, "asking"}, {flagFast, "fast"}, {flagNoAuth, "no_auth"},
	{flagNoMandatoryKeys, "no_mandatory_keys"}, {flagNoAsyncLoading, "no_async_loading"},
	{flagNoMulti, "no_multi"}, {flagMovableKeys, "movablekeys"}, {flagAllowBusy, "allow_busy"},
}

// flagsNamed returns the flags COMMAND names names (space-separated, as
// package cmdspec has Redis's subcommands'); it panics at a name kvs does
// not know, which a table generated from a later Redis may hold.
func flagsNamed(names string) cmdFlags {
	var flags cmdFlags
	for _, name := range strings.Fields(names) {
		found := false
		for _, fn := range flagNames {
			if fn.name == name {
				flags |= fn.f
				found = true
			}
		}
		if !found {
			panic("server: a command flag kvs does not know: " + name)
		}
	}
	return flags
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
	// level is the cluster level (fsm.ApplyLevel's doc) of the release
	// that added the command, 0 for those of every kvs: a script may
	// call it only where the store allows that level (fsm.ParseContext).
	level int

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
	// ordered: the command first waits for what other event loops
	// received before it (order.go): PUBLISH after a SUBSCRIBE.
	ordered bool
	// waits: in cluster mode the command may wait for a Raft round or for
	// another node (KVS.FORWARD's batch, a membership change, an ACL
	// change or CONFIG SET requirepass, proposed through the log), and a
	// loop runs it off the loop (client.runOff). A subcommand may wait
	// when its container does not (waitingSubcommands).
	waits bool
	// blocks: the command, which waits, may wait in every mode (WAIT
	// for its timeout), so it runs off the loop in every mode.
	blocks bool
	// subs names, for a container, the subcommands of Redis's that it
	// answers. commandTable makes each an entry of subcommands, named
	// "container|sub", with Redis's arity and flags (package cmdspec): what
	// the checks before execution read (admit.go) and what COMMAND
	// describes. The container's run or parse executes them, and may rely
	// on the subcommand being one of subs with a good arity.
	subs        string
	subcommands []*command
	// unlisted: a subcommand of a later Redis than the one COMMAND
	// describes (laterSubcommands), checked and answered as the others
	// but not described.
	unlisted bool
	// keys finds the command's keys in its arguments, as Redis does
	// (COMMAND GETKEYS, the slot check of a sharded node). Set by
	// commandTable.
	keys cmdspec.KeyFinder
}

// laterSubcommands are the subcommands of Redis 7.2 and Valkey 9 that kvs
// answers, which the generated table (Redis 7.0.15's) lacks, with their
// arity and flags: CLIENT SETINFO, which go-redis sends as it connects,
// CLUSTER MYSHARDID, and Valkey's slot migration. COMMAND does not
// describe them, as Redis 7.0 has none; the ACL sees the first two as
// their container, the others as themselves.
var laterSubcommands = map[string]cmdspec.Subcommand{
	"client|setinfo":    {Arity: 4, Flags: "noscript loading stale"},
	"cluster|myshardid": {Arity: 2, Flags: "stale"},
	// Valkey 9's atomic slot migration (clustermoves.go), with Valkey's
	// arity and flags, and noscript: they wait for Raft rounds. The ACL
	// sees them as themselves (kvsOwnCategories).
	"cluster|migrateslots":         {Arity: -4, Flags: "admin noscript stale no_async_loading"},
	"cluster|getslotmigrations":    {Arity: 2, Flags: "admin noscript stale no_async_loading"},
	"cluster|cancelslotmigrations": {Arity: 2, Flags: "admin noscript stale no_async_loading"},
}

// waitingSubcommands are the subcommands that wait (command.waits) in a
// container that does not: CLUSTER's moves of slots wait for the meta
// group's Raft rounds (clustermoves.go).
var waitingSubcommands = map[string]bool{
	"cluster|migrateslots": true, "cluster|getslotmigrations": true, "cluster|cancelslotmigrations": true,
}

// subcommand returns the container's subcommand named sub (any case), or
// nil when kvs answers none of that name.
func (cmd *command) subcommand(sub []byte) *command {
	for _, s := range cmd.subcommands {
		if is(sub, s.name[len(cmd.name)+1:]) {
			return s
		}
	}
	return nil
}

// arityOK reports whether args (the name included) are as many as cmd
// takes.
func (cmd *command) arityOK(args [][]byte) bool {
	return (cmd.arity <= 0 || len(args) == cmd.arity) && len(args) >= -cmd.arity
}

// describedSubcommand is the subcommand named sub that COMMAND describes,
// or nil.
func (cmd *command) describedSubcommand(sub []byte) *command {
	if s := cmd.subcommand(sub); s != nil && !s.unlisted {
		return s
	}
	return nil
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
		{name: "memory", arity: -2, flags: r, group: "server", subs: "help purge usage", run: runMemory},

		// connection and server, answered by the server itself
		{name: "ping", arity: -1, flags: flagFast, group: "connection", run: runPing},
		{name: "echo", arity: 2, flags: flagLoading | flagStale | flagFast, group: "connection", run: runEcho},
		{name: "hello", arity: -1, flags: conn | flagNoAuth | flagAllowBusy, group: "connection", run: runHello},
		{name: "auth", arity: -2, flags: conn | flagNoAuth | flagAllowBusy, group: "connection", run: runAuth},
		{name: "acl", arity: -2, flags: flagNoScript | flagLoading | flagStale, group: "server",
			subs: "cat deluser dryrun genpass getuser help list load log save setuser users whoami", run: runACL,
			waits: true},
		{name: "quit", arity: -1, flags: conn | flagNoAuth | flagAllowBusy, group: "connection", run: runQuit},
		{name: "select", arity: 2, flags: flagLoading | flagStale | flagFast, group: "connection", run: runSelect},
		{name: "client", arity: -2, flags: flagNoScript | flagLoading | flagStale, group: "connection",
			subs: "caching getname getredir help id info kill list no-evict pause reply setinfo setname tracking trackinginfo unblock unpause", run: runClient},
		{name: "command", arity: -1, flags: flagLoading | flagStale, group: "server",
			subs: "count docs getkeys getkeysandflags help info list", run: runCommand},
		{name: "time", arity: 1, flags: flagLoading | flagStale | flagFast, group: "server", run: runTime},
		{name: "info", arity: -1, flags: flagLoading | flagStale, group: "server", run: runInfo},
		{name: "config", arity: -2, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server",
			subs: "get help resetstat rewrite set", run: runConfig, waits: true},
		{name: "slowlog", arity: -2, flags: flagAdmin | flagLoading | flagStale, group: "server",
			subs: "get help len reset", run: runSlowlog},
		{name: "monitor", arity: 1, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server", run: runMonitor},
		{name: "latency", arity: -2, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server",
			subs: "help history latest reset", run: runLatency},
		{name: "role", arity: 1, flags: conn, group: "server", run: runRole},

		// Redis Cluster's topology (cluster mode; standalone answers as
		// redis-server without cluster support does)
		{name: "cluster", arity: -2, group: "cluster", subs: "addslots addslotsrange bumpepoch count-failure-reports " +
			"countkeysinslot delslots delslotsrange failover flushslots forget getkeysinslot help info keyslot " +
			"links meet myid myshardid nodes replicas replicate reset saveconfig set-config-epoch setslot shards slaves slots " +
			"migrateslots getslotmigrations cancelslotmigrations",
			run: runCluster},
		{name: "readonly", arity: 1, flags: flagLoading | flagStale | flagFast, group: "cluster", run: runReadonly},
		{name: "readwrite", arity: 1, flags: flagLoading | flagStale | flagFast, group: "cluster", run: runReadwrite},

		// kvs's own cluster administration, and the internal requests of
		// one node to another (KVS.PEER, KVS.FORWARD, KVS.SYNC). Those that
		// do not touch the store run while a script is busy, as Redis
		// Cluster's bus goes on; KVS.FORWARD's batches are answered BUSY.
		{name: "kvs.join", arity: -4, flags: flagAdmin | flagNoScript, group: "server", run: runJoin, waits: true},
		{name: "kvs.remove", arity: 2, flags: flagAdmin | flagNoScript, group: "server", run: runRemove, waits: true},
		{name: "kvs.status", arity: 1, flags: flagLoading | flagStale | flagAllowBusy, group: "server", run: runStatus},
		{name: "kvs.slots", arity: -2, flags: flagAdmin | flagNoScript, group: "server", run: runSlotsCmd, waits: true},
		{name: "kvs.groups", arity: -2, flags: flagAdmin | flagNoScript, group: "server", run: runGroupsCmd, waits: true},
		{name: "kvs.peer", arity: -1, flags: conn | flagAllowBusy, group: "server", run: runPeer},
		{name: "kvs.forward", arity: -2, flags: flagAdmin | flagNoScript, group: "server", run: runForward, waits: true},
		{name: "kvs.sync", arity: -1, flags: flagLoading | flagStale | flagFast | flagAllowBusy, group: "server", run: runSync},
		{name: "kvs.backup", arity: -1, flags: flagAdmin | flagNoScript | flagLoading | flagStale | flagNoMulti, group: "server", run: runBackup},

		// snapshots (backup.go)
		{name: "save", arity: 1, flags: flagAdmin | flagNoScript | flagNoAsyncLoading | flagNoMulti, group: "server", run: runSave},
		{name: "bgsave", arity: -1, flags: flagAdmin | flagNoScript | flagNoAsyncLoading, group: "server", run: runBgsave},
		// Redis's RDB file to a replica or redis-cli --rdb (rdbsync.go)
		{name: "sync", arity: 1, flags: flagAdmin | flagNoScript | flagNoAsyncLoading | flagNoMulti, group: "server", run: runSyncRDB, level: 4},
		{name: "psync", arity: -3, flags: flagAdmin | flagNoScript | flagNoAsyncLoading | flagNoMulti, group: "server", run: runSyncRDB, level: 4},
		{name: "replconf", arity: -1, flags: flagAdmin | flagNoScript | flagLoading | flagStale | flagAllowBusy, group: "server", run: runReplconf, level: 4},
		{name: "lastsave", arity: 1, flags: flagLoading | flagStale | flagFast, group: "server", run: runLastsave},
		{name: "shutdown", arity: -1, flags: flagAdmin | flagNoScript | flagLoading | flagStale | flagNoMulti | flagAllowBusy, group: "server", run: runShutdown},
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
	for name := range cmdspec.Categories {
		if i := strings.IndexByte(name, '|'); i > 0 && m[name[:i]] != nil {
			m[name[:i]].container = true
		}
	}
	for _, cmd := range m {
		cmd.keys = cmdspec.FinderOf(cmd.name)
		if _, _, _, movable := cmdspec.LegacyRange(cmdspec.KeySpecs[cmd.name]); movable {
			cmd.flags |= flagMovableKeys
		}
		if cmd.container != (cmd.subs != "") {
			// A container naming none would refuse every subcommand as
			// unknown.
			panic("server: a container names its subcommands, and only a container: " + cmd.name)
		}
		subs := strings.Fields(cmd.subs)
		sort.Strings(subs)
		for _, sub := range subs {
			name := cmd.name + "|" + sub
			info, ok := cmdspec.Subcommands[name]
			unlisted := false
			if !ok {
				info, unlisted = laterSubcommands[name]
			}
			if !ok && !unlisted {
				panic("server: Redis has no subcommand " + name)
			}
			cmd.subcommands = append(cmd.subcommands, &command{name: name, arity: info.Arity,
				flags: flagsNamed(info.Flags), group: cmd.group, unlisted: unlisted, keys: cmdspec.FinderOf(name),
				waits: waitingSubcommands[name]})
		}
	}
	return m
}
