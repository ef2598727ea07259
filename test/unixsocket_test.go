package test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// unixClient is a go-redis client on the Unix socket at path.
func unixClient(t testing.TB, path string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: path, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestUnixSocket: --unixsocket serves RESP on a Unix socket besides the
// TCP address, with --unixsocketperm's bits; its clients are named as
// Redis names them (addr=PATH:0 laddr=PATH:0, flag U), protected mode
// (on, no password) lets them in, CONFIG GET reports both parameters,
// and the socket's file is gone once kvs stops.
func TestUnixSocket(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	sock := filepath.Join(dir, "kvs.sock")
	// A stale file where the socket goes is replaced, as Redis does.
	if err := os.WriteFile(sock, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startKVS(t, KVSOptions{Extra: []string{"--unixsocket", sock, "--unixsocketperm", "700", "--protected-mode", "yes"}})
	st, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o700 {
		t.Fatalf("%s: mode %v; want a socket with 0700", sock, st.Mode())
	}
	ctx := testCtx(t)
	c := unixClient(t, sock)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET over the Unix socket: %v", err)
	}
	tcp := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer tcp.Close()
	if v, err := tcp.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET over TCP = %q, %v; want v", v, err)
	}
	line, err := c.Do(ctx, "CLIENT", "INFO").Text()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(line, " addr="+sock+":0 laddr="+sock+":0 ") || !strings.Contains(line, " flags=U ") {
		t.Fatalf("CLIENT INFO on the Unix socket = %q; want addr=%[2]s:0 laddr=%[2]s:0 flags=U", line, sock)
	}
	list, err := tcp.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, " addr="+sock+":0 laddr="+sock+":0 ") {
		t.Fatalf("CLIENT LIST lacks the Unix socket's client:\n%s", list)
	}
	for param, want := range map[string]string{"unixsocket": sock, "unixsocketperm": "700"} {
		v, err := c.ConfigGet(ctx, param).Result()
		if err != nil || v[param] != want {
			t.Fatalf("CONFIG GET %s = %v, %v; want %s", param, v, err, want)
		}
	}
	if err := c.ConfigSet(ctx, "unixsocket", "/tmp/x").Err(); err == nil || !strings.Contains(err.Error(), "can't set immutable config") {
		t.Fatalf("CONFIG SET unixsocket: %v; want the immutable config error", err)
	}
	if cli, err := exec.LookPath("redis-cli"); err == nil {
		out, err := exec.Command(cli, "-s", sock, "GET", "k").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "v" {
			t.Fatalf("redis-cli -s %s GET k: %v\n%s", sock, err, out)
		}
	} else {
		t.Log("redis-cli not installed: redis-cli -s not tried")
	}
	c.Close()
	n.Stop()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after kvs stopped: %v; want it removed", sock, err)
	}
}

// TestUnixSocketOnly: a config file's port 0 (and --port 0) leaves the
// Unix socket as the only listener, as in Redis; the file's
// unixsocket and unixsocketperm apply as the flags do.
func TestUnixSocketOnly(t *testing.T) {
	t.Parallel()
	for _, viaFile := range []bool{true, false} {
		dir := testDir(t)
		name := "flags"
		if viaFile {
			name = "file"
		}
		sock := filepath.Join(dir, name+".sock")
		args := []string{"serve", "--port", "0", "--unixsocket", sock, "--unixsocketperm", "770"}
		if viaFile {
			conf := filepath.Join(dir, "kvs.conf")
			if err := os.WriteFile(conf, []byte("port 0\nunixsocket "+sock+"\nunixsocketperm 770\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args = []string{"serve", "--config", conf}
		}
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(requireKVS(t), args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait(); logf.Close() }()
		ctx := testCtx(t)
		c := unixClient(t, sock)
		pollFor(t, "the Unix socket to answer", startTimeout, 20*time.Millisecond, func() error {
			return c.Ping(ctx).Err()
		})
		if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o770 {
			t.Fatalf("%s: %v, %v; want mode 0770", name, st, err)
		}
		if v, err := c.ConfigGet(ctx, "port").Result(); err != nil || v["port"] != "0" {
			t.Fatalf("%s: CONFIG GET port = %v, %v; want 0", name, v, err)
		}
		if err := c.Do(ctx, "SHUTDOWN").Err(); err != nil && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "closed") {
			t.Logf("%s: SHUTDOWN: %v", name, err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("%s: kvs exited with %v", name, err)
			}
		case <-time.After(stopTimeout):
			cmd.Process.Kill()
			t.Fatalf("%s: kvs did not stop within %v", name, stopTimeout)
		}
	}
}
