package test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestGoRedisPasswordAndInfo: go-redis with a password logs in as it
// connects (HELLO 3 AUTH, or AUTH in its RESP2 pipeline) and then sends
// values far over the unauthenticated limits; its INFO tests read the cpu
// section as go-redis's own suite does.
func TestGoRedisPasswordAndInfo(t *testing.T) {
	n := startKVS(t, KVSOptions{Extra: []string{"--requirepass", "pw"}})
	n.Password = "pw"
	for _, proto := range []int{3, 2} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			ctx := testCtx(t)
			c := newClient(t, n, func(o *redis.Options) {
				o.Password = "pw"
				o.Protocol = proto
			})
			big := strings.Repeat("v", 1<<20)
			if err := c.Set(ctx, "big", big, 0).Err(); err != nil {
				t.Fatalf("SET of 1 MiB: %v", err)
			}
			if v, err := c.Get(ctx, "big").Result(); err != nil || v != big {
				t.Fatalf("GET: %d bytes, %v", len(v), err)
			}
			keys := make([]string, 50)
			for i := range keys {
				keys[i] = fmt.Sprintf("k%d", i)
			}
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Fatalf("DEL of 50 keys: %v", err)
			}
			info, err := c.Info(ctx, "cpu").Result()
			if err != nil || !strings.Contains(info, "used_cpu_sys") {
				t.Fatalf("INFO cpu: %q, %v", info, err)
			}
			info, err = c.Info(ctx, "cpu", "memory").Result()
			if err != nil || !strings.Contains(info, "used_cpu_sys") || !strings.Contains(info, "used_memory") {
				t.Fatalf("INFO cpu memory: %q, %v", info, err)
			}
			m, err := c.InfoMap(ctx, "everything").Result()
			if err != nil || len(m) < 10 || m["CPU"]["used_cpu_user"] == "" {
				t.Fatalf("InfoMap everything: %d sections, CPU %v, %v", len(m), m["CPU"], err)
			}
		})
	}
	if _, err := newClient(t, n, nil).Set(testCtx(t), "k", strings.Repeat("v", 20000), 0).Result(); err == nil {
		t.Fatal("SET of 20,000 bytes without a password succeeded")
	}
}
