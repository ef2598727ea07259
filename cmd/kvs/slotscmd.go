package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// kvs slots move|status|cancel: KVS.SLOTS from the command line.

func slotsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, "Usage: kvs slots move [--wait] ADDR FIRST-LAST GROUP | kvs slots status ADDR | kvs slots cancel ADDR ID\n")
		return 2
	}
	switch args[0] {
	case "move":
		return slotsMoveCmd(args[1:], stdout, stderr)
	case "status":
		return slotsStatusCmd(args[1:], stdout, stderr)
	case "cancel":
		return slotsCancelCmd(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "kvs slots: unknown subcommand %q: want move, status or cancel\n", args[0])
	return 2
}

func slotsMoveCmd(args []string, stdout, stderr io.Writer) int {
	var wait bool
	fs, timeout, code := parseAdmin("slots move", "[--wait] ADDR FIRST-LAST GROUP",
		"Moves slots FIRST to LAST, all of one group, to data group GROUP of the cluster\nthe node at ADDR belongs to, live. With --wait it prints the move's progress\nuntil it is done (exit 0) or cancelled (exit 1); --timeout bounds only the\nrequest, not the wait.",
		3, args, stderr, func(fs *flag.FlagSet) {
			fs.BoolVar(&wait, "wait", false, "print the move's progress until it is over")
		})
	if fs == nil {
		return code
	}
	a, b, ok := strings.Cut(fs.Arg(1), "-")
	if !ok {
		a, b = fs.Arg(1), fs.Arg(1)
	}
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		fmt.Fprintf(stderr, "kvs slots move: %q is not a slot range FIRST-LAST\n", fs.Arg(1))
		return 2
	}
	target, err := strconv.Atoi(fs.Arg(2))
	if err != nil {
		fmt.Fprintf(stderr, "kvs slots move: %q is not a group number\n", fs.Arg(2))
		return 2
	}
	id, err := recordMove(fs.Arg(0), *timeout, first, last, target)
	if err != nil {
		fmt.Fprintf(stderr, "kvs slots move: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "move %d: slots %d-%d to group %s\n", id, first, last, fs.Arg(2))
	if !wait {
		return 0
	}
	return waitMove("kvs slots move", fs.Arg(0), id, stdout, stderr)
}

// waitMove prints move id's progress as it changes until it is over;
// cmd names the command in its errors.
func waitMove(cmd, addr string, id uint64, stdout, stderr io.Writer) int {
	last := ""
	failing := time.Time{}
	for {
		m, ok, err := fetchMove(addr, id)
		switch {
		case err != nil:
			// A node changing leaders, or restarting: keep asking a while.
			if failing.IsZero() {
				failing = time.Now()
			} else if time.Since(failing) > time.Minute {
				fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
				return 1
			}
		case !ok:
			fmt.Fprintf(stderr, "%s: the cluster lists no move %d\n", cmd, id)
			return 1
		default:
			failing = time.Time{}
			if line := moveLine(m); line != last {
				fmt.Fprintln(stdout, line)
				last = line
			}
			switch m.phase {
			case phaseDone:
				return 0
			case phaseCancelled:
				return 1
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// shownMove is one move as KVS.SLOTS STATUS lists it.
type shownMove struct {
	id, source, target, keys, bytes, total, leftMS int64
	slots, phase, note                             string
}

func fetchMoves(addr string) ([]shownMove, error) {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	c := adminClient(addr)
	defer c.Close()
	v, err := c.Do(ctx, "KVS.SLOTS", "STATUS").Slice()
	if err != nil {
		return nil, err
	}
	var out []shownMove
	for _, e := range v {
		fields, ok := e.([]any)
		if !ok || len(fields)%2 != 0 {
			return nil, fmt.Errorf("KVS.SLOTS STATUS answered %v", v)
		}
		var m shownMove
		for i := 0; i < len(fields); i += 2 {
			name, _ := fields[i].(string)
			n, _ := fields[i+1].(int64)
			s, _ := fields[i+1].(string)
			switch name {
			case "id":
				m.id = n
			case "source":
				m.source = n
			case "target":
				m.target = n
			case "keys":
				m.keys = n
			case "bytes":
				m.bytes = n
			case "total_keys":
				m.total = n
			case "left_ms":
				m.leftMS = n
			case "slots":
				m.slots = s
			case "phase":
				m.phase = s
			case "note":
				m.note = s
			}
		}
		out = append(out, m)
	}
	return out, nil
}

func fetchMove(addr string, id uint64) (shownMove, bool, error) {
	ms, err := fetchMoves(addr)
	if err != nil {
		return shownMove{}, false, err
	}
	for _, m := range ms {
		if m.id == int64(id) {
			return m, true, nil
		}
	}
	return shownMove{}, false, nil
}

// moveLine is a move's progress in one line.
func moveLine(m shownMove) string {
	s := fmt.Sprintf("move %d: slots %s from group %d to group %d: %s, %d of %d keys and %s copied",
		m.id, m.slots, m.source, m.target, m.phase, m.keys, m.total, sizeText(m.bytes))
	if m.leftMS >= 0 {
		s += fmt.Sprintf(", about %s left", (time.Duration(m.leftMS) * time.Millisecond).Round(time.Second))
	}
	if m.note != "" {
		s += " (" + m.note + ")"
	}
	return s
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func slotsStatusCmd(args []string, stdout, stderr io.Writer) int {
	fs, _, code := parseAdmin("slots status", "ADDR",
		"Lists the moves of slots in flight in the cluster the node at ADDR belongs to,\nand the last ones finished.", 1, args, stderr)
	if fs == nil {
		return code
	}
	ms, err := fetchMoves(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "kvs slots status: %v\n", err)
		return 1
	}
	if len(ms) == 0 {
		fmt.Fprintln(stdout, "no slot moves")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSLOTS\tFROM\tTO\tPHASE\tKEYS\tCOPIED\tLEFT\tNOTE")
	for _, m := range ms {
		left := "-"
		if m.leftMS >= 0 {
			left = (time.Duration(m.leftMS) * time.Millisecond).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%d/%d\t%s\t%s\t%s\n", m.id, m.slots, m.source, m.target, m.phase,
			m.keys, m.total, sizeText(m.bytes), left, m.note)
	}
	tw.Flush()
	return 0
}

func slotsCancelCmd(args []string, stdout, stderr io.Writer) int {
	fs, timeout, code := parseAdmin("slots cancel", "ADDR ID",
		"Rolls move ID back: the source group keeps its slots, and what was copied is\ndropped from the target.", 2, args, stderr)
	if fs == nil {
		return code
	}
	err := adminDo(fs.Arg(0), *timeout, "KVS.SLOTS", "CANCEL", fs.Arg(1))
	if err != nil {
		fmt.Fprintf(stderr, "kvs slots cancel: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "move %s: rolling back (kvs slots status shows when it is cancelled)\n", fs.Arg(1))
	return 0
}

// printMovesInFlight lists, for kvs status, the moves of slots not over,
// if the node at addr tells them.
func printMovesInFlight(w io.Writer, addr string) {
	ms, err := fetchMoves(addr)
	if err != nil {
		return
	}
	first := true
	for _, m := range ms {
		if m.phase == phaseDone || m.phase == phaseCancelled {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nslot moves in flight:")
			first = false
		}
		fmt.Fprintln(w, "  "+moveLine(m))
	}
}
