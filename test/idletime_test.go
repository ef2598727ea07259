package test

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// TestObjectIdleTime: OBJECT IDLETIME grows while a key is left alone;
// TTL, TYPE, EXISTS and OBJECT leave it alone, as in Redis; a read
// resets it. Its checks hold however slow the machine: a reset is
// checked against the time measured since it.
func TestObjectIdleTime(t *testing.T) {
	requireKVS(t)
	t.Parallel()
	c := dialRaw(t, startKVS(t, KVSOptions{}).Addr)
	idle := func() int64 {
		v := c.Do("OBJECT", "IDLETIME", "k")
		n, err := strconv.ParseInt(v.Str, 10, 64)
		if v.Kind != ':' || err != nil {
			t.Fatalf("OBJECT IDLETIME: %s", v)
		}
		return n
	}
	c.Do("SET", "k", "v")
	pollFor(t, "the key to be idle for 2 seconds", 20*time.Second, 100*time.Millisecond, func() error {
		if n := idle(); n < 2 {
			return fmt.Errorf("idle for %d s", n)
		}
		return nil
	})
	for _, cmd := range [][]string{{"TTL", "k"}, {"PTTL", "k"}, {"TYPE", "k"}, {"EXISTS", "k"}, {"OBJECT", "ENCODING", "k"}} {
		c.Do(cmd...)
	}
	if n := idle(); n < 2 {
		t.Fatalf("idle for %d s after TTL, TYPE, EXISTS and OBJECT", n)
	}
	start := time.Now()
	c.Do("GET", "k")
	n := idle()
	if limit := int64(time.Since(start)/time.Second) + 1; n > limit {
		t.Fatalf("idle for %d s %v after a GET", n, time.Since(start))
	}
}
