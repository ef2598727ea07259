package test

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"hash/crc64"
	"os"
	"strings"
	"sync"
)

// The differential test's DUMP and RESTORE. DUMP of any key, compared
// byte for byte where Redis's payload is deterministic (strings, sorted
// sets) and by its RDB type elsewhere (a hash's or hashtable set's order
// is Redis's dict's or insertion order; a list's quicklist nodes depend
// on its history; an intset's width never narrows in Redis), the values
// themselves being compared with the keyspace. RESTORE of payloads that
// redis-server 7.0.15 DUMPed (fsm/testdata, so the payloads cross from
// Redis into kvs), of payloads corrupted in ways both servers must refuse
// alike, with every option and its errors. Registered under a name no
// key has, as the bit commands are: its dump is never called.
//
// Both servers run with sanitize-dump-payload yes (differ.connect): kvs
// always validates payloads as deeply as Redis does with it.
func init() {
	registerDiffType(diffType{
		name:   "dump",
		weight: 6,
		gen:    (*cmdGen).dumpCommand,
		dump:   func(c *rawConn, key string) string { return "" },
		same: func(cmd []string, ref, got Value) (bool, bool) {
			if !strings.EqualFold(cmd[0], "DUMP") || ref.Kind != '$' || got.Kind != '$' || ref.Null || got.Null {
				return false, false
			}
			return sameDumpType(ref.Str, got.Str), true
		},
	})
}

// sameDumpType reports whether two payloads of one key that differ hold
// the same RDB type where Redis's bytes are not deterministic. A sorted
// set may be a skiplist in Redis and a listpack in kvs after a read SORT
// (compatibility.md).
func sameDumpType(ref, got string) bool {
	if len(ref) < 11 || len(got) < 11 {
		return false
	}
	a, b := ref[0], got[0]
	if (a == 5 || a == 17) && (b == 5 || b == 17) {
		return true
	}
	switch a {
	case 18:
		// A list of one quicklist node on both is the same bytes.
		return a == b && (ref[1] != 1 || got[1] != 1)
	case 2, 4, 11, 16:
		return a == b
	case 19:
		// A stream's nodes keep their deleted entries in Redis and not
		// in kvs (fsm/stream_dump.go).
		return a == b
	}
	return false
}

var (
	dumpCorpusOnce sync.Once
	dumpCorpus     []string
)

// recordedPayloads are the payloads of fsm/testdata/dump-redis-7.0.15.txt
// small enough to send often.
func recordedPayloads() []string {
	dumpCorpusOnce.Do(func() {
		f, err := os.Open("../fsm/testdata/dump-redis-7.0.15.txt")
		if err != nil {
			panic(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 4 || strings.HasPrefix(fs[0], "#") || len(fs[3]) > 6000 {
				continue
			}
			p, err := hex.DecodeString(fs[3])
			if err != nil {
				panic(err)
			}
			dumpCorpus = append(dumpCorpus, string(p))
		}
	})
	return dumpCorpus
}

var jones = crc64.MakeTable(0x95ac9329ac4bc9b5)

// withFooter ends body as a payload of RDB version ver.
func withFooter(body string, ver uint16) string {
	b := binary.LittleEndian.AppendUint16([]byte(body), ver)
	return string(binary.LittleEndian.AppendUint64(b, ^crc64.Update(^uint64(0), jones, b)))
}

// dumpPayload is a payload Redis wrote, or one both servers refuse the
// same way.
func (g *cmdGen) dumpPayload() string {
	ps := recordedPayloads()
	p := ps[g.r.Intn(len(ps))]
	body := p[:len(p)-10]
	switch g.r.Intn(12) {
	case 0: // a byte flipped: the checksum is wrong
		b := []byte(p)
		b[g.r.Intn(len(b))] ^= byte(1 + g.r.Intn(255))
		return string(b)
	case 1: // a later RDB version
		return withFooter(body, 11)
	case 2: // cut short, checksum good: bad data
		return withFooter(body[:g.r.Intn(len(body))], 10)
	case 3: // a type no RDB has
		return withFooter(g.pick("\x08", "\x63")+body[1:], 10)
	case 4:
		return g.pick("", "abc", "0123456789", string(make([]byte, 10)))
	case 5: // an older RDB version reads the same
		return withFooter(body, 9)
	}
	return p
}

func (g *cmdGen) dumpCommand() []string {
	if g.chance(0.4) {
		return []string{"DUMP", g.key()}
	}
	ttl := "0"
	if g.chance(0.4) {
		ttl = g.pick(g.millis(), g.unixMillis())
	}
	cmd := []string{"RESTORE", g.key(), ttl, g.dumpPayload()}
	for n := g.r.Intn(3); n > 0; n-- {
		switch g.r.Intn(9) {
		case 0, 1:
			cmd = append(cmd, g.pick("REPLACE", "replace"))
		case 2:
			cmd = append(cmd, g.pick("ABSTTL", "absttl"))
		case 3:
			cmd = append(cmd, "IDLETIME", g.pick("0", "10", "1000000", "-1", "abc"))
		case 4:
			cmd = append(cmd, "FREQ", g.pick("0", "5", "255", "256", "-1", "x"))
		case 5:
			cmd = append(cmd, g.pick("IDLETIME", "FREQ")) // no value
		default:
			cmd = append(cmd, g.pick("REPLACE", "bogus", "TTL"))
		}
	}
	return cmd
}
