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
	cmd, match, _, e := parseScanArgs(op, args, 2, false)
	if e != "" || cmd.Op == 0 {
		return cmd, e
	}
	cmd.Args = [][]byte{args[1], match}
	return cmd, ""
}

// parseScanArgs parses the cursor at args[at] and the options after it
// (MATCH, COUNT, and TYPE when withType) as SCAN and its relatives do, into
// a command of op with Int=cursor, Int2=count (10 unless given) and
// fsm.FlagScanMatch when MATCH was given; the caller adds Args. A cursor
// of 2^63 or more, which no iteration hands out, gives Op 0 once the
// options are checked: nothing follows it.
func parseScanArgs(op fsm.Op, args [][]byte, at int, withType bool) (cmd fsm.Command, match, typ []byte, e string) {
	cursor, ok := parseCursor(args[at])
	if !ok {
		return fsm.Command{}, nil, nil, errInvalidCursor
	}
	cmd = fsm.Command{Op: op, Int: int64(cursor), Int2: 10}
	for j := at + 1; j < len(args); j += 2 {
		if j+1 >= len(args) {
			return fsm.Command{}, nil, nil, errSyntax
		}
		switch {
		case is(args[j], "count"):
			n, ok := parseInt(args[j+1])
			if !ok {
				return fsm.Command{}, nil, nil, errNotInteger
			}
			if n < 1 {
				return fsm.Command{}, nil, nil, errSyntax
			}
			cmd.Int2 = n
		case is(args[j], "match"):
			match = args[j+1]
			cmd.Flags |= fsm.FlagScanMatch
		case withType && is(args[j], "type"):
			// Redis compares type names ignoring case.
			typ = []byte(lowerName(args[j+1]))
		default:
			return fsm.Command{}, nil, nil, errSyntax
		}
	}
	if cursor > math.MaxInt64 {
		cmd.Op = 0
	}
	return cmd, match, typ, ""
}
