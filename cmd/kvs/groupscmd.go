package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// kvs groups add|remove|list: KVS.GROUPS from the command line.

func groupsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, "Usage: kvs groups add ADDR [N] | kvs groups remove ADDR GROUP | kvs groups list ADDR\n")
		return 2
	}
	switch args[0] {
	case "add":
		return groupsAddCmd(args[1:], stdout, stderr)
	case "remove":
		return groupsRemoveCmd(args[1:], stdout, stderr)
	case "list":
		return groupsListCmd(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "kvs groups: unknown subcommand %q: want add, remove or list\n", args[0])
	return 2
}

func groupsAddCmd(args []string, stdout, stderr io.Writer) int {
	n := 1
	fs, timeout, code := parseAdmin("groups add", "ADDR [N]",
		"Creates N (default 1) new data groups in the cluster the node at ADDR belongs\nto, with the next unused ids, their replicas placed as the cluster places\nevery group's. A new group holds no slots: kvs slots move gives it some.\nPrints the new groups' ids.",
		-1, args, stderr)
	if fs == nil {
		return code
	}
	if fs.NArg() == 2 {
		var err error
		if n, err = strconv.Atoi(fs.Arg(1)); err != nil || n < 1 {
			fmt.Fprintf(stderr, "kvs groups add: %q is not a number of groups to add (1 or more)\n", fs.Arg(1))
			return 2
		}
	}
	var ids []int64
	err := retryAdmin(*timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		c := adminClient(fs.Arg(0))
		defer c.Close()
		v, err := c.Do(ctx, "KVS.GROUPS", "ADD", n).Int64Slice()
		if err != nil && strings.HasPrefix(err.Error(), "UNCERTAIN") {
			// Not asked again: the groups would be added twice if they
			// were the first time.
			return fmt.Errorf("the groups may or may not have been added (kvs groups list shows them if they were): %v", err)
		}
		ids = v
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "kvs groups add: %v\n", err)
		return 1
	}
	for _, id := range ids {
		fmt.Fprintf(stdout, "added group %d\n", id)
	}
	return 0
}

func groupsRemoveCmd(args []string, stdout, stderr io.Writer) int {
	fs, timeout, code := parseAdmin("groups remove", "ADDR GROUP",
		"Empties data group GROUP of the cluster the node at ADDR belongs to, moving its\nslots to the other groups (spread so that they hold about as many as each\nother, one move for each range, printing their progress), then deletes it:\nevery node closes its replica and deletes its state, and its id is never\ngiven again. A move cancelled or failed stops it, and the group stays.\n--timeout bounds each request, not the moves.",
		2, args, stderr)
	if fs == nil {
		return code
	}
	addr, id := fs.Arg(0), fs.Arg(1)
	if _, err := strconv.ParseUint(id, 10, 32); err != nil {
		fmt.Fprintf(stderr, "kvs groups remove: %q is not a group id\n", id)
		return 2
	}
	// Each round starts the moves of the slots the group still has (or
	// names those under way) and waits for them; a round that names none
	// leaves the group empty. Slots moved into it meanwhile make another
	// round.
	for round := 0; ; round++ {
		var moves []int64
		err := retryAdmin(*timeout, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
			defer cancel()
			c := adminClient(addr)
			defer c.Close()
			v, err := c.Do(ctx, "KVS.GROUPS", "EMPTY", id).Int64Slice()
			if err != nil && strings.HasPrefix(err.Error(), "UNCERTAIN") {
				return fmt.Errorf("the moves may or may not have been recorded (kvs slots status lists them if they were; run kvs groups remove again to go on): %v", err)
			}
			moves = v
			return err
		})
		if err != nil {
			fmt.Fprintf(stderr, "kvs groups remove: %v\n", err)
			return 1
		}
		if len(moves) == 0 {
			break
		}
		if round == 10 {
			fmt.Fprintf(stderr, "kvs groups remove: group %s keeps getting slots back: it stays\n", id)
			return 1
		}
		fmt.Fprintf(stdout, "group %s: moving its slots in %d moves\n", id, len(moves))
		for _, m := range moves {
			if code := waitMove("kvs groups remove", addr, uint64(m), stdout, stderr); code != 0 {
				fmt.Fprintf(stderr, "kvs groups remove: move %d did not finish: group %s stays (kvs slots status shows why; run kvs groups remove again to go on)\n", m, id)
				return code
			}
		}
	}
	if err := adminDo(addr, *timeout, "KVS.GROUPS", "REMOVE", id); err != nil {
		fmt.Fprintf(stderr, "kvs groups remove: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "removed group %s\n", id)
	return 0
}

// shownGroup is one data group as KVS.GROUPS LIST tells it.
type shownGroup struct {
	id, slots             int64
	ranges, leader, lAddr string
	replicas              []string
}

func fetchGroups(addr string) ([]shownGroup, error) {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	c := adminClient(addr)
	defer c.Close()
	v, err := c.Do(ctx, "KVS.GROUPS", "LIST").Slice()
	if err != nil {
		return nil, err
	}
	var out []shownGroup
	for _, e := range v {
		fields, ok := e.([]any)
		if !ok || len(fields)%2 != 0 {
			return nil, fmt.Errorf("KVS.GROUPS LIST answered %v", v)
		}
		var g shownGroup
		for i := 0; i < len(fields); i += 2 {
			name, _ := fields[i].(string)
			n, _ := fields[i+1].(int64)
			s, _ := fields[i+1].(string)
			switch name {
			case "id":
				g.id = n
			case "slots":
				g.slots = n
			case "ranges":
				g.ranges = s
			case "leader":
				g.leader = s
			case "leader_addr":
				g.lAddr = s
			case "replicas":
				list, _ := fields[i+1].([]any)
				for _, r := range list {
					g.replicas = append(g.replicas, fmt.Sprint(r))
				}
			}
		}
		out = append(out, g)
	}
	return out, nil
}

func groupsListCmd(args []string, stdout, stderr io.Writer) int {
	fs, _, code := parseAdmin("groups list", "ADDR",
		"Lists the data groups of the cluster the node at ADDR belongs to: each one's\nslots, leader and replicas.", 1, args, stderr)
	if fs == nil {
		return code
	}
	gs, err := fetchGroups(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "kvs groups list: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSLOTS\tRANGES\tLEADER\tREPLICAS")
	for _, g := range gs {
		leader := "(none)"
		if g.leader != "" {
			leader = g.leader
			if g.lAddr != "" {
				leader += " at " + g.lAddr
			}
		}
		ranges := g.ranges
		if ranges == "" {
			ranges = "-"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", g.id, g.slots, ranges, leader, strings.Join(g.replicas, ","))
	}
	tw.Flush()
	return 0
}
