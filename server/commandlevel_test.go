package server

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"kvs/fsm"
)

// TestCommandLevels: every command a kvs of cluster level N did not have
// carries a level above N, so that scripts in a cluster not yet at that
// level answer it as unknown on every replica (parseScriptCall), and none
// carries a level above fsm.ApplyLevel. testdata/commands-levelN.txt is
// the command table of the last release of level N; a release that
// raises the level adds the list of the release before it.
func TestCommandLevels(t *testing.T) {
	for level := 2; level < fsm.ApplyLevel; level++ {
		b, err := os.ReadFile(fmt.Sprintf("testdata/commands-level%d.txt", level))
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
			case known[name] && cmd.level > level:
				t.Errorf("%s, which kvs of level %d had, has level %d: scripts would lose it during an upgrade", name, level, cmd.level)
			case !known[name] && cmd.level <= level:
				t.Errorf("%s is new since level %d and has level %d: give its row level %d", name, level, cmd.level, level+1)
			}
		}
	}
}
