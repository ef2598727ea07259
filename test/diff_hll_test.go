package test

import "strconv"

// The differential test's HyperLogLog commands. A HyperLogLog is a string,
// which the string dump compares byte for byte (the registers, the
// encoding and the cached cardinality), so the type is registered under a
// name no key has and its dump is never called. The generator grows keys
// past the sparse encoding's limit, merges them, and damages them (SETRANGE
// of a random byte, APPEND, SETs of headers over made-up registers) so
// that the commands meet corrupted values, and every other type's keys.
//
// hll-sparse-max-bytes is only set to its default or refused: kvs forgets
// run-time configuration when a durable node restarts (see
// diff_bits_test.go).
func init() {
	registerDiffType(diffType{
		name:   "hyperloglog",
		weight: 24,
		gen:    (*cmdGen).hllCommand,
		dump:   func(c *rawConn, key string) string { return "" },
	})
}

// hllElement is an element to add: a few shared ones, so that adds change
// nothing as often as something, and fresh ones.
func (g *cmdGen) hllElement() string {
	if g.chance(0.5) {
		return g.pick("a", "b", "c", "", "foo", "bar", "1", "2", "hello world", "\x00\xff")
	}
	return "e" + strconv.Itoa(g.r.Intn(100000))
}

func (g *cmdGen) hllElements() []string {
	n := g.r.Intn(5)
	switch {
	case g.chance(0.06):
		n = 1500 + g.r.Intn(1500) // past the sparse limit at once
	case g.chance(0.15):
		n = 50 + g.r.Intn(400) // enough to pass it soon
	}
	els := make([]string, n)
	for i := range els {
		els[i] = g.hllElement()
	}
	return els
}

// hllHeader is a HyperLogLog header: the magic (sometimes wrong), an
// encoding, and a cached cardinality valid or not.
func (g *cmdGen) hllHeader(enc byte) string {
	magic := "HYLL"
	if g.chance(0.05) {
		magic = g.pick("HYLX", "hyll", "HYL")
	}
	card := "\x00\x00\x00\x00\x00\x00\x00\x80"
	if g.chance(0.3) {
		card = string([]byte{byte(g.r.Intn(256)), byte(g.r.Intn(4)), 0, 0, 0, 0, 0, 0})
	}
	return magic + string([]byte{enc, 0, 0, 0}) + card
}

// hllSparseOpcodes are sparse registers: runs of ZERO, XZERO and VAL that
// cover the 16384 registers exactly, or fall short, or run past.
func (g *cmdGen) hllSparseOpcodes() string {
	var b []byte
	left := 16384
	switch g.r.Intn(4) {
	case 0:
		left += 1 + g.r.Intn(100)
	case 1:
		left -= 1 + g.r.Intn(100)
	}
	for left > 0 && len(b) < 200 {
		switch g.r.Intn(3) {
		case 0:
			n := min(left, 1+g.r.Intn(64))
			b = append(b, byte(n-1))
			left -= n
		case 1:
			n := min(left, 1+g.r.Intn(16384))
			b = append(b, byte((n-1)>>8)|0x40, byte(n-1))
			left -= n
		default:
			n := min(left, 1+g.r.Intn(4))
			v := 1 + g.r.Intn(32)
			b = append(b, byte((v-1)<<2|(n-1))|0x80)
			left -= n
		}
	}
	if left > 0 {
		// A last XZERO for what is left, perhaps cut short.
		n := min(left, 16384)
		b = append(b, byte((n-1)>>8)|0x40, byte(n-1))
		if g.chance(0.2) {
			b = b[:len(b)-1]
		}
	}
	return string(b)
}

// hllValue is a value for SET: a made-up HyperLogLog, sparse or dense,
// well formed or not.
func (g *cmdGen) hllValue() string {
	switch g.r.Intn(5) {
	case 0:
		regs := make([]byte, 12288)
		for i := g.r.Intn(20); i > 0; i-- {
			regs[g.r.Intn(len(regs))] = byte(g.r.Intn(256))
		}
		v := g.hllHeader(0) + string(regs)
		if g.chance(0.2) {
			v = v[:len(v)-1] // a dense one of the wrong length
		}
		return v
	case 1:
		return g.hllHeader(byte(g.pick("\x02", "\xff", "\x01")[0]))
	}
	return g.hllHeader(1) + g.hllSparseOpcodes()
}

// hllCommand returns one HyperLogLog command, or a write that damages or
// replaces a key's value.
func (g *cmdGen) hllCommand() []string {
	k := g.key()
	switch g.r.Intn(20) {
	case 0, 1, 2, 3, 4, 5:
		return append([]string{g.pick("PFADD", "pfadd"), k}, g.hllElements()...)
	case 6, 7, 8:
		return []string{"PFCOUNT", k}
	case 9:
		return append([]string{"PFCOUNT"}, g.keys(1)...)
	case 10, 11:
		return append([]string{"PFMERGE", k}, g.keys(0)...)
	case 12, 13:
		return []string{"GET", k}
	case 14:
		sub := g.pick("ENCODING", "encoding", "DECODE", "TODENSE", "todense", "GETREG", "bogus")
		return []string{"PFDEBUG", sub, k}
	case 15:
		// A byte of the header or registers changed.
		pos := g.r.Intn(20)
		if g.chance(0.5) {
			pos = g.r.Intn(12304)
		}
		return []string{"SETRANGE", k, strconv.Itoa(pos), string([]byte{byte(g.r.Intn(256))})}
	case 16:
		return []string{"APPEND", k, g.pick("hello", "\x00", "\x7f\xff", "\x80")}
	case 17, 18:
		return []string{"SET", k, g.hllValue()}
	}
	switch g.r.Intn(3) {
	case 0:
		return []string{"CONFIG", "GET", g.pick("hll-sparse-max-bytes", "hll*")}
	case 1:
		return []string{"CONFIG", "SET", "hll-sparse-max-bytes", g.pick("3000", "-1", "abc", "")}
	}
	return []string{"STRLEN", k}
}
