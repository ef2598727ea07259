package fsm

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"
)

// publishParser is testParser with PUBLISH and SPUBLISH, as the server
// parses them inside a script.
func publishParser(p *ParseContext, args [][]byte) (Command, Reply, bool) {
	switch strings.ToLower(string(args[0])) {
	case "publish":
		return Command{Op: OpPublish, Args: args[1:3]}, Reply{}, false
	case "spublish":
		return Command{Op: OpPublish, Args: args[1:3], Flags: FlagPublishShard}, Reply{}, false
	}
	return testParser(p, args)
}

// published collects the messages and keyspace events a store hands its
// hook, as "kind channel message" and "event key".
type published struct {
	mu  sync.Mutex
	got []string
}

func (p *published) hook(events []Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range events {
		switch e.Class {
		case EventMessage:
			p.got = append(p.got, "message "+e.Name+" "+e.Key)
		case EventShardMessage:
			p.got = append(p.got, "smessage "+e.Name+" "+e.Key)
		default:
			p.got = append(p.got, e.Name+" "+e.Key)
		}
	}
}

func (p *published) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.got
	p.got = nil
	return got
}

func publishingStore() (*Store, *published) {
	s, p := NewStore(), &published{}
	s.SetCommandParser(publishParser)
	s.SetNotifyHook(p.hook)
	return s, p
}

// TestScriptPublish: what a script publishes reaches the hook once the
// entry is applied, in order with the entry's keyspace events, and
// PUBLISH answers 0 inside the script, with or without anyone listening,
// so that a script storing the answer leaves the same store everywhere.
func TestScriptPublish(t *testing.T) {
	body := `redis.call('set', 'k', 'v')
		local n = redis.call('publish', 'ch', 'hello')
		redis.call('spublish', 'sh', 'shard')
		redis.call('set', 'n', n)
		return n`
	s, p := publishingStore()
	s.SetNotifyClasses(NotifyKeyspace | NotifyString)
	r := s.Apply(1, 1000, []Command{eval(body, 1, 0)})
	if r[0].Kind != ReplyInt || r[0].Int != 0 {
		t.Fatalf("the script answered %v, want :0", r[0])
	}
	want := []string{"set k", "message ch hello", "smessage sh shard", "set n"}
	if got := p.take(); !slices.Equal(got, want) {
		t.Fatalf("the hook got %q, want %q", got, want)
	}

	// Without a hook (a node replaying its log before it serves) the
	// store ends up the same.
	quiet := NewStore()
	quiet.SetCommandParser(publishParser)
	quiet.Apply(1, 1000, []Command{eval(body, 1, 0)})
	if !bytes.Equal(snapshotBytes(t, s), snapshotBytes(t, quiet)) {
		t.Fatal("a store that delivered the messages differs from one that did not")
	}
	if r := s.Read(1000, c(OpGet, "n")); string(r.Bulk) != "0" {
		t.Fatalf("the stored answer is %v, want 0", r)
	}

	// Messages are delivered whatever notify-keyspace-events says.
	s.SetNotifyClasses(0)
	s.Apply(2, 1000, []Command{eval(`return redis.call('publish', 'ch', 'again')`, 1, 0)})
	if got := p.take(); !slices.Equal(got, []string{"message ch again"}) {
		t.Fatalf("with no notification class the hook got %q", got)
	}
}

// TestReplayedEntriesAnnounceNothing: the entries a node applied before it
// restarted (SetReplayedThrough) deliver neither messages nor keyspace
// events when applied again, one at a time or in a batch with new ones;
// the entries after them do. Memory mode's entries (index 0) are never
// replays.
func TestReplayedEntriesAnnounceNothing(t *testing.T) {
	pub := func(msg string) []Command {
		return []Command{c(OpSet, "k", msg), eval(`return redis.call('publish', 'ch', ARGV[1])`, 1, 0, msg)}
	}
	s, p := publishingStore()
	s.SetNotifyClasses(NotifyKeyspace | NotifyString)
	s.SetReplayedThrough(3)
	s.Apply(1, 1000, pub("one"))
	s.ApplyBatch([]Entry{{Index: 2, Now: 1000, Cmds: pub("two")}, {Index: 3, Now: 1000, Cmds: pub("three")}})
	if got := p.take(); len(got) != 0 {
		t.Fatalf("replayed entries announced %q", got)
	}
	s.ApplyBatch([]Entry{{Index: 4, Now: 1000, Cmds: pub("four")}, {Index: 5, Now: 1000, Cmds: pub("five")}})
	want := []string{"set k", "message ch four", "set k", "message ch five"}
	if got := p.take(); !slices.Equal(got, want) {
		t.Fatalf("new entries announced %q, want %q", got, want)
	}
	if r := s.Read(1000, c(OpGet, "k")); string(r.Bulk) != "five" {
		t.Fatalf("k = %v: the replayed entries were not applied", r)
	}

	m, mp := publishingStore()
	m.SetReplayedThrough(3)
	m.Apply(0, 1000, pub("memory"))
	if got := mp.take(); !slices.Equal(got, []string{"message ch memory"}) {
		t.Fatalf("memory mode's entry announced %q", got)
	}
}
