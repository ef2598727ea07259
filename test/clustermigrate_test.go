package test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// migrations is CLUSTER GETSLOTMIGRATIONS on addr, each move's fields by
// name.
func migrations(ctx context.Context, addr string) ([]map[string]any, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	v, err := c.Do(ctx, "CLUSTER", "GETSLOTMIGRATIONS").Slice()
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, e := range v {
		fields, _ := e.([]any)
		m := map[string]any{}
		for i := 0; i+1 < len(fields); i += 2 {
			m[fmt.Sprint(fields[i])] = fields[i+1]
		}
		out = append(out, m)
	}
	return out, nil
}

// TestClusterMigrateSlots: Valkey's slot migration commands on a cluster
// of three nodes and three groups, sent to any node. CLUSTER MIGRATESLOTS
// refuses what is not a move (a bad range, an unknown node, a number that
// is no group, slots already the target's) before recording any; a move
// to the node that leads group 2, listed by CLUSTER GETSLOTMIGRATIONS on
// every node, is rolled back mid-copy by CLUSTER CANCELSLOTMIGRATIONS
// with every key as it was; then two ranges named to group 2 by its
// number move to their end, keys intact, CLUSTER SLOTS giving the range
// to group 2's leader. A user without @dangerous may not run them; a node
// without cluster support refuses them as Redis does.
func TestClusterMigrateSlots(t *testing.T) {
	t.Parallel()
	const first, last, from, to = 0, 1999, 1, 2
	mc := startMoveCluster(t, first, last)
	nodes, cc, ctx := mc.nodes, mc.cc, mc.ctx
	c := redis.NewClient(&redis.Options{Addr: nodes[2].Addr, MaxRetries: -1})
	defer c.Close()
	st, err := kvsStatus(nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	fromID, toID := sha1hex(st.groups[from][2]), sha1hex(st.groups[to][2])
	if fromID == toID {
		t.Fatalf("groups %d and %d have one leader: %v", from, to, st.groups)
	}

	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"SLOTSRANGE", 0, 10}, "ERR syntax error"},
		{[]any{"SLOTSRANGE", "NODE", toID}, "ERR syntax error"},
		{[]any{"SLOTS", 0, 10, "NODE", toID}, "ERR syntax error"},
		{[]any{"SLOTSRANGE", 0, 16384, "NODE", toID}, "ERR Invalid or out of range slot"},
		{[]any{"SLOTSRANGE", 10, 5, "NODE", toID}, "ERR start slot number 10 is greater than end slot number 5"},
		{[]any{"SLOTSRANGE", 0, 10, "NODE", strings.Repeat("0", 40)}, "ERR Unknown node " + strings.Repeat("0", 40)},
		{[]any{"SLOTSRANGE", 0, 10, "NODE", 9}, "ERR no data group 9: the cluster's are 1 to 3"},
		{[]any{"SLOTSRANGE", 0, 10, "NODE", fromID}, "ERR slots 0-10 are data group 1's already"},
		{[]any{"SLOTSRANGE", 0, 10, 5, 20, "NODE", toID}, "ERR slot 5 is named more than once"},
	} {
		err := c.Do(ctx, append([]any{"CLUSTER", "MIGRATESLOTS"}, tc.args...)...).Err()
		if err == nil || err.Error() != tc.want {
			t.Errorf("CLUSTER MIGRATESLOTS %v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if ms, err := migrations(ctx, nodes[0].Addr); err != nil || len(ms) != 0 {
		t.Fatalf("CLUSTER GETSLOTMIGRATIONS after refusals only: %v, %v", ms, err)
	}

	// A move to the node leading group 2, cancelled mid-copy.
	if err := c.Do(ctx, "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", first, last, "NODE", toID).Err(); err != nil {
		t.Fatalf("CLUSTER MIGRATESLOTS: %v", err)
	}
	var id int64
	for _, n := range nodes {
		ms, err := migrations(ctx, n.Addr)
		if err != nil || len(ms) != 1 {
			t.Fatalf("%s: CLUSTER GETSLOTMIGRATIONS: %v, %v", n.Name, ms, err)
		}
		m := ms[0]
		if m["slot_ranges"] != fmt.Sprintf("%d-%d", first, last) || m["source_group"] != int64(from) ||
			m["target_group"] != int64(to) || m["target_node"] != toID || m["source_node"] != fromID {
			t.Fatalf("%s: CLUSTER GETSLOTMIGRATIONS: %v", n.Name, m)
		}
		id = m["id"].(int64)
	}
	waitMovePhase(t, ctx, nodes[1].Addr, id, "copying", true)
	if err := c.Do(ctx, "CLUSTER", "CANCELSLOTMIGRATIONS").Err(); err != nil {
		t.Fatalf("CLUSTER CANCELSLOTMIGRATIONS: %v", err)
	}
	waitMovePhase(t, ctx, nodes[0].Addr, id, "cancelled", false)
	waitFor(t, "every node to route the range to group 1", func() error { return slotOwners(nodes, "1", first, last, from) })
	if after := describeAll(t, ctx, cc, mc.all); !maps.Equal(mc.before, after) {
		t.Fatalf("keys changed by a cancelled move:\n%s", diffDescribed(mc.before, after))
	}
	// Nothing left to cancel: still OK.
	if err := c.Do(ctx, "CLUSTER", "CANCELSLOTMIGRATIONS").Err(); err != nil {
		t.Fatalf("CLUSTER CANCELSLOTMIGRATIONS with nothing to cancel: %v", err)
	}

	// Two ranges to group 2 by its number: a move each, to their end.
	mid := (first + last) / 2
	if err := c.Do(ctx, "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", first, mid, mid+1, last, "NODE", to).Err(); err != nil {
		t.Fatalf("CLUSTER MIGRATESLOTS by group number: %v", err)
	}
	waitFor(t, "both moves to finish", func() error {
		ms, err := migrations(ctx, nodes[1].Addr)
		if err != nil {
			return err
		}
		var done []string
		for _, m := range ms {
			if m["id"] != id && m["state"] == "done" {
				done = append(done, m["slot_ranges"].(string))
			}
		}
		slices.Sort(done)
		if want := []string{fmt.Sprintf("%d-%d", first, mid), fmt.Sprintf("%d-%d", mid+1, last)}; !slices.Equal(done, want) {
			return fmt.Errorf("moves done %v of %v", done, ms)
		}
		return nil
	})
	waitFor(t, "every node to route the range to group 2", func() error { return slotOwners(nodes, "3", first, last, to) })
	if after := describeAll(t, ctx, cc, mc.all); !maps.Equal(mc.before, after) {
		t.Fatalf("keys changed by the moves:\n%s", diffDescribed(mc.before, after))
	}
	if n, err := keysTotal(ctx, cc); err != nil || n != mc.total {
		t.Fatalf("keys over the masters after the moves: %d, %v; want %d", n, err, mc.total)
	}

	// The ACL sees them as the dangerous admin commands they are.
	if err := c.Do(ctx, "ACL", "SETUSER", "watcher", "on", ">pw", "+@all", "-@dangerous").Err(); err != nil {
		t.Fatal(err)
	}
	w := redis.NewClient(&redis.Options{Addr: nodes[2].Addr, Username: "watcher", Password: "pw", MaxRetries: -1})
	defer w.Close()
	waitFor(t, "the user to be known", func() error { return w.Ping(ctx).Err() })
	for _, sub := range []string{"GETSLOTMIGRATIONS", "CANCELSLOTMIGRATIONS"} {
		if err := w.Do(ctx, "CLUSTER", sub).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("CLUSTER %s by a user without @dangerous: %v", sub, err)
		}
	}
	if err := w.Do(ctx, "CLUSTER", "SLOTS").Err(); err != nil {
		t.Errorf("CLUSTER SLOTS by a user without @dangerous: %v", err)
	}

	plain := startKVS(t, KVSOptions{})
	pc := redis.NewClient(&redis.Options{Addr: plain.Addr})
	defer pc.Close()
	if err := pc.Do(ctx, "CLUSTER", "GETSLOTMIGRATIONS").Err(); err == nil || err.Error() != "ERR This instance has cluster support disabled" {
		t.Errorf("CLUSTER GETSLOTMIGRATIONS in memory mode: %v", err)
	}
}
