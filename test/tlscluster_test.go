package test

import (
	"fmt"
	"testing"
)

// startTLSCluster is startCluster for a cluster with mutual TLS between
// its nodes (--tls-cluster yes), certificates from e: n1 bootstraps, the
// others start fresh and are joined with `kvs join --tls`, n2 through n1,
// the rest through n2. Each node keeps its plain client port for the
// tests' clients; node commands go over TLS (Node.AdminTLS).
func startTLSCluster(t testing.TB, e *tlsEnv, size int, extra ...string) []*Node {
	t.Helper()
	admin := clientTLS(t, e.ca, e.client)
	node := func(id string, more ...string) *Node {
		tlsAddr := freeAddr(t)
		flags := append([]string{"--tls-port", tlsAddr, "--tls-cert-file", e.server.cert, "--tls-key-file", e.server.key,
			"--tls-ca-cert-file", e.ca.file, "--tls-cluster", "yes"}, more...)
		n := newClusterNode(t, id, append(flags, extra...)...)
		n.TLSAddr, n.AdminTLS = tlsAddr, admin
		return n
	}
	nodes := []*Node{node("n1", "--bootstrap")}
	nodes[0].Start()
	for i := 2; i <= size; i++ {
		n := node(fmt.Sprintf("n%d", i))
		n.Start()
		via := nodes[0]
		if i > 2 {
			via = nodes[1]
		}
		out, code := runKVS(t, clusterWait, "join", "--tls", "--cacert", e.ca.file, "--cert", e.client.cert, "--key", e.client.key,
			via.TLSAddr, n.TLSAddr)
		if code != 0 {
			t.Fatalf("kvs join --tls %s %s: exit %d\n%s", via.TLSAddr, n.TLSAddr, code, out)
		}
		nodes = append(nodes, n)
	}
	waitMembers(t, nodes, size)
	return nodes
}
