package test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestChaosGroups runs TestChaos's schedule, with linearizable reads and
// porcupine, against a cluster whose slots are spread over several Raft
// groups (--groups, 3 unless -chaos.groups says otherwise). Every node
// holds a replica of every group and leads about as many as the others,
// so a kill, a pause or a partition of one node hits groups it leads and
// groups it follows at once; the faults on "the leader" take the leader
// of a group drawn at random. All groups share a node's one raft port,
// so the proxy in front of it cuts, delays and links every group's
// traffic to that node (the proxies read past the group header to learn
// each connection's sender), and the run checks that each group's
// configuration dials the proxies and that each group's traffic went
// through them.
//
// Each epoch has a key of each sort in every group that owns slots when
// it starts: the workers' commands are single-key, so none crosses slots,
// and a node forwards a write to its group's leader. A node removed and wiped is joined again only once
// every group has let it go, as docs/cluster.md asks of an operator.
//
// Slots move between the groups throughout, as faults of the schedule
// (chaos_moves_test.go): moves of ranges holding the workers' keys,
// cancels, and moves hit by another fault in a drawn phase, checked by
// the histories, by lists that take unique elements for the whole run,
// and at the end by every member's routing and the keys counted once.
// Data groups are added (and given slots) and removed as faults too
// (chaos_regroup_test.go).
//
//	go test ./test/ -run TestChaosGroups -v -args -chaos.groups-time=2m -seed=42
//	make chaos CHAOS_GROUPS=3 CHAOS_TIME=30m
var (
	flagChaosGroupsTime = flag.Duration("chaos.groups-time", 15*time.Second, "how long TestChaosGroups injects faults")
	flagChaosGroups     = flag.Int("chaos.groups", 3, "how many raft groups TestChaosGroups's cluster spreads its slots over")
)

func TestChaosGroups(t *testing.T) {
	t.Parallel()
	if *flagChaosGroups < 2 {
		t.Fatalf("-chaos.groups=%d: TestChaosGroups needs 2 or more (TestChaos runs one)", *flagChaosGroups)
	}
	runChaos(t, chaosOpts{groups: *flagChaosGroups}, *flagChaosGroupsTime)
}

func (c *chaos) sharded() bool { return c.groups > 1 }

// raftGroups is how many Raft groups the cluster starts with: its data
// groups and, with several, the meta group 0, which holds no slots. The
// groups added and removed as faults (chaos_regroup_test.go) change the
// set from there; c.regroup.live follows it.
func (c *chaos) raftGroups() int {
	if c.sharded() {
		return c.groups + 1
	}
	return 1
}

// groupLeadersNow returns the leader of each group that every running
// node of nodes lists, indexed by group id (nil where no group has that
// id: data groups added and removed leave gaps), with group 0's leader's
// client address replicated as leaderNow requires; or an error, while
// the nodes disagree on the set of groups or on a group's leader, or
// one knows no leader of a group. groups <= 1 is a cluster of one group.
func groupLeadersNow(nodes []*Node, groups int) ([]*Node, error) {
	l0, err := leaderNow(nodes)
	if err != nil || groups <= 1 {
		return []*Node{l0}, err
	}
	var ids []string // by group id; "" for none
	var seen []int
	for _, n := range nodes {
		if n.isExited() {
			continue
		}
		st, err := kvsStatus(n.Addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", n.Name, err)
		}
		var listed []int
		for _, row := range st.groups {
			g, err := strconv.Atoi(row[0])
			if err != nil || g < 0 {
				return nil, fmt.Errorf("%s lists a group %q", n.Name, row[0])
			}
			listed = append(listed, g)
			if g >= len(ids) {
				ids = append(ids, make([]string, g+1-len(ids))...)
			}
			switch {
			case row[2] == "":
				return nil, fmt.Errorf("%s knows no leader of group %d yet (state %s)", n.Name, g, row[1])
			case ids[g] != "" && ids[g] != row[2]:
				return nil, fmt.Errorf("nodes disagree on group %d's leader: %s and %s", g, ids[g], row[2])
			}
			ids[g] = row[2]
		}
		slices.Sort(listed)
		if seen != nil && !slices.Equal(seen, listed) {
			return nil, fmt.Errorf("%s lists groups %v, another node %v", n.Name, listed, seen)
		}
		seen = listed
	}
	out := make([]*Node, len(ids))
	for g, id := range ids {
		if id == "" {
			continue
		}
		for _, n := range nodes {
			if n.Name == id && !n.isExited() {
				out[g] = n
			}
		}
		if out[g] == nil {
			return nil, fmt.Errorf("group %d's leader %q is not among the running nodes", g, id)
		}
	}
	return out, nil
}

// waitSpread waits until every group has a leader and each node leads its
// share of them, so that the first faults already hit nodes that lead.
func (c *chaos) waitSpread() {
	waitFor(c.t, "the groups' leaderships spread over the nodes", func() error {
		ls, err := groupLeadersNow(c.nodes, c.raftGroups())
		if err != nil {
			return err
		}
		for _, n := range c.nodes {
			if led := countOf(ls, n); led < c.raftGroups()/len(c.nodes) {
				return fmt.Errorf("%s leads %d of %d groups", n.Name, led, c.raftGroups())
			}
		}
		return nil
	})
}

func countOf(ls []*Node, n *Node) int {
	k := 0
	for _, l := range ls {
		if l == n {
			k++
		}
	}
	return k
}

// findShards learns the groups' slot ranges and picks the barrier keys,
// one in each; on a cluster of one group, that group holds every slot.
func (c *chaos) findShards() {
	if !c.sharded() {
		c.shards, c.barriers = [][2]int{{0, 16383}}, []string{"chaos:barrier"}
		return
	}
	c.shards = clusterShards(c.t, c.nodes[0], c.groups)
	c.barriers = nil
	for g, r := range c.shards {
		c.barriers = append(c.barriers, keyInSlots(fmt.Sprintf("chaos:barrier:%d", g), r))
	}
	// keySlot is this test's own CRC16: check it against the server's.
	rc := dialRaw(c.t, c.nodes[0].Addr)
	for _, b := range c.barriers {
		if v := rc.Do("CLUSTER", "KEYSLOT", b); v.Str != fmt.Sprint(keySlot(b)) {
			c.t.Fatalf("CLUSTER KEYSLOT %s = %s, keySlot says %d", b, v, keySlot(b))
		}
	}
	c.logf("groups' slots %v; barrier keys %v", c.shards, c.barriers)
}

// clusterShards returns the slot ranges of a cluster of groups groups,
// one range a group, from n's CLUSTER SLOTS, by first slot.
func clusterShards(t *testing.T, n *Node, groups int) [][2]int {
	t.Helper()
	var shards [][2]int
	waitFor(t, "a shard per group in CLUSTER SLOTS", func() error {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		defer rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		slots, err := rc.ClusterSlots(ctx).Result()
		if err != nil {
			return err
		}
		if len(slots) != groups {
			// A group without a known leader is left out, and a group
			// of several ranges would need more than one key of each
			// sort to cover.
			return fmt.Errorf("CLUSTER SLOTS shows %d ranges for %d groups: %v", len(slots), groups, slots)
		}
		shards = nil
		for _, s := range slots {
			shards = append(shards, [2]int{int(s.Start), int(s.End)})
		}
		return nil
	})
	return shards
}

// keyInSlots returns base, or base with the first numeric suffix that
// puts it, in the slots r (first, last).
func keyInSlots(base string, r [2]int) string {
	for i := 0; ; i++ {
		k := base
		if i > 0 {
			k = fmt.Sprintf("%s.%d", base, i)
		}
		if s := keySlot(k); s >= r[0] && s <= r[1] {
			return k
		}
	}
}

// keySlot is Redis Cluster's hash slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc & 16383)
}

// checkConserved runs once the last epoch is over and the cluster has
// healed. Every key the run wrote must hold, on every member, what its
// epoch's final read found, read key by key (a node wiped and joined again
// in a later epoch must have every earlier epoch's keys back); each
// member's own replica must hold exactly the keys present, slot by slot;
// and the number of keys the groups' leaders hold must be the number of
// keys present: a key lost, left behind by a delete, or held by two
// groups would change it.
func (c *chaos) checkConserved(final map[string]finalRead) {
	t := c.t
	keys := slices.Sorted(maps.Keys(final))
	waitFor(t, fmt.Sprintf("every member to hold the final values of all %d keys", len(keys)), func() error {
		for _, n := range c.members() {
			if err := c.holdsFinal(n, keys, final); err != nil {
				return err
			}
		}
		return nil
	})
	want := c.wantKeys(final)
	waitFor(t, fmt.Sprintf("the groups' leaders to hold %d keys in all", want), func() error {
		got, leaders, err := c.keyCount()
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("DBSIZE summed over the groups' leaders (%s) is %d, want %d (%d of %d keys present, %d barriers and %d lists)%s",
				leaders, got, want, want-int64(len(c.barriers)+len(c.extra)), len(final), len(c.barriers), len(c.extra), c.keyDiff(final))
		}
		return nil
	})
}

// keyDiff lists, for a failed count, the keys the groups' leaders hold
// (KEYS *, which a sharded node answers for the groups it leads) that
// are not present after the final reads, those held more than once, and
// those missing.
func (c *chaos) keyDiff(final map[string]finalRead) string {
	ls, err := groupLeadersNow(c.members(), c.raftGroups())
	if err != nil {
		return ""
	}
	held := map[string][]string{} // key -> the leaders holding it
	for i, l := range ls {
		if l == nil || slices.Index(ls, l) != i {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: l.Addr, MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		keys, err := rc.Keys(ctx, "*").Result()
		cancel()
		rc.Close()
		if err != nil {
			return fmt.Sprintf("; KEYS * on %s: %v", l.Name, err)
		}
		for _, k := range keys {
			held[k] = append(held[k], fmt.Sprintf("%s (slot %d)", l.Name, keySlot(k)))
		}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(held)) {
		f, known := final[k]
		switch {
		case len(held[k]) > 1:
			out = append(out, fmt.Sprintf("%s held by %v", k, held[k]))
		case slices.Contains(c.barriers, k), slices.Contains(c.extra, k):
		case !known || f.Nil:
			out = append(out, fmt.Sprintf("%s held by %v, its final read %+v", k, held[k], f))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(final)) {
		if _, ok := held[k]; !ok && !final[k].Nil {
			out = append(out, fmt.Sprintf("%s missing, its final read %+v", k, final[k]))
		}
	}
	return "; " + strings.Join(out, "; ")
}

// wantKeys is how many keys the cluster must hold at the end: those the
// final reads found, and the barrier keys.
func (c *chaos) wantKeys(final map[string]finalRead) int64 {
	n := int64(len(c.barriers) + len(c.extra))
	for _, f := range final {
		if !f.Nil {
			n++
		}
	}
	return n
}

// holdsFinal checks n's values of keys, and that it holds every barrier
// key, with one GET a key, pipelined. With linearizable reads a node that
// does not lead a key's group forwards the GET to the leader, so the keys
// n's own replicas hold are then checked slot by slot with CLUSTER
// GETKEYSINSLOT, which reads the node's store of the slot's group.
func (c *chaos) holdsFinal(n *Node, keys []string, final map[string]finalRead) error {
	conn, err := net.DialTimeout("tcp", n.Addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(ioTimeout))
	all := slices.Concat(keys, c.barriers)
	var req []byte
	for _, k := range all {
		req = append(req, encodeCommand("GET", k)...)
	}
	if _, err := conn.Write(req); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	for i, k := range all {
		v, err := readValue(r)
		if err != nil || v.IsError() {
			return fmt.Errorf("%s: GET %s: %v %v", n.Name, k, v, err)
		}
		if i >= len(keys) {
			if v.Null {
				return fmt.Errorf("%s: barrier key %s missing", n.Name, k)
			}
			continue
		}
		if f := final[k]; v.Null != f.Nil || (!v.Null && v.Str != f.Value) {
			return fmt.Errorf("%s: GET %s = %v, its epoch's final read found %+v", n.Name, k, v, f)
		}
	}
	bySlot := map[int][]string{} // the keys present, by slot
	for _, k := range slices.Concat(all, c.extra) {
		bySlot[keySlot(k)] = nil
	}
	for _, k := range slices.Concat(all, c.extra) {
		if f, ok := final[k]; !ok || !f.Nil {
			bySlot[keySlot(k)] = append(bySlot[keySlot(k)], k)
		}
	}
	slots := slices.Sorted(maps.Keys(bySlot))
	req = req[:0]
	for _, s := range slots {
		req = append(req, encodeCommand("CLUSTER", "GETKEYSINSLOT", fmt.Sprint(s), "1000")...)
	}
	if _, err := conn.Write(req); err != nil {
		return err
	}
	for _, s := range slots {
		v, err := readValue(r)
		if err != nil || v.Kind != '*' {
			return fmt.Errorf("%s: CLUSTER GETKEYSINSLOT %d: %v %v", n.Name, s, v, err)
		}
		var got []string
		for _, e := range v.Elems {
			got = append(got, e.Str)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(bySlot[s]))
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s's replica holds %q in slot %d, want %q", n.Name, got, s, want)
		}
	}
	return nil
}

// keyCount sums DBSIZE over the groups' leaders (a sharded node answers
// DBSIZE for the groups it leads, as a Redis Cluster master for its
// slots), asking each leader once however many groups it leads, and
// names them. Leaders that moved meanwhile make it an error.
func (c *chaos) keyCount() (int64, string, error) {
	before, err := groupLeadersNow(c.members(), c.raftGroups())
	if err != nil {
		return 0, "", err
	}
	var sum int64
	var names []string
	for i, l := range before {
		if l == nil || slices.Index(before, l) != i {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: l.Addr, MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := rc.DBSize(ctx).Result()
		cancel()
		rc.Close()
		if err != nil {
			return 0, "", fmt.Errorf("DBSIZE on %s: %w", l.Name, err)
		}
		sum += n
		names = append(names, fmt.Sprintf("%s %d", l.Name, n))
	}
	after, err := groupLeadersNow(c.members(), c.raftGroups())
	if err != nil {
		return 0, "", err
	}
	if !slices.Equal(before, after) {
		return 0, "", fmt.Errorf("leaders moved while counting keys")
	}
	return sum, strings.Join(names, ", "), nil
}
