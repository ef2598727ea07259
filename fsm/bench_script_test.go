package fsm

import (
	"strconv"
	"strings"
	"testing"
)

// rateLimiter is the script of issue 13's benchmark: GET, INCR and EXPIRE
// of KEYS[1], returning the count.
const rateLimiter = `local v = redis.call('GET', KEYS[1])
local n = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], 60)
return n`

// benchParser is testParser with EXPIRE, parsed as the server parses it.
func benchParser(p *ParseContext, args [][]byte) (Command, Reply, bool) {
	if strings.EqualFold(string(args[0]), "expire") {
		secs, _ := strconv.ParseInt(string(args[2]), 10, 64)
		return Command{Op: OpExpireAt, Args: args[1:2], Int: p.Now + secs*1000}, Reply{}, false
	}
	return testParser(p, args)
}

// BenchmarkEvalSHA is Apply of one EVALSHA of the rate limiter over 100k
// keys: the per-run cost of a script (interpreter setup, KEYS and ARGV,
// three redis.calls and their conversions) beside the store's own.
func BenchmarkEvalSHA(b *testing.B) {
	s := loadedStore(b, benchKeys)
	s.SetCommandParser(benchParser)
	sha := []byte(ScriptSHA([]byte(rateLimiter)))
	s.Apply(0, t0, []Command{{Op: OpScriptLoad, Args: [][]byte{[]byte(rateLimiter)}}})
	b.ReportAllocs()
	var k keyer
	var key []byte
	cmds := []Command{{Op: OpEval, Flags: FlagScriptSHA, Int: 1, Float: 100000, Args: [][]byte{sha, nil}}}
	b.ResetTimer()
	for b.Loop() {
		key = append(append(key[:0], "rl:"...), k.next()...)
		cmds[0].Args[1] = key
		cmds[0].Int2++
		if r := s.Apply(0, t0, cmds); r[0].Kind != ReplyInt {
			b.Fatalf("reply %v", r[0])
		}
	}
}

// BenchmarkEvalSHAEmpty is Apply of EVALSHA of a script that calls nothing:
// the fixed cost of a run.
func BenchmarkEvalSHAEmpty(b *testing.B) {
	s := NewStore()
	s.SetCommandParser(benchParser)
	body := []byte(`return 1`)
	sha := []byte(ScriptSHA(body))
	s.Apply(0, t0, []Command{{Op: OpScriptLoad, Args: [][]byte{body}}})
	b.ReportAllocs()
	cmds := []Command{{Op: OpEval, Flags: FlagScriptSHA, Int: 1, Float: 100000, Args: [][]byte{sha, []byte("k")}}}
	for b.Loop() {
		cmds[0].Int2++
		s.Apply(0, t0, cmds)
	}
}

// BenchmarkRateLimiterCommands applies the rate limiter's GET, INCR and
// EXPIRE as plain commands, one batch per key: the store's share of
// BenchmarkEvalSHA, which the difference shows the script's cost beside.
func BenchmarkRateLimiterCommands(b *testing.B) {
	s := loadedStore(b, benchKeys)
	b.ReportAllocs()
	var k keyer
	var key []byte
	for b.Loop() {
		key = append(append(key[:0], "rl:"...), k.next()...)
		s.Read(t0, Command{Op: OpGet, Args: [][]byte{key}})
		s.Apply(0, t0, []Command{{Op: OpIncrBy, Args: [][]byte{key}, Int: 1}, {Op: OpExpireAt, Args: [][]byte{key}, Int: t0 + 60000}})
	}
}
