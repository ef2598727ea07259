package main

import (
	"slices"
	"testing"
	"time"

	"kvs/fsm"
)

func TestMoveRecordRoundTrip(t *testing.T) {
	for _, r := range []moveRecord{
		{id: 1, source: 1, target: 2, ranges: []fsm.SlotRange{{Lo: 0, Hi: 99}}, phase: phaseBegun},
		{id: 7, source: 3, target: 1, ranges: []fsm.SlotRange{{Lo: 5, Hi: 5}, {Lo: 10, Hi: 20}}, phase: phaseCopying,
			attempt: 2, keys: 10, bytes: 1000, total: 40},
		{id: 9, source: 2, target: 3, ranges: []fsm.SlotRange{{Lo: 16383, Hi: 16383}}, phase: phaseCancelled,
			note: "slot 16383 is group 1's, not the source's"},
	} {
		got, err := parseMoveRecord(r.id, r.String())
		if err != nil {
			t.Fatalf("%q: %v", r.String(), err)
		}
		if got.String() != r.String() || !slices.Equal(got.ranges, r.ranges) || got.note != r.note {
			t.Errorf("%q parsed to %q", r.String(), got.String())
		}
	}
	for _, bad := range []string{"", "1 2 0-9 begun 0 0 0", "1 2 9-0 begun 0 0 0 0", "1 2 0-16384 begun 0 0 0 0", "x 2 0-9 begun 0 0 0 0"} {
		if _, err := parseMoveRecord(1, bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestMoveRecordsOrderAndIDs(t *testing.T) {
	meta := map[string]string{
		"move/next": "10",
		"move/10":   "1 2 0-9 begun 0 0 0 0",
		"move/2":    "1 2 0-9 done 1 10 100 10",
		"slots":     "1 0-16383:1",
	}
	recs, err := moveRecords(meta)
	if err != nil || len(recs) != 2 || recs[0].id != 2 || recs[1].id != 10 {
		t.Fatalf("moveRecords = %v, %v", recs, err)
	}
	// A store that is the source of one move and the target of another
	// never sees an id twice.
	if sourceMoveID(1) == targetMoveID(1, 1) || targetMoveID(1, 2) == sourceMoveID(2) || sourceMoveID(1) == 0 {
		t.Fatal("move ids collide")
	}
}

func TestTimeLeft(t *testing.T) {
	r := moveRecord{phase: phaseCopying, keys: 100, bytes: 100 * 1000, total: 300}
	if got := timeLeft(r, 100_000); got != 2*time.Second {
		t.Errorf("timeLeft = %v, want 2s", got)
	}
	r.phase = phaseFenced
	if got := timeLeft(r, 100_000); got != -1 {
		t.Errorf("timeLeft past the copy = %v, want -1", got)
	}
}
