package server

import (
	"math"
	"strconv"
)

// CONFIG GET and SET of script-write-budget, kvs's own parameter: the
// instruction budget of a script or function that may write, in durable
// and cluster mode. Such a script runs inside the log's apply on every
// replica and at every replay, where SCRIPT KILL cannot stop it (busy.go),
// so the budget is what bounds it: proposed with the script, it stops the
// script at the same instruction everywhere. Memory mode, where a kill is
// safe, and read-only scripts, which run outside the log, have none, as
// Redis's scripts have none. lua-time-limit (busy-reply-threshold) only
// says when other clients start to get BUSY.

// DefaultScriptWriteBudget is script-write-budget's default. What an
// instruction costs varies a hundredfold, so the bound is set by the
// slowest kind, the one a stalled log feels most: on a shared 2-core
// machine it stopped a loop of redis.call('set', ...) after about 70
// seconds, a loop of table stores after 5, and a bare loop after 2 to 3.
const DefaultScriptWriteBudget = 1_000_000_000

func isScriptParam(name string) bool { return name == "script-write-budget" }

// addScriptParams adds this file's parameter to CONFIG GET's.
func (s *Server) addScriptParams(p map[string]string) {
	p["script-write-budget"] = strconv.FormatInt(s.writeBudget.Load(), 10)
}

// checkScriptParam checks a CONFIG SET value of script-write-budget: a
// count of instructions, 0 for none.
func (s *Server) checkScriptParam(name string, val []byte) (apply func(), e string) {
	v, err := strconv.ParseInt(string(val), 10, 64)
	if err != nil || v < 0 {
		return nil, errConfigSetFailed(name, "argument must be between 0 and "+strconv.FormatInt(math.MaxInt64, 10)+" inclusive")
	}
	return func() { s.writeBudget.Store(v) }, ""
}

// scriptBudget is the instruction budget proposed with a script that may
// write: script-write-budget where the script runs inside a logged
// entry's apply, none in memory mode.
func (s *Server) scriptBudget() float64 {
	if _, memory := s.cfg.Proposer.(MemoryProposer); memory {
		return 0
	}
	return float64(s.writeBudget.Load())
}
