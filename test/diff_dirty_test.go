package test

import (
	"strconv"
	"strings"
	"testing"
)

// TestDifferentialDirty compares INFO persistence's
// rdb_changes_since_last_save with redis-server's, command by command,
// over the differential test's generated commands of every type: each
// write must count the changes Redis's dirty counter counts (only real
// ones: SETBIT of the bit already there counts nothing), and a save must
// start the count over.
func TestDifferentialDirty(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	ref := startRedis(t)
	kvs := startKVS(t, KVSOptions{})
	rc, kc := dialRaw(t, ref.Addr), dialRaw(t, kvs.Addr)
	gen := newCmdGen(testSeed(t))
	dirty := func(c *rawConn) int64 {
		info := c.Do("INFO", "persistence").Str
		_, v, ok := strings.Cut(info, "rdb_changes_since_last_save:")
		if !ok {
			t.Fatalf("INFO persistence has no rdb_changes_since_last_save:\n%s", info)
		}
		v, _, _ = strings.Cut(v, "\r\n")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("rdb_changes_since_last_save:%s", v)
		}
		return n
	}
	mismatches := 0
	for i := 0; i < 3000 && mismatches < 20; i++ {
		cmd := gen.next()
		if isScan(cmd) || randomPick[strings.ToUpper(cmd[0])] {
			continue
		}
		r0, k0 := dirty(rc), dirty(kc)
		r, k := rc.Do(cmd...), kc.Do(cmd...)
		rd, kd := dirty(rc)-r0, dirty(kc)-k0
		if !sameReply(cmd, string(r.Raw), string(k.Raw)) {
			// The states diverged (a bug the differential test reports):
			// start both afresh.
			rc.Do("FLUSHALL")
			kc.Do("FLUSHALL")
			continue
		}
		if rd != kd {
			mismatches++
			t.Errorf("%s (reply %q): redis counted %d changes, kvs %d", showCommand(cmd), r.Raw, rd, kd)
		}
	}
	for _, c := range []*rawConn{rc, kc} {
		c.Do("SET", "dirty:last", "v")
		if v := c.Do("SAVE"); string(v.Raw) != "+OK\r\n" {
			t.Fatalf("SAVE: %s", v)
		}
		if n := dirty(c); n != 0 {
			t.Errorf("rdb_changes_since_last_save after SAVE: %d", n)
		}
	}
}

// randomPick are the commands whose effect depends on a random choice:
// each server picks its own members, and the states would differ after.
var randomPick = map[string]bool{"SPOP": true, "SRANDMEMBER": true, "HRANDFIELD": true, "ZRANDMEMBER": true,
	"RANDOMKEY": true, "EVAL": true, "EVALSHA": true, "FCALL": true}
