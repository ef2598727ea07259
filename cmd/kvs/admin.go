package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"kvs/group"
)

// The admin subcommands (join, remove, status) are RESP clients of a running
// node: they send KVS.JOIN, KVS.REMOVE and KVS.STATUS, which any member
// answers (a follower relays JOIN and REMOVE to the leader).

const adminTimeout = 10 * time.Second

// adminTLS, when set, gives the TLS config of admin connections: from
// --tls-cluster (serve's --join) or --tls (join, remove, status), set once
// before the first connection.
var adminTLS func() *tls.Config

// quietClientLog keeps go-redis's own log lines ("connection pool: failed
// to dial after 5 attempts") off kvs's output: every error reaches the
// admin commands as a returned error, which they report in one line of
// their own.
type quietClientLog struct{}

func (quietClientLog) Printf(context.Context, string, ...any) {}

var silenceClientLog = sync.OnceFunc(func() { redis.SetLogger(quietClientLog{}) })

func adminClient(addr string) *redis.Client {
	silenceClientLog()
	var tc *tls.Config
	if adminTLS != nil {
		tc = adminTLS()
	}
	user, password := adminLogin()
	if password == "" {
		user = ""
	}
	return redis.NewClient(&redis.Options{
		TLSConfig:             tc,
		Addr:                  addr,
		Username:              user,
		Password:              password,
		Protocol:              2,
		DisableIdentity:       true,
		DialTimeout:           2 * time.Second,
		ReadTimeout:           adminTimeout,
		WriteTimeout:          2 * time.Second,
		MaxRetries:            -1,
		PoolSize:              1,
		ContextTimeoutEnabled: true,
	})
}

// nodeStatus is one node's KVS.STATUS reply.
type nodeStatus struct {
	fields  map[string]string
	members [][]string // id, raft address, client address, role
	// groups, of a node whose slots are spread over several groups: id,
	// state ("none" where the node holds no replica), leader id, commit
	// index, applied index, and the group's members (comma-separated ids,
	// a non-voter's marked).
	groups [][]string
}

// groupCount is the number of Raft groups the node holds: 1 unless it
// says.
func (s nodeStatus) groupCount() int { return max(1, len(s.groups)) }

// madeGroups is the number of Raft groups the node's cluster was made
// with (its --groups, and the meta group): what a node joining it starts
// with. A kvs from before groups were added at run time does not say: its
// groups are still those it was made with.
func (s nodeStatus) madeGroups() int {
	if n := s.uint("made_groups"); n > 0 {
		return int(n)
	}
	return s.groupCount()
}

// dataGroupIDs are the ids of the data groups the node lists.
func (s nodeStatus) dataGroupIDs() []uint32 {
	var ids []uint32
	for _, g := range s.groups {
		if id, err := strconv.ParseUint(g[0], 10, 32); err == nil && id > 0 {
			ids = append(ids, uint32(id))
		}
	}
	return ids
}

func (s nodeStatus) get(name string) string { return s.fields[name] }

func (s nodeStatus) uint(name string) uint64 {
	v, _ := strconv.ParseUint(s.fields[name], 10, 64)
	return v
}

// fetchStatus asks the node at addr for KVS.STATUS.
func fetchStatus(ctx context.Context, addr string) (nodeStatus, error) {
	c := adminClient(addr)
	defer c.Close()
	v, err := c.Do(ctx, "KVS.STATUS").Result()
	if err != nil {
		return nodeStatus{}, err
	}
	return parseStatus(v)
}

func parseStatus(v any) (nodeStatus, error) {
	st := nodeStatus{fields: map[string]string{}}
	arr, ok := v.([]any)
	if !ok || len(arr)%2 != 0 {
		return st, fmt.Errorf("KVS.STATUS answered %T, not name/value pairs", v)
	}
	for i := 0; i < len(arr); i += 2 {
		name := fmt.Sprint(arr[i])
		if name == "members" || name == "groups" {
			ms, _ := arr[i+1].([]any)
			for _, m := range ms {
				row, _ := m.([]any)
				cells := make([]string, len(row))
				for j, c := range row {
					if list, ok := c.([]any); ok {
						// A group's members: [id, raft address, role]
						// each.
						ids := make([]string, len(list))
						for k, m := range list {
							m, _ := m.([]any)
							if len(m) > 0 {
								ids[k] = fmt.Sprint(m[0])
							}
							if len(m) > 2 && fmt.Sprint(m[2]) == "nonvoter" {
								ids[k] += "(nonvoter)"
							}
						}
						cells[j] = strings.Join(ids, ",")
					} else {
						cells[j] = fmt.Sprint(c)
					}
				}
				if name == "groups" {
					st.groups = append(st.groups, cells)
				} else {
					st.members = append(st.members, cells)
				}
			}
			continue
		}
		st.fields[name] = fmt.Sprint(arr[i+1])
	}
	return st, nil
}

// joinCluster asks the cluster at clusterAddr to add the node (id,
// raftAddr, respAddr), of a cluster of shape sh, which applies replicated
// entries of level level: the count of Raft groups and the replicas go
// with the request (1 and 0 of a cluster of one group, which a kvs from
// before levels checks as it did), and a cluster of another shape refuses
// it; so does a cluster whose level is above the node's.
func joinCluster(clusterAddr, id, raftAddr, respAddr string, sh shape, level int) error {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	c := adminClient(clusterAddr)
	defer c.Close()
	replicas := sh.replicas
	if sh.groups == 1 {
		replicas = 0
	}
	args := []any{"KVS.JOIN", id, raftAddr, respAddr, strconv.Itoa(raftGroups(sh.groups)), strconv.Itoa(replicas), strconv.Itoa(level)}
	err := c.Do(ctx, args...).Err()
	if err != nil && sh.groups == 1 && strings.Contains(err.Error(), "wrong number of arguments") {
		// A kvs from before groups takes the node's addresses alone; it
		// has no level to check, as it writes no entry above level 0.
		err = c.Do(ctx, args[:4]...).Err()
	}
	return err
}

func joinCmd(args []string, stdout, stderr io.Writer) int {
	fs, timeout, code := parseAdmin("join", "[--timeout D] CLUSTER_ADDR NODE_ADDR",
		"Adds the node serving clients at NODE_ADDR to the cluster that the node at\nCLUSTER_ADDR belongs to (any member; followers relay to the leader), and\nwaits until the node knows the leader. While the cluster has no leader yet\nit retries, for up to --timeout.",
		2, args, stderr)
	if fs == nil {
		return code
	}
	clusterAddr, nodeAddr := fs.Arg(0), fs.Arg(1)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	st, err := fetchStatus(ctx, nodeAddr)
	if err != nil {
		fmt.Fprintf(stderr, "kvs join: asking %s who it is: %v\n", nodeAddr, err)
		return 1
	}
	id, raftAddr := st.get("id"), st.get("raft_addr")
	if id == "" || raftAddr == "" {
		fmt.Fprintf(stderr, "kvs join: %s is not a cluster node (no id or raft address in KVS.STATUS)\n", nodeAddr)
		return 1
	}
	respAddr := st.get("addr")
	if respAddr == "" {
		respAddr = nodeAddr
	}
	sh := shape{groups: dataGroups(st.madeGroups()), replicas: int(st.uint("replicas"))}
	// A kvs from before levels reports none: level 0.
	level := int(st.uint("apply_level"))
	if err := retryAdmin(*timeout, func() error { return joinCluster(clusterAddr, id, raftAddr, respAddr, sh, level) }); err != nil {
		fmt.Fprintf(stderr, "kvs join: %v\n", err)
		return 1
	}
	// Return once the new member serves as one: it knows the leader, so
	// a write sent to it next is forwarded rather than refused.
	err = retryAdmin(*timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		st, err := fetchStatus(ctx, nodeAddr)
		if err != nil {
			return err
		}
		if st.get("leader_addr") == "" {
			return errNoLeaderYet
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "kvs join: %s was added but does not know the leader yet: %v\n", id, err)
		return 1
	}
	fmt.Fprintf(stdout, "joined %s (raft %s, clients %s) to the cluster at %s\n", id, raftAddr, respAddr, clusterAddr)
	return 0
}

var errNoLeaderYet = errors.New("CLUSTERDOWN no leader known yet")

// adminDo sends args to the node at addr, retrying as retryAdmin does.
func adminDo(addr string, timeout time.Duration, args ...any) error {
	return retryAdmin(timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		c := adminClient(addr)
		defer c.Close()
		return c.Do(ctx, args...).Err()
	})
}

// retryAdmin runs f until it succeeds, fails with an error that a retry
// cannot fix, or timeout passes. Retried: no leader yet (a cluster that is
// still electing, as right after --bootstrap), not the leader, a change
// whose outcome is unknown (leadership lost while it was committing), and
// a node that does not accept connections yet. Repeating is safe because
// join and remove are idempotent: adding a member already there at that
// address, or removing one already gone, changes nothing.
func retryAdmin(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := f()
		if err == nil || !retryable(err) || time.Now().Add(wait).After(deadline) {
			return err
		}
		time.Sleep(wait)
	}
}

func retryable(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN") ||
		strings.HasPrefix(msg, "UNCERTAIN") || strings.Contains(msg, "connection refused")
}

func removeCmd(args []string, stdout, stderr io.Writer) int {
	fs, timeout, code := parseAdmin("remove", "[--timeout D] CLUSTER_ADDR NODE_ID",
		"Removes node NODE_ID from the cluster that the node at CLUSTER_ADDR belongs to,\nretrying for up to --timeout while the cluster has no leader or changes leaders.",
		2, args, stderr)
	if fs == nil {
		return code
	}
	err := adminDo(fs.Arg(0), *timeout, "KVS.REMOVE", fs.Arg(1))
	if err != nil {
		fmt.Fprintf(stderr, "kvs remove: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "removed %s from the cluster at %s\n", fs.Arg(1), fs.Arg(0))
	return 0
}

func statusCmd(args []string, stdout, stderr io.Writer) int {
	fs, timeout, code := parseAdmin("status", "[--timeout D] ADDR",
		"Prints the node at ADDR's view of the cluster and asks every member how far\nbehind the leader's commit index it is.",
		1, args, stderr)
	if fs == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	st, err := fetchStatus(ctx, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "kvs status: %v\n", err)
		return 1
	}
	printStatus(ctx, stdout, st)
	if st.get("slot_map_version") != "" {
		printMovesInFlight(stdout, fs.Arg(0))
	}
	return 0
}

// printStatus writes the node's fields, then a table of members. Each
// member's own KVS.STATUS gives its applied index; lag is the leader's commit
// index minus it.
func printStatus(ctx context.Context, w io.Writer, st nodeStatus) {
	leader := st.get("leader_id")
	if leader == "" {
		leader = "(none)"
	} else if a := st.get("leader_addr"); a != "" {
		leader += " at " + a
	}
	fmt.Fprintf(w, "node:     %s (%s)\n", st.get("id"), st.get("state"))
	fmt.Fprintf(w, "leader:   %s\n", leader)
	fmt.Fprintf(w, "term:     %s\n", st.get("term"))
	fmt.Fprintf(w, "log:      last %s, commit %s, applied %s\n", st.get("last_index"), st.get("commit_index"), st.get("applied_index"))
	if l := st.get("apply_level"); l != "" {
		// A kvs from before levels reports none.
		fmt.Fprintf(w, "level:    applies entries up to level %s; the cluster's level is %s\n", l, st.get("cluster_level"))
	}

	type row struct {
		cells   []string
		applied uint64
		delay   string // apply delay p50/p99
		state   string
		err     error
	}
	rows := make([]row, len(st.members))
	var commit uint64
	// The members' own views of the groups, with several: member id ->
	// group rows (id, state, leader id, commit index, applied index).
	groupViews := map[string][][]string{}
	for i, m := range st.members {
		rows[i].cells = m
		if len(m) < 3 || m[2] == "" {
			rows[i].err = errors.New("no client address yet")
			continue
		}
		ms, err := fetchStatus(ctx, m[2])
		if err != nil {
			rows[i].err = err
			continue
		}
		groupViews[m[0]] = ms.groups
		rows[i].applied, rows[i].state = ms.uint("applied_index"), ms.get("state")
		rows[i].delay = applyDelay(ms)
		if ms.get("state") == "leader" {
			commit = ms.uint("commit_index")
		}
	}
	if commit == 0 {
		commit = st.uint("commit_index")
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].cells[0] < rows[j].cells[0] })
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tCLIENT ADDR\tRAFT ADDR\tAPPLIED\tAPPLY DELAY p50/p99\tBEHIND")
	for _, r := range rows {
		c := append(r.cells, "", "", "", "")
		behind, applied, delay := "?", "?", "?"
		if r.err == nil {
			applied, delay = strconv.FormatUint(r.applied, 10), r.delay
			behind = "0"
			if commit > r.applied {
				behind = strconv.FormatUint(commit-r.applied, 10)
			}
		} else {
			behind = "unreachable: " + strings.ReplaceAll(r.err.Error(), "\n", " ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c[0], c[3], c[2], c[1], applied, delay, behind)
	}
	tw.Flush()
	if len(st.groups) > 0 {
		printGroups(w, st, rows2ids(st.members), groupViews)
	}
}

func rows2ids(members [][]string) []string {
	var ids []string
	for _, m := range members {
		ids = append(ids, m[0])
	}
	sort.Strings(ids)
	return ids
}

// printGroups writes a table of the groups: each one's leader and
// replicas, and how far each member's replica is behind the commit index
// its leader reports ("-" where a member holds none).
func printGroups(w io.Writer, st nodeStatus, ids []string, views map[string][][]string) {
	if r := st.get("replicas"); r != "" {
		if r == "0" {
			r = "every node"
		}
		fmt.Fprintf(w, "\nreplicas: %s\n", r)
	}
	slots := statusSlots(st)
	switch v := st.get("slot_map_version"); v {
	case "":
	case "0":
		fmt.Fprintln(w, "slot map: as the cluster was made (the meta group's has not reached the node yet)")
	default:
		fmt.Fprintf(w, "slot map: version %s\n", v)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "GROUP\tSLOTS\tLEADER\tREPLICAS")
	for _, id := range ids {
		fmt.Fprint(tw, "\t"+id+" BEHIND")
	}
	fmt.Fprintln(tw)
	for _, g := range st.groups {
		leader, commit := "(none)", uint64(0)
		if len(g) > 2 && g[2] != "" {
			leader = g[2]
		}
		gid, _ := strconv.Atoi(g[0])
		// The commit index as the group's leader reports it.
		if row := groupRow(views[leader], g[0]); len(row) > 3 {
			commit, _ = strconv.ParseUint(row[3], 10, 64)
		}
		replicas := "?"
		if len(g) > 5 {
			replicas = g[5]
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s", gid, slotRanges(slots, uint16(gid), gid == 0), leader, replicas)
		for _, id := range ids {
			cell := "?"
			if row := groupRow(views[id], g[0]); len(row) > 1 && row[1] == "none" {
				cell = "-"
			} else if len(row) > 4 {
				applied, _ := strconv.ParseUint(row[4], 10, 64)
				cell = "0"
				if commit > applied {
					cell = strconv.FormatUint(commit-applied, 10)
				}
			}
			fmt.Fprint(tw, "\t"+cell)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// statusSlots is the slot map the node routes by, as its status gives
// it; the one the cluster was made with from a node that gives none (a kvs
// from before the stored map) or still routes by that.
func statusSlots(st nodeStatus) []uint16 {
	if v := st.get("slot_map_version"); v != "" && v != "0" {
		set := group.GroupSet{Version: 1, Live: st.dataGroupIDs()}
		if len(set.Live) > 0 {
			set.Last = slices.Max(set.Live)
		}
		if m, err := group.ParseSlotMapIn(v+" "+st.get("slot_map"), set); err == nil {
			return m.Table()
		}
	}
	slots, _ := slotTable(dataGroups(st.madeGroups()))
	return slots
}

// groupRow is group id's row of a node's groups, nil when it lists none.
func groupRow(rows [][]string, id string) []string {
	for _, r := range rows {
		if len(r) > 0 && r[0] == id {
			return r
		}
	}
	return nil
}

// slotRanges is group g's slots in slots (slot -> group), as ranges; "-"
// for the meta group, which holds none, and for a data group without
// slots (meta false).
func slotRanges(slots []uint16, g uint16, meta bool) string {
	if meta {
		return "-"
	}
	var out []string
	for s := 0; s < len(slots); s++ {
		if slots[s] != g {
			continue
		}
		e := s
		for e+1 < len(slots) && slots[e+1] == g {
			e++
		}
		out = append(out, strconv.Itoa(s)+"-"+strconv.Itoa(e))
		s = e
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// applyDelay formats a member's recent apply delays (the leader's append
// to that member's store), "-" before any write reached it.
func applyDelay(st nodeStatus) string {
	p50, p99 := st.uint("apply_delay_p50_us"), st.uint("apply_delay_p99_us")
	if p50 == 0 && p99 == 0 {
		return "-"
	}
	ms := func(us uint64) string { return strconv.FormatFloat(float64(us)/1000, 'f', -1, 64) + "ms" }
	return ms(p50) + "/" + ms(p99)
}

// parseAdmin parses an admin subcommand's flags (--timeout) and requires
// nargs arguments (-k: k or k+1, the last optional); extra registers a subcommand's own flags. A nil FlagSet
// means the command is over, with code as its exit status (help asked
// for, or a usage error already reported).
func parseAdmin(name, synopsis, about string, nargs int, args []string, stderr io.Writer, extra ...func(*flag.FlagSet)) (*flag.FlagSet, *time.Duration, int) {
	fs := flag.NewFlagSet("kvs "+name, flag.ContinueOnError)
	for _, f := range extra {
		f(fs)
	}
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kvs %s %s\n\n%s\n", name, synopsis, about)
		fs.PrintDefaults()
	}
	timeout := fs.Duration("timeout", 30*time.Second, "how long to keep trying (join and remove retry while the cluster has no leader or changes leaders)")
	var tf adminTLSFlags
	tf.register(fs)
	user := fs.String("user", "default", "user to authenticate as")
	password := fs.String("password", "", "password to authenticate with (default: $REDISCLI_AUTH; none: no AUTH)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, flagExit(err)
	}
	if *password == "" {
		*password = os.Getenv("REDISCLI_AUTH")
	}
	adminLogin = func() (string, string) { return *user, *password }
	if fs.NArg() != nargs && (nargs >= 0 || fs.NArg() < -nargs || fs.NArg() > -nargs+1) {
		fs.Usage()
		return nil, nil, 2
	}
	if err := tf.apply(); err != nil {
		fmt.Fprintf(stderr, "kvs %s: %v\n", name, err)
		return nil, nil, 2
	}
	return fs, timeout, 0
}

func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// adminLogin is the user and password the admin subcommands (and a
// node's --join) log in with, each time they connect (no AUTH without a
// password): set once, before any admin client is made.
var adminLogin = func() (user, password string) { return "", "" }
