//go:build linux

package test

import (
	"net"
	"os"
	"testing"
)

// TestSocketOwner: the owner of a connection is found by both its ends,
// among the pids given, and a closed connection no longer exists.
func TestSocketOwner(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	local, peer := c.LocalAddr().(*net.TCPAddr), ln.Addr().(*net.TCPAddr)
	if pid, exists := socketOwner(local, peer, []int{os.Getpid()}); pid != os.Getpid() || !exists {
		t.Fatalf("socketOwner = %d, %v; want this process", pid, exists)
	}
	if pid, exists := socketOwner(local, peer, []int{1}); pid != -1 || !exists {
		t.Fatalf("socketOwner among other pids = %d, %v; want -1, true", pid, exists)
	}
	// The same local port toward another peer is another socket.
	other := &net.TCPAddr{IP: peer.IP, Port: peer.Port + 1}
	if _, exists := socketOwner(local, other, []int{os.Getpid()}); exists {
		t.Fatal("a socket to another peer was found")
	}
	c.Close()
	if _, exists := socketOwner(local, peer, []int{os.Getpid()}); exists {
		t.Fatal("a closed socket still exists")
	}
}
