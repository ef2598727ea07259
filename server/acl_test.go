package server

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"kvs/fsm"
)

// The leader checks a forwarded batch again in the name of its sender,
// from the fsm commands alone.
func TestACLForwardedCheck(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	if r := rc.do("ACL", "SETUSER", "app", "on", "nopass", "~app:*", "%R~ro:*", "+@all", "-flushall"); r != "+OK\r\n" {
		t.Fatal(r)
	}
	set := func(k string) fsm.Command { return fsm.Command{Op: fsm.OpSet, Args: [][]byte{[]byte(k), []byte("v")}} }
	cmds := []fsm.Command{set("app:1"), set("ro:1"), {Op: fsm.OpFlushAll}, {Op: fsm.OpGet, Args: [][]byte{[]byte("ro:1")}}}
	errs, any := s.checkForwarded("app", cmds)
	if !any || errs[0] != "" || errs[1] != errNoPermKey || !strings.HasPrefix(errs[2], "NOPERM ") || errs[3] != "" {
		t.Fatalf("forwarded as app: %q", errs)
	}
	if errs, _ := s.checkForwarded("nosuch", cmds[:1]); errs[0] == "" {
		t.Fatal("a batch forwarded in the name of an unknown user passed")
	}
	if _, any := s.checkForwarded("default", cmds); any {
		t.Fatal("the default user was refused")
	}
	merged := mergeRefused([]string{"", "E1", ""}, []fsm.Reply{fsm.IntReply(1), fsm.IntReply(2)})
	if len(merged) != 3 || merged[1].Str != "E1" || merged[2].Int != 2 {
		t.Fatalf("mergeRefused: %+v", merged)
	}
}

// Every denial and failed login is counted for the metrics.
func TestACLDenialsCounted(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	rc.do("ACL", "SETUSER", "app", "on", ">pw", "~app:*", "&ch", "-@all", "+get", "+publish")
	rc.do("AUTH", "app", "bad")
	rc.do("AUTH", "app", "pw")
	rc.do("SET", "app:1", "v")
	rc.do("GET", "other")
	rc.do("PUBLISH", "other", "m")
	got := s.ACLDenials()
	for _, r := range []string{"auth", "command", "key", "channel"} {
		if got[r] != 1 {
			t.Errorf("%s denials: %d, want 1 (%v)", r, got[r], got)
		}
	}
}

// A subscriber whose user loses a channel it listens to, or is deleted,
// is disconnected at once, as Redis does; one whose channels stay allowed
// is not.
func TestACLRevokedSubscribers(t *testing.T) {
	s := startServer(t, Config{})
	admin := dialRaw(t, s)
	admin.do("ACL", "SETUSER", "sub", "on", ">pw", "&news*", "&other", "+@all")
	admin.do("ACL", "SETUSER", "keep", "on", ">pw", "&news*", "+@all")
	subscribe := func(user, channel string, pattern bool) *rawConn {
		rc := dialRaw(t, s)
		if r := rc.do("AUTH", user, "pw"); r != "+OK\r\n" {
			t.Fatal(r)
		}
		cmd := "SUBSCRIBE"
		if pattern {
			cmd = "PSUBSCRIBE"
		}
		if r := rc.do(cmd, channel); !strings.Contains(r, channel) {
			t.Fatalf("%s %s: %q", cmd, channel, r)
		}
		return rc
	}
	lost := subscribe("sub", "news1", false)
	lostPattern := subscribe("sub", "news*", true)
	kept := subscribe("sub", "other", false)
	other := subscribe("keep", "news1", false)
	admin.do("ACL", "SETUSER", "sub", "resetchannels", "&other")
	for _, rc := range []*rawConn{lost, lostPattern} {
		if rest, err := rc.readEOF(); err != nil || rest != "" {
			t.Fatalf("a subscriber that lost its channel: %q, %v; want it closed", rest, err)
		}
	}
	admin.do("PUBLISH", "other", "still")
	if r := kept.reply(); !strings.Contains(r, "still") {
		t.Fatalf("a subscriber whose channel is still allowed: %q", r)
	}
	admin.do("ACL", "DELUSER", "sub")
	if rest, err := kept.readEOF(); err != nil || rest != "" {
		t.Fatalf("a subscriber of a deleted user: %q, %v; want it closed", rest, err)
	}
	admin.do("PUBLISH", "news1", "m")
	if r := other.reply(); !strings.Contains(r, "news1") {
		t.Fatalf("another user's subscriber: %q", r)
	}
}

// A node whose login the leader refuses gets an error that says its
// request certainly did not take effect; with the right password its
// requests go through.
func TestACLPeerLogin(t *testing.T) {
	s := startServer(t, Config{})
	if r := dialRaw(t, s).do("CONFIG", "SET", "requirepass", "pw"); r != "+OK\r\n" {
		t.Fatal(r)
	}
	login := peerLogin{user: "default", password: "wrong"}
	p := newPeerPool(5*time.Second, s.dialNode, func() peerLogin { return login })
	defer p.close()
	ping := func(pc *peerConn) net.Buffers { return net.Buffers{encodeArgs("PING")} }
	if _, err := p.roundTrip(s.Addr().String(), 5*time.Second, ping); !errors.Is(err, ErrLeaderUnreachable) {
		t.Fatalf("wrong password: %v, want ErrLeaderUnreachable", err)
	}
	login.password = "pw"
	if r, err := p.roundTrip(s.Addr().String(), 5*time.Second, ping); err != nil || r.text != "PONG" {
		t.Fatalf("right password: %+v %v", r, err)
	}
}

// The login a node uses with the others follows masteruser and
// masterauth as CONFIG SET changes them, and, while masterauth is empty,
// the requirepass last set on the node; a refused login says what to do.
func TestPeerLoginFollowsConfig(t *testing.T) {
	s := startServer(t, Config{})
	c := dialRaw(t, s)
	check := func(wantUser, wantPass string) {
		t.Helper()
		if u, p := s.PeerLogin(); u != wantUser || p != wantPass {
			t.Fatalf("PeerLogin = %q, %q; want %q, %q", u, p, wantUser, wantPass)
		}
	}
	check("default", "")
	if r := c.do("CONFIG", "SET", "requirepass", "seed"); r != "+OK\r\n" {
		t.Fatal(r)
	}
	check("default", "seed")
	for _, step := range []struct {
		args             []string
		wantUser, wantPW string
	}{
		{[]string{"masterauth", "node-pw"}, "default", "node-pw"},
		{[]string{"masteruser", "repl"}, "repl", "node-pw"},
		{[]string{"masteruser", "", "masterauth", ""}, "default", "seed"},
		{[]string{"requirepass", "changed"}, "default", "changed"},
	} {
		if r := c.do(append([]string{"CONFIG", "SET"}, step.args...)...); r != "+OK\r\n" {
			t.Fatalf("CONFIG SET %q: %s", step.args, r)
		}
		check(step.wantUser, step.wantPW)
	}
	if r := c.do("AUTH", "changed"); r != "+OK\r\n" {
		t.Fatal(r)
	}
	c.do("CONFIG", "SET", "masterauth", "wrong")
	if r := c.do("CONFIG", "GET", "master*"); r != "*4\r\n$10\r\nmasterauth\r\n$5\r\nwrong\r\n$10\r\nmasteruser\r\n$0\r\n\r\n" {
		t.Fatalf("CONFIG GET master*: %q", r)
	}
	ping := func(pc *peerConn) net.Buffers { return net.Buffers{encodeArgs("PING")} }
	_, err := s.peers.roundTrip(s.Addr().String(), 5*time.Second, ping)
	if !errors.Is(err, ErrLeaderUnreachable) || !strings.Contains(err.Error(), "CONFIG SET masterauth <password>") {
		t.Fatalf("refused login: %v; want ErrLeaderUnreachable saying what to do", err)
	}
}

// When the node's login changes, the pool's idle connections that logged
// in otherwise are closed, a busy one is not reused once its request is
// answered, and the next request logs in anew.
func TestPeerPoolRelogin(t *testing.T) {
	s := startServer(t, Config{})
	login := peerLogin{user: "default"}
	p := newPeerPool(5*time.Second, s.dialNode, func() peerLogin { return login })
	defer p.close()
	addr := s.Addr().String()
	ping := func(pc *peerConn) net.Buffers { return net.Buffers{encodeArgs("PING")} }
	if r, err := p.roundTrip(addr, 5*time.Second, ping); err != nil || r.text != "PONG" {
		t.Fatalf("PING: %+v %v", r, err)
	}
	busy, err := p.get(addr, login)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.idle) != 0 {
		t.Fatalf("%d idle connections while the only one is taken", len(p.idle))
	}
	p.put(busy, true)
	idle, err := p.get(addr, login)
	if err != nil || idle != busy {
		t.Fatalf("the idle connection was not reused: %v", err)
	}

	login = peerLogin{user: "default", password: "any"} // nopass: any password logs in
	p.put(idle, true)
	if len(p.idle) != 0 {
		t.Fatal("a busy connection of the old login went back to the pool")
	}
	if r, err := p.roundTrip(addr, 5*time.Second, ping); err != nil || r.text != "PONG" {
		t.Fatalf("PING with the new login: %+v %v", r, err)
	}
	if len(p.idle) != 1 || p.idle[0].login != login {
		t.Fatalf("idle connections after the new login: %d", len(p.idle))
	}
	old := p.idle[0]
	login = peerLogin{user: "default", password: "other"}
	p.expire()
	if len(p.idle) != 0 {
		t.Fatal("expire kept an idle connection of the old login")
	}
	if _, err := old.nc.Write([]byte("PING\r\n")); err == nil {
		if _, err := old.br.ReadByte(); err == nil {
			t.Fatal("the expired connection still works")
		}
	}
}
