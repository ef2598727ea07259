package test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Certificates for the TLS tests, made with crypto/x509: a CA, and leaf
// certificates it signs with chosen validity and key usages, written as
// PEM files into the test's directory.

// testCA is a self-signed CA.
type testCA struct {
	name string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate's PEM file
}

// certFiles are a leaf certificate's PEM files and its serial number.
type certFiles struct {
	cert, key string
	serial    *big.Int
}

// certOpts choose a leaf certificate's properties; the zero value is a
// certificate valid for an hour from a minute ago, for 127.0.0.1, usable
// by both servers and clients.
type certOpts struct {
	notBefore, notAfter time.Time
	usages              []x509.ExtKeyUsage
}

var certSerial atomic.Int64

func nextSerial() *big.Int { return big.NewInt(time.Now().UnixNano() + certSerial.Add(1)) }

// newTestCA makes a CA named name with its certificate in dir.
func newTestCA(t testing.TB, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{name: name, cert: cert, key: key, file: filepath.Join(dir, name+"-ca.crt")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue signs a leaf certificate for cn and writes it and its key into dir.
func (ca *testCA) issue(t testing.TB, dir, cn string, o certOpts) certFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if o.notBefore.IsZero() {
		o.notBefore = time.Now().Add(-time.Minute)
	}
	if o.notAfter.IsZero() {
		o.notAfter = time.Now().Add(time.Hour)
	}
	if o.usages == nil {
		o.usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    o.notBefore,
		NotAfter:     o.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  o.usages,
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := certFiles{cert: filepath.Join(dir, cn+".crt"), key: filepath.Join(dir, cn+".key"), serial: tmpl.SerialNumber}
	writePEM(t, f.cert, "CERTIFICATE", der)
	writePEM(t, f.key, "EC PRIVATE KEY", kder)
	return f
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// clientTLS is a client config that trusts ca and presents cf whenever the
// server asks for a certificate (none when cf is the zero value).
func clientTLS(t testing.TB, ca *testCA, cf certFiles) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	c := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if cf.cert != "" {
		kp, err := tls.LoadX509KeyPair(cf.cert, cf.key)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the server names as acceptable, so that the
		// server, not the client, decides.
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }
	}
	return c
}
