package server

import (
	"bufio"
	"strings"
	"testing"
)

// TestReadReplCommand: the stream's commands are read with their length
// in bytes, which is what the replication offset counts.
func TestReadReplCommand(t *testing.T) {
	in := "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n"
	br := bufio.NewReader(strings.NewReader(in))
	var total int
	for _, want := range []string{"SELECT 0", "SET k ", "PING"} {
		args, n, err := readReplCommand(br)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, a := range args {
			parts = append(parts, string(a))
		}
		if got := strings.Join(parts, " "); got != want {
			t.Fatalf("read %q; want %q", got, want)
		}
		total += n
	}
	if total != len(in) {
		t.Fatalf("%d bytes counted; the stream has %d", total, len(in))
	}
	for _, bad := range []string{"+OK\r\n", "*x\r\n", "*1\r\n:1\r\n", "*1\r\n$-1\r\n", "*1\r\n$5\r\nab"} {
		if _, _, err := readReplCommand(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
}
