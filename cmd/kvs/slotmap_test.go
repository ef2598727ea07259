package main

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"kvs/fsm"
	"kvs/group"
	"kvs/server"
)

// TestSlotMapFollower: the server routes by each version of the slot map
// the meta store applies or restores, from the one the store held when the
// server came; a malformed value is left alone.
func TestSlotMapFollower(t *testing.T) {
	const groups = 2
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	meta := fsm.NewStore()
	f := newSlotMapFollower(meta, groups, logger)
	v1, _ := group.InitialSlotMap(groups)
	index := uint64(0)
	apply := func(c fsm.Command) fsm.Reply {
		index++
		return meta.Apply(index, 0, []fsm.Command{c})[0]
	}
	// Applied before there is a server, as when the meta group replays.
	if r := apply(metaCAS(group.SlotMapMeta, "", v1.String())); r.Int != 1 {
		t.Fatalf("storing version 1: %+v", r)
	}
	table, err := slotTable(groups)
	if err != nil {
		t.Fatal(err)
	}
	gs := []server.Group{{Store: meta}}
	for range groups {
		st := fsm.NewStore()
		gs = append(gs, server.Group{Store: st, Proposer: server.MemoryProposer{Store: st}})
	}
	srv, err := server.New(server.Config{Store: meta, Groups: gs, Slots: table, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if v := srv.SlotMapVersion(); v != 0 {
		t.Fatalf("version %d before attach", v)
	}
	f.attach(srv)
	if v := srv.SlotMapVersion(); v != 1 {
		t.Fatalf("version %d after attach, want the stored 1", v)
	}

	v2, err := v1.Flip([]group.SlotRange{{First: 0, Last: 9}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	// A stale compare-and-set changes nothing; the right one installs.
	if r := apply(metaCAS(group.SlotMapMeta, "", v2.String())); r.Int != 0 {
		t.Fatalf("a second write from absent: %+v", r)
	}
	if r := apply(metaCAS(group.SlotMapMeta, v1.String(), v2.String())); r.Int != 1 {
		t.Fatalf("version 2 from version 1: %+v", r)
	}
	if v := srv.SlotMapVersion(); v != 2 {
		t.Fatalf("version %d after the meta store applied 2", v)
	}

	// Malformed: logged, the map in force stays.
	apply(fsm.Command{Op: fsm.OpMetaSet, Args: [][]byte{[]byte(group.SlotMapMeta), []byte("3 0-16383:7")}})
	if v := srv.SlotMapVersion(); v != 2 {
		t.Fatalf("version %d after a malformed map", v)
	}

	// A restored snapshot brings version 3.
	v3, _ := v2.Flip([]group.SlotRange{{First: 0, Last: 9}}, 1)
	src := fsm.NewStore()
	src.Apply(0, 0, []fsm.Command{metaCAS(group.SlotMapMeta, "", v3.String())})
	var buf bytes.Buffer
	sn := src.Snapshot()
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sn.Release()
	if _, err := meta.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if v := srv.SlotMapVersion(); v != 3 {
		t.Fatalf("version %d after restoring a snapshot of 3", v)
	}
}
