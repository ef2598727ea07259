package fsm

import "testing"

// TestScanMatchEmpty: MATCH "" matches only the empty member, as in Redis;
// no MATCH matches all.
func TestScanMatchEmpty(t *testing.T) {
	s := NewStore()
	s.Apply(0, t0, []Command{
		c(OpSAdd, "s", "", "a"),
		c(OpSet, "", "v"),
	})
	s.Apply(0, t0, []Command{{Op: OpZAdd, Args: [][]byte{[]byte("z2"), ScoreArg(1), []byte(""), ScoreArg(2), []byte("a")}}})
	run(t, s, []step{
		{t0, c(OpSScan, "s", "").i2(10).fl(FlagScanMatch), arr(bulk("0"), bulks(""))},
		{t0, c(OpSScan, "s", "a").i2(10), arr(bulk("0"), bulks("a"))},
	})
	if r := s.Read(t0, c(OpScan, "").i2(1000).fl(FlagScanMatch)); r.String() != `["0" [""]]` {
		t.Fatalf("SCAN MATCH \"\": %v", r)
	}
	if r := s.Read(t0, c(OpSScan, "s", "").i2(10)); len(r.Array[1].Array) != 2 {
		t.Fatalf("SSCAN without MATCH: %v", r)
	}
	if r := s.Read(t0, c(OpZScan, "z2", "").i2(10).fl(FlagScanMatch)); r.String() != `["0" ["" "1"]]` {
		t.Fatalf("ZSCAN MATCH \"\": %v", r)
	}
	if r := s.Read(t0, c(OpZScan, "z2", "").i2(10)); len(r.Array[1].Array) != 4 {
		t.Fatalf("ZSCAN without MATCH: %v", r)
	}
}
