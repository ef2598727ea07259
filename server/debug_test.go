package server

import (
	"regexp"
	"strings"
	"testing"
)

// DEBUG is refused unless enable-debug-command allows it: "local" lets a
// loopback client in.
func TestDebugEnabled(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	if got := rc.do("DEBUG", "SLEEP", "0"); got != "-"+errDebugDisabled+"\r\n" {
		t.Fatalf("DEBUG with enable-debug-command no: %q", got)
	}
	if e := s.setConfig([][]byte{[]byte("enable-debug-command"), []byte("local")}, true); e != "" {
		t.Fatal(e)
	}
	if got := rc.do("DEBUG", "SLEEP", "0"); got != "+OK\r\n" {
		t.Fatalf("DEBUG from loopback with enable-debug-command local: %q", got)
	}
	if got := rc.do("DEBUG", "STRINGMATCH-TEST"); got != "+Apparently Redis did not crash: test passed\r\n" {
		t.Errorf("DEBUG STRINGMATCH-TEST: %q", got)
	}
	rc.do("RPUSH", "l", "a", "b")
	obj := regexp.MustCompile(`^\+Value at:0x[0-9a-f]+ refcount:1 encoding:quicklist serializedlength:[1-9][0-9]* lru:[0-9]+ lru_seconds_idle:0\r\n$`)
	if got := rc.do("DEBUG", "OBJECT", "l"); !obj.MatchString(got) {
		t.Errorf("DEBUG OBJECT l: %q", got)
	}
	// RELOAD saves and loads a copy, and leaves the data as it was.
	rc.do("HSET", "h", "f", "v")
	rc.do("SET", "e", "x", "PX", "1") // expired, not yet deleted: kept
	before := rc.do("DEBUG", "DIGEST")
	if got := rc.do("DEBUG", "RELOAD"); got != "+OK\r\n" {
		t.Errorf("DEBUG RELOAD: %q", got)
	}
	if got := rc.do("DEBUG", "DIGEST"); got != before {
		t.Errorf("DEBUG DIGEST after RELOAD: %q, before %q", got, before)
	}
	if got := rc.do("DEBUG", "RELOAD", "NOSAVE", "bad"); got != "-"+errDebugReloadOpts+"\r\n" {
		t.Errorf("DEBUG RELOAD NOSAVE bad: %q", got)
	}
	// SET-ACTIVE-EXPIRE turns the active expiry cycle off and on.
	rc.do("DEBUG", "SET-ACTIVE-EXPIRE", "0")
	if s.activeExpiry.Load() {
		t.Error("active expiry on after DEBUG SET-ACTIVE-EXPIRE 0")
	}
	rc.do("DEBUG", "SET-ACTIVE-EXPIRE", "1")
	if !s.activeExpiry.Load() {
		t.Error("active expiry off after DEBUG SET-ACTIVE-EXPIRE 1")
	}
}

// A command the server answers itself inside EXEC is slow-logged with its
// own time, as Redis logs the commands EXEC runs: DEBUG SLEEP in MULTI.
func TestSlowlogInExec(t *testing.T) {
	s := startServer(t, Config{})
	if e := s.setConfig([][]byte{[]byte("enable-debug-command"), []byte("yes")}, true); e != "" {
		t.Fatal(e)
	}
	rc := dialRaw(t, s)
	rc.do("CONFIG", "SET", "slowlog-log-slower-than", "10000")
	rc.do("SLOWLOG", "RESET")
	rc.do("MULTI")
	rc.do("DEBUG", "SLEEP", "0.02")
	rc.do("EXEC")
	if got := rc.do("SLOWLOG", "LEN"); got != ":1\r\n" {
		t.Fatalf("SLOWLOG LEN after DEBUG SLEEP 0.02 in MULTI: %q", got)
	}
	if got := rc.do("SLOWLOG", "GET"); !strings.Contains(got, "$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$4\r\n0.02\r\n") {
		t.Errorf("SLOWLOG GET: %q", got)
	}
}
