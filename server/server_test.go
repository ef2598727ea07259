package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"

	"kvs/fsm"
)

func TestRedisReplies(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, tc := range redisReplies {
		if got := rc.do(tc.args...); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
}

func TestRESP3(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"GET", "nokey"}, "$-1\r\n"},
		{[]string{"HELLO", "3"}, "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.4\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:1\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"},
		{[]string{"GET", "nokey"}, "_\r\n"},
		{[]string{"SET", "k", "v"}, "+OK\r\n"},
		{[]string{"MGET", "k", "nokey"}, "*2\r\n$1\r\nv\r\n_\r\n"},
		{[]string{"CLIENT", "GETNAME"}, "_\r\n"},
		{[]string{"CONFIG", "GET", "maxclients"}, "%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"},
		{[]string{"COMMAND", "INFO", "nosuch"}, "*1\r\n_\r\n"},
		{[]string{"INFO", "keyspace"}, "=48\r\ntxt:# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n\r\n"},
		{[]string{"HELLO", "2"}, "*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.4\r\n$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:1\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"},
		{[]string{"GET", "nokey"}, "$-1\r\n"},
		{[]string{"INFO", "keyspace"}, "$44\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n\r\n"},
	}
	for _, st := range steps {
		if got := rc.do(st.args...); got != st.want {
			t.Errorf("%q:\n got %q\nwant %q", st.args, got, st.want)
		}
	}
}

func TestProtocolErrors(t *testing.T) {
	s := startServer(t, Config{})
	cases := []struct {
		name, in, want string
	}{
		{"huge bulk", "*1\r\n$999999999999\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk over proto-max-bulk-len", "*1\r\n$536870913\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"negative bulk", "*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk length not a number", "*1\r\n$3x\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"multibulk not a number", "*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"multibulk too long", "*3000000000\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"no dollar", "*1\r\nx", "-ERR Protocol error: expected '$', got 'x'\r\n"},
		{"commands before the error run", "*1\r\n$4\r\nPING\r\n*1\r\n$99999999999\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
		{"unbalanced quotes", "ECHO \"a\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"inline too big", strings.Repeat("x", 70000), "-ERR Protocol error: too big inline request\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, s)
			rc.send([]byte(tc.in))
			got, err := rc.readEOF()
			if err != nil {
				t.Fatalf("connection not closed: %v (read %q)", err, got)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	// The server survives all of that.
	if got := dialRaw(t, s).do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after protocol errors: %q", got)
	}
}

func TestEmptyRequestsIgnored(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	rc.send([]byte("*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n"))
	if got := rc.reply(); got != "+PONG\r\n" {
		t.Fatalf("got %q", got)
	}
}

func TestRequestsSplitAcrossReads(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	big := strings.Repeat("v", 300000)
	req := append(encodeCommand("SET", "k", big), encodeCommand("STRLEN", "k")...)
	// Headers arrive a byte at a time, the payload in uneven pieces.
	for len(req) > 0 {
		n := 1
		if len(req) > 1000 && req[0] == 'v' {
			n = 777
		}
		rc.send(req[:n])
		req = req[n:]
	}
	if got := rc.reply() + rc.reply(); got != "+OK\r\n:300000\r\n" {
		t.Fatalf("got %q", got)
	}
	if got := rc.do("GET", "k"); got != "$300000\r\n"+big+"\r\n" {
		t.Fatalf("GET returned %d bytes", len(got))
	}
}

func TestInlineCommands(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	rc.send([]byte("SET k \"a b\"\r\nGET k\r\n"))
	if got := rc.reply() + rc.reply(); got != "+OK\r\n$3\r\na b\r\n" {
		t.Fatalf("got %q", got)
	}
}

func TestConfigSetProtoMaxBulkLen(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	if got := rc.do("CONFIG", "SET", "proto-max-bulk-len", "1048576"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET: %q", got)
	}
	rc.send([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048577\r\n"))
	got, _ := rc.readEOF()
	if got != "-ERR Protocol error: invalid bulk length\r\n" {
		t.Fatalf("got %q", got)
	}
}

// countingProposer counts Propose calls and the commands in each, and
// applies through a MemoryProposer.
type countingProposer struct {
	inner Proposer
	mu    sync.Mutex
	calls [][]fsm.Op
}

func (p *countingProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	ops := make([]fsm.Op, len(cmds))
	for i := range cmds {
		ops[i] = cmds[i].Op
	}
	p.mu.Lock()
	p.calls = append(p.calls, ops)
	p.mu.Unlock()
	return p.inner.Propose(cmds)
}

func (p *countingProposer) clientCalls() [][]fsm.Op {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out [][]fsm.Op
	for _, c := range p.calls {
		if c[0] != fsm.OpDelExpired {
			out = append(out, c)
		}
	}
	return out
}

func TestPipelineIsOneProposal(t *testing.T) {
	st := fsm.NewStore()
	p := &countingProposer{inner: MemoryProposer{Store: st}}
	s := startServer(t, Config{Store: st, Proposer: p, DisableActiveExpiry: true})
	rc := dialRaw(t, s)

	// One write of 100 SETs: it arrives in one read on loopback, so the
	// server sees one pipeline.
	var req []byte
	for i := 0; i < 100; i++ {
		req = append(req, encodeCommand("SET", "key"+itoa(i), "v")...)
	}
	rc.send(req)
	for i := 0; i < 100; i++ {
		if got := rc.reply(); got != "+OK\r\n" {
			t.Fatalf("reply %d: %q", i, got)
		}
	}
	calls := p.clientCalls()
	if len(calls) != 1 || len(calls[0]) != 100 {
		t.Fatalf("100 pipelined SETs made %d proposals, want 1 of 100", len(calls))
	}
}

func TestPipelineKeepsOrder(t *testing.T) {
	st := fsm.NewStore()
	p := &countingProposer{inner: MemoryProposer{Store: st}}
	s := startServer(t, Config{Store: st, Proposer: p, DisableActiveExpiry: true})
	rc := dialRaw(t, s)

	var req []byte
	for _, c := range [][]string{
		{"SET", "a", "1"}, {"INCR", "a"}, {"SET", "a", "x", "EX", "0"}, {"GET", "a"},
		{"NOSUCH"}, {"APPEND", "a", "3"}, {"GET", "a"},
	} {
		req = append(req, encodeCommand(c...)...)
	}
	rc.send(req)
	want := []string{"+OK\r\n", ":2\r\n", "-ERR invalid expire time in 'set' command\r\n", "$1\r\n2\r\n",
		"-ERR unknown command 'NOSUCH', with args beginning with: \r\n", ":2\r\n", "$2\r\n23\r\n"}
	for i, w := range want {
		if got := rc.reply(); got != w {
			t.Errorf("reply %d: got %q, want %q", i, got, w)
		}
	}
	calls := p.clientCalls()
	if len(calls) != 2 || len(calls[0]) != 2 || len(calls[1]) != 1 {
		t.Errorf("proposals %v, want [[SET INCR] [APPEND]]", calls)
	}
}

type failingProposer struct{}

func (failingProposer) Propose([]fsm.Command) ([]fsm.Reply, error) {
	return nil, errors.New("not the leader\r\nreally")
}

func TestProposeErrorGoesToEachCommand(t *testing.T) {
	s := startServer(t, Config{Proposer: failingProposer{}, DisableActiveExpiry: true})
	rc := dialRaw(t, s)
	rc.send(append(encodeCommand("SET", "a", "1"), encodeCommand("DEL", "a")...))
	for i := 0; i < 2; i++ {
		if got := rc.reply(); got != "-ERR not the leader  really\r\n" {
			t.Fatalf("reply %d: %q", i, got)
		}
	}
	if got := rc.do("GET", "a"); got != "$-1\r\n" {
		t.Fatalf("GET after failed SET: %q", got)
	}
}

type panickingProposer struct{}

func (panickingProposer) Propose([]fsm.Command) ([]fsm.Reply, error) { panic("boom") }

func TestPanicClosesOnlyThatConnection(t *testing.T) {
	var logged strings.Builder
	lw := &lockedWriter{w: &logged}
	logger := slog.New(slog.NewTextHandler(lw, nil))
	s := startServer(t, Config{Proposer: panickingProposer{}, DisableActiveExpiry: true, Logger: logger})
	rc := dialRaw(t, s)
	rc.send(encodeCommand("SET", "a", "1"))
	if got, err := rc.readEOF(); err != nil || got != "" {
		t.Fatalf("after panic: %q, %v", got, err)
	}
	if got := dialRaw(t, s).do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after a panic: %q", got)
	}
	lw.mu.Lock()
	out := logged.String()
	lw.mu.Unlock()
	if !strings.Contains(out, "panic=boom") {
		t.Fatalf("panic not logged: %q", out)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestMaxClients(t *testing.T) {
	s := startServer(t, Config{MaxClients: 2})
	a, b := dialRaw(t, s), dialRaw(t, s)
	a.do("PING")
	b.do("PING")
	c := dialRaw(t, s)
	got, err := c.readEOF()
	if err != nil || got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third client: %q, %v", got, err)
	}
	a.nc.Close()
	eventually(t, "a slot to free up", func() bool { return s.connectedClients() < 2 })
	if got := dialRaw(t, s).do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after a client left: %q", got)
	}
}

// blockingProposer holds every batch until released.
type blockingProposer struct {
	inner   Proposer
	entered chan struct{}
	release chan struct{}
}

func (p *blockingProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	p.entered <- struct{}{}
	<-p.release
	return p.inner.Propose(cmds)
}

func TestShutdownFinishesInFlightCommands(t *testing.T) {
	st := fsm.NewStore()
	p := &blockingProposer{inner: MemoryProposer{Store: st}, entered: make(chan struct{}, 1), release: make(chan struct{})}
	s := startServer(t, Config{Store: st, Proposer: p, DisableActiveExpiry: true})
	busy, idle := dialRaw(t, s), dialRaw(t, s)
	idle.do("PING")
	busy.send(encodeCommand("SET", "k", "v"))
	<-p.entered

	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	// The idle connection is closed without a reply.
	if got, err := idle.readEOF(); err != nil || got != "" {
		t.Fatalf("idle connection: %q, %v", got, err)
	}
	// New connections are refused once the listener is closed.
	eventually(t, "listener closed", func() bool {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			return true
		}
		nc.Close()
		return false
	})
	close(p.release)
	if got := busy.reply(); got != "+OK\r\n" {
		t.Fatalf("in-flight SET: %q", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if got, _ := busy.readEOF(); got != "" {
		t.Fatalf("after shutdown: %q", got)
	}
	if r := st.Read(0, fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte("k")}}); string(r.Bulk) != "v" {
		t.Fatalf("in-flight SET not applied: %+v", r)
	}
	// Idempotent.
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownContextExpires(t *testing.T) {
	st := fsm.NewStore()
	p := &blockingProposer{inner: MemoryProposer{Store: st}, entered: make(chan struct{}, 1), release: make(chan struct{})}
	s := startServer(t, Config{Store: st, Proposer: p, DisableActiveExpiry: true})
	busy := dialRaw(t, s)
	busy.send(encodeCommand("SET", "k", "v"))
	<-p.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	// The forced close cannot interrupt the proposer; once it returns,
	// Shutdown does too.
	close(p.release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v, want context.Canceled", err)
	}
}

func TestListenAddressInUse(t *testing.T) {
	s := startServer(t, Config{})
	s2, err := New(Config{Store: fsm.NewStore(), Addr: s.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	err = s2.ListenAndServe()
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("ListenAndServe on a taken port: %v", err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without a Store succeeded")
	}
	if _, err := New(Config{Store: fsm.NewStore(), MaxClients: -1}); err == nil {
		t.Error("negative MaxClients accepted")
	}
	if _, err := New(Config{Store: fsm.NewStore(), Addr: "nonsense"}); err == nil {
		t.Error("bad Addr accepted")
	}
	s, err := New(Config{Store: fsm.NewStore()})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Addr != DefaultAddr || s.cfg.MaxClients != DefaultMaxClients || s.cfg.Proposer == nil {
		t.Errorf("defaults not applied: %+v", s.cfg)
	}
}

func TestActiveExpiry(t *testing.T) {
	st := fsm.NewStore()
	p := &countingProposer{inner: MemoryProposer{Store: st}}
	s := startServer(t, Config{Store: st, Proposer: p, DisableActiveExpiry: true})
	s.SetActiveExpiry(true)
	rc := dialRaw(t, s)
	for i := 0; i < 50; i++ {
		rc.do("SET", "k"+itoa(i), "v", "PX", "1")
	}
	rc.do("SET", "keep", "v")
	eventually(t, "expired keys to be deleted", func() bool {
		return len(st.ExpiredKeys(1<<62, 100)) == 0
	})
	if got := rc.do("DBSIZE"); got != ":1\r\n" {
		t.Fatalf("DBSIZE: %q", got)
	}
	// A key whose deadline passed before its SET was applied is never
	// stored, so the count of actively expired keys may be below 50.
	n := s.stats.expiredKeys.Load()
	if n < 1 || n > 50 {
		t.Fatalf("expired_keys = %d", n)
	}
	if info := rc.do("INFO", "stats"); !strings.Contains(info, "expired_keys:"+itoa(int(n))+"\r\n") {
		t.Fatalf("INFO stats: %q", info)
	}
	found := false
	p.mu.Lock()
	for _, c := range p.calls {
		found = found || c[0] == fsm.OpDelExpired
	}
	p.mu.Unlock()
	if !found {
		t.Fatal("no OpDelExpired proposed")
	}
}

func TestInfoAndClientList(t *testing.T) {
	s := startServer(t, Config{
		Version:      "0.1.0",
		InfoSections: []string{"raft"},
		Info: func(section string) []InfoField {
			switch section {
			case "persistence":
				return []InfoField{{"aof_enabled", "1"}}
			case "raft":
				return []InfoField{{"state", "leader"}}
			case "replication":
				return []InfoField{{"role", "slave"}}
			}
			return nil
		},
		ConfigParams: map[string]string{"appendonly": "yes"},
	})
	rc := dialRaw(t, s)
	rc.do("CLIENT", "SETNAME", "me")
	rc.do("CLIENT", "SETINFO", "LIB-NAME", "go-redis")
	info := rc.do("INFO")
	for _, want := range []string{"# Server\r\n", "redis_version:7.2.4\r\n", "kvs_version:0.1.0\r\n",
		"# Clients\r\nconnected_clients:1\r\n", "# Memory\r\nused_memory:", "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\n", "rdb_last_bgsave_status:ok\r\naof_enabled:1\r\n",
		"# Stats\r\ntotal_connections_received:1\r\ntotal_commands_processed:3\r\n", "# Replication\r\nrole:slave\r\nconnected_slaves:0\r\n", "# Cluster\r\ncluster_enabled:0\r\n", "# Keyspace\r\n", "# Raft\r\nstate:leader\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
	if got := rc.do("INFO", "raft"); got != "$22\r\n# Raft\r\nstate:leader\r\n\r\n" {
		t.Errorf("INFO raft: %q", got)
	}
	if got := rc.do("CONFIG", "GET", "append*"); got != "*8\r\n$13\r\nappenddirname\r\n$13\r\nappendonlydir\r\n$14\r\nappendfilename\r\n$14\r\nappendonly.aof\r\n"+
		"$11\r\nappendfsync\r\n$8\r\neverysec\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n" {
		t.Errorf("CONFIG GET append*: %q", got)
	}
	if st := s.Stats(); st.ConnectedClients != 1 || st.CommandsProcessed != 5 {
		t.Errorf("Stats: %+v", st)
	}
	list := rc.do("CLIENT", "LIST")
	if !strings.Contains(list, " name=me ") || !strings.Contains(list, " lib-name=go-redis ") || !strings.Contains(list, " cmd=client|list ") {
		t.Errorf("CLIENT LIST: %q", list)
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := New(Config{Store: fsm.NewStore(), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	for i := 0; i < 3; i++ {
		dialRaw(t, s).do("SET", "k", "v")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-served
	eventually(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestCommandTable(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	if got := rc.do("COMMAND", "INFO", "get"); got != "*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n"+
		"*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n"+
		"$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n" {
		t.Errorf("COMMAND INFO get: %q", got)
	}
	if got := rc.do("COMMAND", "DOCS", "get"); got != "*2\r\n$3\r\nget\r\n*6\r\n$7\r\nsummary\r\n$34\r\nReturns the string value of a key.\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$6\r\nstring\r\n" {
		t.Errorf("COMMAND DOCS get: %q", got)
	}
	count := rc.do("COMMAND", "COUNT")
	if count != ":"+itoa(len(s.commands))+"\r\n" {
		t.Errorf("COMMAND COUNT: %q", count)
	}
	for name := range s.commands {
		if _, ok := commandDocs[name]; !ok {
			t.Errorf("no COMMAND DOCS entry for %s", name)
		}
	}
}
