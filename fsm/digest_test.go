package fsm

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// Digests follow Redis's rules: order matters in a list only, a TTL
// counts, and a value's digest is redis-server 7.0's (checked against it
// in test/diff_gaps_test.go; this one's hex came from redis-server).
func TestDigest(t *testing.T) {
	digest := func(cmds ...Command) []byte {
		s := NewStore()
		s.Apply(0, 1000, cmds)
		return s.Read(1000, Command{Op: OpObject, Args: [][]byte{[]byte("k")}, Int: ObjectDigest}).Bulk
	}
	args := func(a ...string) [][]byte {
		var out [][]byte
		for _, s := range a {
			out = append(out, []byte(s))
		}
		return out
	}
	if a, b := digest(Command{Op: OpSAdd, Args: args("k", "x", "y")}), digest(Command{Op: OpSAdd, Args: args("k", "y", "x")}); !bytes.Equal(a, b) {
		t.Error("a set's digest depends on the order of its members")
	}
	if a, b := digest(Command{Op: OpRPush, Args: args("k", "x", "y")}), digest(Command{Op: OpRPush, Args: args("k", "y", "x")}); bytes.Equal(a, b) {
		t.Error("a list's digest does not depend on the order of its elements")
	}
	plain := digest(Command{Op: OpSet, Args: args("k", "hello")})
	if got := hex.EncodeToString(plain); got != "36b23a1456b2dce2c3ed252c456761301dba8060" {
		t.Errorf("digest of the string hello: %s, want redis-server's", got)
	}
	if withTTL := digest(Command{Op: OpSet, Args: args("k", "hello"), Int: 1 << 40}); bytes.Equal(plain, withTTL) {
		t.Error("a TTL does not change the digest")
	}
	if d := digest(); d != nil {
		t.Errorf("digest of a missing key: %x, want nil", d)
	}
	var zero [20]byte
	if d := DatasetDigest(zero, 0); d != zero {
		t.Errorf("digest of an empty dataset: %x", d)
	}
}
