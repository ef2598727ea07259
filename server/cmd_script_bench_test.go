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
		args[3] = key
		cmd, e := parse(c, args)
		if e != "" {
			b.Fatal(e)
		}
		cmds[0] = cmd
		if r := st.Apply(0, now, cmds); r[0].Kind != fsm.ReplyInt {
			b.Fatalf("reply %v", r[0])
		}
	}
}
