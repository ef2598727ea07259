package main

import (
	"io"
	"strings"
	"testing"
)

// TestServeTLSFlags: the TLS flags that only make sense together, and
// where --tls-port binds.
func TestServeTLSFlags(t *testing.T) {
	certs := []string{"--tls-cert-file", "c.crt", "--tls-key-file", "c.key", "--tls-ca-cert-file", "ca.crt"}
	cluster := []string{"--node-id", "n1", "--raft-addr", "127.0.0.1:7000", "--data-dir", "d"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		args []string
		err  string // "" for none
	}{
		{cat([]string{"--tls-port", "6380"}, certs), ""},
		{cat([]string{"--addr", "", "--tls-port", "6380"}, certs), ""},
		{[]string{"--addr", ""}, `--addr "" turns the plain listener off`},
		{[]string{"--tls-port", "6380"}, "need --tls-cert-file"},
		{cat([]string{"--tls-port", "6380", "--tls-auth-clients", "maybe"}, certs), "--tls-auth-clients"},
		{cat([]string{"--tls-port", "nope"}, certs), "want PORT or HOST:PORT"},
		{certs, "need --tls-port or --tls-cluster yes"},
		{cat([]string{"--tls-port", "6380", "--tls-cluster", "yes"}, certs), "needs cluster mode"},
		{cat([]string{"--tls-cluster", "yes"}, certs, cluster), "needs --tls-port"},
		{cat([]string{"--tls-port", "6380", "--tls-cluster", "yes"}, certs, cluster), ""},
		{cat([]string{"--addr", "", "--tls-port", "6380"}, certs, cluster), "needs --tls-cluster yes"},
	} {
		_, err := parseServeFlags(tc.args, io.Discard)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v; want an error with %q", tc.args, err, tc.err)
		}
	}
	for _, tc := range []struct{ port, addr, want string }{
		{"6380", "10.0.0.1:6379", "10.0.0.1:6380"},
		{"6380", "", "127.0.0.1:6380"},
		{"0.0.0.0:6380", "127.0.0.1:6379", "0.0.0.0:6380"},
	} {
		got, err := tlsFlags{port: tc.port}.listenAddr(tc.addr)
		if err != nil || got != tc.want {
			t.Errorf("listenAddr(%q, %q) = %q, %v; want %q", tc.port, tc.addr, got, err, tc.want)
		}
	}
}
