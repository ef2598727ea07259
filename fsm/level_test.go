package fsm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestLevel(t *testing.T) {
	set := Command{Op: OpSet, Args: [][]byte{[]byte("k"), []byte("v")}}
	meta := Command{Op: OpMetaSet, Args: [][]byte{[]byte("node/n1/level"), []byte("1")}}
	cas := Command{Op: OpMetaCAS, Args: [][]byte{[]byte("slots"), nil, []byte("1 0-16383:1")}}
	for _, tc := range []struct {
		name string
		cmds []Command
		want int
	}{
		{"none", nil, 0},
		{"keys and metadata", []Command{set, meta}, 0},
		{"compare and set", []Command{cas}, 1},
		{"a batch holding one", []Command{set, cas, meta}, 1},
		{"an unknown op", []Command{{Op: 40}}, 0},
		{"slot ownership", []Command{set, SlotsAssign([]SlotRange{{0, 100}})}, 1},
		{"a move's drain", []Command{MoveDrain(1, 1024)}, 1},
		{"a transaction", []Command{cas, MetaTxn([]string{"a", ""}, []string{"a", "1"})}, 2},
		{"MULTI/EXEC: the commands it queued", []Command{set, ExecCommand(nil, nil, []Command{set, cas})}, 1},
		{"MULTI/EXEC of level-0 commands", []Command{ExecCommand(nil, nil, []Command{set, meta})}, 0},
	} {
		if got := Level(tc.cmds); got != tc.want {
			t.Errorf("%s: Level = %d, want %d", tc.name, got, tc.want)
		}
	}
	for op := range opTable {
		if l := opTable[op].level; l > ApplyLevel {
			t.Errorf("%s has level %d, above ApplyLevel %d", opTable[op].name, l, ApplyLevel)
		}
	}
}

// TestNewOpsHaveLevel: every op numbered where a kvs of level N had none
// (testdata/ops-levelN.txt lists the numbers the last release of level N
// registered) has a level above N, reads too: a MULTI queues reads into
// an entry, which an older kvs could not decode. A release that raises
// ApplyLevel adds the list of the release before it.
func TestNewOpsHaveLevel(t *testing.T) {
	for level := 2; level < ApplyLevel; level++ {
		b, err := os.ReadFile(fmt.Sprintf("testdata/ops-level%d.txt", level))
		if err != nil {
			t.Fatal(err)
		}
		old := map[Op]bool{}
		for _, f := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			old[Op(n)] = true
		}
		for op := range opTable {
			sp := &opTable[op]
			if sp.name == "" || old[Op(op)] {
				continue
			}
			if sp.level <= level {
				t.Errorf("%s (op %d) is new since level %d and has level %d", sp.name, op, level, sp.level)
			}
		}
	}
}
