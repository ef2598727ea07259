package fsm

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"

	"kvs/lua"
)

// Scripts: EVAL, EVALSHA, their _RO forms, and SCRIPT LOAD / EXISTS /
// FLUSH. A script that may write is one write command (OpEval), so it runs
// inside Apply on every replica and at every replay, in log order; one that
// cannot write (EVAL_RO, EVALSHA_RO, a `no-writes` shebang) is a read
// (OpEvalRO) answered under the shared lock.
//
// Determinism: a script sees no wall clock (TIME answers the entry's now),
// math.random is seeded from the command (Int2, drawn by the proposer),
// table iteration is the same on every replica (package lua numbers the
// objects a run creates alike everywhere), and a runaway script is stopped
// after a fixed number of Lua instructions carried in the command (Float),
// so every replica stops it at the same instruction. The commands a script
// calls are parsed by the server's parser (SetCommandParser), given the
// script's clock and seeded random source, and applied or read directly
// under the lock Apply or Read already holds.
//
// Loaded scripts are replicated state: the bodies live in the metadata map
// (meta.go) under "script/<sha1>", so they are in snapshots and survive
// restarts; EVAL of a body not yet there adds it, as Redis's EVAL caches
// it. Compiled forms are kept by each interpreter (lua.go), never
// replicated.

const (
	// OpEval (EVAL, EVALSHA, and scripts with writes): Args[0]=the body,
	// or its SHA1 in lowercase hex with FlagScriptSHA; Args[1:1+Int]=keys,
	// the rest ARGV. Int2=seed of math.random and of the random choices
	// the script's commands make; Float=the instruction budget (0: none).
	// Reply: the script's reply, converted as Redis converts it.
	OpEval Op = opBaseScript + iota
	// OpEvalRO (EVAL_RO, EVALSHA_RO, no-writes scripts): as OpEval, a
	// read; a write command called from it is refused.
	OpEvalRO
	// OpScriptLoad: Args[0]=body, already compiled by the server. Reply
	// the SHA1.
	OpScriptLoad
	// OpScriptFlush: forget every loaded script. Reply +OK.
	OpScriptFlush
	// OpScriptExists: Args = SHA1s. Reply array of :1/:0.
	OpScriptExists
)

// Flags of the script ops.
const (
	FlagScriptSHA Flags = 1 << 0 // OpEval, OpEvalRO: Args[0] is a SHA1
	// FlagScriptNoWrites, on OpEval: the script says no-writes; it is a
	// write only so that EVAL adds it to the replicated cache, and runs
	// refusing writes.
	FlagScriptNoWrites Flags = 1 << 1
	// FlagScriptUser, on OpEval, OpEvalRO, OpFCall and OpFCallRO: the
	// last argument is the name of the ACL user who called the script,
	// and every command the script calls is checked against that user's
	// rules as the store's ACL table stands when the script runs (the
	// log's order, so every replica decides alike). Without it the calls
	// are not checked: the caller could run anything.
	FlagScriptUser Flags = 1 << 3
	// FlagScriptOOM, on OpEval: used memory was over maxmemory when the
	// script was proposed, so its first denyoom call before any write is
	// refused with Redis's OOM error (ParseContext.OOM). The proposer
	// decides, so every replica refuses the same call.
	FlagScriptOOM Flags = 1 << 4
	// FlagScriptNoReplicas, on OpEval: when the script was proposed, its
	// node had fewer good replicas than min-replicas-to-write, so its
	// first call of a write before any write is refused with Redis's
	// NOREPLICAS error (ParseContext.NoReplicas). The proposer decides,
	// so every replica refuses the same call.
	FlagScriptNoReplicas Flags = 1 << 5
	// FlagScriptRules, with FlagScriptUser: the argument before the
	// user's name is the user's rule line, as the proposing node's ACL
	// table had it, and the calls are checked against that line instead
	// of the store's table. A sharded cluster's data groups hold no ACL
	// table (it lives in the meta group), so their script entries carry
	// the rules they are checked by: every replica still decides alike.
	FlagScriptRules Flags = 1 << 7
)

// SetScriptUser makes c (a script or function call) run its commands
// with the rights of the ACL user name, replacing the user it carried.
// Other commands are left alone.
func SetScriptUser(c *Command, name string) {
	setScriptUser(c, name, "", false)
}

// SetScriptUserRules is SetScriptUser with the user's rule line carried
// in c (FlagScriptRules), for a store that has no ACL table of its own.
func SetScriptUserRules(c *Command, name, rules string) {
	setScriptUser(c, name, rules, true)
}

func setScriptUser(c *Command, name, rules string, carry bool) {
	switch c.Op {
	case OpEval, OpEvalRO, OpFCall, OpFCallRO:
	default:
		return
	}
	if c.Flags&FlagScriptUser != 0 {
		c.Args = c.Args[:len(c.Args)-1]
		if c.Flags&FlagScriptRules != 0 {
			c.Args = c.Args[:len(c.Args)-1]
		}
	}
	c.Flags = c.Flags&^FlagScriptRules | FlagScriptUser
	c.Args = c.Args[:len(c.Args):len(c.Args)]
	if carry {
		c.Flags |= FlagScriptRules
		c.Args = append(c.Args, []byte(rules))
	}
	c.Args = append(c.Args, []byte(name))
}

// scriptCaller is who a script call runs as: the ACL user ("" when its
// calls are unchecked) and, with FlagScriptRules, the table of that one
// user's carried rule line (nil: the store's table decides).
type scriptCaller struct {
	user  string
	rules map[string]string
}

// scriptArgs splits a script call's arguments after the first: its keys,
// its ARGV, and who it runs as.
func scriptArgs(c *Command) (keys, argv [][]byte, who scriptCaller) {
	rest := c.Args[1+c.Int:]
	if c.Flags&FlagScriptUser != 0 {
		who.user, rest = string(rest[len(rest)-1]), rest[:len(rest)-1]
		if c.Flags&FlagScriptRules != 0 {
			who.rules = map[string]string{who.user: string(rest[len(rest)-1])}
			rest = rest[:len(rest)-1]
		}
	}
	return c.Args[1 : 1+c.Int], rest, who
}

const scriptMetaPrefix = "script/"

func init() {
	registerOp(OpEval, opSpec{name: "EVAL", write: true, args: argsAtLeast(1), flags: FlagScriptSHA | FlagScriptNoWrites | FlagScriptUser | FlagScriptRules | FlagScriptOOM | FlagScriptNoReplicas,
		check: checkNumKeys, apply: applyEval, keys: scriptKeys, composite: true})
	registerOp(OpEvalRO, opSpec{name: "EVAL_RO", args: argsAtLeast(1), flags: FlagScriptSHA | FlagScriptUser | FlagScriptRules,
		check: checkNumKeys, read: readEval, readMet: readEvalMet, keys: scriptKeys})
	registerOp(OpScriptLoad, opSpec{name: "SCRIPT", write: true, args: 1, apply: applyScriptLoad, keys: keysNone})
	registerOp(OpScriptFlush, opSpec{name: "SCRIPT", write: true, args: 0, apply: applyScriptFlush, keys: keysNone})
	registerOp(OpScriptExists, opSpec{name: "SCRIPT", args: argsAtLeast(1), read: readScriptExists, keys: keysNone})
}

// checkNumKeys checks that the key count of a script call fits its
// arguments.
func checkNumKeys(c *Command) error {
	n := len(c.Args) - 1
	if c.Flags&FlagScriptUser != 0 {
		n-- // the user, after the ARGV
	}
	if c.Flags&FlagScriptRules != 0 {
		if c.Flags&FlagScriptUser == 0 {
			return fmt.Errorf("script rules without a user")
		}
		n-- // the user's rules, before the user
	}
	if c.Int < 0 || c.Int > int64(n) {
		return fmt.Errorf("key count %d out of range", c.Int)
	}
	if c.Float < 0 {
		return fmt.Errorf("negative instruction budget")
	}
	return nil
}

// scriptKeys is opSpec.keys of OpEval and OpFCall.
func scriptKeys(c *Command) [][]byte { return c.Args[1 : 1+c.Int] }

// ScriptSHA returns the SHA1 Redis names a script body by, in lowercase hex.
func ScriptSHA(body []byte) string {
	sum := sha1.Sum(body)
	return hex.EncodeToString(sum[:])
}

// Script returns the body of the loaded script sha (any case).
func (s *Store) Script(sha string) ([]byte, bool) {
	body, ok := s.publishedMeta()[scriptMetaPrefix+strings.ToLower(sha)]
	return []byte(body), ok
}

// ScriptShebang reports whether the script sha (any case) is loaded, and
// returns a copy of its first line, newline included, if that is a
// shebang ("#!..."), nil if
// the body has none: what EVALSHA needs to know of a body before it is
// proposed, without copying the body.
func (s *Store) ScriptShebang(sha []byte) (shebang []byte, ok bool) {
	var key scriptKey
	name, valid := key.of(sha)
	if !valid {
		return nil, false
	}
	body, ok := s.publishedMeta()[string(name)]
	if !ok || !strings.HasPrefix(body, "#!") {
		return nil, ok
	}
	if i := strings.IndexByte(body, '\n'); i >= 0 {
		body = body[:i+1] // with its newline: a shebang line must end
	}
	return []byte(body), true
}

// scriptKey builds the metadata name of a script from its SHA1 without
// allocating: look it up as s.meta[string(name)].
type scriptKey [len(scriptMetaPrefix) + 2*sha1.Size]byte

// of returns the name of the script sha (any case) in k, or false if sha
// is not 40 characters long, so names no script.
func (k *scriptKey) of(sha []byte) ([]byte, bool) {
	if len(sha) != 2*sha1.Size {
		return nil, false
	}
	n := copy(k[:], scriptMetaPrefix)
	for i, ch := range sha {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		k[n+i] = ch
	}
	return k[:], true
}

func applyEval(s *Store, now int64, c *Command) Reply {
	return s.eval(now, c, false, &s.expired.met, s.applyServe)
}

func readEval(s *Store, now int64, c *Command) Reply { return readEvalMet(s, now, c, nil) }

// readEvalMet is readEval collecting the expired keys the script's reads
// meet into *met (nil: none).
func readEvalMet(s *Store, now int64, c *Command, met *[][]byte) Reply {
	return s.eval(now, c, true, met, nil)
}

// eval runs the script an eval command names, under the lock the caller
// holds: exclusive for a write, shared for a read. The expired keys its
// reads meet are appended to *met (nil: none); whileBusy is what its
// caller serves once it is busy (nil: nothing).
func (s *Store) eval(now int64, c *Command, read bool, met *[][]byte, whileBusy func()) Reply {
	vm := s.vms.get(lua.Eval, read)
	defer s.vms.put(vm, lua.Eval, read)
	script, r, ok := s.evalScriptLocked(vm, c)
	if !ok {
		return r
	}
	if !read && c.Flags&FlagScriptSHA == 0 {
		// As Redis's EVAL, keep the body for EVALSHA, once it compiled.
		s.cacheScriptLocked(script.sha, c.Args[0])
	}
	readOnly := read || c.Flags&FlagScriptNoWrites != 0 || script.noWrites
	run := vm.newRun(s, now, readOnly, script.sha, uint64(c.Int2), int64(c.Float))
	run.st.track(c, false, s.entryOf(read), whileBusy)
	defer run.st.end()
	run.met = met
	keys, argv, who := scriptArgs(c)
	run.who, run.oom = who, c.Flags&FlagScriptOOM != 0
	run.noReplicas = c.Flags&FlagScriptNoReplicas != 0
	out := vm.st.Run(script.ref, script.sha, keys, argv, uint64(c.Int2), run.firstCheckpoint(), run)
	if run.exceeded() {
		return errorReply(ErrBudget)
	}
	if run.st.stop == errExclusive {
		return replyRetryExclusive
	}
	return replyFromRESP(out)
}

// evalScriptLocked finds the script an eval command runs (its first
// argument, or the loaded script it names) compiled in vm. It answers the
// error reply (NOSCRIPT, a compile error) when there is none to run.
func (s *Store) evalScriptLocked(vm *luaVM, c *Command) (compiledScript, Reply, bool) {
	if c.Flags&FlagScriptSHA == 0 {
		sha := ScriptSHA(c.Args[0])
		if cs, ok := vm.scripts[sha]; ok {
			return cs, Reply{}, true
		}
		return vm.script(sha, string(c.Args[0]))
	}
	var key scriptKey
	name, valid := key.of(c.Args[0])
	if !valid {
		return compiledScript{}, errorReply(ErrNoScript), false
	}
	body, found := s.meta[string(name)]
	if !found {
		return compiledScript{}, errorReply(ErrNoScript), false
	}
	// The common case: loaded and compiled, found with no allocation.
	sha := name[len(scriptMetaPrefix):]
	if cs, ok := vm.scripts[string(sha)]; ok {
		return cs, Reply{}, true
	}
	return vm.script(string(sha), body)
}

// ErrNoScript is Redis's reply to EVALSHA of a script it does not have.
const ErrNoScript = "NOSCRIPT No matching script. Please use EVAL."

func errorReply(text string) Reply { return Reply{Kind: ReplyError, Str: text} }

// cacheScriptLocked keeps body as the loaded script sha, if it is not
// there already.
func (s *Store) cacheScriptLocked(sha string, body []byte) {
	name := scriptMetaPrefix + sha
	if _, ok := s.meta[name]; !ok {
		s.setMetaLocked(name, string(body))
	}
}

func applyScriptLoad(s *Store, now int64, c *Command) Reply {
	sha := ScriptSHA(c.Args[0])
	s.cacheScriptLocked(sha, c.Args[0])
	return Reply{Kind: ReplyBulk, Bulk: []byte(sha)}
}

func applyScriptFlush(s *Store, now int64, c *Command) Reply {
	s.dropMetaPrefixLocked(scriptMetaPrefix)
	s.vms.reset(lua.Eval)
	return replyOK
}

// dropMetaPrefixLocked deletes every metadata entry whose name begins with
// prefix, replacing the map once.
func (s *Store) dropMetaPrefixLocked(prefix string) {
	next := maps.Clone(s.meta)
	for name := range next {
		if strings.HasPrefix(name, prefix) {
			delete(next, name)
		}
	}
	if len(next) == 0 {
		next = nil
	}
	s.setMetaMapLocked(next)
}

func readScriptExists(s *Store, now int64, c *Command) Reply {
	out := make([]Reply, len(c.Args))
	for i, sha := range c.Args {
		out[i] = Reply{Kind: ReplyInt}
		if _, ok := s.meta[scriptMetaPrefix+strings.ToLower(string(sha))]; ok {
			out[i].Int = 1
		}
	}
	return Reply{Kind: ReplyArray, Array: out}
}
