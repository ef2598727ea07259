package test

import (
	"math/rand"
	"testing"
	"time"
)

const crashWriters = 16

// walVariants are the log layouts the crash and power-cut tests run under:
// the default segments, and tiny ones that make the log roll segments and
// write snapshots (compaction) many times during the load.
var walVariants = []struct {
	name  string
	extra []string
}{
	{"default", nil},
	{"small-segments", []string{"--wal-segment-bytes", "65536", "--wal-compact-bytes", "262144"}},
}

// TestCrashKill9: with --fsync always, no acknowledged write may be lost
// when the process is killed at an arbitrary moment under concurrent load.
// The rounds reuse one data dir, so later rounds recover a log that was
// itself recovered (and possibly truncated) before. The small-segments
// variant makes the log roll segments and write snapshots (compaction)
// many times during the load, so kills land in those too. The
// io-goroutines variant serves the connections without the event loops.
func TestCrashKill9(t *testing.T) {
	seed := testSeed(t)
	// The event loops serve durable mode by default; a goroutine per
	// connection (--io goroutines) must keep every write as well.
	variants := append(walVariants[:len(walVariants):len(walVariants)],
		struct {
			name  string
			extra []string
		}{"io-goroutines", []string{"--io", "goroutines"}})
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(seed + int64(i)))
			n := newKVS(t, "kvs-durable", KVSOptions{Durable: true, Fsync: "always", Extra: v.extra})
			n.Start()
			ledger := newAckLedger(crashWriters)
			killRounds(t, n, ledger, 5, rng, nil)
			// A graceful restart after all that recovery still keeps everything.
			n.Restart()
			ledger.verify(t, n, true)
		})
	}
}

// TestCrashKill9Lazy: with --fsync everysec or no, a crash of the machine
// may lose the last writes, but a crash of the process may not: as with
// Redis's append-only file, a write is acknowledged only once its record is
// written to the log, where the OS keeps it.
func TestCrashKill9Lazy(t *testing.T) {
	seed := testSeed(t)
	for i, policy := range []string{"everysec", "no"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(seed + int64(i)))
			n := newKVS(t, "kvs-"+policy, KVSOptions{Durable: true, Fsync: policy})
			n.Start()
			ledger := newAckLedger(crashWriters)
			killRounds(t, n, ledger, 3, rng, nil)
			rc := dialRaw(t, n.Addr)
			if v := rc.Do("SET", "after", "recovery"); string(v.Raw) != "+OK\r\n" {
				t.Fatalf("SET after recovery: %s", v)
			}
			n.Restart()
			if v := dialRaw(t, n.Addr).Do("GET", "after"); v.Str != "recovery" {
				t.Fatalf("write after recovery lost across a graceful restart: %s", v)
			}
		})
	}
}

// killRounds runs rounds of load, kill -9 at a random moment, afterKill
// (if any: a power cut, say), restart, and a check that every acknowledged
// write is there with its value; it stops the test at the first round that
// lost one.
func killRounds(t *testing.T, n *Node, ledger *ackLedger, rounds int, rng *rand.Rand, afterKill func() string) {
	t.Helper()
	for round := 0; round < rounds; round++ {
		loadThenKill(t, n, ledger, round, rng)
		note := ""
		if afterKill != nil {
			note = afterKill()
		}
		n.Start()
		ledger.verify(t, n, true)
		t.Logf("round %d: %d SETs and %d hash, list, set and sorted-set members acknowledged, of %d sent so far%s",
			round, len(ledger.acked), ledger.collAckedCount(), ledger.attempted, note)
		if t.Failed() {
			t.Fatalf("round %d lost acknowledged writes\n%s", round, n.LogTail(30))
		}
	}
}

// loadThenKill runs the writers for a random 200-800 ms and kills the
// server with SIGKILL while they are still writing.
func loadThenKill(t *testing.T, n *Node, ledger *ackLedger, round int, rng *rand.Rand) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ledger.load(t, n.Addr, round, stop)
	}()
	time.Sleep(time.Duration(200+rng.Intn(600)) * time.Millisecond) // load for a random while; not synchronisation
	n.Kill()
	close(stop)
	<-done
}
