package server

import (
	"strconv"
	"testing"

	"kvs/fsm"
)

// BenchmarkEvalSHA is memory mode's work for one EVALSHA of issue 13's
// rate limiter (GET, INCR and EXPIRE of KEYS[1]) over 100k keys, without
// the network: the server's parse of EVALSHA, then the store's run of the
// script, whose redis.calls the server's parser parses.
func BenchmarkEvalSHA(b *testing.B) {
	const body = `local v = redis.call('GET', KEYS[1])
local n = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], 60)
return n`
	benchEvalSHA(b, body, nil, func(r fsm.Reply) bool { return r.Kind == fsm.ReplyInt })
}

// tokenBucket is a token-bucket rate limiter as client libraries ship
// them: it reads the bucket (a hash), refills it for the time passed,
// takes the tokens asked for when there are enough, writes the bucket
// back and lets it expire once it would be full again. More Lua work per
// call than the rate limiter above: number parsing, arithmetic, a
// number formatted back into the hash.
const tokenBucket = `local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local requested = tonumber(ARGV[4])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or capacity
local ts = tonumber(b[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate / 1000)
local allowed = 0
if tokens >= requested then
  tokens = tokens - requested
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate * 1000))
return {allowed, tostring(tokens)}`

// BenchmarkEvalSHATokenBucket is BenchmarkEvalSHA's work for tokenBucket,
// with a clock advancing 1 ms a call.
func BenchmarkEvalSHATokenBucket(b *testing.B) {
	now := int64(1_700_000_000_000)
	argv := [][]byte{[]byte("10"), []byte("100"), nil, []byte("1")}
	benchEvalSHA(b, tokenBucket, func() [][]byte {
		now++
		argv[2] = strconv.AppendInt(argv[2][:0], now, 10)
		return argv
	}, func(r fsm.Reply) bool { return r.Kind == fsm.ReplyArray && len(r.Array) == 2 })
}

// benchEvalSHA runs EVALSHA of body with one key, a new one each call
// from 100k keys, and the arguments argv returns (none if argv is nil),
// checking each reply with ok.
func benchEvalSHA(b *testing.B, body string, argv func() [][]byte, ok func(fsm.Reply) bool) {
	const keys, now = 100_000, 1_700_000_000_000
	st := fsm.NewStore()
	s, err := New(Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	for i := range keys {
		st.Apply(0, now, []fsm.Command{{Op: fsm.OpSet, Args: [][]byte{[]byte("k:" + strconv.Itoa(i)), []byte("v")}}})
	}
	st.Apply(0, now, []fsm.Command{{Op: fsm.OpScriptLoad, Args: [][]byte{[]byte(body)}}})
	c := &client{s: s, proto: 2, fd: -1}
	args := [][]byte{[]byte("evalsha"), []byte(fsm.ScriptSHA([]byte(body))), []byte("1"), nil}
	parse := evalParser(true, false)
	cmds := make([]fsm.Command, 1)
	var key []byte
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i = (i + 7919) % keys // a prime stride: every key, no pattern
		key = strconv.AppendInt(append(key[:0], "rl:"...), int64(i), 10)
		args = append(args[:3], key)
		if argv != nil {
			args = append(args, argv()...)
		}
		cmd, e := parse(c, args)
		if e != "" {
			b.Fatal(e)
		}
		cmds[0] = cmd
		if r := st.Apply(0, now, cmds); !ok(r[0]) {
			b.Fatalf("reply %v", r[0])
		}
	}
}
