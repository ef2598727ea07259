package test

import "strconv"

// The differential test's numbered databases: SELECT among a few of them
// (and out of range), MOVE, SWAPDB, COPY ... DB, FLUSHDB and DBSIZE, over
// the keys every other type's commands use, so those commands run in
// several databases too. The registered type's name is no TYPE's, so its
// dump is never called; compareState compares every database (dbsCompared).
func init() {
	registerDiffType(diffType{
		name:   "databases",
		weight: 8,
		gen:    (*cmdGen).dbCommand,
		dump:   func(c *rawConn, key string) string { return "" },
	})
}

// dbsCompared is how many databases the keyspace comparisons visit: the
// ones the generator SELECTs among.
const dbsCompared = 4

func (g *cmdGen) db() string {
	switch {
	case g.chance(0.03):
		return g.pick("16", "-1", "99", "x", "2147483648", "1.5", "")
	case g.chance(0.02):
		return "15"
	}
	return strconv.Itoa(g.r.Intn(dbsCompared))
}

func (g *cmdGen) dbCommand() []string {
	switch g.r.Intn(21) {
	case 0, 1, 2, 3, 4, 5:
		return []string{"SELECT", g.db()}
	case 6, 7, 8:
		return []string{"MOVE", g.key(), g.db()}
	case 9:
		return []string{"SWAPDB", g.db(), g.db()}
	case 10, 11, 12:
		cmd := []string{"COPY", g.key(), g.key(), "DB", g.db()}
		if g.chance(0.4) {
			cmd = append(cmd, "REPLACE")
		}
		if g.chance(0.1) {
			cmd = []string{"COPY", g.key(), g.key(), "REPLACE", "DB", g.db(), "DB", g.db()}
		}
		return cmd
	case 13:
		if g.chance(0.3) {
			return []string{"FLUSHDB"}
		}
		return []string{"DBSIZE"}
	case 14, 15, 16:
		return []string{"DBSIZE"}
	case 17:
		return []string{"SCAN", "0", "COUNT", "100"}
	case 18:
		return []string{"RANDOMKEY"}
	case 19:
		// A script's SELECT is its own; its calls run in the database it
		// chose, the caller's until then.
		k := g.key()
		switch g.r.Intn(3) {
		case 0:
			return []string{"EVAL", "local a = redis.call('GET', KEYS[1]) redis.call('SELECT', ARGV[1]) return {a, redis.call('GET', KEYS[1]), redis.call('TYPE', KEYS[1])}", "1", k, g.db()}
		case 1:
			return []string{"EVAL_RO", "redis.call('SELECT', ARGV[1]) return {redis.call('EXISTS', KEYS[1]), redis.call('TTL', KEYS[1])}", "1", k, g.db()}
		}
		return []string{"EVAL", "redis.call('SELECT', ARGV[1]) return redis.call('INCR', KEYS[1])", "1", k, g.db()}
	}
	return []string{"KEYS", "k*"}
}
