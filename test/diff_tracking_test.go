package test

import (
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var flagTrackingOps = flag.Int("tracking.ops", 800, "operations per mode in TestDifferentialTracking")

// TestDifferentialTracking sends the same random client-side caching
// session to kvs and to redis-server and requires the same frames. Four
// connections: a RESP3 tracker, a RESP2 tracker, a RESP2 subscriber of
// __redis__:invalidate (the redirection) and a writer. The trackers turn
// tracking on and off with random options (REDIRECT to the subscriber,
// BCAST with prefixes, OPTIN, OPTOUT, NOLOOP), send CLIENT CACHING,
// GETREDIR and TRACKINGINFO, read and write keys alone and in
// transactions; the writer writes and flushes. After each operation the
// RESP3 tracker and the subscriber get a PING with a fresh marker: the
// frames before its answer are the operation's invalidations, compared as
// a multiset (a BCAST client's messages per prefix come in the order of
// Redis's prefix table); the sender's replies, and the pushes it gets
// before them, in order.
func TestDifferentialTracking(t *testing.T) {
	sessionModes(t, func(t *testing.T, r *rand.Rand, ref, kvs *Node, cluster bool) {
		sides := []*trackingSide{newTrackingSide(t, ref), newTrackingSide(t, kvs)}
		var history []string
		for op := range *flagTrackingOps {
			who, cmds := genTrackingOp(r)
			var got [2][]string
			for j, s := range sides {
				got[j] = s.do(who, cmds, op)
			}
			var shown []string
			for _, c := range cmds {
				shown = append(shown, showCommand(c))
			}
			history = append(history, fmt.Sprintf("  > %s: %s\n    %q", trackingConnNames[who], strings.Join(shown, ", "), got[0]))
			if !slices.Equal(got[0], got[1]) {
				t.Fatalf("op %d differs:\n%s\n    kvs: %q", op, strings.Join(lastN(history, 40), "\n"), got[1])
			}
		}
	})
}

var trackingConnNames = []string{"t3", "t2", "sub", "w"}

// trackingSide is one server's four connections.
type trackingSide struct {
	t     testing.TB
	name  string
	c     [4]*rawConn
	subID string
}

func newTrackingSide(t testing.TB, n *Node) *trackingSide {
	s := &trackingSide{t: t, name: n.Name}
	for i := range s.c {
		s.c[i] = dialRaw(t, n.Addr)
	}
	if v := s.c[0].Do("HELLO", "3"); v.Kind != '%' {
		t.Fatalf("%s: HELLO 3: %s", n.Name, v)
	}
	s.subID = s.c[2].Do("CLIENT", "ID").Str
	s.c[2].Do("SUBSCRIBE", "__redis__:invalidate")
	s.c[3].Do("FLUSHALL")
	return s
}

// do sends cmds on connection who, reading each reply, and returns what
// the sender and the two connections that receive invalidations got.
func (s *trackingSide) do(who int, cmds [][]string, op int) []string {
	s.t.Helper()
	var out []string
	c := s.c[who]
	for _, cmd := range cmds {
		cmd = slices.Clone(cmd)
		for i, a := range cmd {
			if a == "$SUB" {
				cmd[i] = s.subID
			}
		}
		if err := c.write(encodeCommand(cmd...)); err != nil {
			s.t.Fatalf("%s: %s: %v", s.name, showCommand(cmd), err)
		}
		var pushes []string
		for {
			v, err := c.read()
			if err != nil {
				s.t.Fatalf("%s: %s: %v (after %q)", s.name, showCommand(cmd), err, pushes)
			}
			if v.Kind == '>' {
				pushes = append(pushes, normaliseInvalidation(v))
				continue
			}
			slices.Sort(pushes)
			out = append(out, pushes...)
			reply := string(v.Raw)
			if strings.EqualFold(cmd[0], "client") && len(cmd) == 2 { // GETREDIR, TRACKINGINFO
				reply = strings.ReplaceAll(reply, ":"+s.subID+"\r\n", ":SUB\r\n")
			}
			out = append(out, reply)
			break
		}
	}
	for _, i := range []int{0, 2} {
		frames := s.untilMark(i, "mark-"+strconv.Itoa(op))
		slices.Sort(frames)
		for _, f := range frames {
			out = append(out, trackingConnNames[i]+": "+f)
		}
	}
	return out
}

// normaliseInvalidation renders an invalidation with its keys sorted.
func normaliseInvalidation(v Value) string {
	keys, null, ok := invalidated(v)
	switch {
	case !ok:
		return string(v.Raw)
	case null:
		return string(v.Kind) + "invalidate null"
	}
	return string(v.Kind) + "invalidate " + strings.Join(keys, " ")
}

// untilMark sends PING mark on connection i and returns the frames before
// its answer.
func (s *trackingSide) untilMark(i int, mark string) []string {
	c := s.c[i]
	if err := c.write(encodeCommand("PING", mark)); err != nil {
		s.t.Fatalf("%s: PING: %v", s.name, err)
	}
	var frames []string
	for {
		v, err := c.read()
		if err != nil {
			s.t.Fatalf("%s: %s waiting for %s: %v (after %q)", s.name, trackingConnNames[i], mark, err, frames)
		}
		if strings.Contains(string(v.Raw), mark) {
			return frames
		}
		frames = append(frames, normaliseInvalidation(v))
	}
}

var trackingKeys = []string{"a{t}", "ab{t}", "b{t}", "bc{t}", "c{t}", "n{t}"}

func genTrackingOp(r *rand.Rand) (int, [][]string) {
	key := func() string { return trackingKeys[r.Intn(len(trackingKeys))] }
	read := func() []string {
		switch r.Intn(4) {
		case 0:
			return []string{"MGET", key(), key()}
		case 1:
			return []string{"EXISTS", key()}
		case 2:
			return []string{"STRLEN", key()}
		}
		return []string{"GET", key()}
	}
	write := func() []string {
		switch r.Intn(5) {
		case 0:
			return []string{"DEL", key()}
		case 1:
			return []string{"MSET", key(), "v", key(), "w"}
		case 2:
			return []string{"INCR", "n{t}"}
		case 3:
			return []string{"APPEND", key(), "x"}
		}
		return []string{"SET", key(), strconv.Itoa(r.Intn(100))}
	}
	if r.Intn(4) == 0 {
		// The writer.
		switch r.Intn(20) {
		case 0:
			return 3, [][]string{{"FLUSHALL"}}
		case 1:
			return 3, [][]string{{"FLUSHDB"}}
		}
		return 3, [][]string{write()}
	}
	who := r.Intn(2) // t3 or t2
	switch n := r.Intn(20); {
	case n < 2:
		return who, [][]string{{"CLIENT", "TRACKING", "off"}}
	case n < 5:
		cmd := []string{"CLIENT", "TRACKING", "on"}
		if who == 1 || r.Intn(3) == 0 {
			cmd = append(cmd, "REDIRECT", "$SUB")
		}
		switch r.Intn(4) {
		case 0:
			cmd = append(cmd, "BCAST")
			for range r.Intn(3) {
				cmd = append(cmd, "PREFIX", []string{"a", "b", "c", "ab"}[r.Intn(4)])
			}
		case 1:
			cmd = append(cmd, "OPTIN")
		case 2:
			cmd = append(cmd, "OPTOUT")
		}
		if r.Intn(3) == 0 {
			cmd = append(cmd, "NOLOOP")
		}
		return who, [][]string{cmd}
	case n < 7:
		return who, [][]string{{"CLIENT", "CACHING", []string{"yes", "no"}[r.Intn(2)]}, read()}
	case n == 7:
		return who, [][]string{{"CLIENT", "GETREDIR"}}
	case n == 8:
		return who, [][]string{{"CLIENT", "TRACKINGINFO"}}
	case n == 9:
		tx := [][]string{{"MULTI"}}
		for range 1 + r.Intn(3) {
			if r.Intn(2) == 0 {
				tx = append(tx, read())
			} else {
				tx = append(tx, write())
			}
		}
		return who, append(tx, []string{"EXEC"})
	case n < 15:
		return who, [][]string{read()}
	}
	return who, [][]string{write()}
}

// TestDifferentialTrackingDatabases: Redis's tracking table knows keys by
// name alone, whatever their database, so a client that read k in one
// database is invalidated by a write of k in another (and a flush of any
// database invalidates everything). The same session against kvs and
// redis-server gets the same frames: the trackers read in database 0 or
// 1, the writer writes, moves, copies, swaps and flushes in others.
func TestDifferentialTrackingDatabases(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	t.Parallel()
	ref := startRedis(t)
	kvs := startKVS(t, KVSOptions{})
	ops := []struct {
		who  int
		cmds [][]string
	}{
		{0, [][]string{{"CLIENT", "TRACKING", "on"}}},
		{1, [][]string{{"CLIENT", "TRACKING", "on", "REDIRECT", "$SUB"}}},
		{0, [][]string{{"GET", "a{t}"}}},
		{1, [][]string{{"SELECT", "1"}, {"GET", "b{t}"}}},
		// k read in db 0, written in db 1: invalidated.
		{3, [][]string{{"SELECT", "1"}, {"SET", "a{t}", "1"}}},
		// k read in db 1, written in db 2.
		{3, [][]string{{"SELECT", "2"}, {"SET", "b{t}", "2"}}},
		// Written where nobody read: nothing.
		{3, [][]string{{"SET", "c{t}", "2"}}},
		{0, [][]string{{"SELECT", "3"}, {"GET", "a{t}"}, {"SELECT", "0"}, {"GET", "c{t}"}}},
		{3, [][]string{{"SELECT", "1"}, {"MOVE", "a{t}", "4"}}},
		{3, [][]string{{"SELECT", "2"}, {"COPY", "c{t}", "c{t}", "DB", "5"}}},
		{0, [][]string{{"GET", "a{t}"}}},
		{1, [][]string{{"GET", "a{t}"}, {"MGET", "b{t}", "c{t}"}}},
		{3, [][]string{{"SELECT", "6"}, {"DEL", "b{t}"}, {"MSET", "a{t}", "x", "c{t}", "y"}}},
		{0, [][]string{{"GET", "a{t}"}}},
		{1, [][]string{{"GET", "c{t}"}}},
		{3, [][]string{{"SWAPDB", "1", "6"}}},
		{3, [][]string{{"SELECT", "6"}, {"SET", "c{t}", "z"}}},
		{0, [][]string{{"GET", "a{t}"}}},
		{3, [][]string{{"SELECT", "7"}, {"FLUSHDB"}}},
		{0, [][]string{{"CLIENT", "TRACKING", "off"}, {"CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"}}},
		{3, [][]string{{"SELECT", "8"}, {"SET", "ab{t}", "1"}, {"SET", "b{t}", "1"}}},
		{3, [][]string{{"SELECT", "0"}, {"FLUSHALL"}}},
	}
	sides := []*trackingSide{newTrackingSide(t, ref), newTrackingSide(t, kvs)}
	var history []string
	for i, op := range ops {
		var got [2][]string
		for j, s := range sides {
			got[j] = s.do(op.who, op.cmds, i)
		}
		history = append(history, fmt.Sprintf("  > %s: %v\n    %q", trackingConnNames[op.who], op.cmds, got[0]))
		if !slices.Equal(got[0], got[1]) {
			t.Fatalf("op %d differs:\n%s\n    kvs: %q", i, strings.Join(history, "\n"), got[1])
		}
	}
	// The session did invalidate across databases (the reference's
	// frames say so).
	if all := strings.Join(history, "\n"); !strings.Contains(all, "invalidate a{t}") || !strings.Contains(all, "invalidate b{t}") {
		t.Fatalf("no invalidation across databases in the session:\n%s", all)
	}
	t.Logf("session:\n%s", strings.Join(history, "\n"))
}
