package main

import (
	"slices"
	"sync/atomic"
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

// TestPacer: bytes are due at the rate from the first wait on; a rate
// changed mid-way counts from then, owing nothing; no limit, nothing due.
func TestPacer(t *testing.T) {
	var rate atomic.Int64
	rate.Store(1000)
	t0 := time.Unix(1000, 0)
	p := pacer{rate: rate.Load, start: t0}
	at := func(sent int64, now time.Time, want time.Duration, limited bool) {
		t.Helper()
		due, ok := p.due(sent, now)
		if ok != limited || ok && due.Sub(t0) != want {
			t.Errorf("sent %d at %v: due %v (%v), want %v (%v)", sent, now.Sub(t0), due.Sub(t0), ok, want, limited)
		}
	}
	at(0, t0, 0, true)
	at(500, t0, 500*time.Millisecond, true)
	at(2000, t0.Add(time.Second), 2*time.Second, true)
	rate.Store(4000) // faster, from 3 s on, with 2,000 sent
	at(2000, t0.Add(3*time.Second), 3*time.Second, true)
	at(6000, t0.Add(3*time.Second), 4*time.Second, true)
	rate.Store(0)
	at(10000, t0.Add(4*time.Second), 0, false)
	rate.Store(100) // slower again, from 5 s on, with 10,000 sent
	at(10000, t0.Add(5*time.Second), 5*time.Second, true)
	at(10100, t0.Add(5*time.Second), 6*time.Second, true)
}
