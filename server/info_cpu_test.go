package server

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestInfoCPU: INFO cpu has Redis 7.0's six fields in its format, in a
// bare INFO, default, all and everything once each, between Replication
// and Cluster as in Redis, and not in other sections.
func TestInfoCPU(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	cpu := rc.do("INFO", "cpu")
	re := regexp.MustCompile(`^\$\d+\r\n# CPU\r\n` +
		`used_cpu_sys:\d+\.\d{6}\r\nused_cpu_user:\d+\.\d{6}\r\n` +
		`used_cpu_sys_children:\d+\.\d{6}\r\nused_cpu_user_children:\d+\.\d{6}\r\n` +
		`used_cpu_sys_main_thread:\d+\.\d{6}\r\nused_cpu_user_main_thread:\d+\.\d{6}\r\n\r\n$`)
	if !re.MatchString(cpu) {
		t.Errorf("INFO cpu: %q", cpu)
	}
	for _, args := range [][]string{{"INFO"}, {"INFO", "default"}, {"INFO", "all"}, {"INFO", "everything"}, {"INFO", "cpu", "all"}, {"INFO", "cpu", "default"}} {
		info := rc.do(args...)
		if n := strings.Count(info, "used_cpu_user_children:"); n != 1 {
			t.Errorf("%v: the cpu section %d times", args, n)
		}
		r, c, cl := strings.Index(info, "# Replication"), strings.Index(info, "# CPU"), strings.Index(info, "# Cluster")
		if !(r < c && c < cl) {
			t.Errorf("%v: sections out of Redis's order (replication %d, cpu %d, cluster %d)", args, r, c, cl)
		}
		if !strings.Contains(info, "master_repl_offset:0\r\n") {
			t.Errorf("%v: no master_repl_offset", args)
		}
	}
	if got := rc.do("INFO", "memory"); strings.Contains(got, "used_cpu") {
		t.Errorf("INFO memory holds cpu fields: %q", got)
	}
	if got := rc.do("INFO", "cpu", "sentinel"); strings.Contains(got, "used_memory") || !strings.Contains(got, "used_cpu_sys:") {
		t.Errorf("INFO cpu sentinel: %q", got)
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "0.000000",
		5 * time.Microsecond:    "0.000005",
		1500 * time.Millisecond: "1.500000",
		3*time.Hour + 7*time.Microsecond + 999*time.Nanosecond: "10800.000007",
	} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestInfoReplicationStandalone: outside a cluster INFO replication has
// redis-server's fields for a master without replicas or backlog.
func TestInfoReplicationStandalone(t *testing.T) {
	s := startServer(t, Config{})
	got := dialRaw(t, s).do("INFO", "replication")
	re := regexp.MustCompile(`^\$\d+\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n` +
		`master_failover_state:no-failover\r\nmaster_replid:[0-9a-f]{40}\r\n` +
		`master_replid2:0{40}\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\n` +
		`repl_backlog_active:0\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\n` +
		`repl_backlog_histlen:0\r\n\r\n$`)
	if !re.MatchString(got) {
		t.Errorf("INFO replication: %q", got)
	}
}
