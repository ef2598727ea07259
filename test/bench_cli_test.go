package test

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// benchJSON is the part of `kvs bench --json-out-file` the test reads; the
// names are memtier_benchmark's.
type benchJSON struct {
	AllStats struct {
		Sets, Gets, Totals struct {
			Count   int64   `json:"Count"`
			OpsSec  float64 `json:"Ops/sec"`
			HitsSec float64 `json:"Hits/sec"`
			Errors  int64   `json:"Errors"`
			Pcts    struct {
				P50 float64 `json:"p50.00"`
				P99 float64 `json:"p99.00"`
			} `json:"Percentile Latencies"`
		}
		Runtime struct {
			Duration int64 `json:"Total duration"`
		}
	} `json:"ALL STATS"`
	Errors int64 `json:"Errors"`
}

// TestBenchCLIAgainstKVS runs the load generator against a real kvs for a
// second and checks what its JSON says: both commands ran, in the 1:10
// ratio, every GET after the prefill hit, and nothing failed.
func TestBenchCLIAgainstKVS(t *testing.T) {
	n := startKVS(t, KVSOptions{})
	_, port, err := net.SplitHostPort(n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(testDir(t), "bench.json")
	text, code := runKVS(t, 60*time.Second, "bench", "--server", "127.0.0.1", "--port", port,
		"--test-time", "1", "--threads", "2", "--clients", "4", "--key-maximum", "1000", "--prefill",
		"--json-out-file", out)
	if code != 0 {
		t.Fatalf("kvs bench exited %d:\n%s", code, text)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res benchJSON
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	st := res.AllStats
	if st.Sets.Count <= 0 || st.Gets.Count <= 0 || st.Totals.Count != st.Sets.Count+st.Gets.Count {
		t.Fatalf("counts: sets %d, gets %d, totals %d\n%s", st.Sets.Count, st.Gets.Count, st.Totals.Count, b)
	}
	// Each client sends exactly one SET per ten GETs; a client stopped by
	// the clock is at most one cycle off, with 8 clients.
	if diff := st.Gets.Count - 10*st.Sets.Count; diff < -10*8 || diff > 10*8 {
		t.Errorf("%d GETs for %d SETs, not 10:1", st.Gets.Count, st.Sets.Count)
	}
	if st.Gets.HitsSec < st.Gets.OpsSec*0.999 {
		t.Errorf("hits %.0f/s of %.0f GETs/s after a prefill of every key", st.Gets.HitsSec, st.Gets.OpsSec)
	}
	if res.Errors != 0 || st.Totals.Errors != 0 {
		t.Errorf("errors: %d\n%s", res.Errors, b)
	}
	if st.Totals.OpsSec <= 0 || st.Totals.Pcts.P50 <= 0 || st.Totals.Pcts.P99 < st.Totals.Pcts.P50 {
		t.Errorf("rates or latencies implausible:\n%s", b)
	}
	if d := st.Runtime.Duration; d < 1000 || d > 30000 {
		t.Errorf("Total duration %d ms for --test-time 1", d)
	}
}

// TestMemtierScriptFallback runs make memtier's script as a user without
// memtier_benchmark does (kvs bench with the reference workload's flags,
// which kvs bench validates as memtier does): it must start kvs, prefill
// and load it, and leave a JSON result where it was told to.
func TestMemtierScriptFallback(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(testDir(t), "memtier.json")
	cmd := exec.Command("bash", "memtier.sh")
	cmd.Env = append(os.Environ(), "KVS="+requireKVS(t), "BENCH_MODE=memory", "BENCH_TIME=1",
		"KVS_BENCH_PORT="+port, "NO_MEMTIER=1", "BENCH_JSON="+out)
	text, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("memtier.sh: %v\n%s", err, text)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var res benchJSON
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if st := res.AllStats; st.Sets.Count <= 0 || st.Gets.Count <= 0 || res.Errors != 0 || st.Gets.HitsSec < st.Gets.OpsSec*0.999 {
		t.Fatalf("the run did not load every key and read it back:\n%s\n%s", b, text)
	}
}
