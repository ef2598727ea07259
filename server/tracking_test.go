package server

import (
	"strings"
	"testing"
)

// TestTrackingErrors: CLIENT TRACKING's and CACHING's refusals, with
// Redis's texts.
func TestTrackingErrors(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"CLIENT", "TRACKING", "maybe"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "nosuch"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "REDIRECT", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "REDIRECT", "12345"}, "-ERR The client ID you want redirect to does not exist\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "PREFIX", "a"}, "-ERR PREFIX option requires BCAST mode to be enabled\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "BCAST", "OPTIN"}, "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"}, "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab", "PREFIX", "a"},
			"-ERR Prefix 'ab' overlaps with another provided prefix 'a'. Prefixes for a single client must not overlap.\r\n"},
		{[]string{"CLIENT", "CACHING", "yes"},
			"-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"},
		{[]string{"CLIENT", "GETREDIR"}, ":-1\r\n"},
		{[]string{"CLIENT", "TRACKINGINFO"}, "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "OPTIN"}, "+OK\r\n"},
		{[]string{"CLIENT", "CACHING", "no"}, "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"},
		{[]string{"CLIENT", "CACHING", "maybe"}, "-ERR syntax error\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "OPTOUT"},
			"-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "BCAST"},
			"-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"},
		{[]string{"CLIENT", "CACHING", "yes"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKINGINFO"}, "*6\r\n$5\r\nflags\r\n*3\r\n$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n" +
			"$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"},
		{[]string{"CLIENT", "TRACKING", "off"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b"}, "+OK\r\n"},
		{[]string{"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "bc"},
			"-ERR Prefix 'bc' overlaps with an existing prefix 'b'. Prefixes for a single client must not overlap.\r\n"},
	} {
		if got := rc.do(tc.args...); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := rc.do("CLIENT", "INFO"); !strings.Contains(got, " flags=tB ") || !strings.Contains(got, " redir=0 ") {
		t.Errorf("CLIENT INFO: %q", got)
	}
	info := rc.do("INFO")
	for _, f := range []string{"tracking_clients:1\r\n", "tracking_total_prefixes:2\r\n", "tracking_total_keys:0\r\n"} {
		if !strings.Contains(info, f) {
			t.Errorf("INFO lacks %q", f)
		}
	}
}

// TestTrackingTableLimit: past tracking-table-max-keys the table is
// evicted down to the limit, each evicted key invalidated; the keys a
// client reads are counted in INFO.
func TestTrackingTableLimit(t *testing.T) {
	s := startServer(t, Config{})
	rc, w := dialRaw(t, s), dialRaw(t, s)
	rc.do("HELLO", "3")
	rc.do("CLIENT", "TRACKING", "on")
	rc.do("MGET", "k1", "k2", "k3", "k4", "k5")
	if info := rc.do("INFO", "stats"); !strings.Contains(info, "tracking_total_keys:5\r\n") ||
		!strings.Contains(info, "tracking_total_items:5\r\n") {
		t.Fatalf("INFO: %q", info)
	}
	if got := w.do("CONFIG", "SET", "tracking-table-max-keys", "2"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	for range 3 {
		if got := rc.reply(); !strings.HasPrefix(got, ">2\r\n$10\r\ninvalidate\r\n*1\r\n") {
			t.Fatalf("got %q, want an invalidation", got)
		}
	}
	if info := w.do("INFO", "stats"); !strings.Contains(info, "tracking_total_keys:2\r\n") {
		t.Fatalf("INFO: %q", info)
	}
	if got := rc.do("PING"); got != "+PONG\r\n" {
		t.Fatalf("an invalidation too many: %q", got)
	}
}

// TestTrackingNoloopExpiry: NOLOOP leaves out a client's own writes, not
// the expiry's deletion of a key it wrote.
func TestTrackingNoloopExpiry(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	rc.do("HELLO", "3")
	rc.do("CLIENT", "TRACKING", "on", "BCAST", "NOLOOP")
	if got := rc.do("SET", "soon", "1", "PX", "1"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	// The active expiry deletes it: one invalidation, of the deletion.
	if got := rc.reply(); got != ">2\r\n$10\r\ninvalidate\r\n*1\r\n$4\r\nsoon\r\n" {
		t.Fatalf("got %q", got)
	}
}

// TestTrackingReset: RESET turns tracking off, as Redis's
// clearClientConnectionState does.
func TestTrackingReset(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	rc.do("CLIENT", "TRACKING", "on")
	if got := rc.do("RESET"); got != "+RESET\r\n" {
		t.Fatal(got)
	}
	if got := rc.do("CLIENT", "GETREDIR"); got != ":-1\r\n" {
		t.Fatalf("GETREDIR after RESET: %q", got)
	}
	if info := rc.do("INFO", "clients"); !strings.Contains(info, "tracking_clients:0\r\n") {
		t.Fatalf("INFO: %q", info)
	}
}
