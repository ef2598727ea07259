package test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/redis/go-redis/v9"
)

// TLS tests: clients over TLS (go-redis, redis-cli), the certificates a
// server refuses, tls-auth-clients, tls-protocols, reloading certificates
// with CONFIG SET, a TLS-only server, and a cluster whose nodes talk
// mutual TLS. Every certificate is made by tlscert_test.go.

// tlsEnv is a CA, another CA, and certificates signed by them.
type tlsEnv struct {
	dir         string
	ca, other   *testCA
	server      certFiles // signed by ca, for servers and nodes
	client      certFiles // signed by ca, client use only
	expired     certFiles // signed by ca, expired an hour ago
	otherClient certFiles // signed by other
}

func newTLSEnv(t testing.TB) *tlsEnv {
	t.Helper()
	dir := filepath.Join(testDir(t), "certs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &tlsEnv{dir: dir, ca: newTestCA(t, dir, "cluster"), other: newTestCA(t, dir, "other")}
	e.server = e.ca.issue(t, dir, "server", certOpts{})
	e.client = e.ca.issue(t, dir, "client", certOpts{usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	e.expired = e.ca.issue(t, dir, "expired", certOpts{notBefore: time.Now().Add(-2 * time.Hour), notAfter: time.Now().Add(-time.Hour)})
	e.otherClient = e.other.issue(t, dir, "other-client", certOpts{})
	return e
}

// flags are serve's TLS flags with the server certificate.
func (e *tlsEnv) flags(tlsAddr string, extra ...string) []string {
	return append([]string{"--tls-port", tlsAddr, "--tls-cert-file", e.server.cert,
		"--tls-key-file", e.server.key, "--tls-ca-cert-file", e.ca.file}, extra...)
}

// tlsPing dials addr over TLS with cfg, sends PING and reads the reply:
// the certificate checks of TLSv1.3 end after the client's handshake, so
// only a round trip shows whether the server accepted it.
func tlsPing(addr string, cfg *tls.Config) (*tls.ConnectionState, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(encodeCommand("PING")); err != nil {
		return nil, err
	}
	v, err := readValue(bufio.NewReader(nc))
	if err != nil {
		return nil, err
	}
	if v.Str != "PONG" {
		return nil, fmt.Errorf("PING answered %s", v)
	}
	cs := nc.(*tls.Conn).ConnectionState()
	return &cs, nil
}

func mustPing(t testing.TB, what, addr string, cfg *tls.Config) *tls.ConnectionState {
	t.Helper()
	cs, err := tlsPing(addr, cfg)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return cs
}

func mustRefuse(t testing.TB, what, addr string, cfg *tls.Config) {
	t.Helper()
	if _, err := tlsPing(addr, cfg); err == nil {
		t.Fatalf("%s: PING answered over TLS; want the handshake refused", what)
	}
}

// tlsConfigSet sends CONFIG SET over plain RESP and returns the reply.
func tlsConfigSet(t testing.TB, n *Node, args ...string) Value {
	t.Helper()
	return dialRaw(t, n.Addr).Do(append([]string{"CONFIG", "SET"}, args...)...)
}

// TestTLSClients: in memory and durable mode, go-redis and redis-cli work
// over TLS with a client certificate; a client without one, with an expired
// one or with one from another CA is refused (tls-auth-clients yes, the
// default); the plain port keeps working beside it.
func TestTLSClients(t *testing.T) {
	t.Parallel()
	e := newTLSEnv(t)
	for _, durable := range []bool{false, true} {
		name := map[bool]string{false: "memory", true: "durable"}[durable]
		t.Run(name, func(t *testing.T) {
			tlsAddr := freeAddr(t)
			n := startKVS(t, KVSOptions{Durable: durable, Extra: e.flags(tlsAddr)})
			ctx := testCtx(t)
			c := redis.NewClient(&redis.Options{Addr: tlsAddr, TLSConfig: clientTLS(t, e.ca, e.client)})
			defer c.Close()
			if err := c.Set(ctx, "tls:k", "v1", 0).Err(); err != nil {
				t.Fatalf("go-redis SET over TLS: %v", err)
			}
			if v, err := c.Get(ctx, "tls:k").Result(); err != nil || v != "v1" {
				t.Fatalf("go-redis GET over TLS = %q, %v", v, err)
			}
			if v, err := c.ConfigGet(ctx, "tls-port").Result(); err != nil || v["tls-port"] != portOf(tlsAddr) {
				t.Fatalf("CONFIG GET tls-port = %v, %v; want %s", v, err, portOf(tlsAddr))
			}
			if v := dialRaw(t, n.Addr).Do("GET", "tls:k"); v.Str != "v1" {
				t.Fatalf("GET on the plain port = %s", v)
			}
			mustPing(t, "a client certificate the CA signed", tlsAddr, clientTLS(t, e.ca, e.client))
			mustRefuse(t, "no client certificate", tlsAddr, clientTLS(t, e.ca, certFiles{}))
			mustRefuse(t, "an expired client certificate", tlsAddr, clientTLS(t, e.ca, e.expired))
			mustRefuse(t, "a client certificate from another CA", tlsAddr, clientTLS(t, e.ca, e.otherClient))
			// The server's certificate is checked by the client too: one
			// that trusts only the other CA gives up.
			mustRefuse(t, "a client that trusts another CA", tlsAddr, clientTLS(t, e.other, e.otherClient))
			if !durable {
				testRedisCLITLS(t, e, tlsAddr)
			}
		})
	}
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// testRedisCLITLS runs redis-cli --tls against tlsAddr, with and without a
// client certificate.
func testRedisCLITLS(t *testing.T, e *tlsEnv, tlsAddr string) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Log("no redis-cli installed: its TLS check skipped")
		return
	}
	host, port, _ := net.SplitHostPort(tlsAddr)
	run := func(args ...string) (string, error) {
		base := []string{"-h", host, "-p", port, "--tls", "--cacert", e.ca.file}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, cli, append(base, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := run("--cert", e.client.cert, "--key", e.client.key, "SET", "cli:k", "cli-v")
	if err != nil || out != "OK" {
		t.Fatalf("redis-cli --tls SET: %q, %v", out, err)
	}
	out, err = run("--cert", e.client.cert, "--key", e.client.key, "GET", "cli:k")
	if err != nil || out != "cli-v" {
		t.Fatalf("redis-cli --tls GET: %q, %v", out, err)
	}
	if out, _ := run("PING"); out == "PONG" {
		t.Fatalf("redis-cli --tls without a certificate was answered: %q", out)
	}
}

// TestTLSAuthClients: tls-auth-clients optional admits a client without a
// certificate and still refuses one from another CA; no admits both; the
// changes apply to new handshakes through CONFIG SET; a bad value gets
// Redis's error.
func TestTLSAuthClients(t *testing.T) {
	t.Parallel()
	e := newTLSEnv(t)
	tlsAddr := freeAddr(t)
	n := startKVS(t, KVSOptions{Extra: e.flags(tlsAddr, "--tls-auth-clients", "optional")})
	mustPing(t, "optional, no certificate", tlsAddr, clientTLS(t, e.ca, certFiles{}))
	mustPing(t, "optional, a good certificate", tlsAddr, clientTLS(t, e.ca, e.client))
	mustRefuse(t, "optional, a certificate from another CA", tlsAddr, clientTLS(t, e.ca, e.otherClient))
	mustRefuse(t, "optional, an expired certificate", tlsAddr, clientTLS(t, e.ca, e.expired))

	if v := tlsConfigSet(t, n, "tls-auth-clients", "no"); v.Str != "OK" {
		t.Fatalf("CONFIG SET tls-auth-clients no: %s", v)
	}
	mustPing(t, "no, no certificate", tlsAddr, clientTLS(t, e.ca, certFiles{}))
	mustPing(t, "no, a certificate from another CA (not asked for)", tlsAddr, clientTLS(t, e.ca, e.otherClient))

	if v := tlsConfigSet(t, n, "tls-auth-clients", "yes"); v.Str != "OK" {
		t.Fatalf("CONFIG SET tls-auth-clients yes: %s", v)
	}
	mustRefuse(t, "yes, no certificate", tlsAddr, clientTLS(t, e.ca, certFiles{}))
	mustPing(t, "yes, a good certificate", tlsAddr, clientTLS(t, e.ca, e.client))

	want := "ERR CONFIG SET failed (possibly related to argument 'tls-auth-clients') - argument(s) must be one of the following: no, yes, optional"
	if v := tlsConfigSet(t, n, "tls-auth-clients", "sometimes"); v.Str != want {
		t.Fatalf("CONFIG SET tls-auth-clients sometimes = %s; want %q", v, want)
	}
	if v := dialRaw(t, n.Addr).Do("CONFIG", "GET", "tls-auth-clients"); len(v.Elems) != 2 || v.Elems[1].Str != "yes" {
		t.Fatalf("CONFIG GET tls-auth-clients = %s", v)
	}
}

// TestTLSProtocols: --tls-protocols TLSv1.3 refuses a TLSv1.2 client;
// CONFIG SET tls-protocols TLSv1.2 then refuses a TLSv1.3-only one; a bad
// list is refused with Redis's error and changes nothing.
func TestTLSProtocols(t *testing.T) {
	t.Parallel()
	e := newTLSEnv(t)
	tlsAddr := freeAddr(t)
	n := startKVS(t, KVSOptions{Extra: e.flags(tlsAddr, "--tls-protocols", "TLSv1.3")})
	only := func(v uint16) *tls.Config {
		c := clientTLS(t, e.ca, e.client)
		c.MinVersion, c.MaxVersion = v, v
		return c
	}
	if cs := mustPing(t, "TLSv1.3", tlsAddr, only(tls.VersionTLS13)); cs.Version != tls.VersionTLS13 {
		t.Fatalf("negotiated %x", cs.Version)
	}
	mustRefuse(t, "a TLSv1.2 client against TLSv1.3", tlsAddr, only(tls.VersionTLS12))

	if v := tlsConfigSet(t, n, "tls-protocols", "TLSv1.2"); v.Str != "OK" {
		t.Fatalf("CONFIG SET tls-protocols TLSv1.2: %s", v)
	}
	mustRefuse(t, "a TLSv1.3 client against TLSv1.2", tlsAddr, only(tls.VersionTLS13))
	if cs := mustPing(t, "any client against TLSv1.2", tlsAddr, clientTLS(t, e.ca, e.client)); cs.Version != tls.VersionTLS12 {
		t.Fatalf("negotiated %x; want TLSv1.2", cs.Version)
	}

	want := "ERR CONFIG SET failed (possibly related to argument 'tls-protocols') - Unable to update TLS configuration. Check server logs."
	if v := tlsConfigSet(t, n, "tls-protocols", "TLSv9"); v.Str != want {
		t.Fatalf("CONFIG SET tls-protocols TLSv9 = %s; want %q", v, want)
	}
	mustPing(t, "TLSv1.2 after a refused change", tlsAddr, only(tls.VersionTLS12))
	if v := dialRaw(t, n.Addr).Do("CONFIG", "GET", "tls-protocols"); len(v.Elems) != 2 || v.Elems[1].Str != "TLSv1.2" {
		t.Fatalf("CONFIG GET tls-protocols = %s", v)
	}
}

// TestTLSReload: CONFIG SET of the certificate files makes new handshakes
// present the new certificate (its serial) while an open TLS connection
// goes on; files that do not load are refused with Redis's error and the
// certificate in force stays.
func TestTLSReload(t *testing.T) {
	t.Parallel()
	e := newTLSEnv(t)
	tlsAddr := freeAddr(t)
	n := startKVS(t, KVSOptions{Extra: e.flags(tlsAddr)})
	serial := func() string {
		cs := mustPing(t, "handshake", tlsAddr, clientTLS(t, e.ca, e.client))
		return cs.PeerCertificates[0].SerialNumber.String()
	}
	if got := serial(); got != e.server.serial.String() {
		t.Fatalf("serial %s; want the first certificate's %s", got, e.server.serial)
	}
	ctx := testCtx(t)
	open := redis.NewClient(&redis.Options{Addr: tlsAddr, TLSConfig: clientTLS(t, e.ca, e.client), PoolSize: 1})
	defer open.Close()
	if err := open.Set(ctx, "reload:k", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	next := e.ca.issue(t, e.dir, "server2", certOpts{})
	if v := tlsConfigSet(t, n, "tls-cert-file", next.cert, "tls-key-file", next.key); v.Str != "OK" {
		t.Fatalf("CONFIG SET tls-cert-file tls-key-file: %s", v)
	}
	if got := serial(); got != next.serial.String() {
		t.Fatalf("serial after CONFIG SET %s; want the new certificate's %s", got, next.serial)
	}
	if err := open.Incr(ctx, "reload:k").Err(); err != nil {
		t.Fatalf("the connection opened before the reload: %v", err)
	}

	want := "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs."
	if v := tlsConfigSet(t, n, "tls-cert-file", filepath.Join(e.dir, "missing.crt")); v.Str != want {
		t.Fatalf("CONFIG SET tls-cert-file missing = %s; want %q", v, want)
	}
	// A certificate with another certificate's key does not load either.
	if v := tlsConfigSet(t, n, "tls-cert-file", e.server.cert); v.Str != want {
		t.Fatalf("CONFIG SET tls-cert-file with a mismatched key = %s; want %q", v, want)
	}
	if got := serial(); got != next.serial.String() {
		t.Fatalf("serial after refused changes %s; want %s still", got, next.serial)
	}
	v := dialRaw(t, n.Addr).Do("CONFIG", "GET", "tls-cert-file")
	if len(v.Elems) != 2 || v.Elems[1].Str != next.cert {
		t.Fatalf("CONFIG GET tls-cert-file = %s; want %s", v, next.cert)
	}
}

// TestTLSOnly: with --addr "" only the TLS port is served: a plain-text
// request sent to it (a captured AUTH or PING replayed) gets no reply, and
// the server reports port 0.
func TestTLSOnly(t *testing.T) {
	t.Parallel()
	e := newTLSEnv(t)
	tlsAddr := freeAddr(t)
	dir := filepath.Join(testDir(t), "tls-only")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "kvs.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(requireKVS(t), append([]string{"serve", "--addr", ""}, e.flags(tlsAddr)...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("kvs exited with %v", err)
			}
		case <-time.After(stopTimeout):
			cmd.Process.Kill()
			t.Errorf("kvs did not stop within %v", stopTimeout)
		}
	})
	good := clientTLS(t, e.ca, e.client)
	pollFor(t, "the TLS port to answer", startTimeout, 20*time.Millisecond, func() error {
		_, err := tlsPing(tlsAddr, good)
		return err
	})
	ctx := testCtx(t)
	c := redis.NewClient(&redis.Options{Addr: tlsAddr, TLSConfig: good})
	defer c.Close()
	if v, err := c.ConfigGet(ctx, "port").Result(); err != nil || v["port"] != "0" {
		t.Fatalf("CONFIG GET port = %v, %v; want 0", v, err)
	}

	nc, err := net.DialTimeout("tcp", tlsAddr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write(encodeCommand("AUTH", "default", "secret"))
	nc.Write(encodeCommand("PING"))
	b, _ := io.ReadAll(nc)
	if strings.Contains(string(b), "PONG") || strings.Contains(string(b), "+OK") || strings.Contains(string(b), "-ERR") {
		t.Fatalf("plain-text requests on the TLS port were answered: %q", b)
	}
}

// TestTLSCluster: three nodes with --tls-cluster yes form a cluster (one
// joined by serve's --join, one by `kvs join --tls`), replicate, forward a
// follower's writes to the leader over TLS, and survive the leader's kill.
// The nodes admit TLS clients without certificates (tls-auth-clients no),
// so a node whose certificate another CA signed reaches KVS.JOIN and is
// refused there: it cannot join; a raw TLS client
// with such a certificate and a plain TCP client get nothing from a Raft
// port; node requests on a plain connection are refused.
func TestTLSCluster(t *testing.T) {
	t.Parallel()
	e := newTLSEnv(t)
	tlsAddrs := map[string]string{}
	node := func(id string, certs certFiles, ca *testCA, extra ...string) *Node {
		tlsAddrs[id] = freeAddr(t)
		// tls-auth-clients no: any client may use the TLS port, so only
		// the node commands' own check keeps an intruder out.
		flags := []string{"--tls-port", tlsAddrs[id], "--tls-cert-file", certs.cert, "--tls-key-file", certs.key,
			"--tls-ca-cert-file", ca.file, "--tls-cluster", "yes", "--tls-auth-clients", "no"}
		return newClusterNode(t, id, append(flags, extra...)...)
	}
	n1 := node("n1", e.server, e.ca, "--bootstrap")
	n1.Start()
	n2 := node("n2", e.server, e.ca, "--join", tlsAddrs["n1"])
	n2.Start()
	n3 := node("n3", e.server, e.ca)
	n3.Start()
	nodes := []*Node{n1, n2, n3}
	waitMembers(t, nodes[:2], 2)
	out, code := runKVS(t, clusterWait, "join", "--tls", "--cacert", e.ca.file, "--cert", e.client.cert, "--key", e.client.key,
		tlsAddrs["n2"], tlsAddrs["n3"])
	if code != 0 {
		t.Fatalf("kvs join --tls: exit %d\n%s", code, out)
	}
	waitMembers(t, nodes, 3)
	for _, n := range nodes {
		st, err := kvsStatus(n.Addr)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range st.members {
			if m[2] != tlsAddrs[m[0]] {
				t.Fatalf("%s advertises %s; want its TLS address %s", m[0], m[2], tlsAddrs[m[0]])
			}
		}
	}

	// Writes through a follower, over TLS from the client too, are
	// forwarded to the leader over TLS and replicate everywhere.
	leader := waitLeader(t, nodes)
	f := followers(nodes, leader)[0]
	ctx := testCtx(t)
	c := redis.NewClient(&redis.Options{Addr: tlsAddrs[f.Name], TLSConfig: clientTLS(t, e.ca, e.client)})
	defer c.Close()
	if err := c.Set(ctx, "tlscluster:a", "1", 0).Err(); err != nil {
		t.Fatalf("SET through follower %s over TLS: %v", f.Name, err)
	}
	for _, n := range nodes {
		waitValue(t, n, "tlscluster:a", "1")
	}
	// go-redis's ClusterClient learns the TLS addresses from CLUSTER
	// SLOTS and reaches the leader over TLS.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{tlsAddrs[f.Name]}, TLSConfig: clientTLS(t, e.ca, e.client)})
	defer cc.Close()
	if err := retryLeaderChange(t, func() error { return cc.Set(ctx, "tlscluster:cc", "2", 0).Err() }); err != nil {
		t.Fatalf("ClusterClient SET over TLS: %v", err)
	}
	if v, err := cc.Get(ctx, "tlscluster:cc").Result(); err != nil || v != "2" {
		t.Fatalf("ClusterClient GET over TLS = %q, %v", v, err)
	}

	// PUBLISH on one node reaches a subscriber on another over the TLS
	// link between them.
	sub := redis.NewClient(&redis.Options{Addr: leader.Addr})
	defer sub.Close()
	ps := sub.Subscribe(ctx, "tlscluster:ch")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("SUBSCRIBE: %v", err)
	}
	pubc := redis.NewClient(&redis.Options{Addr: f.Addr})
	defer pubc.Close()
	msgs := ps.Channel()
	waitFor(t, "a message published on a follower to reach the leader's subscriber", func() error {
		if err := pubc.Publish(ctx, "tlscluster:ch", "hello").Err(); err != nil {
			return err
		}
		select {
		case m := <-msgs:
			if m.Payload != "hello" {
				return fmt.Errorf("got %q", m.Payload)
			}
			return nil
		case <-time.After(time.Second):
			return errors.New("no message within a second")
		}
	})

	// Nothing of the node protocol on a plain connection.
	if v := dialRaw(t, leader.Addr).Do("KVS.JOIN", "n9", "127.0.0.1:1", "127.0.0.1:2"); !strings.Contains(v.Str, "tls-cluster") {
		t.Fatalf("KVS.JOIN on a plain connection = %s; want it refused", v)
	}
	if v := dialRaw(t, leader.Addr).Do("KVS.PEER"); !strings.Contains(v.Str, "tls-cluster") {
		t.Fatalf("KVS.PEER on a plain connection = %s; want it refused", v)
	}

	// A node with another CA's certificate (which trusts the cluster's
	// CA) cannot join: its TLS connection is admitted, its KVS.JOIN not.
	intruderCert := e.other.issue(t, e.dir, "intruder", certOpts{})
	n4 := node("n4", intruderCert, e.ca, "--join", tlsAddrs[leader.Name])
	n4.Start()
	waitFor(t, "n4's join to be refused", func() error {
		if !strings.Contains(n4.LogTail(200), "it needs a TLS connection with a certificate signed by the cluster") {
			return errors.New("no refused join in n4's log yet")
		}
		return nil
	})
	if st, err := kvsStatus(leader.Addr); err != nil || len(st.members) != 3 {
		t.Fatalf("members after the intruder tried: %v, %v", st.members, err)
	}
	n4.Stop()

	// A Raft port answers nothing to a certificate from another CA, nor
	// to plain TCP.
	st, err := kvsStatus(leader.Addr)
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := st.fields["raft_addr"]
	// TLSv1.3 lets the client finish its handshake first: the server's
	// verdict arrives as an alert on the first read.
	_, err = tlsPing(raftAddr, clientTLS(t, e.ca, e.otherClient))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("the raft port with another CA's certificate: %v; want the certificate refused", err)
	}
	nc, err := net.DialTimeout("tcp", raftAddr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	// raft's RPC type byte for RequestVote, then junk: over plain TCP
	// the TLS layer sees no ClientHello and hangs up.
	nc.Write([]byte{1, 0x85, 0xa1, 'x'})
	b, _ := io.ReadAll(nc)
	nc.Close()
	if len(b) > 0 && b[0] != 0x15 { // 0x15: a TLS alert record, the only thing allowed
		t.Fatalf("the raft port answered plain TCP with %q", b)
	}

	// raft's own TCP transport, as a process without a certificate would
	// use it: its AppendEntries and RequestVote, with a term far ahead,
	// get no answer, and no node's term moves to it.
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for _, n := range followers(nodes, leader) {
		st, err := kvsStatus(n.Addr)
		if err != nil {
			t.Fatal(err)
		}
		target := raft.ServerAddress(st.fields["raft_addr"])
		hdr := raft.RPCHeader{ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")}
		var ae raft.AppendEntriesResponse
		if err := plain.AppendEntries(raft.ServerID(n.Name), target, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 1000}, &ae); err == nil {
			t.Fatalf("%s answered a plain AppendEntries: %+v", n.Name, ae)
		}
		var rv raft.RequestVoteResponse
		if err := plain.RequestVote(raft.ServerID(n.Name), target, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 1000, LastLogIndex: 1 << 40, LastLogTerm: 1000}, &rv); err == nil {
			t.Fatalf("%s answered a plain RequestVote: %+v", n.Name, rv)
		}
	}
	for _, n := range nodes {
		st, err := kvsStatus(n.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if term, _ := strconv.Atoi(st.fields["term"]); term >= 1000 {
			t.Fatalf("%s took the intruder's term: %d", n.Name, term)
		}
	}

	// The leader's kill: a new leader is elected over TLS and takes
	// writes, and the old one catches up when it returns.
	leader.Kill()
	newLeader := waitLeader(t, nodes)
	if v := dialRaw(t, newLeader.Addr).DoRetry("SET", "tlscluster:b", "2"); v.Str != "OK" {
		t.Fatalf("SET after the leader's kill: %s", v)
	}
	leader.Start()
	for _, n := range nodes {
		waitValue(t, n, "tlscluster:b", "2")
	}
}
