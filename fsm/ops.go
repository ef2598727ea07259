package fsm

import "fmt"

// The op table: one row per op, filled in by each type's file (string.go,
// generic.go, hash.go, ...) from its init function. Apply, Read, Validate,
// IsWrite, Keys and Op.String dispatch through it, so adding a command
// touches its type's file and nothing central.

// opSpec is one op's row.
type opSpec struct {
	name  string // the Redis command it stands for, canonical form
	write bool   // goes through a proposer and Apply; else answered by Read

	// args is the argument count: n exactly when n >= 0, at least -n-1
	// when negative (argsAtLeast(k) = -k-1), any when argsAny.
	args int
	// step, when > 1, requires the arguments after the first first to
	// come in groups of step (MSET's pairs: first 0, step 2).
	first, step int
	// flags are the Flags bits the op accepts; any other is corruption.
	flags Flags
	// check validates what args, step and flags cannot express (a
	// non-negative offset, say); nil when there is nothing more.
	check func(c *Command) error
	// checksItself says apply runs check's validation itself before it
	// changes anything, so applyLocked need not run check first (an
	// OpExec's commands are decoded once per apply, not twice).
	checksItself bool

	// apply runs a write under the exclusive lock; read answers a read
	// under the shared lock. Exactly one is set, as write says.
	apply func(s *Store, now int64, c *Command) Reply
	read  func(s *Store, now int64, c *Command) Reply
	// readMet, for a read whose expired keys are not (only) those of its
	// key lookups (SCAN's visits, RANDOMKEY's samples, a read-only
	// script's commands), is read that also appends copies of the keys
	// it found expired to *met (expire.go); nil for the others.
	readMet func(s *Store, now int64, c *Command, met *[][]byte) Reply

	// keys returns the keys a write touches (see Command.Keys), or a
	// read reads, which slot ownership is checked for (slots.go); nil
	// means its first argument.
	keys func(c *Command) [][]byte
	// slotSkips says the write passes over the keys of slots it may not
	// write (active expiry, eviction) instead of being refused.
	slotSkips bool

	// composite ops (EXEC, EVAL) run other commands, each through
	// applyLocked, which gives every one its key versions, lazy expiry
	// and keyspace events; the composite itself has none of its own.
	composite bool

	// level is the ApplyLevel from which kvs applies the op (level.go):
	// 0 for the ops every kvs applies.
	level int
}

const argsAny = -1

// argsAtLeast is opSpec.args for "at least n arguments".
func argsAtLeast(n int) int { return -n - 1 }

var opTable [opLimit]opSpec

// registerOp adds op's row. It panics on a number taken twice or a row
// that is not one of a write with apply or a read with read: both are
// programming errors found at startup.
func registerOp(op Op, spec opSpec) {
	switch {
	case op == OpInvalid || op >= opLimit:
		panic(fmt.Sprintf("fsm: op %d out of range", op))
	case opTable[op].name != "":
		panic(fmt.Sprintf("fsm: op %d registered twice (%s, %s)", op, opTable[op].name, spec.name))
	case spec.name == "":
		panic(fmt.Sprintf("fsm: op %d has no name", op))
	case spec.write && (spec.apply == nil || spec.read != nil),
		!spec.write && (spec.read == nil || spec.apply != nil):
		panic(fmt.Sprintf("fsm: op %v needs exactly its apply (write) or read function", spec.name))
	case spec.level < 0 || spec.level > ApplyLevel:
		panic(fmt.Sprintf("fsm: op %v of level %d, beyond ApplyLevel %d", spec.name, spec.level, ApplyLevel))
	}
	opTable[op] = spec
}

// spec returns op's row, or nil for an unknown op.
func (op Op) spec() *opSpec {
	if op >= opLimit || opTable[op].name == "" {
		return nil
	}
	return &opTable[op]
}

// String returns the Redis command an op stands for (its canonical form).
func (op Op) String() string {
	if sp := op.spec(); sp != nil {
		return sp.name
	}
	return fmt.Sprintf("Op(%d)", uint16(op))
}

// Validate reports whether c is well formed for its op: a known op, the
// argument count and the fields its op needs, and only the flags it
// accepts. The server builds commands that pass it; DecodeEntry rejects
// entries that do not; Apply and Read panic on a command that does not (a
// bug, not input).
func (c *Command) Validate() error { return c.validate(true) }

// validate is Validate, running the op's check only when deep.
func (c *Command) validate(deep bool) error {
	sp := c.Op.spec()
	if sp == nil {
		return fmt.Errorf("fsm: unknown op %d", uint16(c.Op))
	}
	if c.Flags&^sp.flags != 0 {
		return fmt.Errorf("fsm: %v: unknown flags %#x", c.Op, uint32(c.Flags&^sp.flags))
	}
	n := len(c.Args)
	switch {
	case sp.args >= 0 && n != sp.args:
		return fmt.Errorf("fsm: %v with %d args: want %d", c.Op, n, sp.args)
	case sp.args < argsAny && n < -sp.args-1:
		return fmt.Errorf("fsm: %v with %d args: want at least %d", c.Op, n, -sp.args-1)
	case sp.step > 1 && (n < sp.first || (n-sp.first)%sp.step != 0):
		return fmt.Errorf("fsm: %v with %d args: want groups of %d after %d", c.Op, n, sp.step, sp.first)
	}
	if deep && sp.check != nil {
		if err := sp.check(c); err != nil {
			return fmt.Errorf("fsm: %v with %d args: %w", c.Op, n, err)
		}
	}
	return nil
}

// Keys returns the keys a write command touches, as its Args hold them
// (not copies), for saying what a damaged or cut log record affected.
// FLUSHALL touches every key: all is true and keys is empty. Reads and
// OpMetaSet (cluster metadata, not a key) touch none.
func (c Command) Keys() (keys [][]byte, all bool) {
	if c.Op == OpFlushAll || (c.Op == OpExec && execFlushes(&c)) {
		return nil, true
	}
	sp := c.Op.spec()
	if sp == nil || !sp.write {
		return nil, false
	}
	if sp.keys != nil {
		return sp.keys(&c), false
	}
	if len(c.Args) > 0 {
		return c.Args[:1], false
	}
	return nil, false
}

// keysAll is opSpec.keys for ops whose every argument is a key.
func keysAll(c *Command) [][]byte { return c.Args }

// keysNone is opSpec.keys for writes that touch no key.
func keysNone(c *Command) [][]byte { return nil }

// keysEvery returns an opSpec.keys taking every step-th argument from
// first on (MSET's keys: keysEvery(0, 2)).
func keysEvery(first, step int) func(c *Command) [][]byte {
	return func(c *Command) [][]byte {
		var keys [][]byte
		for i := first; i < len(c.Args); i += step {
			keys = append(keys, c.Args[i])
		}
		return keys
	}
}

// keysFrom returns an opSpec.keys taking the arguments from first on.
func keysFrom(first int) func(c *Command) [][]byte {
	return func(c *Command) [][]byte { return c.Args[min(first, len(c.Args)):] }
}

// keysFirst returns an opSpec.keys taking the first n arguments.
func keysFirst(n int) func(c *Command) [][]byte {
	return func(c *Command) [][]byte { return c.Args[:min(n, len(c.Args))] }
}
