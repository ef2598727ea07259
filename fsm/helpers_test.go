package fsm

import (
	"strconv"
	"testing"
)

// c builds a command; fields other than Args are set with the methods below.
func c(op Op, args ...string) Command {
	cmd := Command{Op: op}
	for _, a := range args {
		cmd.Args = append(cmd.Args, []byte(a))
	}
	return cmd
}

func (cmd Command) i(n int64) Command   { cmd.Int = n; return cmd }
func (cmd Command) i2(n int64) Command  { cmd.Int2 = n; return cmd }
func (cmd Command) f(x float64) Command { cmd.Float = x; return cmd }
func (cmd Command) fl(f Flags) Command  { cmd.Flags |= f; return cmd }

// Expected replies, written as redis-cli would show them.
var (
	ok   = replyOK
	nilr = replyNil
)

func in(n int64) Reply      { return IntReply(n) }
func bulk(s string) Reply   { return BulkReply([]byte(s)) }
func errr(s string) Reply   { return ErrorReply(s) }
func status(s string) Reply { return Reply{Kind: ReplyStatus, Str: s} }
func arr(rs ...Reply) Reply {
	if rs == nil {
		rs = []Reply{}
	}
	return Reply{Kind: ReplyArray, Array: rs}
}
func bulks(ss ...string) Reply {
	rs := []Reply{}
	for _, s := range ss {
		rs = append(rs, bulk(s))
	}
	return arr(rs...)
}

// step is one command at a time; a read op goes to Read, a write to Apply.
type step struct {
	now  int64
	cmd  Command
	want Reply
}

func run(t *testing.T, s *Store, steps []step) {
	t.Helper()
	for i, st := range steps {
		var got Reply
		if st.cmd.Op.IsWrite() {
			got = s.Apply(0, st.now, []Command{st.cmd})[0]
		} else {
			got = s.Read(st.now, st.cmd)
		}
		if got.String() != st.want.String() || got.Expanded().Kind != st.want.Expanded().Kind {
			t.Errorf("step %d: %v %q at %d: got %v, want %v", i, st.cmd.Op, st.cmd.Args, st.now, got, st.want)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
