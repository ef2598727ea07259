package server

import (
	"net"
	"testing"

	"kvs/fsm"
)

// TestProtectedRefuses: protected mode refuses addresses other than
// 127.0.0.1 and ::1 exactly, except a cluster member's, and stands down
// when turned off.
func TestProtectedRefuses(t *testing.T) {
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000} }
	fc := &fakeCluster{selfID: "a", members: []Member{
		{ID: "a", RaftAddr: "10.0.0.1:7000", RESPAddr: "10.0.0.1:6379", Leader: true},
		{ID: "b", RaftAddr: "10.0.0.2:7000", RESPAddr: "[fd00::2]:6379"},
		{ID: "c", RaftAddr: "node-c:7000", RESPAddr: "node-c:6379"},
	}}
	standalone, err := New(Config{Store: fsm.NewStore()})
	if err != nil {
		t.Fatal(err)
	}
	clustered, err := New(Config{Store: fsm.NewStore(), Cluster: fc})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s      *Server
		addr   string
		refuse bool
	}{
		{standalone, "127.0.0.1", false},
		{standalone, "::1", false},
		{standalone, "::ffff:127.0.0.1", false},
		{standalone, "127.0.0.2", true}, // as Redis: loopback means 127.0.0.1
		{standalone, "192.0.2.7", true},
		{standalone, "10.0.0.2", true},
		{clustered, "10.0.0.2", false},
		{clustered, "fd00::2", false},
		{clustered, "10.0.0.3", true},
	} {
		if got := tc.s.protectedRefuses(tcp(tc.addr)); got != tc.refuse {
			t.Errorf("cluster %v, client %s: refused %v, want %v", tc.s.cfg.Cluster != nil, tc.addr, got, tc.refuse)
		}
	}
	if standalone.protectedRefuses(&net.UnixAddr{Name: "/tmp/s", Net: "unix"}) {
		t.Error("a non-TCP address was refused")
	}
	standalone.protectedMode.Store(false)
	if standalone.protectedRefuses(tcp("192.0.2.7")) {
		t.Error("refused with protected mode off")
	}
}
