package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"

	"kvs/server"
)

// tlsFlags are serve's tls-* flags, named as redis-server's directives.
type tlsFlags struct {
	port           string // --tls-port: PORT (on --addr's host) or HOST:PORT
	certFile       string
	keyFile        string
	clientCertFile string
	clientKeyFile  string
	caCertFile     string
	authClients    string
	protocols      string
	ciphers        string
	ciphersuites   string
	cluster        string // yes or no
}

func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.port, "tls-port", "", "serve RESP over TLS on this PORT (on --addr's host; 127.0.0.1 when --addr is \"\") or HOST:PORT (empty: no TLS listener)")
	fs.StringVar(&t.certFile, "tls-cert-file", "", "PEM certificate (chain) the server presents, and the node presents to other nodes with --tls-cluster")
	fs.StringVar(&t.keyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&t.clientCertFile, "tls-client-cert-file", "", "PEM certificate the node presents when it dials another node (default: --tls-cert-file)")
	fs.StringVar(&t.clientKeyFile, "tls-client-key-file", "", "PEM private key of --tls-client-cert-file")
	fs.StringVar(&t.caCertFile, "tls-ca-cert-file", "", "PEM CA certificate(s) that client and node certificates must chain to")
	fs.StringVar(&t.authClients, "tls-auth-clients", "yes", "yes: TLS clients must present a certificate the CA signed; optional: one presented is verified; no: none is asked for")
	fs.StringVar(&t.protocols, "tls-protocols", "", `TLS versions to accept, e.g. "TLSv1.2 TLSv1.3" (empty: TLSv1.2 and TLSv1.3)`)
	fs.StringVar(&t.ciphers, "tls-ciphers", "", "TLSv1.2 cipher suites, OpenSSL's names separated by colons (empty: Go's defaults)")
	fs.StringVar(&t.ciphersuites, "tls-ciphersuites", "", "TLSv1.3 suites; kvs always offers all three, so only a list of all three is accepted (empty: all)")
	fs.StringVar(&t.cluster, "tls-cluster", "no", "cluster mode: yes runs Raft, forwarding, PUBLISH links and joins over mutual TLS with these certificates, and advertises the TLS address")
}

func (t tlsFlags) clusterOn() bool { return t.cluster == "yes" }

// enabled reports whether any TLS is asked for.
func (t tlsFlags) enabled() bool { return t.port != "" || t.clusterOn() }

func (t tlsFlags) validate(addr string, unix, clustered bool) error {
	if t.cluster != "yes" && t.cluster != "no" {
		return fmt.Errorf("--tls-cluster %q: want yes or no", t.cluster)
	}
	switch t.authClients {
	case "yes", "no", "optional":
	default:
		return fmt.Errorf("--tls-auth-clients %q: want yes, no or optional", t.authClients)
	}
	if addr == "" && t.port == "" && !unix {
		return errors.New(`--addr "" turns the plain listener off (as --port 0) and needs --tls-port or --unixsocket`)
	}
	if t.clusterOn() && !clustered {
		return errors.New("--tls-cluster yes needs cluster mode (--node-id and --raft-addr)")
	}
	if clustered && addr == "" && !t.clusterOn() {
		return errors.New(`--addr "" in cluster mode needs --tls-cluster yes: other nodes forward to this node's plain address otherwise`)
	}
	if t.clusterOn() && t.port == "" {
		return errors.New("--tls-cluster yes needs --tls-port: other nodes forward to this node's TLS address")
	}
	if t.enabled() && (t.certFile == "" || t.keyFile == "" || t.caCertFile == "") {
		return errors.New("--tls-port and --tls-cluster need --tls-cert-file, --tls-key-file and --tls-ca-cert-file")
	}
	if !t.enabled() && (t.certFile != "" || t.keyFile != "" || t.caCertFile != "") {
		return errors.New("--tls-cert-file, --tls-key-file and --tls-ca-cert-file need --tls-port or --tls-cluster yes")
	}
	if t.port != "" {
		if _, err := t.listenAddr(addr); err != nil {
			return err
		}
	}
	return nil
}

// listenAddr is the TLS listener's host:port.
func (t tlsFlags) listenAddr(addr string) (string, error) {
	if _, err := strconv.ParseUint(t.port, 10, 16); err == nil {
		host := "127.0.0.1"
		if addr != "" {
			h, _, err := net.SplitHostPort(addr)
			if err != nil {
				return "", fmt.Errorf("--addr: %w", err)
			}
			host = h
		}
		return net.JoinHostPort(host, t.port), nil
	}
	if _, _, err := net.SplitHostPort(t.port); err != nil {
		return "", fmt.Errorf("--tls-port %q: want PORT or HOST:PORT", t.port)
	}
	return t.port, nil
}

// load reads the certificates; nil without TLS.
func (t tlsFlags) load(addr string) (*server.TLS, error) {
	if !t.enabled() {
		return nil, nil
	}
	p := server.TLSParams{
		CertFile: t.certFile, KeyFile: t.keyFile,
		ClientCertFile: t.clientCertFile, ClientKeyFile: t.clientKeyFile,
		CACertFile: t.caCertFile, AuthClients: t.authClients, Protocols: t.protocols,
		Ciphers: t.ciphers, Ciphersuites: t.ciphersuites, Cluster: t.clusterOn(),
	}
	if t.port != "" {
		var err error
		if p.Addr, err = t.listenAddr(addr); err != nil {
			return nil, err
		}
	}
	st, err := server.NewTLS(p)
	if err != nil {
		return nil, err
	}
	if t.clusterOn() {
		adminTLS = st.DialConfig // --join's requests
	}
	return st, nil
}

// adminTLSFlags are the TLS flags of join, remove and status, named as
// redis-cli's.
type adminTLSFlags struct {
	on                bool
	cert, key, cacert string
}

func (a *adminTLSFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&a.on, "tls", false, "connect over TLS (to nodes started with --tls-cluster yes: their --tls-port address)")
	fs.StringVar(&a.cert, "cert", "", "with --tls: PEM client certificate (one the cluster's CA signed; required by nodes with --tls-cluster yes)")
	fs.StringVar(&a.key, "key", "", "with --tls: PEM private key of --cert")
	fs.StringVar(&a.cacert, "cacert", "", "with --tls: PEM CA certificate the node's certificate must chain to")
}

// apply sets adminTLS from the flags.
func (a adminTLSFlags) apply() error {
	if !a.on {
		if a.cert != "" || a.key != "" || a.cacert != "" {
			return errors.New("--cert, --key and --cacert need --tls")
		}
		return nil
	}
	if a.cacert == "" {
		return errors.New("--tls needs --cacert")
	}
	c, err := server.ClientTLSConfig(a.cert, a.key, a.cacert)
	if err != nil {
		return err
	}
	adminTLS = func() *tls.Config { return c }
	return nil
}
