package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Transactions: MULTI/EXEC as one log entry, and the key versions WATCH
// compares.
//
// # Versions
//
// The store keeps a write counter, advanced by one before each write
// command is applied (Store.applyLocked, and each write inside an EXEC),
// so its value is a function of the log prefix applied: every replica,
// and every replay, has the same counter after the same entries. Every
// item stored is stamped with the counter (keyspace.Set), whichever write
// path stored it (a command, an EXEC, a script), so an item's version is
// the counter of its last write. The version is the counter's low 48 bits,
// kept in the item struct's padding: it costs no memory per key, where a
// uint64 would add 8 bytes to every key. 2^48 writes is about nine years
// at a million writes a second; an item whose version is read back after
// the counter has wrapped appears younger than it is, which can only abort
// a transaction that need not have been (see changed).
//
// A key that is absent has no item to carry a version. For those the
// store keeps, per bucket of keys (16384 buckets by key hash, two tables
// of 128 KiB allocated on first use), the highest version at which an item
// of the bucket was deleted, and the highest at which one was written
// (stored or deleted). A WATCH of an absent key records the counter (At);
// its EXEC aborts if the key exists by then with a version above At
// (created since), or if the key is still absent but an item of its
// bucket written after At was deleted since: another key of the bucket
// may have been, the one case where kvs aborts a transaction Redis would
// run. FLUSHALL deletes every item: the deletion record takes the
// written record's values.
//
// Versions, the counter and the two records are replicated state: they
// are in snapshots (version 4), since an EXEC's outcome depends on them
// and must be the same on every replica.
//
// # What counts as a change
//
// A watched key that existed (unexpired) at WATCH is changed when, at the
// EXEC's apply, it is absent, expired by the entry's clock, or has another
// version: any write that stored or deleted it (SET, DEL, EXPIRE, RENAME
// over it or away from it, a collection's edit, its deletion by the active
// expiry, FLUSHALL). A watched key that was absent or expired at WATCH is
// changed when it was written since; its deletion after expiring is not a
// change, as in Redis 7.0.

// opBaseMulti numbers the transaction ops, within the scripts' range.
const opBaseMulti Op = opBaseScript + 50

const (
	// OpExec (EXEC): Args[0] = the watched keys and what WATCH saw of
	// them (AppendWatches), Args[1] = the queued commands, reads and
	// writes, as AppendCommands encodes them (not an OpExec). Apply
	// checks the watched keys at the entry's clock and, when none
	// changed, runs the commands in order and replies with an array of
	// their replies; when one changed it runs nothing and replies
	// ReplyNilArray. Build it with ExecCommand.
	OpExec Op = opBaseMulti + iota
)

func init() {
	registerOp(OpExec, opSpec{name: "EXEC", write: true, args: 2, check: checkExec,
		checksItself: true, apply: applyExec, keys: keysExec, composite: true})
}

// KeyVersion is what WATCH saw of a key (Store.WatchKey), carried by the
// EXEC's entry to the apply that compares it.
type KeyVersion struct {
	Live bool   // the key existed, unexpired
	Ver  uint64 // its version, when Live
	At   uint64 // the store's write counter when it was watched
}

// WatchKey returns what WATCH records of key at now: whether it is live,
// its version, and the store's write counter.
func (s *Store) WatchKey(now int64, key []byte) KeyVersion {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.watchKeyLocked(now, key)
}

func (s *Store) watchKeyLocked(now int64, key []byte) KeyVersion {
	kv := KeyVersion{At: s.keys.vers.now}
	if it, ok := s.liveLocked(key, now); ok {
		kv.Live, kv.Ver = true, it.version()
	}
	return kv
}

// ExecCommand builds the OpExec of a transaction: the watched keys with
// what WATCH saw of each (keys[i] with seen[i]), and the queued commands,
// which must pass Validate and must not be OpExec.
func ExecCommand(keys [][]byte, seen []KeyVersion, cmds []Command) Command {
	return Command{Op: OpExec, Args: [][]byte{AppendWatches(nil, keys, seen), AppendCommands(nil, cmds)}}
}

// AppendWatches appends the encoding of watched keys to dst:
//
//	watches = count:uvarint (keylen:uvarint key live:byte ver:uvarint at:uvarint)*count
func AppendWatches(dst []byte, keys [][]byte, seen []KeyVersion) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for i, k := range keys {
		dst = binary.AppendUvarint(dst, uint64(len(k)))
		dst = append(dst, k...)
		live := byte(0)
		if seen[i].Live {
			live = 1
		}
		dst = append(dst, live)
		dst = binary.AppendUvarint(dst, seen[i].Ver)
		dst = binary.AppendUvarint(dst, seen[i].At)
	}
	return dst
}

// ExecBuilder builds OpExecs (ExecCommand) in memory it reuses, for a
// proposer that builds one per transaction: the commands it returns alias
// its buffers, which Reset hands back for the next ones. The zero value is
// ready to use.
type ExecBuilder struct {
	buf  []byte   // the encodings
	args [][]byte // the OpExecs' Args
}

// Build returns ExecCommand(keys, seen, cmds), built in b's memory. It
// stays valid until Reset; nothing b builds later writes over it.
func (b *ExecBuilder) Build(keys [][]byte, seen []KeyVersion, cmds []Command) Command {
	// When an append outgrows the buffer it moves to a new one; the
	// commands built before keep the old one, which nothing writes again.
	start := len(b.buf)
	b.buf = AppendWatches(b.buf, keys, seen)
	mid := len(b.buf)
	b.buf = AppendCommands(b.buf, cmds)
	end := len(b.buf)
	n := len(b.args)
	b.args = append(b.args, b.buf[start:mid:mid], b.buf[mid:end:end])
	return Command{Op: OpExec, Args: b.args[n : n+2 : n+2]}
}

// Reset makes b reuse its memory: every command it built before must be
// out of use (Apply copies what it keeps; a log has encoded its entry).
func (b *ExecBuilder) Reset() {
	clear(b.args)
	b.args = b.args[:0]
	b.buf = b.buf[:0]
	if cap(b.buf) > maxReusedExec {
		b.buf = nil // do not keep a huge transaction's buffer
	}
}

// maxReusedExec is the size above which ExecBuilder and execScratch drop
// their memory instead of keeping it for the next transaction.
const maxReusedExec = 64 << 10

// decodeWatches reads AppendWatches's encoding into sc; keys alias b.
func decodeWatches(b []byte, sc *execScratch) error {
	d := decoder{b: b}
	n := d.count(4) // a watch takes at least 4 bytes
	sc.keys, sc.seen = sc.keys[:0], sc.seen[:0]
	for i := 0; i < n && d.err == nil; i++ {
		var kv KeyVersion
		key := d.bytes()
		switch d.byte() {
		case 0:
		case 1:
			kv.Live = true
		default:
			d.fail("bad watch state")
		}
		kv.Ver = d.uvarint()
		kv.At = d.uvarint()
		sc.keys = append(sc.keys, key)
		sc.seen = append(sc.seen, kv)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes after the watches")
	}
	return d.err
}

var errNestedExec = errors.New("EXEC inside EXEC")

// execScratch is an OpExec decoded: its watched keys, what WATCH saw of
// them and its commands, in memory reused from one OpExec to the next
// (execScratchPool), so neither validating an entry nor applying it
// allocates. What it holds aliases the OpExec's Args.
type execScratch struct {
	keys [][]byte
	seen []KeyVersion
	cmds []Command
	args [][]byte // the backing array of cmds' Args
}

var execScratchPool = sync.Pool{New: func() any { return new(execScratch) }}

// release drops sc's references to the entry's memory and returns it to
// the pool.
func (sc *execScratch) release() {
	if cap(sc.cmds) > maxReusedExec/64 || cap(sc.args) > maxReusedExec/16 || cap(sc.keys) > maxReusedExec/16 {
		return // a huge transaction: let its memory go
	}
	clear(sc.keys)
	clear(sc.cmds)
	clear(sc.args)
	execScratchPool.Put(sc)
}

// decodeExec reads an OpExec's arguments into sc, validating the commands.
func decodeExec(c *Command, sc *execScratch) error {
	if err := decodeWatches(c.Args[0], sc); err != nil {
		return fmt.Errorf("watched keys: %w", err)
	}
	d := decoder{b: c.Args[1]}
	var err error
	if sc.cmds, sc.args, err = d.commandsInto(sc.cmds, sc.args, false); err != nil {
		return fmt.Errorf("commands: %w", err)
	}
	for i := range sc.cmds {
		if sc.cmds[i].Op == OpExec {
			return fmt.Errorf("command %d: %w", i, errNestedExec)
		}
	}
	return nil
}

func checkExec(c *Command) error {
	sc := execScratchPool.Get().(*execScratch)
	defer sc.release()
	return decodeExec(c, sc)
}

// keysExec is the keys the transaction's writes touch. A FLUSHALL among
// them touches every key: Command.Keys asks execFlushes.
func keysExec(c *Command) [][]byte {
	var sc execScratch // returned keys alias it: not pooled
	if decodeExec(c, &sc) != nil {
		return nil
	}
	var keys [][]byte
	for _, sub := range sc.cmds {
		k, _ := sub.Keys()
		keys = append(keys, k...)
	}
	return keys
}

// execFlushes reports whether an OpExec holds a FLUSHALL.
func execFlushes(c *Command) bool {
	sc := execScratchPool.Get().(*execScratch)
	defer sc.release()
	if decodeExec(c, sc) != nil {
		return false
	}
	for _, sub := range sc.cmds {
		if sub.Op == OpFlushAll {
			return true
		}
	}
	return false
}

// applyExec validates the OpExec itself, before it changes anything
// (applyLocked leaves it to it: see opSpec.checksItself).
func applyExec(s *Store, now int64, c *Command) Reply {
	sc := execScratchPool.Get().(*execScratch)
	defer sc.release()
	if err := decodeExec(c, sc); err != nil {
		panic(fmt.Errorf("fsm: %v: %w", c.Op, err)) // a committed entry the store cannot apply
	}
	for i, k := range sc.keys {
		if s.changedLocked(now, k, sc.seen[i]) {
			return Reply{Kind: ReplyNilArray}
		}
	}
	out := make([]Reply, len(sc.cmds))
	for i := range sc.cmds {
		sub := &sc.cmds[i]
		sp := sub.Op.spec()
		if sp.write {
			out[i] = s.applyLocked(now, sub)
		} else {
			if sub.DB != s.cur {
				s.inDBLocked(sub.DB, func() { out[i] = s.readInsideLocked(now, sub, true, &s.expired.met) })
			} else {
				out[i] = s.readInsideLocked(now, sub, true, &s.expired.met)
			}
		}
	}
	// The replies of reads alias the store's immutable memory, and those
	// of writes are built fresh; nothing aliases the entry's bytes, which
	// the caller may reuse, nor the scratch, which the next EXEC reuses.
	return Reply{Kind: ReplyArray, Array: out}
}

// changedLocked reports whether key changed since WATCH saw kv (see "What
// counts as a change" above). It reads only replicated state and the
// entry's clock.
func (s *Store) changedLocked(now int64, key []byte, kv KeyVersion) bool {
	it, ok := s.getLocked(key)
	v := &s.keys.vers
	if kv.Live {
		return !ok || it.expired(now) || it.version() != kv.Ver&versionMask
	}
	if ok {
		// Present now though absent (or expired) then: changed if
		// written since; an older item is the expired one WATCH saw.
		return v.full(it.version()) > kv.At
	}
	return v.gone.at(keyHash(unsafeString(key))) > kv.At
}

// versionMask keeps the 48 bits of a version an item holds.
const versionMask = 1<<48 - 1

func (it *item) version() uint64 { return uint64(it.verHi)<<32 | uint64(it.verLo) }

func (it *item) setVersion(v uint64) {
	it.verHi, it.verLo = uint16(v>>32), uint32(v)
}

// versions is the keyspace's part of WATCH's state: the write counter and
// what is known of the keys of each bucket (16384 buckets by key hash).
type versions struct {
	now   uint64 // the write counter: the version the next Set stamps
	clock int64  // the entry's clock of the write being applied
	// gone[b] is the highest version at which an item of bucket b was
	// deleted; written[b] the highest at which one was stored or
	// deleted. FLUSHALL deletes every item, so it makes gone what
	// written was.
	gone, written buckets
}

const numBuckets = 1 << 14

func bucketOf(hash uint64) int { return int(hash>>1) & (numBuckets - 1) }

// buckets is a table of versions by bucket, allocated on the first write
// (128 KiB). It is shared with the snapshots taken while gen was the
// keyspace's generation, and copied before it is written in a later one.
type buckets struct {
	t   *[numBuckets]uint64
	gen uint64
}

func (bs *buckets) at(hash uint64) uint64 {
	if bs.t == nil {
		return 0
	}
	return bs.t[bucketOf(hash)]
}

// raise makes hash's bucket at least v, in keyspace generation gen.
func (bs *buckets) raise(hash, v, gen uint64) {
	b := bucketOf(hash)
	if v == 0 || (bs.t != nil && bs.t[b] >= v) {
		return
	}
	switch {
	case bs.t == nil:
		bs.t = new([numBuckets]uint64)
	case bs.gen != gen:
		cp := *bs.t
		bs.t = &cp
	}
	bs.gen = gen
	bs.t[b] = v
}

// noGen is a generation no keyspace reaches: a table marked with it is
// copied before its first write.
const noGen = ^uint64(0)

// begin advances the counter for a write command applied at the entry's
// clock now: the version of every item it stores.
func (v *versions) begin(now int64) {
	v.now++
	v.clock = now
}

// full returns the counter value whose low 48 bits are v48: the most recent
// one not after now.
func (v *versions) full(v48 uint64) uint64 {
	return v.now - (v.now-v48)&versionMask
}

// storedLocked stamps it, about to be stored in generation gen.
func (v *versions) storedLocked(it *item, gen uint64) {
	it.setVersion(v.now)
	v.written.raise(it.hash, v.now, gen)
}

// deletedLocked records the deletion of prev in keyspace generation gen:
// the deletion of a live item is a write (version now); that of an item
// already expired is not a change, and records only the item's own
// version. Both are the same whichever path the command took to the
// deletion (a large collection is stored, then deleted when left empty;
// a packed one is deleted at once), so every replica records the same
// whatever encodings it chose.
func (v *versions) deletedLocked(prev *item, gen uint64) {
	ver := v.now
	if prev.expired(v.clock) {
		ver = v.full(prev.version())
	}
	v.gone.raise(prev.hash, ver, gen)
	v.written.raise(prev.hash, ver, gen)
}

// flushedLocked returns the versions after a FLUSHALL, which deletes
// every item: gone becomes written, shared until either is written.
func (v versions) flushedLocked() versions {
	shared := buckets{t: v.written.t, gen: noGen}
	return versions{now: v.now, clock: v.clock, gone: shared, written: shared}
}
