package test

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDifferentialPassiveExpiry compares, with redis-server, what reads of
// a key that has expired do (Redis's lookups delete such a key on the
// spot): for each read, on a fresh keyspace, a key of its type is given a
// deadline 1 ms away (or one already past), and once KEYS (which deletes
// nothing) no longer lists it the read runs. The replies must match, INFO
// stats' expired_keys must have grown by exactly one by the next command,
// and one "expired" event must have been announced. Active expiry may
// take the key first on either server; the count and the event are the
// same either way, so the comparison holds whoever deleted it. A case
// whose 1 ms passed inside the PEXPIRE itself, which then deletes the key
// on the spot on either server, is set up again (setUpExpiring). Memory
// mode, where kvs deletes the key before the connection's next command;
// in RESP2 and RESP3.
func TestDifferentialPassiveExpiry(t *testing.T) {
	requireRedis(t)
	requireKVS(t)
	type readCase struct {
		setup [][]string // creates the key "k", expiring
		reads [][]string // the commands that find it expired
		want  int        // the keys expired: 0 for one deleted, not expired
	}
	ttl := func(create ...string) [][]string { return [][]string{create, {"PEXPIRE", "k", "1"}} }
	str, hash := ttl("SET", "k", "v"), ttl("HSET", "k", "f", "v")
	list, set, zset := ttl("RPUSH", "k", "a"), ttl("SADD", "k", "m"), ttl("ZADD", "k", "1", "m")
	cases := []readCase{
		// A deadline already past: SET keeps the key, expired, for
		// expiry to delete; PEXPIREAT deletes it at once, which is no
		// expiry.
		{[][]string{{"SET", "k", "v", "PXAT", "1"}}, [][]string{{"GET", "k"}}, 1},
		{[][]string{{"SET", "k", "v"}, {"PEXPIREAT", "k", "1"}}, [][]string{{"GET", "k"}}, 0},
		{str, [][]string{{"GET", "k"}}, 1},
		{str, [][]string{{"MGET", "x", "k"}}, 1},
		{str, [][]string{{"EXISTS", "k", "x"}}, 1},
		{str, [][]string{{"TYPE", "k"}}, 1},
		{str, [][]string{{"TTL", "k"}}, 1},
		{str, [][]string{{"PTTL", "k"}}, 1},
		{str, [][]string{{"STRLEN", "k"}}, 1},
		{str, [][]string{{"GETRANGE", "k", "0", "-1"}}, 1},
		{str, [][]string{{"OBJECT", "ENCODING", "k"}}, 1},
		{str, [][]string{{"SCAN", "0"}}, 1},
		{str, [][]string{{"SCAN", "0", "MATCH", "k*", "COUNT", "100"}}, 1},
		{str, [][]string{{"RANDOMKEY"}}, 1},
		{str, [][]string{{"MULTI"}, {"GET", "k"}, {"EXEC"}}, 1},
		{str, [][]string{{"EVAL", "return redis.call('get', KEYS[1])", "1", "k"}}, 1},
		{str, [][]string{{"EVAL_RO", "return redis.call('exists', KEYS[1])", "1", "k"}}, 1},
		{hash, [][]string{{"HGET", "k", "f"}}, 1},
		{hash, [][]string{{"HGETALL", "k"}}, 1},
		{list, [][]string{{"LRANGE", "k", "0", "-1"}}, 1},
		{list, [][]string{{"LLEN", "k"}}, 1},
		{set, [][]string{{"SMEMBERS", "k"}}, 1},
		{set, [][]string{{"SISMEMBER", "k", "m"}}, 1},
		{zset, [][]string{{"ZRANGE", "k", "0", "-1"}}, 1},
		{zset, [][]string{{"ZSCORE", "k", "m"}}, 1},
	}
	for _, proto := range []int{2, 3} {
		t.Run("resp"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			sides := []*notifySide{
				newNotifySide(t, startRedis(t), proto, "Exg"),
				newNotifySide(t, startKVS(t, KVSOptions{}), proto, "Exg"),
			}
			for _, s := range sides {
				if proto == 3 {
					if v := s.cmd.Do("HELLO", "3"); v.Kind != '%' {
						t.Fatalf("%s: HELLO 3: %s", s.name, v)
					}
				}
			}
			for _, tc := range cases {
				var replies [2][]string
				var counted [2]int
				var events [2][]string
				for i, s := range sides {
					var before int
					for attempt := 0; ; attempt++ {
						s.do([]string{"FLUSHALL"})
						before = expiredKeys(t, s)
						expired, deleted := setUpExpiring(t, s, tc.setup)
						if !deleted || tc.want == 0 || attempt == 100 {
							events[i] = expired
							break
						}
					}
					events[i] = append(events[i], waitLogicallyExpired(t, s)...)
					// Without markers between them (one would be queued
					// inside MULTI): the PING's collects their events.
					for _, cmd := range tc.reads {
						replies[i] = append(replies[i], string(s.cmd.Do(cmd...).Raw))
					}
					// The next command sees the deletion done and counted.
					counted[i] = expiredKeys(t, s) - before
					_, ev := s.do([]string{"PING"})
					events[i] = append(events[i], ev...)
				}
				for j, cmd := range tc.reads {
					if !sameReply(cmd, replies[0][j], replies[1][j]) {
						t.Errorf("%s after %q: redis %q, kvs %q", showCommand(cmd), tc.setup, replies[0][j], replies[1][j])
					}
				}
				for i, s := range sides {
					if counted[i] != tc.want {
						t.Errorf("%s: %q after %q: expired_keys grew by %d, want %d", s.name, tc.reads, tc.setup, counted[i], tc.want)
					}
					if len(events[i]) != tc.want || tc.want == 1 && !strings.Contains(events[i][0], "__keyevent@0__:expired") {
						t.Errorf("%s: %q after %q announced %q, want %d expired events", s.name, tc.reads, tc.setup, events[i], tc.want)
					}
				}
				if len(events[0]) == 1 && len(events[1]) == 1 && events[0][0] != events[1][0] {
					t.Errorf("%q: redis announced %q, kvs %q", tc.reads, events[0][0], events[1][0])
				}
			}
		})
	}
}

// expiredKeys returns INFO stats' expired_keys on s's command connection
// (whose events the next marker collects).
func expiredKeys(t *testing.T, s *notifySide) int {
	t.Helper()
	info := s.cmd.Do("INFO", "stats").Str
	_, v, ok := strings.Cut(info, "expired_keys:")
	if !ok {
		t.Fatalf("%s: INFO stats has no expired_keys: %q", s.name, info)
	}
	v, _, _ = strings.Cut(v, "\r\n")
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: expired_keys:%s", s.name, v)
	}
	return n
}

// setUpExpiring runs setup on s. It returns the expired events announced
// meanwhile (active expiry may take the key before the setup's last
// marker is back) and reports whether one of its commands deleted the key
// at once ("del" announced, class g). A PEXPIRE of 1 ms does, on either
// server, when a millisecond passes between the two clock readings it
// makes (a busy machine): the deadline it computed is past when it
// checks, so the key is deleted and never expires, and the case is set up
// again.
func setUpExpiring(t *testing.T, s *notifySide, setup [][]string) (expired []string, deleted bool) {
	t.Helper()
	for _, cmd := range setup {
		r, events := s.do(cmd)
		if !strings.HasPrefix(r, ":") && r != "+OK\r\n" {
			t.Fatalf("%s: %s: %q", s.name, showCommand(cmd), r)
		}
		for _, e := range events {
			switch {
			case strings.Contains(e, "__keyevent@0__:del"):
				deleted = true
			case strings.Contains(e, "__keyevent@0__:expired"):
				expired = append(expired, e)
			}
		}
	}
	return expired, deleted
}

// waitLogicallyExpired polls KEYS, which hides an expired key without
// deleting it on either server, until "k" has expired, and returns the
// events announced meanwhile (active expiry may have deleted it).
func waitLogicallyExpired(t *testing.T, s *notifySide) []string {
	t.Helper()
	var events []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, ev := s.do([]string{"KEYS", "k"})
		events = append(events, ev...)
		if r == "*0\r\n" {
			return events
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: k never expired: KEYS k = %q", s.name, r)
		}
	}
}
