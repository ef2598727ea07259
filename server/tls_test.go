package server

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testPKI is a CA and a certificate it signed, as PEM files in a temp dir.
type testPKI struct {
	dir               string
	caFile, cert, key string
	caCert            *x509.Certificate
	caKey             *ecdsa.PrivateKey
	serial            int64
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	p.caKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.caCert, _ = x509.ParseCertificate(der)
	p.caFile = p.write(t, "ca.crt", "CERTIFICATE", der)
	p.cert, p.key = p.issue(t, "leaf", 2)
	return p
}

// issue writes a certificate with serial, signed by the CA.
func (p *testPKI) issue(t *testing.T, name string, serial int64) (cert, key string) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &k.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(k)
	return p.write(t, name+".crt", "CERTIFICATE", der), p.write(t, name+".key", "EC PRIVATE KEY", kder)
}

func (p *testPKI) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseTLSProtocols(t *testing.T) {
	for _, tc := range []struct {
		in       string
		min, max uint16
		ok       bool
	}{
		{"", tls.VersionTLS12, tls.VersionTLS13, true},
		{"TLSv1.2 TLSv1.3", tls.VersionTLS12, tls.VersionTLS13, true},
		{"tlsv1.3", tls.VersionTLS13, tls.VersionTLS13, true},
		{"TLSv1.2", tls.VersionTLS12, tls.VersionTLS12, true},
		{"TLSv1 TLSv1.1 TLSv1.2", tls.VersionTLS10, tls.VersionTLS12, true},
		{"TLSv1 TLSv1.2", 0, 0, false}, // a gap Go cannot express
		{"TLSv1.4", 0, 0, false},
		{"SSLv3", 0, 0, false},
	} {
		lo, hi, err := parseTLSProtocols(tc.in)
		if (err == nil) != tc.ok || (tc.ok && (lo != tc.min || hi != tc.max)) {
			t.Errorf("parseTLSProtocols(%q) = %x, %x, %v", tc.in, lo, hi, err)
		}
		if err != nil && !errors.Is(err, ErrTLSConfig) {
			t.Errorf("parseTLSProtocols(%q): %v does not wrap ErrTLSConfig", tc.in, err)
		}
	}
}

func TestParseTLSCiphers(t *testing.T) {
	ids, err := parseTLSCiphers("ECDHE-RSA-AES128-GCM-SHA256:TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384")
	if err != nil || len(ids) != 2 || ids[0] != tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 || ids[1] != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Fatalf("parseTLSCiphers = %v, %v", ids, err)
	}
	for _, bad := range []string{"DEFAULT", "HIGH:!aNULL", "ECDHE-RSA-NOPE"} {
		if _, err := parseTLSCiphers(bad); err == nil {
			t.Errorf("parseTLSCiphers(%q) accepted", bad)
		}
	}
	if err := checkTLS13Suites("TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"); err != nil {
		t.Errorf("all three TLSv1.3 suites: %v", err)
	}
	if err := checkTLS13Suites("TLS_AES_256_GCM_SHA384"); err == nil {
		t.Error("a TLSv1.3 list Go cannot honour was accepted")
	}
}

// TestTLSUpdate: a change whose files load replaces the material new
// handshakes use; one that does not is refused and changes nothing.
func TestTLSUpdate(t *testing.T) {
	p := newTestPKI(t)
	st, err := NewTLS(TLSParams{Addr: "127.0.0.1:0", CertFile: p.cert, KeyFile: p.key, CACertFile: p.caFile})
	if err != nil {
		t.Fatal(err)
	}
	if st.CertSerial() != "2" {
		t.Fatalf("serial %s", st.CertSerial())
	}
	cert3, key3 := p.issue(t, "next", 3)
	next := st.Params()
	next.CertFile, next.KeyFile = cert3, key3
	if err := st.Update(next); err != nil {
		t.Fatal(err)
	}
	hello := &tls.ClientHelloInfo{}
	cfg, _ := st.ServerConfig().GetConfigForClient(hello)
	if st.CertSerial() != "3" || cfg.Certificates[0].Leaf.SerialNumber.Int64() != 3 {
		t.Fatalf("after Update: serial %s", st.CertSerial())
	}
	bad := st.Params()
	bad.KeyFile = p.key // another certificate's key
	if err := st.Update(bad); !errors.Is(err, ErrTLSConfig) {
		t.Fatalf("Update with a mismatched key: %v", err)
	}
	if st.CertSerial() != "3" || st.Params().KeyFile != key3 {
		t.Fatal("a refused Update changed the material")
	}
	bad = st.Params()
	bad.AuthClients = "sometimes"
	if err := st.Update(bad); err == nil {
		t.Fatal("tls-auth-clients sometimes accepted")
	}
}

// TestTLSIsNode: a certificate the CA signed marks a connection as a
// node's, whether the handshake verified it or only asked for it.
func TestTLSIsNode(t *testing.T) {
	p := newTestPKI(t)
	st, err := NewTLS(TLSParams{CertFile: p.cert, KeyFile: p.key, CACertFile: p.caFile, Cluster: true, AuthClients: "no"})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.LoadX509KeyPair(p.cert, p.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(kp.Certificate[0])
	if !st.isNode(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}) {
		t.Error("a CA-signed certificate was not a node's")
	}
	other := newTestPKI(t)
	okp, _ := tls.LoadX509KeyPair(other.cert, other.key)
	oleaf, _ := x509.ParseCertificate(okp.Certificate[0])
	if st.isNode(tls.ConnectionState{PeerCertificates: []*x509.Certificate{oleaf}}) {
		t.Error("another CA's certificate was a node's")
	}
	if st.isNode(tls.ConnectionState{}) {
		t.Error("no certificate was a node's")
	}
}

// TestPeerClosedTLS: an idle pooled TLS connection to a leader reads as
// open after a round trip, and as closed once the leader hangs up.
func TestPeerClosedTLS(t *testing.T) {
	p := newTestPKI(t)
	st, err := NewTLS(TLSParams{CertFile: p.cert, KeyFile: p.key, CACertFile: p.caFile, Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", st.NodeListenerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	hangUp := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		b := make([]byte, 1)
		if _, err := nc.Read(b); err == nil {
			nc.Write([]byte("+OK\r\n"))
		}
		<-hangUp
	}()
	nc, err := DialTLS(st, ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte("x"))
	if r, err := readPeerReply(bufio.NewReader(nc)); err != nil || r.text != "OK" {
		t.Fatalf("round trip: %+v, %v", r, err)
	}
	if peerClosed(nc) {
		t.Fatal("an idle TLS peer connection reads as closed")
	}
	close(hangUp)
	<-done
	deadline := time.Now().Add(10 * time.Second)
	for !peerClosed(nc) {
		if time.Now().After(deadline) {
			t.Fatal("a TLS peer connection the leader closed still reads as open")
		}
		time.Sleep(5 * time.Millisecond) // poll until the close arrives
	}
}
