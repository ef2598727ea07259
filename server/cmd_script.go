package server

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"kvs/acl"
	"kvs/fsm"
	"kvs/resp"
)

// Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT. A script that
// may write is proposed as one OpEval write, carrying the seed its
// math.random and random commands use and its instruction budget, so it
// runs identically inside apply on every replica; a read-only one (the
// _RO forms, a "#!lua flags=no-writes" body) is an OpEvalRO read answered
// locally. The commands a script calls are parsed here too, by
// parseScriptCall, which the store calls under its lock.

func init() {
	const script = flagNoScript | flagStale | flagSkipMonitor | flagNoMandatoryKeys | flagDeclared
	registerCommands(
		command{name: "eval", arity: -3, flags: script | flagMayReplicate, group: "scripting", parse: evalParser(false, false)},
		command{name: "evalsha", arity: -3, flags: script | flagMayReplicate, group: "scripting", parse: evalParser(true, false)},
		command{name: "eval_ro", arity: -3, flags: script | flagReadonly, group: "scripting", parse: evalParser(false, true)},
		command{name: "evalsha_ro", arity: -3, flags: script | flagReadonly, group: "scripting", parse: evalParser(true, true)},
		command{name: "script", arity: -2, flags: flagNoScript, group: "scripting", subs: "exists flush kill load",
			parse: parseScript, runs: scriptSubcommands},
	)
	for name, doc := range map[string][2]string{
		"eval":       {"Execute a Lua script server side", "2.6.0"},
		"evalsha":    {"Execute a Lua script server side", "2.6.0"},
		"eval_ro":    {"Execute a read-only Lua script server side", "7.0.0"},
		"evalsha_ro": {"Execute a read-only Lua script server side", "7.0.0"},
		"script":     {"A container for Lua scripts management commands", "2.6.0"},
	} {
		commandDocs[name] = doc
	}
}

// defaultLuaTimeLimit is lua-time-limit's (busy-reply-threshold's)
// default, Redis's: after 5 s a script is busy (busy.go).
const defaultLuaTimeLimit = 5000

func (s *Server) luaTimeLimit() int64 {
	if v := s.luaLimit.Load(); v != nil {
		return *v
	}
	return defaultLuaTimeLimit
}

const (
	errScriptWriteRO = "ERR Write commands are not allowed from read-only scripts."
	errNegativeKeys  = "ERR Number of keys can't be negative"
	errTooManyKeys   = "ERR Number of keys can't be greater than number of args"
)

// evalParser returns the parser of EVAL script numkeys key... arg... (sha:
// EVALSHA, naming the script by its SHA1; ro: the _RO form).
func evalParser(sha, ro bool) func(c *client, args [][]byte) (fsm.Command, string) {
	return func(c *client, args [][]byte) (fsm.Command, string) { return parseEval(c, args, sha, ro) }
}

func parseEval(c *client, args [][]byte, sha, ro bool) (fsm.Command, string) {
	n, ok := parseInt(args[2])
	switch {
	case !ok:
		return fsm.Command{}, errNotInteger
	case n < 0:
		return fsm.Command{}, errNegativeKeys
	case n > int64(len(args)-3):
		return fsm.Command{}, errTooManyKeys
	}
	body := args[1]
	cmd := fsm.Command{Op: fsm.OpEval, Int: n, Int2: rand.Int64()}
	if sha {
		// Only the shebang line matters here; the body is the store's.
		// A script missing here may be loaded by an earlier command of
		// the same pipeline: the store answers NOSCRIPT where it runs.
		var line []byte
		var ok bool
		if !c.grp.remote() {
			line, ok = c.grp.store.ScriptShebang(args[1])
		}
		if !ok && c.s.router.sharded() {
			if body, found := c.s.scriptElsewhere(args[1]); found {
				// EVAL cached it in another group of the node: the
				// body goes to this one, which caches it too, as one
				// Redis node's cache serves every key.
				evalArgs := slices.Clone(args)
				evalArgs[1] = body
				return parseEval(c, evalArgs, false, ro)
			}
		}
		body = line
		cmd.Flags = fsm.FlagScriptSHA
	}
	sf, e := shebangFlags(body)
	if e != "" {
		return fsm.Command{}, e
	}
	noWrites := sf.noWrites
	if ro && !noWrites && bytes.HasPrefix(body, []byte("#!")) {
		// A script with a shebang may write unless it says no-writes.
		return fsm.Command{}, fsm.ErrFunctionWriteRO
	}
	switch {
	case ro:
		cmd.Op = fsm.OpEvalRO
	case noWrites && !sha && !c.scriptCached(body):
		// EVAL caches the body, which is a write, even of a no-writes
		// script; once cached it runs as a read.
		cmd.Flags |= fsm.FlagScriptNoWrites
	case noWrites:
		cmd.Op = fsm.OpEvalRO
	}
	if cmd.Op == fsm.OpEval {
		// Only a script that runs inside the log's apply has a budget.
		cmd.Float = c.s.scriptBudget()
	}
	if cmd.Op == fsm.OpEval && c.s.maxMemory.Load() > 0 {
		if e := c.scriptOOM(sf); e != "" {
			return fsm.Command{}, e
		}
		if !sf.shebang && c.oomRefusal() != "" {
			// As Redis's pre_command_oom_state: the script runs, but
			// its first denyoom call before any write is refused.
			cmd.Flags |= fsm.FlagScriptOOM
		}
	}
	if cmd.Op == fsm.OpEval && cmd.Flags&fsm.FlagScriptNoWrites == 0 && !sf.shebang && c.s.tooFewReplicas(c.writeGroup()) {
		// A script that declares flags and may write was refused
		// before it ran (admit); one that declares none runs, and its
		// first write is refused (Redis's scriptVerifyWriteCommandAllow).
		cmd.Flags |= fsm.FlagScriptNoReplicas
	}
	cmd.Args = append([][]byte{args[1]}, args[3:]...)
	c.setScriptUser(&cmd)
	return cmd, ""
}

// scriptOOM is the error a script or function with flags sf gets over
// maxmemory: one that may write and does not say allow-oom is denyoom as
// a whole (Redis's scriptFlagsToCmdFlags), refused before it starts.
func (c *client) scriptOOM(sf scriptFlags) string {
	if !sf.shebang || sf.noWrites || sf.allowOOM {
		return ""
	}
	return c.oomRefusal()
}

// setScriptUser makes the script cmd check its calls as c's user, unless
// that user may run anything (checked before each command: aclAllows).
func (c *client) setScriptUser(cmd *fsm.Command) {
	if !c.auth.fast {
		c.s.scriptUserOn(cmd, c.auth.name, c.s.aclState())
	}
}

// scriptUserOn makes the script cmd check its calls as user name, with
// the rule line st has for it when the node is sharded: the script runs
// in a data group, whose store has no ACL table.
func (s *Server) scriptUserOn(cmd *fsm.Command, name string, st *acl.Table) {
	if !s.router.sharded() {
		fsm.SetScriptUser(cmd, name)
		return
	}
	line, ok := st.Lines[name]
	if !ok {
		line = "off" // a user the table lost: refused, as by the table
	}
	fsm.SetScriptUserRules(cmd, name, line)
}

// scriptCached reports whether body is in the script cache of the
// command's group: false for a group held elsewhere, whose leader's store
// decides.
func (c *client) scriptCached(body []byte) bool {
	if c.grp.remote() {
		return false
	}
	_, ok := c.grp.store.Script(fsm.ScriptSHA(body))
	return ok
}

// scriptShebang is Store.ScriptShebang over the node's groups: the first
// line of script sha, from the first group that holds it.
func (s *Server) scriptShebang(sha []byte) ([]byte, bool) {
	for g := range s.router.local() {
		if line, ok := g.store.ScriptShebang(sha); ok {
			return line, true
		}
	}
	return nil, false
}

// scriptElsewhere returns the body of script sha from the first of the
// node's groups that holds it.
func (s *Server) scriptElsewhere(sha []byte) ([]byte, bool) {
	for g := range s.router.local() {
		if body, ok := g.store.Script(string(sha)); ok {
			return body, true
		}
	}
	return nil, false
}

// scriptsElsewhere marks in r, SCRIPT EXISTS's answer from one group,
// the scripts of shas another group of the node holds: EVAL caches a script
// in its keys' group, and EVALSHA finds it in any (scriptElsewhere), as
// one Redis node's cache serves every key.
func (s *Server) scriptsElsewhere(shas [][]byte, r *fsm.Reply) {
	if r.Kind != fsm.ReplyArray || len(r.Array) != len(shas) {
		return
	}
	for i := range r.Array {
		if e := &r.Array[i]; e.Kind == fsm.ReplyInt && e.Int == 0 {
			if _, ok := s.scriptElsewhere(shas[i]); ok {
				e.Int = 1
			}
		}
	}
}

// shebangNoWrites reads a "#!lua flags=..." first line: whether it says
// no-writes, or Redis's error for a shebang it does not accept.
func shebangNoWrites(body []byte) (bool, string) {
	f, e := shebangFlags(body)
	return f.noWrites, e
}

// scriptFlags are the flags of a script's shebang that kvs acts on.
type scriptFlags struct {
	shebang  bool // it has one: the flags are the script's, not EVAL's
	noWrites bool
	allowOOM bool
}

// shebangFlags reads a "#!lua flags=..." first line, split as Redis's
// sdssplitargs splits it, or returns Redis's error for a shebang it does
// not accept.
func shebangFlags(body []byte) (scriptFlags, string) {
	var sf scriptFlags
	if !bytes.HasPrefix(body, []byte("#!")) {
		return sf, ""
	}
	sf.shebang = true
	i := bytes.IndexByte(body, '\n')
	if i < 0 {
		return sf, "ERR Invalid script shebang"
	}
	parts, ok := resp.SplitArgs(string(body[:i]))
	if !ok || len(parts) == 0 {
		return sf, "ERR Invalid engine in script shebang"
	}
	if parts[0] != "#!lua" {
		return sf, "ERR Unexpected engine in script shebang: " + spacedArg([]byte(parts[0]))
	}
	for _, p := range parts[1:] {
		flags, ok := strings.CutPrefix(p, "flags=")
		if !ok {
			return sf, "ERR Unknown lua shebang option: " + spacedArg([]byte(p))
		}
		if flags == "" {
			continue
		}
		for _, f := range strings.Split(flags, ",") {
			switch f {
			case "no-writes":
				sf.noWrites = true
			case "allow-oom":
				sf.allowOOM = true
			case "allow-stale", "no-cluster", "allow-cross-slot-keys":
			default:
				return sf, "ERR Unexpected flag in script shebang: " + spacedArg([]byte(f))
			}
		}
	}
	return sf, ""
}

// parseScript parses SCRIPT LOAD / EXISTS / FLUSH, and KILL with the
// wrong number of arguments (scriptSubcommands answers the right one).
func parseScript(c *client, args [][]byte) (fsm.Command, string) {
	sub := args[1]
	switch {
	case is(sub, "load"):
		if _, e := shebangNoWrites(args[2]); e != "" {
			return fsm.Command{}, e
		}
		if e := fsm.CompileScript(args[2]); e != "" {
			return fsm.Command{}, e
		}
		return fsm.Command{Op: fsm.OpScriptLoad, Args: args[2:3]}, ""
	case is(sub, "exists"):
		return fsm.Command{Op: fsm.OpScriptExists, Args: args[2:]}, ""
	case is(sub, "flush"):
		if len(args) > 3 || len(args) == 3 && !is(args[2], "sync") && !is(args[2], "async") {
			return fsm.Command{}, "ERR SCRIPT FLUSH only support SYNC|ASYNC option"
		}
		return fsm.Command{Op: fsm.OpScriptFlush}, ""
	}
	// KILL: a script never runs past its instruction budget, and never
	// while another command waits for it on the same node.
	return fsm.Command{}, "NOTBUSY No scripts in execution right now."
}

// InstallScriptParser gives cfg.Store the parser redis.call uses before
// the Server exists, so that the scripts and functions the store applies
// while it recovers its log (durable mode's append log, a cluster node's
// raft log) run their commands as they did when first applied; without it
// every redis.call of a replayed script would fail, and the store would
// come back without their writes. New installs its own in its place.
func InstallScriptParser(cfg Config) {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, commands: commandTable()}
	s.acl.cmds = newACLCommands(s.commands)
	s.maxBulk.Store(cfg.ProtoMaxBulkLen)
	// The settings a new server starts with, which parsers read
	// (hll-sparse-max-bytes; stream-node-max-* in streamNodeLimits).
	s.hllSparseMax.Store(fsm.HLLSparseMaxBytes)
	s.router.init(&s.cfg)
	s.installScriptParsers()
}

// installScriptParsers gives each group's store its parser.
func (s *Server) installScriptParsers() {
	for g := range s.router.local() {
		g.store.SetCommandParser(s.scriptParser(g.index))
	}
}

// scriptParser is the CommandParser of group g's store.
func (s *Server) scriptParser(g int) fsm.CommandParser {
	return func(p *fsm.ParseContext, args [][]byte) (fsm.Command, fsm.Reply, bool) {
		return s.parseScriptCall(g, p, args)
	}
}

// errScriptNonLocal is Redis Cluster's refusal of a script's call on a key
// its node does not serve: on a sharded kvs node, a key of another group
// than the one the script runs in (its declared keys', or the home
// group's).
const errScriptNonLocal = "ERR Script attempted to access a non local key in a cluster node"

// parseScriptCall is group g's store's CommandParser: redis.call's
// arguments as the command table parses them, with Redis's
// script-specific refusals. TIME answers the script's clock, the entry's.
// On a sharded node a call on a key of another group is refused: the
// script runs in g's store alone. Which group that is comes from the slot
// map the cluster was made with (router.startSlots), not the one in force,
// which a replica applying this entry, or replaying it, may have at
// another version: the refusal is the same everywhere and at every
// replay. Once a move of slots has told the store which slots it owns
// (ParseContext.SlotsTold), the store refuses such calls itself, by the
// slots it owns at the entry, and the map the cluster was made with is no
// longer the truth.
func (s *Server) parseScriptCall(g int, p *fsm.ParseContext, args [][]byte) (fsm.Command, fsm.Reply, bool) {
	fail := func(text string) (fsm.Command, fsm.Reply, bool) {
		return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyError, Str: text}, true
	}
	sc, _ := p.Scratch.(*scriptScratch)
	if sc == nil || sc.c.s != s {
		// The first call in this interpreter, or the first since New
		// replaced InstallScriptParser's parser.
		sc = &scriptScratch{c: client{s: s, proto: 2, fd: -1}}
		p.Scratch = sc
	}
	cmd := sc.command(s, args[0])
	if cmd != nil && cmd.level > p.Level {
		// A command the older kvs of a cluster being upgraded lacks:
		// unknown here too, as it is on its replicas.
		cmd = nil
	}
	if p.CheckOnly {
		return s.scriptACLCheck(p, sc, cmd, args)
	}
	spec := cmd
	if cmd != nil && cmd.subcommands != nil && len(args) > 1 {
		spec = cmd.subcommand(args[1])
	}
	switch {
	case spec == nil:
		return fail("ERR Unknown Redis command called from script")
	case !spec.arityOK(args):
		return fail("ERR Wrong number of args calling Redis command from script")
	case spec.flags&flagNoScript != 0:
		return fail("ERR This Redis command is not allowed from script")
	}
	if p.User != "" {
		if e := s.scriptACLRefusal(p, sc, cmd, args); e != "" {
			return fail(e)
		}
	}
	switch {
	case p.ReadOnly && spec.flags&(flagWrite|flagMayReplicate) != 0:
		// Refused before its arguments are parsed, as in Redis, which
		// counts what may be propagated (PUBLISH) as a write here, so
		// that a read-only script may run under a pause of writes.
		return fail(errScriptWriteRO)
	case p.NoReplicas && !p.Dirty && spec.flags&flagWrite != 0:
		return fail(errNoReplicas)
	case p.OOM && !p.Dirty && spec.flags&flagDenyOOM != 0:
		return fail(errOOM)
	}
	if spec.flags&flagWrite != 0 {
		p.Dirty = true
	}
	// Last, as Redis's scriptVerifyClusterState. A store told its slots
	// refuses the others' keys itself, by what it owns at this entry.
	if s.router.sharded() && !p.SlotsTold {
		if slot, ok := commandSlot(spec, args, &sc.c.slotKeys); !ok || (slot != noSlot && int(s.router.startSlots[slot]) != g) {
			return fail(errScriptNonLocal)
		}
	}
	c := &sc.c
	c.script = p
	c.errIfFound = ""
	c.db = p.DB // the script's database, which its calls name
	if s.monitoring.Load() != 0 {
		s.feedMonitors("lua", p.DB, spec, args)
	}
	switch {
	case cmd.name == "select":
		// The script's database for the rest of the script; the
		// caller's connection keeps its own.
		n, e := dbIndex(args[1])
		switch {
		case e != "":
			return fail(e)
		case n != 0 && s.router.sharded():
			return fail("ERR SELECT is not allowed in cluster mode")
		case !s.validDB(n):
			return fail(errDBIndex)
		}
		p.DB = uint16(n)
		return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyStatus, Str: "OK"}, true
	case cmd.name == "time":
		sec, ms := p.Now/1000, p.Now%1000
		return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyArray, Array: []fsm.Reply{
			{Kind: fsm.ReplyBulk, Bulk: strconv.AppendInt(nil, sec, 10)},
			{Kind: fsm.ReplyBulk, Bulk: strconv.AppendInt(nil, ms*1000, 10)},
		}}, true
	case cmd.name == "ping":
		if len(args) == 2 {
			return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyBulk, Bulk: args[1]}, true
		}
		return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyStatus, Str: "PONG"}, true
	case cmd.name == "echo":
		return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyBulk, Bulk: args[1]}, true
	case cmd.block != nil:
		// Blocking commands act as their non-blocking forms, as in Redis.
		req, e := cmd.block(c, args)
		if e != "" {
			return fail(e)
		}
		req.cmd.DB = c.db
		return req.cmd, fsm.Reply{}, false
	case cmd.name == "memory":
		return scriptMemory(args)
	case cmd.name == "publish", cmd.name == "spublish":
		return scriptPublish(cmd, args)
	case cmd.parse == nil:
		return fail("ERR This Redis command is not allowed from script")
	}
	fc, e := cmd.parse(c, args)
	if e != "" {
		return fail(e)
	}
	fc.DB = c.db
	if c.errIfFound != "" {
		return fail(c.errIfFound)
	}
	if fc.Op == fsm.OpInvalid {
		return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyArray, Array: []fsm.Reply{
			{Kind: fsm.ReplyBulk, Bulk: []byte("0")}, {Kind: fsm.ReplyArray},
		}}, true
	}
	return fc, fsm.Reply{}, false
}

// scriptScratch is what parseScriptCall keeps in one interpreter from
// call to call (fsm.ParseContext.Scratch): the client the command parsers
// are given, and the commands last called, by the name the script used.
type scriptScratch struct {
	c client
	// The user the last call was checked as, compiled from its rule
	// line aclLine (aclFound: the table had one).
	aclName  string
	aclLine  string
	aclFound bool
	aclUser  *acl.User
	aclSet   bool

	seen [8]struct {
		name [maxCommandName]byte
		n    int
		cmd  *command
	}
}

// command returns the command named name (any case), nil if there is
// none, looking it up in s.commands only when the name was not the last
// called that falls in its slot.
func (sc *scriptScratch) command(s *Server, name []byte) *command {
	if len(name) == 0 || len(name) > maxCommandName {
		return nil
	}
	e := &sc.seen[(len(name)+int(name[0]|0x20))%len(sc.seen)]
	if e.cmd != nil && string(name) == string(e.name[:e.n]) {
		return e.cmd
	}
	var lower [maxCommandName]byte
	for i, ch := range name {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		lower[i] = ch
	}
	cmd := s.commands[string(lower[:len(name)])]
	if cmd != nil {
		e.n, e.cmd = copy(e.name[:], name), cmd
	}
	return cmd
}

// clockMs is the clock a parser turns relative times into deadlines with:
// inside a script the entry's clock, so that every replica computes the
// same deadline; otherwise the wall clock.
func (c *client) clockMs() int64 {
	if c.script != nil {
		return c.script.Now
	}
	return time.Now().UnixMilli()
}

// seed draws a seed for a command's random choices (SPOP): inside a
// script from the script's seeded source, so it is the same on every
// replica.
func (c *client) seed() int64 {
	if c.script != nil {
		return c.script.Rand.Int64()
	}
	return rand.Int64()
}

// addScriptMemory adds INFO memory's fields of scripts and functions, in
// Redis's order.
func (s *Server) addScriptMemory(st fsm.ScriptStats, add func(name string, v any)) {
	add("used_memory_lua", st.EvalVM)
	add("used_memory_vm_eval", st.EvalVM)
	add("used_memory_lua_human", humanBytes(uint64(st.EvalVM)))
	add("used_memory_scripts_eval", st.ScriptBytes)
	add("number_of_cached_scripts", st.Scripts)
	add("number_of_functions", st.Functions)
	add("number_of_libraries", st.Libraries)
	add("used_memory_vm_functions", st.FunctionVM)
	add("used_memory_vm_total", st.EvalVM+st.FunctionVM)
	add("used_memory_vm_total_human", humanBytes(uint64(st.EvalVM+st.FunctionVM)))
	add("used_memory_functions", st.FunctionBytes)
	add("used_memory_scripts", st.ScriptBytes+st.FunctionBytes)
	add("used_memory_scripts_human", humanBytes(uint64(st.ScriptBytes+st.FunctionBytes)))
}

// scriptPublish is PUBLISH or SPUBLISH inside a script: an op the store
// applies on every replica, which delivers the message to each node's own
// subscribers and answers 0 everywhere (fsm/publish.go).
func scriptPublish(cmd *command, args [][]byte) (fsm.Command, fsm.Reply, bool) {
	fc := fsm.Command{Op: fsm.OpPublish, Args: args[1:3]}
	if cmd.name == "spublish" {
		fc.Flags = fsm.FlagPublishShard
	}
	return fc, fsm.Reply{}, false
}

// scriptMemory is MEMORY inside a script, its subcommand and arity
// checked as any command's (parseScriptCall): USAGE reads the store's
// estimate from the value alone (fsm.FlagMemoryLogical), the same on
// every replica whatever each holds the value as, since a script that
// writes runs on all of them; HELP answers as outside; PURGE, a node's
// own affair, is not there.
func scriptMemory(args [][]byte) (fsm.Command, fsm.Reply, bool) {
	fail := func(text string) (fsm.Command, fsm.Reply, bool) {
		return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyError, Str: text}, true
	}
	switch sub := args[1]; {
	case is(sub, "usage"):
		samples, e := parseMemoryUsage(args)
		if e != "" {
			return fail(e)
		}
		return fsm.Command{Op: fsm.OpMemoryUsage, Flags: fsm.FlagMemoryLogical, Int: samples, Args: args[2:3]}, fsm.Reply{}, false
	case is(sub, "help"):
		lines := make([]fsm.Reply, len(memoryHelp))
		for i, l := range memoryHelp {
			lines[i] = fsm.Reply{Kind: fsm.ReplyStatus, Str: l}
		}
		return fsm.Command{}, fsm.Reply{Kind: fsm.ReplyArray, Array: lines}, true
	}
	return fail("ERR Unknown Redis command called from script")
}
