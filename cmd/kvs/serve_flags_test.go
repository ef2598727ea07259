package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeFlagsThatCannotApply: a flag with nothing to act on in the mode
// asked for is an error that says what was meant, not ignored.
func TestServeFlagsThatCannotApply(t *testing.T) {
	cluster := []string{"--node-id", "n1", "--raft-addr", "127.0.0.1:7000", "--data-dir", "d"}
	for _, tc := range []struct {
		args []string
		err  string // "" for none
	}{
		{[]string{"--fsync", "no"}, "--fsync needs --data-dir"},
		{[]string{"--data-dir", "d", "--fsync", "no"}, ""},
		{[]string{"--data-dir", "d", "--fsync", "sometimes"}, `--fsync "sometimes": want always, everysec or no`},
		{[]string{"--wal-segment-bytes", "4096"}, "--wal-segment-bytes needs --data-dir"},
		{[]string{"--wal-compact-bytes", "4096"}, "--wal-compact-bytes needs --data-dir"},
		{append([]string{"--fsync", "always"}, cluster...), "--fsync is for durable mode's append log"},
		{append([]string{"--wal-segment-bytes", "4096"}, cluster...), "--wal-segment-bytes is for durable mode"},
		{[]string{"--repair"}, "--repair needs --data-dir"},
		{append([]string{"--repair"}, cluster...), ""},
		{append([]string{"--io", "loop"}, cluster...), ""},
		{append([]string{"--io", "goroutines"}, cluster...), ""},
		{[]string{"--bootstrap"}, "need cluster mode"},
		{[]string{"--node-id", "n1"}, "cluster mode needs both --node-id and --raft-addr"},
		{[]string{"--replicas", "2"}, "need cluster mode"},
		{append([]string{"--groups", "3", "--replicas", "2"}, cluster...), ""},
		{append([]string{"--groups", "3", "--replicas", "-1"}, cluster...), "--replicas -1: want 0 (every node) or more"},
		{[]string{"--raft-snapshot-growth", "50"}, "need cluster mode"},
		{append([]string{"--raft-snapshot-growth", "0"}, cluster...), ""},
		{append([]string{"--raft-snapshot-growth", "-5"}, cluster...), "--raft-snapshot-growth -5: want a percent, 0 or more"},
	} {
		_, err := parseServeFlags(tc.args, io.Discard)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v; want an error with %q", tc.args, err, tc.err)
		}
	}
}

// TestServeConfigFileFlags: a config file's directives set flags, the
// command line wins, port and bind make --addr, and a file's fsync without
// a data dir is the same error as the flag's.
func TestServeConfigFileFlags(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "kvs.conf")
	write := func(s string) {
		if err := os.WriteFile(conf, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("data-dir " + dir + "\nfsync everysec\nport 7001\nbind 0.0.0.0 ::1\nhz 20\nlog-level warn\n")
	f, err := parseServeFlags([]string{"--config", conf, "--log-level", "debug"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.dataDir != dir || f.fsync != "everysec" || f.addr != "0.0.0.0:7001" || f.logLevel != "debug" {
		t.Fatalf("flags from the file: data-dir %q fsync %q addr %q log-level %q", f.dataDir, f.fsync, f.addr, f.logLevel)
	}
	if len(f.directives) != 1 || f.directives[0].Name != "hz" {
		t.Fatalf("Redis directives: %+v", f.directives)
	}
	f, err = parseServeFlags([]string{"--config", conf, "--addr", "127.0.0.1:7002"}, io.Discard)
	if err != nil || f.addr != "127.0.0.1:7002" {
		t.Fatalf("--addr over the file's port and bind: %q, %v", f.addr, err)
	}
	write("fsync no\n")
	if _, err := parseServeFlags([]string{"--config", conf}, io.Discard); err == nil || !strings.Contains(err.Error(), "--fsync needs --data-dir") {
		t.Fatalf("fsync from the file in memory mode: %v", err)
	}
}

// TestServePortAndUnixSocket: --port sets --addr's port, and 0 turns
// TCP off, which needs another listener (--unixsocket here);
// --unixsocketperm is octal.
func TestServePortAndUnixSocket(t *testing.T) {
	for _, tc := range []struct {
		args []string
		addr string // when err is ""
		err  string
	}{
		{[]string{"--port", "7001"}, "127.0.0.1:7001", ""},
		{[]string{"--addr", "0.0.0.0:6379", "--port", "7001"}, "0.0.0.0:7001", ""},
		{[]string{"--port", "0", "--unixsocket", "/tmp/kvs.sock"}, "", ""},
		{[]string{"--port", "0"}, "", "needs --tls-port or --unixsocket"},
		{[]string{"--port", "x"}, "", `--port "x": want a port number`},
		{[]string{"--unixsocket", "/tmp/kvs.sock", "--unixsocketperm", "800"}, "", `--unixsocketperm "800": want octal`},
		{[]string{"--unixsocket", "/tmp/kvs.sock", "--unixsocketperm", "770"}, "127.0.0.1:6379", ""},
	} {
		f, err := parseServeFlags(tc.args, io.Discard)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v; want an error with %q", tc.args, err, tc.err)
		case tc.err == "" && f.addr != tc.addr:
			t.Errorf("%q: addr %q; want %q", tc.args, f.addr, tc.addr)
		}
	}
}

// TestServeReplicaOf: --replicaof takes Redis's HOST PORT as two
// arguments (or one), and a bad port is refused.
func TestServeReplicaOf(t *testing.T) {
	for _, tc := range []struct {
		args []string
		host string
		port int
		err  string
	}{
		{[]string{"--replicaof", "10.0.0.1", "6380", "--log-level", "debug"}, "10.0.0.1", 6380, ""},
		{[]string{"--replicaof", "10.0.0.1 6380"}, "10.0.0.1", 6380, ""},
		{[]string{"--slaveof", "h", "7000"}, "h", 7000, ""},
		{[]string{"--replicaof", "h:7001"}, "h", 7001, ""},
		{[]string{"--replicaof", "h x"}, "", 0, "want HOST PORT"},
	} {
		f, err := parseServeFlags(tc.args, io.Discard)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v; want an error with %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if h, p, err := f.replicaOfAddr(); err != nil || h != tc.host || p != tc.port {
			t.Errorf("%q: %s %d %v; want %s %d", tc.args, h, p, err, tc.host, tc.port)
		}
	}
}
