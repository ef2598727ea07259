package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TLS, as redis-server configures it (tls-port, tls-cert-file, ...): the
// certificates and settings of the client TLS listener and, with
// tls-cluster, of the connections kvs nodes make to one another.
//
// A TLS value holds the parameters and the material loaded from their
// files. Every new handshake (accepted or dialled) reads the current
// material, so CONFIG SET of a file name, or of tls-auth-clients,
// tls-protocols and the cipher lists, takes effect for new connections
// without a restart; connections already open keep what they agreed. A
// change whose files do not load is refused and the old material kept.
//
// Peers are verified by chain only, as Redis does for its cluster bus: a
// certificate is a node's (or a client's) if it chains to tls-ca-cert-file
// and carries the right extended key usage; host names are not checked. A
// CA used with tls-cluster must therefore sign only certificates of the
// cluster's members and of clients trusted as much.

// TLSParams are the tls-* parameters. The zero value of a field is Redis's
// default for it.
type TLSParams struct {
	// Addr is the host:port of the TLS client listener. Empty: none (the
	// node may still use TLS between nodes with Cluster).
	Addr string
	// CertFile and KeyFile are the PEM certificate (chain) and key the
	// server presents, and, unless ClientCertFile is set, the node
	// presents when it dials another node.
	CertFile string
	KeyFile  string
	// ClientCertFile and ClientKeyFile, when set, are presented instead
	// when dialling another node (tls-client-cert-file).
	ClientCertFile string
	ClientKeyFile  string
	// CACertFile holds the PEM CA certificates that client and node
	// certificates must chain to.
	CACertFile string
	// AuthClients is tls-auth-clients: "yes" (empty: a client must present
	// a certificate the CA signed), "optional" (one presented is
	// verified), or "no" (none is asked for).
	AuthClients string
	// Protocols is tls-protocols, e.g. "TLSv1.2 TLSv1.3". Empty: TLSv1.2
	// and TLSv1.3.
	Protocols string
	// Ciphers is tls-ciphers, the TLSv1.2 cipher suites in OpenSSL's
	// names (or IANA's), separated by colons. Empty: Go's defaults.
	Ciphers string
	// Ciphersuites is tls-ciphersuites, the TLSv1.3 suites. Go offers all
	// three TLSv1.3 suites always, so a list that leaves one out is
	// refused rather than silently ignored. Empty: all three.
	Ciphersuites string
	// Cluster is tls-cluster: Raft traffic, forwarded requests, the
	// PUBLISH links and kvs join run over mutual TLS with the certificates
	// above, and the commands one node sends another (KVS.PEER,
	// KVS.FORWARD, KVS.SYNC, KVS.PUBLISH, KVS.JOIN, KVS.REMOVE) are
	// refused on any connection that has not presented a certificate the
	// CA signed.
	Cluster bool
}

// TLS is the live TLS state of one process. Create it with NewTLS.
type TLS struct {
	mu     sync.Mutex // serialises changes; guards params
	params TLSParams

	cur atomic.Pointer[tlsMaterial] // read by every handshake
}

// tlsMaterial is one consistent set of loaded files and settings.
type tlsMaterial struct {
	server *tls.Config // the client listener's
	node   *tls.Config // the Raft listener's: a CA-signed client certificate required
	dial   *tls.Config // dialling a node, less the verification (verifyNode)
	roots  *x509.CertPool
	cert   *x509.Certificate // the server certificate's leaf
}

// Errors of TLS configuration; each is wrapped with the parameter or file.
var (
	ErrTLSConfig   = errors.New("server: bad TLS configuration")
	ErrTLSNotPeer  = errors.New("server: peer certificate not signed by the cluster CA")
	errTLSNoParams = errors.New("tls-cert-file, tls-key-file and tls-ca-cert-file are required")
)

// NewTLS loads p's files and checks its settings.
func NewTLS(p TLSParams) (*TLS, error) {
	m, err := loadTLS(p)
	if err != nil {
		return nil, err
	}
	t := &TLS{params: p}
	t.cur.Store(m)
	return t, nil
}

// Params returns the parameters in force.
func (t *TLS) Params() TLSParams {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.params
}

// Update loads the material for p and, if it loads, makes it the one new
// handshakes use; otherwise it returns why and keeps the old one. Addr and
// Cluster cannot change.
func (t *TLS) Update(p TLSParams) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.Addr, p.Cluster = t.params.Addr, t.params.Cluster
	m, err := loadTLS(p)
	if err != nil {
		return err
	}
	t.params = p
	t.cur.Store(m)
	return nil
}

// ServerConfig is the tls.Config of the client listener.
func (t *TLS) ServerConfig() *tls.Config {
	return &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return t.cur.Load().server, nil
	}}
}

// NodeListenerConfig is the tls.Config of a listener only nodes may use
// (Raft's): a certificate signed by the CA is required.
func (t *TLS) NodeListenerConfig() *tls.Config {
	return &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return t.cur.Load().node, nil
	}}
}

// DialConfig is a tls.Config for dialling another node (or, for kvs join,
// any member) with the current client certificate; the server's
// certificate is verified against the CA.
func (t *TLS) DialConfig() *tls.Config {
	m := t.cur.Load()
	c := m.dial.Clone()
	// Chain only, as the package doc says: InsecureSkipVerify turns off
	// Go's host name check, and VerifyConnection does the chain check
	// against the CA of this material.
	c.InsecureSkipVerify = true
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		return verifyChain(m.roots, cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
	}
	return c
}

// verifyChain checks that certs (leaf first) chain to roots for usage.
func verifyChain(roots *x509.CertPool, certs []*x509.Certificate, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return fmt.Errorf("%w: no certificate presented", ErrTLSNotPeer)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTLSNotPeer, err)
	}
	return nil
}

// isNode reports whether a TLS connection's peer presented a certificate
// signed by the CA: verified by the handshake, or, where the handshake
// asked for one without verifying it (tls-auth-clients no), verified here.
func (t *TLS) isNode(cs tls.ConnectionState) bool {
	if len(cs.VerifiedChains) > 0 {
		return true
	}
	return len(cs.PeerCertificates) > 0 && verifyChain(t.cur.Load().roots, cs.PeerCertificates, x509.ExtKeyUsageClientAuth) == nil
}

// CertSerial is the serial number of the server certificate in force, for
// logs and tests.
func (t *TLS) CertSerial() string { return t.cur.Load().cert.SerialNumber.String() }

func loadTLS(p TLSParams) (*tlsMaterial, error) {
	if p.CertFile == "" || p.KeyFile == "" || p.CACertFile == "" {
		return nil, fmt.Errorf("%w: %w", ErrTLSConfig, errTLSNoParams)
	}
	cert, err := loadKeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		return nil, err
	}
	dialCert := cert
	if p.ClientCertFile != "" || p.ClientKeyFile != "" {
		if dialCert, err = loadKeyPair(p.ClientCertFile, p.ClientKeyFile); err != nil {
			return nil, err
		}
	}
	pem, err := os.ReadFile(p.CACertFile)
	if err != nil {
		return nil, fmt.Errorf("%w: tls-ca-cert-file: %w", ErrTLSConfig, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: tls-ca-cert-file %s: no PEM certificate in it", ErrTLSConfig, p.CACertFile)
	}
	minV, maxV, err := parseTLSProtocols(p.Protocols)
	if err != nil {
		return nil, err
	}
	suites, err := parseTLSCiphers(p.Ciphers)
	if err != nil {
		return nil, err
	}
	if err := checkTLS13Suites(p.Ciphersuites); err != nil {
		return nil, err
	}
	auth, err := parseAuthClients(p.AuthClients, p.Cluster)
	if err != nil {
		return nil, err
	}
	base := &tls.Config{
		MinVersion:   minV,
		MaxVersion:   maxV,
		CipherSuites: suites,
		// No session tickets: a resumed session would skip the
		// certificate checks, and every connection is to be verified
		// against the certificates in force (a CA reloaded by CONFIG SET).
		SessionTicketsDisabled: true,
	}
	srv := base.Clone()
	srv.Certificates = []tls.Certificate{cert}
	srv.ClientCAs = roots
	srv.ClientAuth = auth
	node := srv.Clone()
	node.ClientAuth = tls.RequireAndVerifyClientCert
	dial := base.Clone()
	dial.Certificates = []tls.Certificate{dialCert}
	dial.RootCAs = roots
	return &tlsMaterial{server: srv, node: node, dial: dial, roots: roots, cert: cert.Leaf}, nil
}

func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return cert, fmt.Errorf("%w: certificate %s, key %s: %w", ErrTLSConfig, certFile, keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return cert, fmt.Errorf("%w: certificate %s: %w", ErrTLSConfig, certFile, err)
		}
	}
	return cert, nil
}

// parseAuthClients maps tls-auth-clients onto Go's. With tls-cluster a
// connection is asked for a certificate even under "no", so that a node's
// connection can be told from a client's (isNode); none is required.
func parseAuthClients(v string, cluster bool) (tls.ClientAuthType, error) {
	switch strings.ToLower(v) {
	case "", "yes":
		return tls.RequireAndVerifyClientCert, nil
	case "optional":
		return tls.VerifyClientCertIfGiven, nil
	case "no":
		if cluster {
			return tls.RequestClientCert, nil
		}
		return tls.NoClientCert, nil
	}
	return 0, fmt.Errorf("%w: tls-auth-clients %q: want yes, no or optional", ErrTLSConfig, v)
}

// tlsVersions are tls-protocols' names, in order.
var tlsVersions = []struct {
	name string
	v    uint16
}{
	{"tlsv1", tls.VersionTLS10},
	{"tlsv1.1", tls.VersionTLS11},
	{"tlsv1.2", tls.VersionTLS12},
	{"tlsv1.3", tls.VersionTLS13},
}

// parseTLSProtocols turns tls-protocols into the range of versions Go
// allows. Go takes a range, so a list with a gap (TLSv1 TLSv1.2) is
// refused.
func parseTLSProtocols(s string) (minV, maxV uint16, err error) {
	if strings.TrimSpace(s) == "" {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	var on [4]bool
	for _, tok := range strings.Fields(s) {
		i := 0
		for i < len(tlsVersions) && !strings.EqualFold(tok, tlsVersions[i].name) {
			i++
		}
		if i == len(tlsVersions) {
			return 0, 0, fmt.Errorf("%w: tls-protocols %q: use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'", ErrTLSConfig, s)
		}
		on[i] = true
	}
	lo, hi := -1, -1
	for i, ok := range on {
		if ok {
			if lo < 0 {
				lo = i
			} else if hi != i-1 {
				return 0, 0, fmt.Errorf("%w: tls-protocols %q: the versions must be consecutive", ErrTLSConfig, s)
			}
			hi = i
		}
	}
	return tlsVersions[lo].v, tlsVersions[hi].v, nil
}

// openSSLCiphers maps OpenSSL's names of the TLSv1.2 suites Go implements
// onto Go's.
var openSSLCiphers = map[string]uint16{
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-ECDSA-AES128-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
	"ECDHE-RSA-AES128-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
	"ECDHE-ECDSA-AES256-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
	"ECDHE-RSA-AES256-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	"AES128-GCM-SHA256":             tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES256-GCM-SHA384":             tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
	"AES128-SHA":                    tls.TLS_RSA_WITH_AES_128_CBC_SHA,
	"AES256-SHA":                    tls.TLS_RSA_WITH_AES_256_CBC_SHA,
}

// parseTLSCiphers turns tls-ciphers (names separated by colons, commas or
// spaces; OpenSSL's or IANA's) into Go's suite ids. OpenSSL's keywords
// (DEFAULT, HIGH, !aNULL) have no Go equivalent and are refused.
func parseTLSCiphers(s string) ([]uint16, error) {
	toks := strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == ',' || r == ' ' })
	if len(toks) == 0 {
		return nil, nil
	}
	iana := map[string]uint16{}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		iana[cs.Name] = cs.ID
	}
	ids := make([]uint16, 0, len(toks))
	for _, tok := range toks {
		id, ok := openSSLCiphers[strings.ToUpper(tok)]
		if !ok {
			id, ok = iana[strings.ToUpper(tok)]
		}
		if !ok {
			return nil, fmt.Errorf("%w: tls-ciphers: unknown cipher %q (name TLSv1.2 suites, e.g. ECDHE-RSA-AES128-GCM-SHA256)", ErrTLSConfig, tok)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// tls13Suites are the TLSv1.3 suites, all of which Go always offers.
var tls13Suites = []string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}

// checkTLS13Suites accepts a tls-ciphersuites list only if it names
// every TLSv1.3 suite Go offers, since Go cannot offer fewer.
func checkTLS13Suites(s string) error {
	toks := strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == ',' || r == ' ' })
	if len(toks) == 0 {
		return nil
	}
	seen := map[string]bool{}
	for _, tok := range toks {
		name := strings.ToUpper(tok)
		known := false
		for _, n := range tls13Suites {
			known = known || n == name
		}
		if !known {
			return fmt.Errorf("%w: tls-ciphersuites: unknown TLSv1.3 suite %q", ErrTLSConfig, tok)
		}
		seen[name] = true
	}
	if len(seen) != len(tls13Suites) {
		return fmt.Errorf("%w: tls-ciphersuites %q: kvs (Go's crypto/tls) always offers all of %s and cannot offer fewer", ErrTLSConfig, s, strings.Join(tls13Suites, ":"))
	}
	return nil
}

// tlsParamNames are the tls-* parameters CONFIG GET and SET know.
var tlsParamNames = []string{
	"tls-port", "tls-cert-file", "tls-key-file", "tls-client-cert-file", "tls-client-key-file",
	"tls-ca-cert-file", "tls-auth-clients", "tls-protocols", "tls-ciphers", "tls-ciphersuites", "tls-cluster",
}

func isTLSParam(name string) bool { return strings.HasPrefix(name, "tls-") && tlsParamIndex(name) >= 0 }

func tlsParamIndex(name string) int {
	for i, n := range tlsParamNames {
		if n == name {
			return i
		}
	}
	return -1
}

// addTLSParams adds the tls-* parameters to CONFIG GET's, with Redis's
// values when TLS is not configured.
func (s *Server) addTLSParams(p map[string]string) {
	var tp TLSParams
	if s.cfg.TLS != nil {
		tp = s.cfg.TLS.Params()
	}
	port := "0"
	if tp.Addr != "" {
		if _, pt, err := net.SplitHostPort(s.TLSAddr()); err == nil {
			port = pt
		}
	}
	auth := tp.AuthClients
	if auth == "" {
		auth = "yes"
	}
	p["tls-port"] = port
	p["tls-cert-file"] = tp.CertFile
	p["tls-key-file"] = tp.KeyFile
	p["tls-client-cert-file"] = tp.ClientCertFile
	p["tls-client-key-file"] = tp.ClientKeyFile
	p["tls-ca-cert-file"] = tp.CACertFile
	p["tls-auth-clients"] = strings.ToLower(auth)
	p["tls-protocols"] = tp.Protocols
	p["tls-ciphers"] = tp.Ciphers
	p["tls-ciphersuites"] = tp.Ciphersuites
	p["tls-cluster"] = yesNo(tp.Cluster)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// checkTLSParams checks the tls-* pairs of one CONFIG SET together (a
// certificate and its key change in one command) and returns what applies
// them, or Redis's error. Files are loaded here, so a change that would
// not load is refused before anything else of the command is applied.
// Without TLS, and for tls-port and tls-cluster, a parameter set to the
// value it has (known, CONFIG GET's) changes nothing and is accepted, as
// Redis accepts it; with TLS, setting a file to its own name reloads it.
func (s *Server) checkTLSParams(set map[string][]byte, known map[string]string) (func(), string) {
	for name, v := range set {
		if string(v) == known[name] && (s.cfg.TLS == nil || name == "tls-port" || name == "tls-cluster") {
			delete(set, name)
		}
	}
	if len(set) == 0 {
		return func() {}, ""
	}
	for _, name := range []string{"tls-port", "tls-cluster"} {
		if _, ok := set[name]; ok {
			return nil, errConfigSetFailed(name, "can't set immutable config")
		}
	}
	if v, ok := set["tls-auth-clients"]; ok {
		if _, err := parseAuthClients(string(v), false); err != nil || strings.TrimSpace(string(v)) == "" {
			return nil, errConfigSetFailed("tls-auth-clients", "argument(s) must be one of the following: no, yes, optional")
		}
	}
	if s.cfg.TLS == nil {
		// As Redis without TLS in use: the values would be kept for a
		// later listener, which kvs cannot start at run time.
		for name := range set {
			return nil, errConfigSetFailed(name, "TLS is not configured (start kvs with --tls-port or --tls-cluster yes)")
		}
	}
	p := s.cfg.TLS.Params()
	first := ""
	for _, name := range tlsParamNames {
		v, ok := set[name]
		if !ok {
			continue
		}
		if first == "" {
			first = name
		}
		val := string(v)
		switch name {
		case "tls-cert-file":
			p.CertFile = val
		case "tls-key-file":
			p.KeyFile = val
		case "tls-client-cert-file":
			p.ClientCertFile = val
		case "tls-client-key-file":
			p.ClientKeyFile = val
		case "tls-ca-cert-file":
			p.CACertFile = val
		case "tls-auth-clients":
			p.AuthClients = strings.ToLower(val)
		case "tls-protocols":
			p.Protocols = val
		case "tls-ciphers":
			p.Ciphers = val
		case "tls-ciphersuites":
			p.Ciphersuites = val
		}
	}
	if _, err := loadTLS(p); err != nil {
		s.cfg.Logger.Warn("CONFIG SET: TLS configuration not changed", "err", err)
		return nil, errConfigSetFailed(first, "Unable to update TLS configuration. Check server logs.")
	}
	return func() {
		if err := s.cfg.TLS.Update(p); err != nil {
			// The files changed between the check and now: the old
			// material stays, as the log says.
			s.cfg.Logger.Warn("CONFIG SET: TLS configuration not changed", "err", err)
			return
		}
		s.cfg.Logger.Info("TLS configuration reloaded", "cert_serial", s.cfg.TLS.CertSerial())
	}, ""
}

// nodeCommands are the requests one node sends another; with tls-cluster
// only a connection with a CA-signed certificate may send them.
var nodeCommands = map[string]bool{
	"kvs.peer": true, "kvs.forward": true, "kvs.sync": true, "kvs.publish": true,
	"kvs.join": true, "kvs.remove": true, "kvs.waitapplied": true,
}

// nodeRefusal is the error for a node's command on a connection that may
// not send it, or "".
func (c *client) nodeRefusal(cmd *command) string {
	if c.node || c.s.cfg.TLS == nil || !nodeCommands[cmd.name] || !c.s.cfg.TLS.Params().Cluster {
		return ""
	}
	return errNodeOnly
}

const errNodeOnly = "ERR this command is for cluster nodes: with tls-cluster yes it needs a TLS connection with a certificate signed by the cluster's CA"

// tlsHandshakeTimeout bounds a client's TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// serveTLS runs the handshake of an accepted TLS connection, then serves
// it on this goroutine (TLS connections are never on an event loop,
// which works on raw sockets).
func (c *client) serveTLS(tc *tls.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), tlsHandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		c.s.cfg.Logger.Debug("TLS handshake failed", "addr", c.addr, "err", err)
		tc.Close()
		c.s.unregister(c)
		return
	}
	c.node = c.s.cfg.TLS.isNode(tc.ConnectionState())
	c.serve()
}

// TLSAddr returns the bound TLS client address, or "" when there is none.
func (s *Server) TLSAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tlsLn == nil {
		return ""
	}
	return s.tlsLn.Addr().String()
}

// DialTLS is how this process dials another kvs node over TLS: the
// node's client certificate, the server verified against the CA.
func DialTLS(t *TLS, addr string, timeout time.Duration) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: t.DialConfig()}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, "tcp", addr)
}

// dialNode dials another node's client address: over TLS with
// tls-cluster, else plain TCP.
func (s *Server) dialNode(addr string, timeout time.Duration) (net.Conn, error) {
	if t := s.cfg.TLS; t != nil && t.Params().Cluster {
		return DialTLS(t, addr, timeout)
	}
	return net.DialTimeout("tcp", addr, timeout)
}

// ClientTLSConfig is the config of a client of kvs nodes (kvs join,
// remove, status): the server's certificate verified against the CA in
// caFile by chain, as nodes verify one another, and the certificate in
// certFile and keyFile presented if given.
func ClientTLSConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: CA certificates: %w", ErrTLSConfig, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s: no PEM certificate in it", ErrTLSConfig, caFile)
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // host names are not checked; VerifyConnection checks the chain
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(roots, cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
		},
	}
	if certFile != "" || keyFile != "" {
		cert, err := loadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
