package test

import (
	"fmt"
	"testing"
)

// Blocked stream readers: XREAD BLOCK with "$" and XREADGROUP BLOCK with
// ">" are each served by a later XADD, in every mode, and on a cluster's
// follower by an XADD sent to the leader; two readers of one stream,
// waiting for different IDs, are each served what they wait for; a
// blocked XREADGROUP whose stream is deleted, replaced or flushed is
// answered UNBLOCKED, as Redis answers it.
func TestBlockingStreams(t *testing.T) {
	for _, m := range blockingModes {
		t.Run(m.name, func(t *testing.T) {
			n := m.start(t)
			w := dialRaw(t, n.Addr)
			if v := w.DoRetry("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"); v.Str != "OK" {
				t.Fatalf("XGROUP CREATE: %s", v)
			}
			r1, r2, r3 := dialRaw(t, n.Addr), dialRaw(t, n.Addr), dialRaw(t, n.Addr)
			r1.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
			r2.send("XREAD", "BLOCK", "0", "STREAMS", "s", "5-0")
			r3.send("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", ">")
			waitBlocked(t, n.Addr, 3)
			if v := w.Do("XADD", "s", "3-0", "f", "v"); v.Str != "3-0" {
				t.Fatalf("XADD: %s", v)
			}
			want := "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n3-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
			if v := r1.Read(); string(v.Raw) != want {
				t.Fatalf("XREAD $: %s", v)
			}
			if v := r3.Read(); string(v.Raw) != want {
				t.Fatalf("XREADGROUP >: %s", v)
			}
			waitBlocked(t, n.Addr, 1) // r2 waits for IDs after 5-0
			w.Do("XADD", "s", "6-0", "f", "w")
			if v := r2.Read(); string(v.Raw) != "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n6-0\r\n*2\r\n$1\r\nf\r\n$1\r\nw\r\n" {
				t.Fatalf("XREAD 5-0: %s", v)
			}
			if v := w.Do("XPENDING", "s", "g"); string(v.Raw) != "*4\r\n:1\r\n$3\r\n3-0\r\n$3\r\n3-0\r\n*1\r\n*2\r\n$5\r\nalice\r\n$1\r\n1\r\n" {
				t.Fatalf("XPENDING: %s", v)
			}
			// A blocked XREADGROUP learns that its stream is gone: deleted,
			// replaced by another type, flushed.
			for _, gone := range [][]string{{"DEL", "s2"}, {"SET", "s2", "x"}, {"FLUSHALL"}} {
				if v := w.Do("XGROUP", "CREATE", "s2", "g", "$", "MKSTREAM"); v.Str != "OK" {
					t.Fatalf("XGROUP CREATE s2: %s", v)
				}
				r := dialRaw(t, n.Addr)
				r.send("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "0", "STREAMS", "s2", ">")
				waitBlocked(t, n.Addr, 1)
				w.Do(gone...)
				if v := r.Read(); v.Str != "UNBLOCKED the stream key no longer exists" {
					t.Fatalf("XREADGROUP after %v: %s", gone, v)
				}
				w.Do("DEL", "s2")
			}
		})
	}
	t.Run("follower", func(t *testing.T) {
		nodes := startCluster(t, 3)
		leader := waitLeader(t, nodes)
		f := followers(nodes, leader)[0]
		lc := dialRaw(t, leader.Addr)
		if v := lc.DoRetry("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"); v.Str != "OK" {
			t.Fatalf("XGROUP CREATE: %s", v)
		}
		waitFor(t, "the group on the follower", func() error {
			if v := dialRaw(t, f.Addr).Do("XINFO", "GROUPS", "s"); len(v.Elems) != 1 {
				return fmt.Errorf("XINFO GROUPS: %s", v)
			}
			return nil
		})
		r1, r2 := dialRaw(t, f.Addr), dialRaw(t, f.Addr)
		r1.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
		r2.send("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "0", "STREAMS", "s", ">")
		waitBlocked(t, f.Addr, 2)
		if v := lc.DoRetry("XADD", "s", "7-1", "a", "b"); v.Str != "7-1" {
			t.Fatalf("XADD on the leader: %s", v)
		}
		want := "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n7-1\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"
		for i, r := range []*rawConn{r1, r2} {
			if v := r.Read(); string(v.Raw) != want {
				t.Fatalf("reader %d on the follower: %s", i, v)
			}
		}
		if v := lc.Do("XPENDING", "s", "g"); v.Elems[0].Str != "1" {
			t.Fatalf("XPENDING on the leader: %s", v)
		}
	})
}
