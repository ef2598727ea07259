package test

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// socketOwner returns which of pids holds the TCP socket bound to local
// and connected to peer: for a proxy, the process that dialed the
// connection it accepted, whose remote address is that socket's local one
// and whose local address is its peer. Both ends are matched: one local
// port may serve several connections to different peers (the test's own
// dials among them), and the first line for the port alone can be another
// process's. It reads /proc/net/tcp for
// the socket's inode and each process's fds for it, and returns -1 when
// none holds it; exists reports whether the socket is still open at all
// (a sender killed just after it dialed has none). A TLS connection shows
// nothing of its sender, so this is how the chaos proxies tell senders
// apart when raft runs over TLS.
func socketOwner(local, peer *net.TCPAddr, pids []int) (pid int, exists bool) {
	inode := tcpInode(local, peer)
	if inode == "" {
		return -1, false
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(dir + "/" + fd.Name()); err == nil && l == want {
				return pid, true
			}
		}
	}
	return -1, true
}

// tcpInode finds the inode of the IPv4 TCP socket from a to peer in
// /proc/net/tcp, or "".
func tcpInode(a, peer *net.TCPAddr) string {
	key, peerKey := procTCPAddr(a), procTCPAddr(peer)
	if key == "" || peerKey == "" {
		return ""
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == key && f[2] == peerKey {
			if _, err := strconv.Atoi(f[9]); err == nil && f[9] != "0" {
				return f[9]
			}
		}
	}
	return ""
}

// procTCPAddr is a as /proc/net/tcp prints it: the IPv4 address as the
// 32-bit word in host (little endian) order, then the port big endian
// (127.0.0.1:80 is 0100007F:0050); "" for other addresses.
func procTCPAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	if ip == nil {
		return ""
	}
	return strings.ToUpper(hex.EncodeToString([]byte{ip[3], ip[2], ip[1], ip[0]})) + ":" + fmt.Sprintf("%04X", a.Port)
}
