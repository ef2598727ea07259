package server

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kvs/fsm"
)

// roundsProposer is a roundProposer over a store, as durable mode's is over
// the wal: Enqueue encodes the batch, Kick applies everything enqueued on
// another goroutine and answers each batch from there, as an fsync's
// completion does. With late set, the answers come 5 ms after the Kick, as
// from a slow disk.
type roundsProposer struct {
	store *fsm.Store
	late  bool

	applyMu sync.Mutex

	mu      sync.Mutex
	pending []roundsEntry
	flushes int
	batches int
	cmds    int // commands received, by Propose or Enqueue
}

type roundsEntry struct {
	rec  []byte
	done func([]fsm.Reply, error)
}

func (p *roundsProposer) Propose(cmds []fsm.Command) ([]fsm.Reply, error) {
	p.mu.Lock()
	p.cmds += len(cmds)
	p.mu.Unlock()
	return p.store.Apply(0, time.Now().UnixMilli(), cmds), nil
}

func (p *roundsProposer) Enqueue(cmds []fsm.Command, done func([]fsm.Reply, error)) {
	rec := fsm.EncodeEntry(nil, time.Now().UnixMilli(), cmds) // cmds is not ours after this
	p.mu.Lock()
	p.pending = append(p.pending, roundsEntry{rec, done})
	p.batches++
	p.cmds += len(cmds)
	p.mu.Unlock()
}

func (p *roundsProposer) Kick() { p.kick() }

func (p *roundsProposer) Flush(stop <-chan struct{}) {
	answered := p.kick()
	if !p.late {
		select {
		case <-answered:
		case <-stop:
		}
	}
}

// kick answers the batches enqueued so far on another goroutine, closing
// the channel it returns once they are.
func (p *roundsProposer) kick() chan struct{} {
	answered := make(chan struct{})
	p.mu.Lock()
	todo := p.pending
	p.pending = nil
	p.flushes++
	p.mu.Unlock()
	go func() {
		defer close(answered)
		if p.late {
			time.Sleep(5 * time.Millisecond)
		}
		// In log order: one Kick's batches are applied before the next's.
		p.applyMu.Lock()
		defer p.applyMu.Unlock()
		for _, e := range todo {
			now, cmds, err := fsm.DecodeEntry(e.rec)
			if err != nil {
				e.done(nil, err)
				continue
			}
			e.done(p.store.Apply(0, now, cmds), nil)
		}
	}()
	return answered
}

func (p *roundsProposer) counts() (flushes, batches int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flushes, p.batches
}

func startRounds(t *testing.T, late bool) (*Server, *roundsProposer) {
	store := fsm.NewStore()
	p := &roundsProposer{store: store, late: late}
	return startServer(t, Config{Store: store, Proposer: p}), p
}

// TestRoundsPipelines: pipelines that mix writes with reads and other
// commands, served by a roundProposer, answer in order with what each
// command saw: a read after a write in the same pipeline waits for the
// write's answer.
func TestRoundsPipelines(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			s, p := startRounds(t, late)
			rc := dialRaw(t, s)
			steps := []respStep{
				{[]string{"SET", "a", "1"}, "+OK\r\n"},
				{[]string{"GET", "a"}, "$1\r\n1\r\n"},
				{[]string{"INCR", "a"}, ":2\r\n"},
				{[]string{"INCR", "a"}, ":3\r\n"},
				{[]string{"PING"}, "+PONG\r\n"},
				{[]string{"GET", "a"}, "$1\r\n3\r\n"},
				{[]string{"NOSUCH"}, "-ERR unknown command 'NOSUCH', with args beginning with: \r\n"},
				{[]string{"SET", "b", "x"}, "+OK\r\n"},
				{[]string{"DEL", "b"}, ":1\r\n"},
				{[]string{"GET", "b"}, "$-1\r\n"},
				{[]string{"INCR", "b", "c"}, "-ERR wrong number of arguments for 'incr' command\r\n"},
				{[]string{"SET", "b", "y"}, "+OK\r\n"},
				{[]string{"INCR", "b"}, "-ERR value is not an integer or out of range\r\n"},
				{[]string{"DBSIZE"}, ":2\r\n"},
			}
			var req []byte
			for _, st := range steps {
				req = append(req, encodeCommand(st.cmd...)...)
			}
			rc.send(req)
			for _, st := range steps {
				if got := rc.reply(); got != st.want {
					t.Fatalf("%v: %q, want %q", st.cmd, got, st.want)
				}
			}
			// Each command alone too.
			for _, st := range []respStep{{[]string{"SET", "c", "z"}, "+OK\r\n"}, {[]string{"GET", "c"}, "$1\r\nz\r\n"}} {
				if got := rc.do(st.cmd...); got != st.want {
					t.Fatalf("%v: %q, want %q", st.cmd, got, st.want)
				}
			}
			if _, batches := p.counts(); batches == 0 && usesLoops(s) {
				t.Fatal("no batch went through Enqueue: the loop did not serve the writes")
			}
		})
	}
}

type respStep struct {
	cmd  []string
	want string
}

// TestRoundsManyClients: concurrent clients' writes are answered, all of
// them applied, and rounds group the batches of several clients into one
// Kick.
func TestRoundsManyClients(t *testing.T) {
	s, p := startRounds(t, false)
	const clients, rounds = 32, 40
	start := make(chan struct{})
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			rc := dialRaw(t, s)
			<-start
			for r := range rounds {
				req := append(encodeCommand("INCR", "n"), encodeCommand("INCR", fmt.Sprint("c", c))...)
				if _, err := rc.nc.Write(req); err != nil {
					errs <- err
					return
				}
				rc.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := rc.br.ReadString('\n'); err != nil {
					errs <- err
					return
				}
				line, err := rc.br.ReadString('\n')
				if want := fmt.Sprintf(":%d\r\n", r+1); err != nil || line != want {
					errs <- fmt.Errorf("client %d round %d: %q, %v; want %q", c, r, line, err, want)
					return
				}
			}
			errs <- nil
		}()
	}
	close(start)
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := dialRaw(t, s).do("GET", "n"), fmt.Sprintf("$4\r\n%d\r\n", clients*rounds); got != want {
		t.Fatalf("GET n = %q, want %q", got, want)
	}
	if !usesLoops(s) {
		return // served by goroutines, through Propose
	}
	flushes, batches := p.counts()
	if batches != clients*rounds || flushes >= batches {
		t.Fatalf("%d batches in %d flushes: want %d batches, more than one to a flush", batches, flushes, clients*rounds)
	}
}

// usesLoops reports whether s serves its connections with event loops.
func usesLoops(s *Server) bool { return s.eventLoops() > 0 }

// TestRoundsShutdown: Shutdown waits for the batches in flight and answers
// them.
func TestRoundsShutdown(t *testing.T) {
	s, p := startRounds(t, true)
	rc := dialRaw(t, s)
	rc.send([]byte(strings.Repeat(string(encodeCommand("INCR", "k")), 10)))
	// Every INCR has reached the proposer, whose answers are late: the
	// last round is in flight. (A request not yet read when Shutdown
	// closes the connection is not in flight, and is never answered.)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		n := p.cmds
		p.mu.Unlock()
		if n >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the 10 INCRs reached the proposer", n)
		}
	}
	go s.Shutdown(t.Context())
	for i := range 10 {
		if got, want := rc.reply(), fmt.Sprintf(":%d\r\n", i+1); got != want {
			t.Fatalf("reply %d: %q, want %q", i, got, want)
		}
	}
	if rest, err := rc.readEOF(); err != nil || rest != "" {
		t.Fatalf("after the replies: %q, %v; want the connection closed", rest, err)
	}
}

// TestRoundsCloseWaitsForAnswers: Close closes the connections at once, but
// returns only once the batches with the proposer are answered, so that no
// answer reaches a loop that is gone.
func TestRoundsCloseWaitsForAnswers(t *testing.T) {
	s, p := startRounds(t, true)
	rc := dialRaw(t, s)
	rc.send(encodeCommand("INCR", "k"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		n := p.cmds
		p.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the INCR never reached the proposer")
		}
	}
	s.Close()
	if b, err := rc.readEOF(); err != nil || (b != "" && b != ":1\r\n") {
		t.Fatalf("after Close: %q, %v", b, err)
	}
	if got := string(p.store.Read(time.Now().UnixMilli(), fsm.Command{Op: fsm.OpGet, Args: [][]byte{[]byte("k")}}).Bulk); got != "1" {
		t.Fatalf("the batch in flight at Close was not applied by the time Close returned: GET k = %q", got)
	}
}

// TestRoundsMonitorOnce: a command that first waits for the writes before
// it (handed to a roundProposer) runs again once they are answered, but
// MONITOR shows it once.
func TestRoundsMonitorOnce(t *testing.T) {
	s, _ := startRounds(t, true)
	mon, rc := dialRaw(t, s), dialRaw(t, s)
	if got := mon.do("MONITOR"); got != "+OK\r\n" {
		t.Fatalf("MONITOR: %q", got)
	}
	got := script(t, rc, [][]string{{"SET", "a", "1"}, {"PING"}, {"GET", "a"}, {"ECHO", "end"}})
	if got[3] != "$3\r\nend\r\n" {
		t.Fatalf("ECHO end: %q", got[3])
	}
	var lines []string
	for len(lines) == 0 || !strings.Contains(lines[len(lines)-1], `"ECHO"`) {
		line := mon.reply()
		lines = append(lines, line[strings.Index(line, `"`):])
	}
	want := []string{"\"SET\" \"a\" \"1\"\r\n", "\"PING\"\r\n", "\"GET\" \"a\"\r\n", "\"ECHO\" \"end\"\r\n"}
	if !slices.Equal(lines, want) {
		t.Fatalf("MONITOR showed %q, want %q", lines, want)
	}
}
