package test

import (
	"bufio"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestDifferentialTLS compares the tls-* parameters with a redis-server
// started with TLS on the same certificate files: CONFIG GET of each, and
// CONFIG SET of values both accept or both refuse (a protocol list that
// does not parse, a file that does not load, an enum value out of range,
// a certificate reloaded), byte for byte over TLS connections, in RESP2
// and RESP3. Where kvs differs by design (tls-port and tls-cluster cannot
// change at run time; OpenSSL's cipher keywords are refused) nothing is
// sent: docs/compatibility.md lists those.
func TestDifferentialTLS(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	t.Parallel()
	e := newTLSEnv(t)
	next := e.ca.issue(t, e.dir, "server-next", certOpts{})
	kvsTLS := freeAddr(t)
	startKVS(t, KVSOptions{Extra: e.flags(kvsTLS)})
	_, refTLS := startRedisTLS(t, e)

	script := [][]string{
		{"CONFIG", "GET", "tls-auth-clients"},
		{"CONFIG", "GET", "tls-cluster"},
		{"CONFIG", "GET", "tls-protocols"},
		{"CONFIG", "GET", "tls-ciphers"},
		{"CONFIG", "GET", "tls-ciphersuites"},
		{"CONFIG", "GET", "tls-cert-file"},
		{"CONFIG", "GET", "tls-key-file"},
		{"CONFIG", "GET", "tls-ca-cert-file"},
		{"CONFIG", "GET", "tls-client-cert-file"},
		{"CONFIG", "SET", "tls-protocols", "TLSv9"},
		{"CONFIG", "SET", "tls-protocols", "TLSv1.2 TLSv1.3"},
		{"CONFIG", "GET", "tls-protocols"},
		{"CONFIG", "SET", "tls-auth-clients", "sometimes"},
		{"CONFIG", "SET", "tls-auth-clients", "optional"},
		{"CONFIG", "GET", "tls-auth-clients"},
		{"CONFIG", "SET", "tls-auth-clients", "yes"},
		{"CONFIG", "SET", "tls-cert-file", filepath.Join(e.dir, "missing.crt")},
		{"CONFIG", "SET", "tls-cert-file", next.cert, "tls-key-file", next.key},
		{"CONFIG", "GET", "tls-cert-file"},
		{"CONFIG", "SET", "tls-ciphers", "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384"},
		{"CONFIG", "GET", "tls-ciphers"},
		{"CONFIG", "SET", "tls-ciphersuites", "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"},
		{"CONFIG", "GET", "tls-ciphersuites"},
		{"PING"},
	}
	for _, proto := range []string{"2", "3"} {
		cfg := clientTLS(t, e.ca, e.client)
		a, b := dialTLSRaw(t, refTLS, cfg), dialTLSRaw(t, kvsTLS, cfg)
		a.Do("HELLO", proto)
		b.Do("HELLO", proto)
		for _, cmd := range script {
			want, got := a.Do(cmd...), b.Do(cmd...)
			if string(want.Raw) != string(got.Raw) {
				t.Errorf("RESP%s %s:\n redis %q\n kvs   %q", proto, showCommand(cmd), want.Raw, got.Raw)
			}
		}
	}
}

// startRedisTLS starts a redis-server with a plain port (for the
// harness's readiness check) and a TLS port on e's server certificate.
func startRedisTLS(t *testing.T, e *tlsEnv) (*Node, string) {
	t.Helper()
	bin := requireRedis(t)
	tlsAddr := freeAddr(t)
	n := &Node{t: t, Name: "redis-tls", Bin: bin, Addr: freeAddr(t)}
	n.Dir = filepath.Join(testDir(t), n.Name)
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.Args = func(n *Node) []string {
		_, port, _ := net.SplitHostPort(n.Addr)
		return []string{
			"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", n.Dir, "--daemonize", "no", "--logfile", "",
			"--tls-port", portOf(tlsAddr), "--tls-cert-file", e.server.cert, "--tls-key-file", e.server.key,
			"--tls-ca-cert-file", e.ca.file,
		}
	}
	n.Start()
	return n, tlsAddr
}

func dialTLSRaw(t testing.TB, addr string, cfg *tls.Config) *rawConn {
	t.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: ioTimeout}, Config: cfg}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s over TLS: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}
