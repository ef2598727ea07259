package main

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// TestResolveGroups: a new cluster's shape is written beside its data and
// read back at every start; flags that disagree with it are refused; a
// file from before --replicas puts every group on every node.
func TestResolveGroups(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	flags := func(args ...string) serveFlags {
		t.Helper()
		f, err := parseServeFlags(append([]string{"--node-id", "n1", "--raft-addr", "127.0.0.1:7000", "--data-dir", dir}, args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	sh, err := resolveGroups(flags("--bootstrap", "--groups", "4", "--replicas", "2"), logger)
	if err != nil || sh != (shape{groups: 4, replicas: 2}) {
		t.Fatalf("a new cluster: %+v, %v", sh, err)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{nil, ""},
		{[]string{"--groups", "4"}, ""},
		{[]string{"--replicas", "2"}, ""},
		{[]string{"--groups", "3"}, "--groups 3: the data dir's cluster was made with 4 groups"},
		{[]string{"--replicas", "3"}, "--replicas 3: the data dir's cluster places 2 replicas"},
	} {
		sh, err := resolveGroups(flags(tc.args...), logger)
		switch {
		case tc.err == "" && (err != nil || sh != shape{groups: 4, replicas: 2}):
			t.Errorf("%q on the data dir: %+v, %v", tc.args, sh, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q on the data dir: %v, want an error with %q", tc.args, err, tc.err)
		}
	}
	// A file written before --replicas holds the count alone.
	if err := os.WriteFile(groupsFile(dir), []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if sh, err := resolveGroups(flags(), logger); err != nil || sh != (shape{groups: 4}) {
		t.Errorf("a file from before --replicas: %+v, %v; want every node", sh, err)
	}
	for _, bad := range []string{"", "x\n", "4\n-1\n", "4\n2\n9\n", "0\n"} {
		if err := os.WriteFile(groupsFile(dir), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readGroups(dir); err == nil {
			t.Errorf("readGroups of %q succeeded", bad)
		}
	}
}
