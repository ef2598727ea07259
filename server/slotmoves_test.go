package server

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeMover struct {
	mu       sync.Mutex // the server calls it from connections' goroutines
	moved    []string
	canceled []uint64
	err      error
}

func (f *fakeMover) Move(first, last, target int) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	f.moved = append(f.moved, fmt.Sprintf("%d-%d:%d", first, last, target))
	return uint64(len(f.moved)), nil
}

func (f *fakeMover) Moves() ([]SlotMove, error) {
	return []SlotMove{{ID: 3, Source: 1, Target: 2, Slots: "0-99", Phase: "copying", Attempts: 1,
		Keys: 5, Bytes: 500, TotalKeys: 10, Left: 1500 * time.Millisecond}}, nil
}

func (f *fakeMover) Cancel(id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.canceled = append(f.canceled, id)
	return nil
}

// TestSlotsCommand: KVS.SLOTS's arguments and replies; a node without a
// mover (slots not spread over groups) refuses it.
func TestSlotsCommand(t *testing.T) {
	fm := &fakeMover{}
	srv, _ := startSharded(t, 2, func(c *Config) { c.Mover = fm })
	c := dialRaw(t, srv)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"KVS.SLOTS", "MOVE", "0", "99", "2"}, ":1\r\n"},
		{[]string{"KVS.SLOTS", "move", "x", "99", "2"}, "-" + errNotInteger + "\r\n"},
		{[]string{"KVS.SLOTS", "MOVE", "0", "99"}, "-ERR unknown subcommand or wrong number of arguments for 'MOVE'. Try KVS.SLOTS MOVE first last group, KVS.SLOTS STATUS, KVS.SLOTS CANCEL id or KVS.SLOTS SIZES first last.\r\n"},
		{[]string{"KVS.SLOTS", "CANCEL", "7"}, "+OK\r\n"},
		{[]string{"KVS.SLOTS", "CANCEL", "-1"}, "-" + errNotInteger + "\r\n"},
		{[]string{"KVS.SLOTS", "STATUS"}, "*1\r\n*22\r\n" + bulk("id") + ":3\r\n" + bulk("source") + ":1\r\n" +
			bulk("target") + ":2\r\n" + bulk("slots") + bulk("0-99") + bulk("phase") + bulk("copying") +
			bulk("attempts") + ":1\r\n" + bulk("keys") + ":5\r\n" + bulk("bytes") + ":500\r\n" +
			bulk("total_keys") + ":10\r\n" + bulk("left_ms") + ":1500\r\n" + bulk("note") + bulk("")},
		{[]string{"KVS.SLOTS"}, "-ERR wrong number of arguments for 'kvs.slots' command\r\n"},
	} {
		if got := c.do(tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	fm.mu.Lock()
	if fmt.Sprint(fm.moved, fm.canceled) != "[0-99:2] [7]" {
		t.Errorf("the mover saw %v %v", fm.moved, fm.canceled)
	}
	fm.err = errors.New("no data group 9: the cluster's are 1 to 3")
	fm.mu.Unlock()
	if got := c.do("KVS.SLOTS", "MOVE", "0", "1", "9"); got != "-ERR no data group 9: the cluster's are 1 to 3\r\n" {
		t.Errorf("a refused move: %q", got)
	}
	fm.mu.Lock()
	fm.err = fmt.Errorf("%w", ErrNoLeader)
	fm.mu.Unlock()
	if got := c.do("KVS.SLOTS", "CANCEL", "1"); got != "-"+errNoLeader+"\r\n" {
		t.Errorf("a cancel without a meta leader: %q", got)
	}

	// SIZES: the keys and bytes of each slot holding keys, from the group
	// the slots are in ("a" and "{a}2" in slot 15495, group 1's).
	for _, k := range []string{"a", "{a}2", "b"} {
		if got := c.do("SET", k, "value"); got != "+OK\r\n" {
			t.Fatalf("SET %s: %q", k, got)
		}
	}
	var bytes int
	for _, k := range []string{"a", "{a}2"} {
		var n int
		fmt.Sscanf(c.do("MEMORY", "USAGE", k), ":%d", &n)
		bytes += n
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"KVS.SLOTS", "SIZES", "15495", "15495"}, fmt.Sprintf("*3\r\n:15495\r\n:2\r\n:%d\r\n", bytes)},
		{[]string{"KVS.SLOTS", "SIZES", "15000", "16383"}, fmt.Sprintf("*3\r\n:15495\r\n:2\r\n:%d\r\n", bytes)},
		{[]string{"KVS.SLOTS", "SIZES", "0", "100"}, "*0\r\n"},
		{[]string{"KVS.SLOTS", "SIZES", "8000", "9000"}, "-ERR slots 8000-9000 are not all in one group\r\n"},
		{[]string{"KVS.SLOTS", "SIZES", "x", "1"}, "-" + errNotInteger + "\r\n"},
		{[]string{"KVS.SLOTS", "SIZES", "5", "4"}, "-" + errInvalidSlot + "\r\n"},
		{[]string{"KVS.SLOTS", "SIZES", "0", "16384"}, "-" + errInvalidSlot + "\r\n"},
	} {
		if got := c.do(tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}

	plain := dialRaw(t, startServer(t, Config{}))
	if got := plain.do("KVS.SLOTS", "STATUS"); got != "-"+errNoMover+"\r\n" {
		t.Errorf("KVS.SLOTS without groups: %q", got)
	}
}

// TestSlotMoveRateConfig: CONFIG GET and SET of slot-move-rate on a node
// of several groups change the pace the mover reads; a node without
// groups has no such parameter.
func TestSlotMoveRateConfig(t *testing.T) {
	var rate atomic.Int64
	rate.Store(32 << 20)
	srv, _ := startSharded(t, 2, func(c *Config) { c.Mover = &fakeMover{}; c.SlotMoveRate = &rate })
	c := dialRaw(t, srv)
	if got := c.do("CONFIG", "GET", "slot-move-rate"); got != "*2\r\n$14\r\nslot-move-rate\r\n$8\r\n33554432\r\n" {
		t.Errorf("CONFIG GET slot-move-rate: %q", got)
	}
	for val, want := range map[string]int64{"4mb": 4 << 20, "500kb": 500 << 10, "1000": 1000, "0": 0} {
		if got := c.do("CONFIG", "SET", "slot-move-rate", val); got != "+OK\r\n" || rate.Load() != want {
			t.Errorf("CONFIG SET slot-move-rate %s: %q, rate %d, want %d", val, got, rate.Load(), want)
		}
	}
	rate.Store(77)
	for _, bad := range []string{"x", "-1", "1zb"} {
		want := "-ERR CONFIG SET failed (possibly related to argument 'slot-move-rate') - argument must be a memory value\r\n"
		if got := c.do("CONFIG", "SET", "slot-move-rate", bad); got != want || rate.Load() != 77 {
			t.Errorf("CONFIG SET slot-move-rate %s: %q (rate %d), want %q", bad, got, rate.Load(), want)
		}
	}
	// Atomic with the other pairs: a bad one changes nothing.
	if got := c.do("CONFIG", "SET", "slot-move-rate", "1mb", "hz", "x"); !strings.HasPrefix(got, "-ERR") || rate.Load() != 77 {
		t.Errorf("CONFIG SET with a bad pair: %q, rate %d", got, rate.Load())
	}
	plain := dialRaw(t, startServer(t, Config{}))
	if got := plain.do("CONFIG", "GET", "slot-move-rate"); got != "*0\r\n" {
		t.Errorf("CONFIG GET slot-move-rate without groups: %q", got)
	}
	if got := plain.do("CONFIG", "SET", "slot-move-rate", "1mb"); !strings.Contains(got, "Unknown option") {
		t.Errorf("CONFIG SET slot-move-rate without groups: %q", got)
	}
}
