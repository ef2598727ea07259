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

var flagPubsubOps = flag.Int("pubsub.ops", 1500, "operations per mode in TestDifferentialPubsub")

// TestDifferentialPubsub sends the same random pub/sub session to kvs and
// to redis-server and requires the same frames: two subscribers (one RESP2,
// one RESP3) subscribe and unsubscribe to channels, patterns and shard
// channels, PING, RESET and run commands that RESP2's subscribed mode
// refuses, while a third connection publishes (with PUBLISH, SPUBLISH and
// scripts that call them) and asks PUBSUB. After each
// operation both subscribers get a PING with a fresh marker: the frames
// before its answer are the operation's (confirmations, messages, errors).
//
// One operation in eight is a race: a subscriber sends a (P|S)SUBSCRIBE,
// or a (P|S)UNSUBSCRIBE without arguments, and the publisher at once (not
// waiting for its confirmations) a PUBLISH or SPUBLISH, whose count and
// deliveries must be as if the two were run in the order they were sent,
// as redis-server runs them. Only where kvs keeps that order: not on a
// cluster node, whose connections have goroutines of their own (see
// compatibility.md).
//
// Two orders are Redis's dict order and so compared as multisets (see
// compatibility.md): the frames a PUBLISH delivers to one subscriber (a
// message matching several patterns) and the confirmations of an
// UNSUBSCRIBE without arguments, whose counts must still fall in order; and
// PUBSUB CHANNELS and SHARDCHANNELS lists.
func TestDifferentialPubsub(t *testing.T) {
	sessionModes(t, func(t *testing.T, r *rand.Rand, ref, kvs *Node, cluster bool) {
		sides := []*pubsubSide{newPubsubSide(t, ref), newPubsubSide(t, kvs)}
		var history []string
		for op := range *flagPubsubOps {
			var steps []pubsubStep
			if !cluster {
				steps = genPubsubRace(r)
			}
			if steps == nil {
				who, cmd := genPubsubOp(r)
				steps = []pubsubStep{{who, cmd}}
			}
			var got [2][]string
			for j, s := range sides {
				got[j] = s.do(steps, op)
			}
			var shown []string
			for _, st := range steps {
				shown = append(shown, pubsubConnNames[st.who]+" "+showCommand(st.cmd))
			}
			history = append(history, fmt.Sprintf("  > %s\n    %q", strings.Join(shown, ", then "), got[0]))
			if !slices.Equal(got[0], got[1]) {
				t.Fatalf("op %d differs:\n%s\n    kvs: %q", op, strings.Join(lastN(history, 40), "\n"), got[1])
			}
		}
	})
}

var pubsubConnNames = []string{"sub2", "sub3", "pub"}

// pubsubSide is one server's three connections: a RESP2 subscriber, a
// RESP3 one and a publisher.
type pubsubSide struct {
	t    testing.TB
	name string
	c    [3]*rawConn
}

func newPubsubSide(t testing.TB, n *Node) *pubsubSide {
	s := &pubsubSide{t: t, name: n.Name}
	for i := range s.c {
		s.c[i] = dialRaw(t, n.Addr)
	}
	if v := s.c[1].Do("HELLO", "3"); v.Kind != '%' {
		t.Fatalf("%s: HELLO 3: %s", n.Name, v)
	}
	return s
}

// pubsubStep is one command of an operation and its connection (0, 1: a
// subscriber; 2: the publisher).
type pubsubStep struct {
	who int
	cmd []string
}

// do sends the steps' commands one after another, each without waiting
// for the subscribers' confirmations (the publisher's reply is read), and
// returns what every connection received for them, normalised where
// Redis's order is its dict's.
func (s *pubsubSide) do(steps []pubsubStep, op int) []string {
	s.t.Helper()
	var out []string
	published, unsubAll := false, -1
	for _, st := range steps {
		c := s.c[st.who]
		if err := c.write(encodeCommand(st.cmd...)); err != nil {
			s.t.Fatalf("%s: %s: %v", s.name, showCommand(st.cmd), err)
		}
		switch {
		case st.who == 2:
			published = true
			v, err := c.read()
			if err != nil {
				s.t.Fatalf("%s: %s: %v", s.name, showCommand(st.cmd), err)
			}
			out = append(out, "pub: "+normalisePubsubReply(st.cmd, v))
		case len(st.cmd) == 1 && strings.HasSuffix(strings.ToUpper(st.cmd[0]), "UNSUBSCRIBE"):
			unsubAll = st.who
		}
	}
	for i := range 2 {
		mark := "mark-" + strconv.Itoa(op)
		frames := s.untilMark(i, mark)
		switch {
		case unsubAll == i:
			frames = unsubscribeAll(frames)
			if published {
				slices.Sort(frames[2:]) // the deliveries after the confirmations
			}
		case published:
			slices.Sort(frames) // one PUBLISH's deliveries
		}
		for _, f := range frames {
			out = append(out, pubsubConnNames[i]+": "+f)
		}
	}
	return out
}

// untilMark sends PING mark on subscriber i and returns the frames before
// its answer.
func (s *pubsubSide) untilMark(i int, mark string) []string {
	c := s.c[i]
	if err := c.write(encodeCommand("PING", mark)); err != nil {
		s.t.Fatalf("%s: PING: %v", s.name, err)
	}
	var frames []string
	for {
		v, err := c.read()
		if err != nil {
			s.t.Fatalf("%s: %s waiting for %s: %v (after %q)", s.name, pubsubConnNames[i], mark, err, frames)
		}
		if strings.Contains(string(v.Raw), mark) {
			// PING's answer: +mark's bulk, or [pong, mark] in RESP2's
			// subscribed mode; which one is part of what is compared.
			frames = append(frames, "ping "+string(v.Raw[:1]))
			return frames
		}
		frames = append(frames, string(v.Raw))
	}
}

// unsubscribeAll renders the confirmations of an UNSUBSCRIBE without
// arguments as the counts in order and the channels as a set.
func unsubscribeAll(frames []string) []string {
	var counts, chans []string
	var rest []string
	for _, f := range frames {
		v, err := parseValue(f)
		if err != nil || len(v.Elems) != 3 || !strings.HasSuffix(v.Elems[0].Str, "unsubscribe") {
			rest = append(rest, f)
			continue
		}
		counts = append(counts, v.Elems[0].Str+" "+string(v.Kind)+v.Elems[2].Str)
		chans = append(chans, v.Elems[1].Str)
	}
	slices.Sort(chans)
	return append([]string{"counts " + strings.Join(counts, ","), "channels " + strings.Join(chans, ",")}, rest...)
}

// normalisePubsubReply sorts the lists PUBSUB CHANNELS and SHARDCHANNELS
// answer in dict order.
func normalisePubsubReply(cmd []string, v Value) string {
	if len(cmd) >= 2 && strings.EqualFold(cmd[0], "PUBSUB") && v.Kind == '*' &&
		(strings.EqualFold(cmd[1], "CHANNELS") || strings.EqualFold(cmd[1], "SHARDCHANNELS")) {
		return "channels " + strings.Join(sortedStrs(v.Elems), ",")
	}
	return string(v.Raw)
}

// genPubsubRace returns, one time in eight, a race (see
// TestDifferentialPubsub): a subscription change on a subscriber, then a
// publish; nil otherwise.
func genPubsubRace(r *rand.Rand) []pubsubStep {
	if r.Intn(8) != 0 {
		return nil
	}
	who := r.Intn(2)
	var change, publish []string
	switch r.Intn(6) {
	case 0:
		change = []string{"UNSUBSCRIBE"}
	case 1:
		change = []string{"PUNSUBSCRIBE"}
	case 2:
		change = []string{"SUNSUBSCRIBE"}
	case 3:
		change = []string{"SUBSCRIBE", pickN(r, psChannels, 1, 1)[0]}
	case 4:
		change = []string{"PSUBSCRIBE", pickN(r, psPatterns, 1, 1)[0]}
	default:
		change = []string{"SSUBSCRIBE", pickN(r, psShards, 1, 1)[0]}
	}
	if change[0][0] == 'S' && change[0] != "SUBSCRIBE" {
		publish = []string{"SPUBLISH", pickN(r, psShards, 1, 1)[0], "race"}
	} else {
		publish = []string{"PUBLISH", pickN(r, psChannels, 1, 1)[0], "race"}
	}
	return []pubsubStep{{who, change}, {2, publish}}
}

var (
	psChannels = []string{"c0", "c1", "c2", "news.eu", "news.us"}
	psPatterns = []string{"c*", "c[01]", "*", "news.*", "x?", "n*s.??"}
	psShards   = []string{"s0", "s1", "{s}2"}
)

func pickN(r *rand.Rand, pool []string, min, max int) []string {
	n := min + r.Intn(max-min+1)
	out := make([]string, n)
	for i := range out {
		out[i] = pool[r.Intn(len(pool))]
	}
	return out
}

// genPubsubOp returns a connection (0, 1: a subscriber; 2: the publisher)
// and a command for it.
func genPubsubOp(r *rand.Rand) (int, []string) {
	if r.Intn(3) == 0 {
		switch r.Intn(12) {
		case 0, 1, 2:
			return 2, []string{"PUBLISH", pickN(r, psChannels, 1, 1)[0], "m" + strconv.Itoa(r.Intn(100))}
		case 3:
			return 2, []string{"SPUBLISH", pickN(r, psShards, 1, 1)[0], "sm"}
		case 4:
			return 2, append([]string{"PUBSUB", "CHANNELS"}, pickN(r, psPatterns, 0, 1)...)
		case 5:
			return 2, append([]string{"PUBSUB", "NUMSUB"}, pickN(r, psChannels, 0, 3)...)
		case 6:
			return 2, append([]string{"PUBSUB", "NUMPAT"}, pickN(r, psChannels, 0, 1)...)
		case 7:
			return 2, append([]string{"PUBSUB", "SHARDCHANNELS"}, pickN(r, []string{"s*", "*", "s[01]"}, 0, 1)...)
		case 8:
			return 2, append([]string{"PUBSUB", "SHARDNUMSUB"}, pickN(r, psShards, 0, 2)...)
		case 9, 10:
			// A script's messages: delivered as a PUBLISH's are. The
			// script answers what it returns, not PUBLISH's count, which
			// is 0 in kvs (compatibility.md); a read-only one is refused.
			eval := []string{"EVAL", "EVAL", "EVAL_RO"}[r.Intn(3)]
			return 2, []string{eval, "redis.call('publish', ARGV[1], ARGV[2]) redis.call('spublish', ARGV[3], ARGV[2]) " +
				"return redis.call('publish', ARGV[1], ARGV[2] .. ' again') * 0", "0",
				pickN(r, psChannels, 1, 1)[0], "script m" + strconv.Itoa(r.Intn(100)), pickN(r, psShards, 1, 1)[0]}
		}
		return 2, []string{"PUBSUB", []string{"BOGUS", "HELP", "help"}[r.Intn(3)]}
	}
	who := r.Intn(2)
	switch r.Intn(16) {
	case 0, 1, 2:
		return who, append([]string{"SUBSCRIBE"}, pickN(r, psChannels, 1, 3)...)
	case 3, 4:
		return who, append([]string{"UNSUBSCRIBE"}, pickN(r, psChannels, 0, 2)...)
	case 5, 6:
		return who, append([]string{"PSUBSCRIBE"}, pickN(r, psPatterns, 1, 2)...)
	case 7:
		return who, append([]string{"PUNSUBSCRIBE"}, pickN(r, psPatterns, 0, 2)...)
	case 8:
		return who, append([]string{"SSUBSCRIBE"}, pickN(r, psShards, 1, 2)...)
	case 9:
		return who, append([]string{"SUNSUBSCRIBE"}, pickN(r, psShards, 0, 2)...)
	case 10:
		return who, append([]string{"PING"}, pickN(r, []string{"hello", ""}, 0, 1)...)
	case 11:
		// Refused in RESP2's subscribed mode, answered otherwise; SET k
		// is an arity error, which comes first. (Not a container command
		// such as CONFIG: Redis checks its subcommand and the
		// subcommand's arity before the mode, kvs after.)
		return who, []string{[]string{"GET", "SET"}[r.Intn(2)], "k"}
	case 12:
		if r.Intn(4) == 0 {
			return who, []string{"RESET"}
		}
		return who, []string{"ECHO", "e"}
	case 13:
		// Arity errors.
		return who, []string{[]string{"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"}[r.Intn(3)]}
	case 14:
		return who, []string{"PING", "a", "b"}
	}
	return who, []string{"PUBSUB", "NUMPAT"}
}

// sessionModes runs f in parallel subtests, one for each mode a session
// of several connections is compared in (memory, durable, a cluster's
// leader), each with a redis-server and a kvs of its own and a random
// source seeded from the test's seed.
func sessionModes(t *testing.T, f func(t *testing.T, r *rand.Rand, ref, kvs *Node, cluster bool)) {
	requireRedis(t)
	requireKVS(t)
	seed := testSeed(t)
	modes := []struct {
		name    string
		opts    KVSOptions
		cluster bool
	}{
		{"memory", KVSOptions{}, false},
		{"durable", KVSOptions{Durable: true, Fsync: "always"}, false},
		{"cluster-leader", KVSOptions{}, true},
	}
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			ref := startRedis(t)
			var kvs *Node
			if m.cluster {
				kvs = waitLeader(t, startCluster(t, 3))
			} else {
				kvs = newKVS(t, "kvs", m.opts)
				kvs.Start()
			}
			f(t, rand.New(rand.NewSource(seed+int64(i))), ref, kvs, m.cluster)
		})
	}
}
