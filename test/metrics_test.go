package test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Metrics tests start kvs with --metrics-addr and read /metrics and /healthz
// over HTTP, as Prometheus and a load balancer would.

// scrape fetches /metrics and returns every sample by its series, e.g.
// `kvs_commands_total{command="get"}`.
func scrape(t testing.TB, addr string) map[string]float64 {
	t.Helper()
	resp, err := httpGet(addr, "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s: %s\n%s", addr, resp.Status, body)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("scrape %s: bad line %q", addr, line)
		}
		samples[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	return samples
}

func httpGet(addr, path string) (*http.Response, error) {
	c := http.Client{Timeout: ioTimeout}
	return c.Get("http://" + addr + path)
}

// healthz returns /healthz's status code and body.
func healthz(addr string) (int, string, error) {
	resp, err := httpGet(addr, "/healthz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// sample returns one series of a scrape, failing t if it is missing.
func sample(t testing.TB, m map[string]float64, series string) float64 {
	t.Helper()
	v, ok := m[series]
	if !ok {
		t.Fatalf("no sample %s in the scrape", series)
	}
	return v
}

// TestMetricsCounts: known traffic moves the command counters by exactly
// its amounts, /healthz is 200 on a serving node, and a durable node's wal
// counters grow with the writes.
func TestMetricsCounts(t *testing.T) {
	t.Parallel()
	maddr := freeAddr(t)
	n := startKVS(t, KVSOptions{Durable: true, Extra: []string{"--metrics-addr", maddr}})

	if code, body, err := healthz(maddr); err != nil || code != http.StatusOK || body != "ok" {
		t.Fatalf("/healthz: %d %q %v, want 200 ok", code, body, err)
	}
	before := scrape(t, maddr)
	rc := dialRaw(t, n.Addr)
	for i := range 7 {
		if v := rc.Do("SET", fmt.Sprintf("k%d", i), "v"); v.Str != "OK" {
			t.Fatalf("SET: %s", v)
		}
	}
	for i := range 5 {
		rc.Do("GET", fmt.Sprintf("k%d", i))
	}
	for range 2 {
		if v := rc.Do("GET"); !v.IsError() {
			t.Fatalf("GET without a key: %s, want an error", v)
		}
	}
	after := scrape(t, maddr)

	delta := func(series string) float64 {
		return sample(t, after, series) - before[series] // absent before: 0
	}
	for _, tc := range []struct {
		series string
		want   float64
	}{
		{`kvs_commands_total{command="set"}`, 7},
		{`kvs_command_errors_total{command="set"}`, 0},
		{`kvs_command_duration_seconds_count{command="set"}`, 7},
		{`kvs_commands_total{command="get"}`, 7},
		{`kvs_command_errors_total{command="get"}`, 2},
		{`kvs_command_duration_seconds_count{command="get"}`, 7},
		{`kvs_command_duration_seconds_bucket{command="get",le="+Inf"}`, 7},
		{`kvs_connections_received_total`, 1},
		{`kvs_keyspace_hits_total`, 5},
		{`kvs_wal_appends_total`, 7}, // one request at a time: one record each
	} {
		if got := delta(tc.series); got != tc.want {
			t.Errorf("%s moved by %v, want %v", tc.series, got, tc.want)
		}
	}
	if got := sample(t, after, "kvs_keys"); got != 7 {
		t.Errorf("kvs_keys %v, want 7", got)
	}
	if got := sample(t, after, "kvs_connected_clients"); got < 1 {
		t.Errorf("kvs_connected_clients %v with a client connected", got)
	}
	if d := delta("kvs_wal_fsyncs_total"); d < 1 {
		t.Errorf("kvs_wal_fsyncs_total moved by %v after 7 writes with --fsync always", d)
	}
	if d := delta("kvs_wal_fsync_duration_seconds_count"); d != delta("kvs_wal_fsyncs_total") {
		t.Errorf("fsync duration count moved by %v, fsyncs by %v", d, delta("kvs_wal_fsyncs_total"))
	}
	// The batch-size histogram counts every record made durable: the 7
	// SETs (one record each, one request at a time).
	if d := delta("kvs_wal_fsync_records_sum"); d != delta("kvs_wal_records_fsynced_total") || d != 7 {
		t.Errorf("fsync records histogram moved by %v, records fsynced by %v, want 7", d, delta("kvs_wal_records_fsynced_total"))
	}
	for _, series := range []string{"go_goroutines", "process_cpu_seconds_total", `kvs_evicted_keys_total`, `kvs_build_info{mode="durable",version="0.1.0"}`} {
		sample(t, after, series)
	}

	// INFO reports the same counters.
	info := rc.Do("INFO", "commandstats").Str
	if !strings.Contains(info, "cmdstat_get:calls=5,") || !strings.Contains(info, ",rejected_calls=2,failed_calls=0") {
		t.Errorf("INFO commandstats does not say 5 GET calls and 2 rejected:\n%s", info)
	}
}

// TestMetricsTakenPort: a --metrics-addr in use stops serve at once with a
// message naming the flag and the cause.
func TestMetricsTakenPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out, code := runKVS(t, startTimeout, "serve", "--addr", freeAddr(t), "--metrics-addr", l.Addr().String())
	if code == 0 {
		t.Fatalf("serve on a taken metrics port exited 0; output:\n%s", out)
	}
	if !strings.Contains(out, "--metrics-addr") || !strings.Contains(out, "address already in use") {
		t.Fatalf("serve on a taken metrics port (exit %d) does not name the flag and the cause:\n%s", code, out)
	}
}

// TestMetricsCluster: a bootstrapped node reports itself leader and
// healthy; a node that belongs to no cluster yet is unhealthy until it is
// joined, and then counts the writes it forwards to the leader.
func TestMetricsCluster(t *testing.T) {
	t.Parallel()
	m1, m2 := freeAddr(t), freeAddr(t)
	n1 := newClusterNode(t, "n1", "--bootstrap", "--metrics-addr", m1)
	n1.Start()
	n2 := newClusterNode(t, "n2", "--metrics-addr", m2)
	n2.Start()

	// Healthy once it leads; its first entries commit a moment later.
	waitFor(t, "n1 to lead, be healthy and commit", func() error {
		if code, body, err := healthz(m1); err != nil || code != http.StatusOK {
			return fmt.Errorf("/healthz %d %q %v", code, body, err)
		}
		s := scrape(t, m1)
		if c, a := sample(t, s, "kvs_raft_commit_index"), sample(t, s, "kvs_raft_applied_index"); c < 1 || a < 1 {
			return fmt.Errorf("commit index %v, applied index %v", c, a)
		}
		return nil
	})
	s1 := scrape(t, m1)
	for series, want := range map[string]float64{
		"kvs_raft_is_leader":               1,
		`kvs_raft_state{state="leader"}`:   1,
		`kvs_raft_state{state="follower"}`: 0,
		"kvs_raft_leader_changes_total":    1,
	} {
		if got := sample(t, s1, series); got != want {
			t.Errorf("n1 %s = %v, want %v", series, got, want)
		}
	}
	if term := sample(t, s1, "kvs_raft_term"); term < 1 {
		t.Errorf("n1 kvs_raft_term %v", term)
	}
	if c, a := sample(t, s1, "kvs_raft_commit_index"), sample(t, s1, "kvs_raft_applied_index"); c < 1 || a < 1 {
		t.Errorf("n1 commit index %v, applied index %v", c, a)
	}
	info := dialRaw(t, n1.Addr).Do("INFO", "raft").Str
	if !strings.Contains(info, "# Raft\r\n") || !strings.Contains(info, "\r\nraft_state:leader\r\n") || !strings.Contains(info, "\r\nraft_leader_id:n1\r\n") {
		t.Errorf("INFO raft on the leader:\n%s", info)
	}

	// n2 has no cluster state and no leader: not ready.
	code, body, err := healthz(m2)
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "no leader") {
		t.Fatalf("n2 /healthz before joining: %d %q %v, want 503 no leader", code, body, err)
	}
	if got := sample(t, scrape(t, m2), "kvs_raft_is_leader"); got != 0 {
		t.Errorf("n2 kvs_raft_is_leader %v before joining", got)
	}

	if out, code := runKVS(t, clusterWait, "join", n1.Addr, n2.Addr); code != 0 {
		t.Fatalf("kvs join: exit %d\n%s", code, out)
	}
	waitFor(t, "n2 to be healthy", func() error {
		if code, body, err := healthz(m2); err != nil || code != http.StatusOK {
			return fmt.Errorf("/healthz %d %q %v", code, body, err)
		}
		return nil
	})
	before := scrape(t, m2)
	rc := dialRaw(t, n2.Addr)
	sent := 0 // SETs sent: a leader change on a busy machine makes some be sent again
	for i := range 4 {
		var v Value
		err := retryLeaderChange(t, func() error {
			sent++
			v = rc.Do("SET", fmt.Sprintf("f%d", i), "v")
			return replyErr(v)
		})
		if err != nil || v.Str != "OK" {
			t.Fatalf("SET on the follower: %s", v)
		}
	}
	after := scrape(t, m2)
	// Each SET was forwarded once, or more often if a leader change made
	// it be sent again (one refused for want of a leader is not forwarded).
	if d := sample(t, after, "kvs_forwarded_commands_total") - before["kvs_forwarded_commands_total"]; d < 4 || d > float64(sent) {
		t.Errorf("n2 forwarded %v commands for %d SETs sent (4 acknowledged)", d, sent)
	}
	if d := sample(t, after, `kvs_commands_total{command="set"}`) - before[`kvs_commands_total{command="set"}`]; d != float64(sent) {
		t.Errorf("n2 counted %v SETs, want %d", d, sent)
	}
	// The follower applied the 4 writes it forwarded (it waits for them
	// before it answers), each one recorded with its apply delay.
	if d := sample(t, after, "kvs_raft_apply_delay_seconds_count") - before["kvs_raft_apply_delay_seconds_count"]; d < 1 {
		t.Errorf("n2 recorded %v apply delays for 4 forwarded SETs", d)
	}
	if got := sample(t, after, `kvs_raft_state{state="follower"}`); got != 1 {
		t.Errorf("n2 kvs_raft_state{state=\"follower\"} %v", got)
	}
}

// INFO persistence says how the durable log's fsyncs are made, so an
// operator can tell io_uring from the plain system call, and counts them.
func TestInfoPersistenceFsync(t *testing.T) {
	n := newKVS(t, "kvs-durable", KVSOptions{Durable: true, Fsync: "always"})
	n.Start()
	rc := dialRaw(t, n.Addr)
	if v := rc.Do("SET", "k", "v"); string(v.Raw) != "+OK\r\n" {
		t.Fatalf("SET: %s", v)
	}
	info := rc.Do("INFO", "persistence").Str
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	if m := fields["wal_fsync_method"]; m != "io_uring" && m != "fdatasync" {
		t.Fatalf("wal_fsync_method = %q, want io_uring or fdatasync\n%s", m, info)
	}
	if n, err := strconv.Atoi(fields["wal_fsyncs"]); err != nil || n < 1 {
		t.Fatalf("wal_fsyncs = %q after an acknowledged SET under fsync always\n%s", fields["wal_fsyncs"], info)
	}
}

// TestPprof: --pprof serves Go's profiler on the metrics endpoint, and only
// with it; without --metrics-addr it refuses to start.
func TestPprof(t *testing.T) {
	t.Parallel()
	maddr := freeAddr(t)
	startKVS(t, KVSOptions{Extra: []string{"--metrics-addr", maddr, "--pprof"}})
	resp, err := httpGet(maddr, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("/debug/pprof/goroutine: %d %.200q", resp.StatusCode, body)
	}

	plain := freeAddr(t)
	startKVS(t, KVSOptions{Extra: []string{"--metrics-addr", plain}})
	resp, err = httpGet(plain, "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without --pprof: %d, want 404", resp.StatusCode)
	}

	out, code := runKVS(t, startTimeout, "serve", "--addr", freeAddr(t), "--pprof")
	if code == 0 || !strings.Contains(out, "--pprof needs --metrics-addr") {
		t.Fatalf("--pprof without --metrics-addr: exit %d, %q", code, out)
	}
}
