package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testCA signs node certificates in memory.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "raft CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (ca *testCA) node(t *testing.T) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"}, DNSNames: []string{"node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// nodeTLS is a node's TLS: its certificate, trusting trust's CA.
func nodeTLS(cert tls.Certificate, trust *testCA) *TLS {
	return &TLS{
		Listener: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: trust.pool, ClientAuth: tls.RequireAndVerifyClientCert},
		Dial: func() *tls.Config {
			return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: trust.pool, ServerName: "node"}
		},
	}
}

func newTestTransport(t *testing.T, nt *TLS) *raft.NetworkTransport {
	t.Helper()
	tr, err := newTLSTransport("127.0.0.1:0", nt, &raft.NetworkTransportConfig{MaxPool: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestTLSTransport: a RequestVote from a node with a certificate of the
// cluster's CA reaches raft over TLS; one from a node whose certificate
// another CA signed, and one over plain TCP, fail and deliver nothing.
func TestTLSTransport(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	server := newTestTransport(t, nodeTLS(ca.node(t), ca))

	var delivered atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case rpc := <-server.Consumer():
				delivered.Add(1)
				rpc.Respond(&raft.RequestVoteResponse{Granted: true}, nil)
			case <-done:
				return
			}
		}
	}()
	defer wg.Wait()
	defer close(done)

	vote := func(tr raft.Transport) error {
		var resp raft.RequestVoteResponse
		err := tr.RequestVote("n1", server.LocalAddr(), &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("n2")}, Term: 1}, &resp)
		if err == nil && !resp.Granted {
			t.Fatal("vote not granted")
		}
		return err
	}
	if err := vote(newTestTransport(t, nodeTLS(ca.node(t), ca))); err != nil {
		t.Fatalf("RequestVote from a node of the cluster's CA: %v", err)
	}
	if delivered.Load() != 1 {
		t.Fatalf("%d RPCs delivered; want 1", delivered.Load())
	}
	if err := vote(newTestTransport(t, nodeTLS(other.node(t), ca))); err == nil {
		t.Fatal("RequestVote with another CA's certificate succeeded")
	}
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := vote(plain); err == nil {
		t.Fatal("RequestVote over plain TCP succeeded")
	}
	if delivered.Load() != 1 {
		t.Fatalf("%d RPCs delivered; want only the trusted node's", delivered.Load())
	}
}
