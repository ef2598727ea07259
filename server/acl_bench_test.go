package server

import (
	"io"
	"testing"

	"kvs/acl"
	"kvs/fsm"
)

// BenchmarkACLPipelined measures the ACL check on the hot path: pipelines
// of 16 GETs or SETs on one raw connection, as the default user (open to
// all: the check is skipped) and as a user restricted to one key pattern
// and two commands (every command checked).
func BenchmarkACLPipelined(b *testing.B) {
	for _, user := range []string{"default", "restricted"} {
		for _, cmd := range []string{"GET", "SET"} {
			b.Run(user+"/"+cmd, func(b *testing.B) {
				s := startServer(b, Config{Store: fsm.NewStore(), DisableActiveExpiry: true})
				rc := dialRaw(b, s)
				if user == "restricted" {
					rc.do("ACL", "SETUSER", "app", "on", ">pw", "~key*", "-@all", "+get", "+set")
					if r := rc.do("AUTH", "app", "pw"); r != "+OK\r\n" {
						b.Fatalf("AUTH: %q", r)
					}
				}
				rc.do("SET", "key", "value")
				args := []string{cmd, "key"}
				reply := "$5\r\nvalue\r\n"
				if cmd == "SET" {
					args, reply = append(args, "value"), "+OK\r\n"
				}
				var req []byte
				for range 16 {
					req = append(req, encodeCommand(args...)...)
				}
				buf := make([]byte, 16*len(reply))
				b.ReportAllocs()
				for b.Loop() {
					rc.send(req)
					if _, err := io.ReadFull(rc.br, buf); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16), "ns/cmd")
			})
		}
	}
}

// BenchmarkACLCheck measures the check before a command alone, without
// the network: GET key as a user allowed GET on key* (the restricted
// path), and as the default user (the fast path).
func BenchmarkACLCheck(b *testing.B) {
	args := [][]byte{[]byte("GET"), []byte("key1")}
	for _, user := range []string{"default", "restricted"} {
		b.Run(user, func(b *testing.B) {
			s, err := New(Config{Store: fsm.NewStore()})
			if err != nil {
				b.Fatal(err)
			}
			cmd := s.commands["get"]
			c := &client{s: s, auth: s.newClientAuth()}
			c.setUserName("default")
			if user == "restricted" {
				u, err := acl.ParseUser(s.acl.cmds, "app", "on nopass ~key* -@all +get +set")
				if err != nil {
					b.Fatal(err)
				}
				s.cfg.Store.Apply(1, 0, []fsm.Command{{Op: fsm.OpACLSet, Args: [][]byte{[]byte("app"), []byte(s.userLine(u))}}})
				c.auth.name, c.auth.authed = "app", true
			}
			b.ReportAllocs()
			for b.Loop() {
				if !c.auth.fast || c.auth.gen != s.cfg.Store.ACLGen() {
					if !c.refreshUser() {
						b.Fatal("no user")
					}
					if !c.auth.fast {
						if ac := c.aclCommand(cmd, args); c.needsAuth(ac) || c.aclDenial(ac, args) != "" {
							b.Fatal("denied")
						}
					}
				}
			}
		})
	}
}
