package test

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"kvs/test/powercut"
)

// Power cuts of the real binary. kill -9 leaves everything kvs wrote in the
// kernel's page cache, so it cannot show a missing fsync; these tests put
// each node's data dir on a FUSE file system (package powercut) that keeps
// every write, create, rename and remove volatile until it is fsynced, kill
// the node with SIGKILL at a random moment under load, then cut the power:
// everything not fsynced is gone, as after losing power. The node boots on
// what is left, and every acknowledged write must be there.
//
// They need root and /dev/fuse, and are skipped with a message elsewhere.

// powerDisk is one node's simulated disk, mounted on Dir/mnt, holding the
// node's data dir.
type powerDisk struct {
	t   testing.TB
	fs  *powercut.FS
	mnt string
}

// onPowerDisk mounts a fresh power-cut file system for n (prepared, not
// started) and moves n's data dir onto it, or skips t where FUSE cannot be
// mounted. Call it before n's first Start, so that the node is stopped
// before the disk is unmounted at the end of the test.
func onPowerDisk(t testing.TB, n *Node) *powerDisk {
	t.Helper()
	if err := powercut.Available(); err != nil {
		t.Skipf("power-cut tests need FUSE: %v", err)
	}
	d := &powerDisk{t: t, fs: powercut.New(), mnt: filepath.Join(n.Dir, "mnt")}
	if err := os.MkdirAll(d.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := d.fs.Mount(d.mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			// The disk lives in memory: keep a copy of what is on it
			// next to the node's log.
			keep := filepath.Join(n.Dir, "data-at-end")
			if err := os.CopyFS(keep, os.DirFS(d.mnt)); err != nil {
				t.Logf("%s: copying the disk's contents: %v", n.Name, err)
			}
		}
		if err := d.fs.Unmount(); err != nil {
			t.Errorf("%s: %v", n.Name, err)
		}
	})
	data := filepath.Join(d.mnt, "data")
	base := n.Args
	n.Args = func(n *Node) []string {
		args := slices.Clone(base(n))
		if i := slices.Index(args, "--data-dir"); i >= 0 {
			args[i+1] = data
			return args
		}
		return append(args, "--data-dir", data)
	}
	return d
}

// cut drops everything the disk has not made durable and boots it again:
// unmounted with the power off, mounted again. The node must not be
// running.
func (d *powerDisk) cut() {
	d.t.Helper()
	d.fs.PowerCut()
	if err := d.fs.Unmount(); err != nil {
		d.t.Fatal(err)
	}
	if err := d.fs.Mount(d.mnt); err != nil {
		d.t.Fatal(err)
	}
}

// TestPowerCutDurable: --fsync always keeps every acknowledged write across
// kill -9 plus a power cut, with the default segments and with tiny ones
// (so the cuts land in segment rollovers, snapshots and compactions).
func TestPowerCutDurable(t *testing.T) {
	seed := testSeed(t)
	for i, v := range walVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(seed + int64(i)))
			n := newKVS(t, "kvs-powercut", KVSOptions{Fsync: "always", Extra: v.extra})
			disk := onPowerDisk(t, n)
			n.Start()
			ledger := newAckLedger(crashWriters)
			killRounds(t, n, ledger, 4, rng, func() string {
				disk.cut()
				files, dirs := disk.fs.Syncs()
				return fmt.Sprintf(" (then a power cut); %d file and %d directory fsyncs served", files, dirs)
			})
		})
	}
}

// TestPowerCutLosesUnsynced is the control: with --fsync no, kvs
// acknowledges writes it never fsyncs, and a power cut must take them. If
// it did not, the disk would not be dropping anything and the tests above
// would prove nothing.
func TestPowerCutLosesUnsynced(t *testing.T) {
	t.Parallel()
	n := newKVS(t, "kvs-fsync-no", KVSOptions{Fsync: "no"})
	disk := onPowerDisk(t, n)
	n.Start()
	const count = 100
	writeKeys(t, n, count)
	n.Kill()
	disk.cut()
	n.Start()
	kept := 0
	for _, ok := range presentKeys(t, n, count) {
		if ok {
			kept++
		}
	}
	t.Logf("%d of %d writes never fsynced survived the power cut", kept, count)
	if kept > count/2 {
		t.Fatalf("%d of %d writes never fsynced survived a power cut: the disk is not dropping unsynced state", kept, count)
	}
}

// TestPowerCutCluster: every node of a three-node cluster on its own
// power-cut disk. Under load, in turn: all three are killed and lose power
// together, then boot; the leader alone is killed and loses power while the
// other two carry on, then boots and catches up; all three again. After
// each, every acknowledged write is on every node. Tiny snapshot settings
// make raft snapshot and truncate its log all the time, so the cuts land in
// those too.
func TestPowerCutCluster(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(testSeed(t)))
	small := []string{"--raft-snapshot-entries", "64", "--raft-trailing-logs", "16", "--raft-snapshot-interval", "100ms"}
	var nodes []*Node
	disks := map[*Node]*powerDisk{}
	for i := 1; i <= 3; i++ {
		extra := small
		if i == 1 {
			extra = append([]string{"--bootstrap"}, small...)
		}
		n := newClusterNode(t, fmt.Sprintf("n%d", i), extra...)
		disks[n] = onPowerDisk(t, n)
		nodes = append(nodes, n)
	}
	nodes[0].Start()
	for _, n := range nodes[1:] {
		n.Start()
		if out, code := runKVS(t, clusterWait, "join", nodes[0].Addr, n.Addr); code != 0 {
			t.Fatalf("kvs join %s %s: exit %d\n%s", nodes[0].Addr, n.Addr, code, out)
		}
	}
	waitMembers(t, nodes, 3)
	var loads []*clusterLoad
	for round, whole := range []bool{true, false, true} {
		stop := make(chan struct{})
		load, wg := runClusterLoad(nodes, 12, stop)
		loads = append(loads, load)
		ackedAtLeast := func(n int) func() error {
			return func() error {
				load.mu.Lock()
				defer load.mu.Unlock()
				if len(load.acked) < n {
					return fmt.Errorf("%d acknowledged", len(load.acked))
				}
				return nil
			}
		}
		waitFor(t, "writes before the power cut", ackedAtLeast(200))
		time.Sleep(time.Duration(rng.Intn(300)) * time.Millisecond) // a random moment; not synchronisation
		cut := []*Node{waitLeader(t, nodes)}
		if whole {
			cut = nil
			for _, i := range rng.Perm(len(nodes)) {
				cut = append(cut, nodes[i])
			}
		}
		for _, n := range cut {
			n.Kill()
		}
		if !whole {
			// The other two elect a leader and go on acknowledging.
			load.mu.Lock()
			before := len(load.acked)
			load.mu.Unlock()
			waitFor(t, "writes after the leader's power cut", ackedAtLeast(before+200))
		}
		close(stop)
		wg.Wait()
		for _, n := range cut {
			disks[n].cut()
			n.Start()
		}
		waitLeader(t, nodes)
		for _, n := range nodes {
			for _, l := range loads {
				l.verifyOn(t, n)
			}
		}
		files, dirs := disks[nodes[0]].fs.Syncs()
		t.Logf("round %d (%d nodes cut): %d SETs sent, %d acknowledged, errors %v; n1 served %d file and %d directory fsyncs",
			round, len(cut), load.attempts, len(load.acked), load.errors, files, dirs)
	}
	waitMembers(t, nodes, 3)
}
