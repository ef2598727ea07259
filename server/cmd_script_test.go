package server

import (
	"testing"

	"kvs/fsm"
)

// TestEvalSHANoWrites: EVALSHA and EVALSHA_RO of a loaded script with a
// no-writes shebang run it; only its first line is looked at before the
// store runs it, and that line must keep its newline.
func TestEvalSHANoWrites(t *testing.T) {
	rc := dialRaw(t, startServer(t, Config{}))
	body := "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])"
	rc.do("SET", "k", "v")
	sha := rc.do("SCRIPT", "LOAD", body)
	if len(sha) < 45 || sha[0] != '$' {
		t.Fatalf("SCRIPT LOAD = %q", sha)
	}
	sha = sha[5 : 5+40]
	for _, cmd := range []string{"EVALSHA", "EVALSHA_RO"} {
		if got := rc.do(cmd, sha, "1", "k"); got != "$1\r\nv\r\n" {
			t.Errorf("%s of a no-writes script = %q", cmd, got)
		}
	}
}

// TestScriptCommandNames: redis.call finds a command by its name in any
// case, and not by another name that shares its slot in the interpreter's
// cache of names (scriptScratch), in one run and in the next.
func TestScriptCommandNames(t *testing.T) {
	rc := dialRaw(t, startServer(t, Config{}))
	// "gex" and "GET" share a slot: 3 + 'g'.
	body := `local r = {}
r[1] = redis.call('SET', KEYS[1], 'v')['ok']
r[2] = redis.call('GET', KEYS[1])
r[3] = redis.call('gEt', KEYS[1])
r[4] = redis.pcall('gex', KEYS[1])['err']
r[5] = redis.call('get', KEYS[1])
r[6] = redis.pcall('GET')['err']
r[7] = redis.pcall('', 'x')['err']
r[8] = redis.call('GET', KEYS[1])
return r`
	unknown := "$44\r\nERR Unknown Redis command called from script\r\n"
	want := "*8\r\n$2\r\nOK\r\n$1\r\nv\r\n$1\r\nv\r\n" + unknown + "$1\r\nv\r\n" +
		"$58\r\nERR Wrong number of args calling Redis command from script\r\n" + unknown + "$1\r\nv\r\n"
	for i := 0; i < 2; i++ {
		if got := rc.do("EVAL", body, "1", "k"); got != want {
			t.Fatalf("run %d = %q, want %q", i+1, got, want)
		}
	}
}

// TestReplayParserDefaults: the parser a store replays its log with
// (InstallScriptParser, before the server exists) gives a script's PFADD
// and XADD the settings a new server starts with, so that the replayed
// writes build the same values: a HyperLogLog stays sparse to
// hll-sparse-max-bytes, as it was when first applied.
func TestReplayParserDefaults(t *testing.T) {
	live := fsm.NewStore()
	New(Config{Store: live})
	replay := fsm.NewStore()
	InstallScriptParser(Config{Store: replay})
	script := fsm.Command{Op: fsm.OpEval, Args: [][]byte{[]byte("redis.call('PFADD', KEYS[1], 'a'); return redis.call('XADD', KEYS[2], '1-1', 'f', 'v')"), []byte("h"), []byte("s")}, Int: 2}
	for _, st := range []*fsm.Store{live, replay} {
		if r := st.Apply(1, 0, []fsm.Command{script}); r[0].Kind == fsm.ReplyError {
			t.Fatalf("script: %+v", r[0])
		}
	}
	get := fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte("h")}}
	if a, b := live.Read(0, get), replay.Read(0, get); string(a.Bulk) != string(b.Bulk) || len(a.Bulk) == 0 {
		enc := func(v []byte) string {
			if len(v) > 4 && v[4] == 1 {
				return "sparse"
			}
			return "dense"
		}
		t.Errorf("the HyperLogLog after a replay: %s, %d bytes; when first applied: %s, %d bytes", enc(b.Bulk), len(b.Bulk), enc(a.Bulk), len(a.Bulk))
	}
}
