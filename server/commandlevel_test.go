package server

import (
	"os"
	"strings"
	"testing"

	"kvs/fsm"
)

// TestCommandLevels: every command a kvs of cluster level 2 did not have
// carries a level above 2, so that scripts in a cluster not yet at that
// level answer it as unknown on every replica (parseScriptCall), and none
// carries a level above fsm.ApplyLevel. testdata/commands-level2.txt is
// the command table of the last release of level 2; a release that raises
// the level adds its own list and the test checks against the newest.
func TestCommandLevels(t *testing.T) {
	b, err := os.ReadFile("testdata/commands-level2.txt")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, n := range strings.Fields(string(b)) {
		known[n] = true
	}
	for name, cmd := range commandTable() {
		switch {
		case cmd.level > fsm.ApplyLevel:
			t.Errorf("%s has level %d, above this kvs's %d", name, cmd.level, fsm.ApplyLevel)
		case known[name] && cmd.level != 0:
			t.Errorf("%s, which kvs of level 2 had, has level %d: scripts would lose it during an upgrade", name, cmd.level)
		case !known[name] && cmd.level < 3:
			t.Errorf("%s is new since level 2 and has level %d: give its row level 3", name, cmd.level)
		}
	}
}
