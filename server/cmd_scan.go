package server

import (
	"math"

	"kvs/fsm"
)

// parseCollectionScan parses HSCAN, SSCAN and ZSCAN: key cursor [MATCH
// pattern] [COUNT count], with SCAN's cursor and option rules. It returns
// a read command of op with Args[0]=key, Args[1]=pattern (with
// fsm.FlagScanMatch when MATCH was given, even empty), Int=cursor and
// Int2=count (10 unless given). A cursor of 2^63 or more
// can come from no kvs iteration: nothing follows it, and cmd.Op is 0
// after the options are checked; the caller answers an empty page.
func parseCollectionScan(op fsm.Op, args [][]byte) (fsm.Command, string) {
	cursor, ok := parseCursor(args[2])
	if !ok {
		return fsm.Command{}, errInvalidCursor
	}
	cmd := fsm.Command{Op: op, Int: int64(cursor), Int2: 10}
	var match []byte
	for j := 3; j < len(args); j += 2 {
		if j+1 >= len(args) {
			return fsm.Command{}, errSyntax
		}
		switch {
		case is(args[j], "count"):
			n, ok := parseInt(args[j+1])
			if !ok {
				return fsm.Command{}, errNotInteger
			}
			if n < 1 {
				return fsm.Command{}, errSyntax
			}
			cmd.Int2 = n
		case is(args[j], "match"):
			match = args[j+1]
			cmd.Flags |= fsm.FlagScanMatch
		default:
			return fsm.Command{}, errSyntax
		}
	}
	if cursor > math.MaxInt64 {
		cmd.Op = 0
		return cmd, ""
	}
	cmd.Args = [][]byte{args[1], match}
	return cmd, ""
}
