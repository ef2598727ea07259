package fsm

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
)

// Scripts: EVAL, EVALSHA, their _RO forms, and SCRIPT LOAD / EXISTS /
// FLUSH. A script that may write is one write command (OpEval), so it runs
// inside Apply on every replica and at every replay, in log order; one that
// cannot write (EVAL_RO, EVALSHA_RO, a `no-writes` shebang) is a read
// (OpEvalRO) answered under the shared lock.
//
// Determinism: a script sees no wall clock (TIME answers the entry's now),
// math.random is seeded from the command (Int2, drawn by the proposer),
// table iteration follows insertion order (gopher-lua's tables keep their
// keys in a slice), and a runaway script is stopped after a fixed number of
// Lua instructions carried in the command (Float), so every replica stops
// it at the same instruction. The commands a script calls are parsed by the
// server's parser (SetCommandParser), given the script's clock and seeded
// random source, and applied or read directly under the lock Apply or Read
// already holds.
//
// Loaded scripts are replicated state: the bodies live in the metadata map
// (meta.go) under "script/<sha1>", so they are in snapshots and survive
// restarts; EVAL of a body not yet there adds it, as Redis's EVAL caches
// it. Compiled forms are cached per node (lua.go), never replicated.

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
)

const scriptMetaPrefix = "script/"

func init() {
	registerOp(OpEval, opSpec{name: "EVAL", write: true, args: argsAtLeast(1), flags: FlagScriptSHA,
		check: checkNumKeys, apply: applyEval, keys: scriptKeys, composite: true})
	registerOp(OpEvalRO, opSpec{name: "EVAL_RO", args: argsAtLeast(1), flags: FlagScriptSHA,
		check: checkNumKeys, read: readEval})
	registerOp(OpScriptLoad, opSpec{name: "SCRIPT", write: true, args: 1, apply: applyScriptLoad, keys: keysNone})
	registerOp(OpScriptFlush, opSpec{name: "SCRIPT", write: true, args: 0, apply: applyScriptFlush, keys: keysNone})
	registerOp(OpScriptExists, opSpec{name: "SCRIPT", args: argsAtLeast(1), read: readScriptExists})
}

// checkNumKeys checks that the key count of a script call fits its
// arguments.
func checkNumKeys(c *Command) error {
	if c.Int < 0 || c.Int > int64(len(c.Args)-1) {
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
	s.mu.RLock()
	defer s.mu.RUnlock()
	body, ok := s.meta[scriptMetaPrefix+strings.ToLower(sha)]
	return []byte(body), ok
}

func applyEval(s *Store, now int64, c *Command) Reply {
	body, sha, r, ok := s.scriptBodyLocked(c)
	if !ok {
		return r
	}
	if c.Flags&FlagScriptSHA == 0 {
		// As Redis's EVAL, keep the body for EVALSHA, once it compiles.
		if _, e := compileScript(sha, body); e != "" {
			return errorReply(e)
		}
		s.cacheScriptLocked(sha, body)
	}
	return s.runScript(now, c, sha, body, false)
}

func readEval(s *Store, now int64, c *Command) Reply {
	body, sha, r, ok := s.scriptBodyLocked(c)
	if !ok {
		return r
	}
	return s.runScript(now, c, sha, body, true)
}

// scriptBodyLocked finds the body an eval command runs: its first argument,
// or the loaded script it names.
func (s *Store) scriptBodyLocked(c *Command) (body []byte, sha string, r Reply, ok bool) {
	if c.Flags&FlagScriptSHA == 0 {
		return c.Args[0], ScriptSHA(c.Args[0]), Reply{}, true
	}
	sha = strings.ToLower(string(c.Args[0]))
	b, found := s.meta[scriptMetaPrefix+sha]
	if !found {
		return nil, "", errorReply(ErrNoScript), false
	}
	return []byte(b), sha, Reply{}, true
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
	s.meta = next
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

// runScript runs body (named sha) with the keys and arguments of c, under
// the lock the caller holds: exclusive for a write, shared when readOnly.
func (s *Store) runScript(now int64, c *Command, sha string, body []byte, readOnly bool) Reply {
	proto, e := compileScript(sha, body)
	if e != "" {
		return errorReply(e)
	}
	vm := s.vms.get(readOnly)
	defer s.vms.put(vm, readOnly)
	run := &scriptRun{
		s: s, now: now, readOnly: readOnly, name: sha,
		rnd:    rand.New(rand.NewPCG(uint64(c.Int2), 0x5c1a)),
		budget: newBudget(int64(c.Float)),
	}
	return vm.runEval(run, proto, c.Args[1:1+c.Int], c.Args[1+c.Int:])
}
