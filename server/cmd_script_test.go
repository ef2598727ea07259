package server

import "testing"

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
