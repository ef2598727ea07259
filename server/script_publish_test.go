package server

import (
	"strings"
	"testing"
)

// TestScriptPublish: PUBLISH and SPUBLISH inside a script or function
// reach this node's subscribers (channel, pattern and shard) and answer 0,
// whoever listens; read-only scripts refuse them with Redis's error, also
// during a pause of writes, which holds only scripts that may write.
func TestScriptPublish(t *testing.T) {
	ioModes(t, func(t *testing.T, cfg Config) {
		s := startServer(t, cfg)
		sub := dialRaw(t, s)
		w := dialRaw(t, s)
		sub.do("SUBSCRIBE", "ch")
		sub.do("PSUBSCRIBE", "c*")
		sub.do("SSUBSCRIBE", "sh")
		msg := func(ch, m string) string { return "*3\r\n" + bulk("message") + bulk(ch) + bulk(m) }
		pmsg := func(ch, m string) string {
			return "*4\r\n" + bulk("pmessage") + bulk("c*") + bulk(ch) + bulk(m)
		}
		smsg := func(ch, m string) string { return "*3\r\n" + bulk("smessage") + bulk(ch) + bulk(m) }

		body := "redis.call('set', 'k', 'v') " +
			"local n = redis.call('publish', 'ch', 'hello') " +
			"redis.call('spublish', 'sh', 'shard') " +
			"redis.call('set', 'n', n) return n"
		if got := w.do("EVAL", body, "0"); got != ":0\r\n" {
			t.Fatalf("EVAL publishing: %q, want :0", got)
		}
		for _, want := range []string{msg("ch", "hello"), pmsg("ch", "hello"), smsg("sh", "shard")} {
			if got := sub.reply(); got != want {
				t.Fatalf("subscriber got %q, want %q", got, want)
			}
		}
		if got := w.do("GET", "n"); got != bulk("0") {
			t.Fatalf("the stored answer: %q, want 0", got)
		}

		lib := "#!lua name=pub\n" +
			"redis.register_function('pub', function(keys, args) return redis.call('publish', args[1], args[2]) end)\n" +
			"redis.register_function{function_name='pubro', flags={'no-writes'}, " +
			"callback=function(keys, args) return redis.call('publish', args[1], args[2]) end}"
		if got := w.do("FUNCTION", "LOAD", lib); got != bulk("pub") {
			t.Fatalf("FUNCTION LOAD: %q", got)
		}
		if got := w.do("FCALL", "pub", "0", "ch", "from a function"); got != ":0\r\n" {
			t.Fatalf("FCALL publishing: %q, want :0", got)
		}
		for _, want := range []string{msg("ch", "from a function"), pmsg("ch", "from a function")} {
			if got := sub.reply(); got != want {
				t.Fatalf("subscriber got %q, want %q", got, want)
			}
		}

		w.do("CLIENT", "PAUSE", "100000", "WRITE")
		for _, args := range [][]string{
			{"EVAL_RO", "return redis.call('publish', 'ch', 'ro')", "0"},
			{"EVAL", "#!lua flags=no-writes\nreturn redis.call('publish', 'ch', 'ro')", "0"},
			{"FCALL_RO", "pubro", "0", "ch", "ro"},
			{"FCALL", "pubro", "0", "ch", "ro"},
		} {
			if got := w.do(args...); !strings.HasPrefix(got, "-"+errScriptWriteRO+" script: ") {
				t.Fatalf("%s during a pause of writes: %q, want Redis's refusal", args[0], got)
			}
		}
		w.do("CLIENT", "UNPAUSE")
		// Nothing was published: the next message is the marker.
		w.do("PUBLISH", "ch", "marker")
		if got := sub.reply(); got != msg("ch", "marker") {
			t.Fatalf("after the refusals the subscriber got %q, want the marker", got)
		}
	})
}
