package fsm

import (
	"errors"
	"strings"
	"testing"
)

func bulksOf(elems ...string) Reply {
	var buf []byte
	for _, e := range elems {
		buf = AppendBulks(buf, []byte(e))
	}
	return BulksReply(buf, len(elems))
}

// TestReplyBulks: a flat array of bulks reads as the array of bulks it
// stands for, and crosses the forwarding encoding as it is, nested too.
func TestReplyBulks(t *testing.T) {
	long := strings.Repeat("v", 300) // a two-byte length
	r := bulksOf("a", "", long)
	want := `["a" "" "` + long + `"]`
	if got := r.String(); got != want {
		t.Fatalf("String() = %s", got)
	}
	if x := r.Expanded(); x.Kind != ReplyArray || len(x.Array) != 3 || x.Array[1].Kind != ReplyBulk || x.String() != want {
		t.Fatalf("Expanded() = %+v", x)
	}
	in := []Reply{r, {Kind: ReplyArray, Array: []Reply{BulkReply([]byte("key")), bulksOf("x")}}}
	out, err := DecodeReplies(AppendReplies(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Kind != ReplyBulks || out[0].String() != want ||
		out[1].Array[1].Kind != ReplyBulks || out[1].String() != `["key" ["x"]]` {
		t.Fatalf("round trip gave %v", out)
	}
}

func TestDecodeRepliesRejectsBadBulks(t *testing.T) {
	good := AppendReplies(nil, []Reply{bulksOf("ab", "c")})
	if _, err := DecodeReplies(good); err != nil {
		t.Fatal(err)
	}
	// count 1, kind, element count, buffer length, buffer.
	bad := func(n byte, buf string) []byte {
		return append([]byte{1, byte(ReplyBulks), n, byte(len(buf))}, buf...)
	}
	for name, b := range map[string][]byte{
		"fewer elements than counted": bad(3, "$2\r\nab\r\n$1\r\nc\r\n"),
		"more elements than counted":  bad(1, "$2\r\nab\r\n$1\r\nc\r\n"),
		"element past the buffer":     bad(2, "$2\r\nab\r\n$2\r\nc\r\n"),
		"no line end":                 bad(1, "$2\r\nabc\n"),
		"no length":                   bad(1, "$\r\nab\r\n"),
		"a leading zero":              bad(1, "$02\r\nab\r\n"),
		"a negative length":           bad(1, "$-1\r\n"),
		"not a bulk":                  bad(1, ":1\r\n"),
		"huge element length":         bad(1, "$99999999999999999999\r\na\r\n"),
		"buffer past the end":         {1, byte(ReplyBulks), 1, 9, '$', '0', '\r', '\n'},
	} {
		if _, err := DecodeReplies(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecodeReplies(f *testing.F) {
	f.Add(AppendReplies(nil, []Reply{bulksOf("a", "", "bc"), replyOK, IntReply(-3)}))
	f.Add(AppendReplies(nil, []Reply{{Kind: ReplyArray, Array: []Reply{BulkReply([]byte("k")), bulksOf("v")}}}))
	f.Add(AppendReplies(nil, []Reply{{Kind: ReplyMap, Array: []Reply{BulkReply([]byte("f")), {Kind: ReplyDouble, Bulk: []byte("1.5")}}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		replies, err := DecodeReplies(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// What decodes reads (String walks every flat array of bulks)
		// and re-encodes to the same replies.
		again, err := DecodeReplies(AppendReplies(nil, replies))
		if err != nil || len(again) != len(replies) {
			t.Fatalf("re-encoding failed: %v", err)
		}
		for i := range replies {
			if again[i].String() != replies[i].String() || again[i].Kind != replies[i].Kind {
				t.Fatalf("reply %d re-encoded as %v, was %v", i, again[i], replies[i])
			}
		}
	})
}
