package server

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"kvs/fsm"
)

// Client-side caching: CLIENT TRACKING, CACHING, GETREDIR, TRACKINGINFO,
// as Redis's tracking.c.
//
// The node keeps Redis's two tables: tracked keys (key -> the ids of the
// clients that read it since it last changed) and, for BCAST mode, the
// prefixes clients registered. A read marks its keys in the first table
// before it runs, so a write applied while the read is answered is not
// missed (at worst a client hears of a change it already sees). Every
// change of a key reaches the table from the store's apply
// (fsm.Store.SetModifiedHook), whoever proposed it: a client of this node
// or of another, the expiry or the eviction loop, so on every node of a
// cluster a write invalidates what that node's clients read from its
// replica.
//
// A write of a tracking client's own marks its keys as the client's while
// its reply is owed (selfKeys): an invalidation of such a key waits until
// the reply is written, as Redis sends it after the command's reply, and
// is dropped in NOLOOP mode.
//
// Lock order: trackingTable.mu, then a pushState's mu (deliver).

// trackingTable is the node's tracking state.
type trackingTable struct {
	// clients counts the clients with tracking on (INFO's
	// tracking_clients); the stores record changed keys while it is not 0.
	clients atomic.Int64
	maxKeys atomic.Int64 // tracking-table-max-keys; 0: no limit
	// recording says the stores record changed keys: while a client
	// tracks, or the table holds keys (a key read by a client that then
	// turned tracking off is forgotten only when it changes, as in Redis,
	// and invalidated to the client if it turned tracking on again).
	recording atomic.Bool

	mu       sync.Mutex
	keys     map[string]map[int64]struct{}
	items    int
	prefixes map[string]map[*client]struct{}
	// recv are the clients that can be sent pushes (they have a
	// pushState), by id: tracking clients, subscribers, RESP3
	// connections, which a client may redirect to.
	recv map[int64]*client
	// evictEffort is Redis's timeout_counter: how hard the next round of
	// eviction from the table tries.
	evictEffort int
}

// clientTracking is a client's tracking state; guarded by trackingTable.mu
// except caching, which only the connection uses.
type clientTracking struct {
	on, bcast, optin, optout, noloop, broken bool
	redirect                                 int64
	prefixes                                 []string
	// caching is CLIENT CACHING's flag, for the next command or
	// transaction; writing says self may hold keys. Only the connection
	// uses them.
	caching, writing bool
	// self holds the keys of the client's writes whose replies are owed;
	// pending the invalidations to send once they are written.
	self    map[string]int
	pending []pendingInval
	// selfOut says, per key of self, what the client's own write does to
	// the client (selfQuiet, selfKeep; trackSequence); 0: an invalidation
	// after the reply, and the key is no longer tracked for it.
	selfOut map[string]uint8
}

// pendingInval is an invalidation held until its client's reply is out.
type pendingInval struct {
	keys []string
	null bool
}

// trackingOn reports whether some client of the node tracks.
func (s *Server) trackingOn() bool { return s.trk.recording.Load() }

// addReceiver records that c has a pushState (pubsub.go's ensurePush).
func (t *trackingTable) addReceiver(c *client) {
	t.mu.Lock()
	if t.recv == nil {
		t.recv = make(map[int64]*client)
	}
	t.recv[c.id] = c
	t.mu.Unlock()
}

// leaveTracking drops c from the tracking tables as it closes.
func (c *client) leaveTracking() {
	t := &c.s.trk
	t.mu.Lock()
	if c.trk.on {
		c.disableTrackingLocked()
	}
	delete(t.recv, c.id)
	t.mu.Unlock()
}

// setStoresTracking tells every store whether to record changed keys;
// the caller holds t.mu.
func (s *Server) setStoresTracking() {
	t := &s.trk
	on := t.clients.Load() > 0 || len(t.keys) > 0
	if t.recording.Load() == on {
		return
	}
	t.recording.Store(on)
	s.router.everyStore(func(st *fsm.Store) { st.SetTracking(on) })
}

func (c *client) disableTrackingLocked() {
	t := &c.s.trk
	for _, p := range c.trk.prefixes {
		set := t.prefixes[p]
		delete(set, c)
		if len(set) == 0 {
			delete(t.prefixes, p)
		}
	}
	if c.trk.on {
		t.clients.Add(-1)
		c.s.setStoresTracking()
	}
	c.trk = clientTracking{self: c.trk.self, pending: c.trk.pending, selfOut: c.trk.selfOut, writing: c.trk.writing}
}

// runClientTracking is CLIENT TRACKING (ON|OFF) [REDIRECT id] [BCAST]
// [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP], with Redis's checks in its
// order.
func runClientTracking(c *client, args [][]byte) {
	var redir int64
	var bcast, optin, optout, noloop bool
	var prefixes []string
	for j := 3; j < len(args); j++ {
		more := len(args) - 1 - j
		switch a := args[j]; {
		case is(a, "redirect") && more > 0:
			j++
			if redir != 0 {
				c.out = appendError(c.out, "ERR A client can only redirect to a single other client")
				return
			}
			v, ok := parseInt(args[j])
			if !ok {
				c.out = appendError(c.out, errNotInteger)
				return
			}
			redir = v
			if !c.s.clientExists(redir) {
				c.out = appendError(c.out, "ERR The client ID you want redirect to does not exist")
				return
			}
		case is(a, "bcast"):
			bcast = true
		case is(a, "optin"):
			optin = true
		case is(a, "optout"):
			optout = true
		case is(a, "noloop"):
			noloop = true
		case is(a, "prefix") && more > 0:
			j++
			prefixes = append(prefixes, string(args[j]))
		default:
			c.out = appendError(c.out, errSyntax)
			return
		}
	}
	t := &c.s.trk
	switch {
	case is(args[2], "on"):
		if !bcast && len(prefixes) > 0 {
			c.out = appendError(c.out, "ERR PREFIX option requires BCAST mode to be enabled")
			return
		}
		t.mu.Lock()
		cur := c.trk
		t.mu.Unlock()
		if cur.on && cur.bcast != bcast {
			c.out = appendError(c.out, "ERR You can't switch BCAST mode on/off before disabling tracking "+
				"for this client, and then re-enabling it with a different mode.")
			return
		}
		if bcast && (optin || optout) {
			c.out = appendError(c.out, "ERR OPTIN and OPTOUT are not compatible with BCAST")
			return
		}
		if optin && optout {
			c.out = appendError(c.out, "ERR You can't specify both OPTIN mode and OPTOUT mode")
			return
		}
		if optin && cur.optout || optout && cur.optin {
			c.out = appendError(c.out, "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking "+
				"for this client, and then re-enabling it with a different mode.")
			return
		}
		if bcast {
			if e := prefixCollision(cur.prefixes, prefixes); e != "" {
				c.out = appendError(c.out, e)
				return
			}
		}
		c.ensurePush()
		t.mu.Lock()
		if !c.trk.on {
			t.clients.Add(1)
			c.s.setStoresTracking()
		}
		c.trk.on, c.trk.broken, c.trk.redirect = true, false, redir
		c.trk.bcast, c.trk.optin, c.trk.optout, c.trk.noloop = bcast, optin, optout, noloop
		if bcast {
			if len(prefixes) == 0 {
				prefixes = []string{""}
			}
			if t.prefixes == nil {
				t.prefixes = make(map[string]map[*client]struct{})
			}
			for _, p := range prefixes {
				set := t.prefixes[p]
				if set == nil {
					set = make(map[*client]struct{})
					t.prefixes[p] = set
				}
				if _, ok := set[c]; !ok {
					set[c] = struct{}{}
					c.trk.prefixes = append(c.trk.prefixes, p)
				}
			}
		}
		t.mu.Unlock()
	case is(args[2], "off"):
		t.mu.Lock()
		c.disableTrackingLocked()
		t.mu.Unlock()
	default:
		c.out = appendError(c.out, errSyntax)
		return
	}
	c.out = appendStatus(c.out, "OK")
}

// prefixCollision is Redis's checkPrefixCollisionsOrReply: no prefix may
// be a prefix of another of the client's.
func prefixCollision(have, add []string) string {
	overlap := func(a, b string) bool {
		n := min(len(a), len(b))
		return a[:n] == b[:n]
	}
	have = slices.Sorted(slices.Values(have)) // Redis walks its radix tree
	for i, p := range add {
		for _, h := range have {
			if overlap(h, p) {
				return "ERR Prefix '" + p + "' overlaps with an existing prefix '" + h +
					"'. Prefixes for a single client must not overlap."
			}
		}
		for _, q := range add[i+1:] {
			if overlap(p, q) {
				return "ERR Prefix '" + p + "' overlaps with another provided prefix '" + q +
					"'. Prefixes for a single client must not overlap."
			}
		}
	}
	return ""
}

// runClientCaching is CLIENT CACHING (YES|NO).
func runClientCaching(c *client, v []byte) {
	t := &c.s.trk
	t.mu.Lock()
	st := c.trk
	t.mu.Unlock()
	if !st.on {
		c.out = appendError(c.out, "ERR CLIENT CACHING can be called only when the client is in tracking mode "+
			"with OPTIN or OPTOUT mode enabled")
		return
	}
	switch {
	case is(v, "yes"):
		if !st.optin {
			c.out = appendError(c.out, "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
			return
		}
	case is(v, "no"):
		if !st.optout {
			c.out = appendError(c.out, "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
			return
		}
	default:
		c.out = appendError(c.out, errSyntax)
		return
	}
	c.trk.caching = true
	c.out = appendStatus(c.out, "OK")
}

// runClientGetredir is CLIENT GETREDIR.
func runClientGetredir(c *client) {
	t := &c.s.trk
	t.mu.Lock()
	on, redir := c.trk.on, c.trk.redirect
	t.mu.Unlock()
	if !on {
		redir = -1
	}
	c.out = appendInt(c.out, redir)
}

// runClientTrackingInfo is CLIENT TRACKINGINFO.
func runClientTrackingInfo(c *client) {
	t := &c.s.trk
	t.mu.Lock()
	st := c.trk
	st.prefixes = slices.Clone(st.prefixes)
	t.mu.Unlock()
	slices.Sort(st.prefixes) // Redis's prefix table is a radix tree
	flags := []string{"off"}
	if st.on {
		flags[0] = "on"
	}
	if st.bcast {
		flags = append(flags, "bcast")
	}
	if st.optin {
		flags = append(flags, "optin")
		if c.trk.caching {
			flags = append(flags, "caching-yes")
		}
	}
	if st.optout {
		flags = append(flags, "optout")
		if c.trk.caching {
			flags = append(flags, "caching-no")
		}
	}
	if st.noloop {
		flags = append(flags, "noloop")
	}
	if st.broken {
		flags = append(flags, "broken_redirect")
	}
	b := appendMapLen(c.out, 3, c.proto)
	b = appendBulkString(b, "flags")
	b = appendSetLen(b, len(flags), c.proto)
	for _, f := range flags {
		b = appendBulkString(b, f)
	}
	b = appendBulkString(b, "redirect")
	if st.on {
		b = appendInt(b, st.redirect)
	} else {
		b = appendInt(b, -1)
	}
	b = appendBulkString(b, "prefixes")
	b = appendArrayLen(b, len(st.prefixes))
	for _, p := range st.prefixes {
		b = appendBulkString(b, p)
	}
	c.out = b
}

// trackingFlags are CLIENT LIST's tracking flags of c (t, R, B) and its
// redir= field.
func (c *client) trackingFlags() (flags string, redir int64) {
	if c.s.trk.clients.Load() == 0 {
		return "", -1
	}
	t := &c.s.trk
	t.mu.Lock()
	st := c.trk
	t.mu.Unlock()
	if !st.on {
		return "", -1
	}
	flags = "t"
	if st.broken {
		flags += "R"
	}
	if st.bcast {
		flags += "B"
	}
	return flags, st.redirect
}

// clientExists reports whether a client with id is connected.
func (s *Server) clientExists(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.clients {
		if c.id == id && !c.killReq.Load() {
			return true
		}
	}
	return false
}

// endCaching ends CLIENT CACHING's effect once a command other than
// CLIENT ran outside a transaction, as Redis's resetClient.
func (c *client) endCaching() {
	if c.multi == nil && !is(c.pipe[c.pipeAt][0], "client") {
		c.trk.caching = false
	}
}

// keyArgs are spec's keys in args.
func keyArgs(spec *command, args [][]byte) []string {
	var out []string
	for _, k := range spec.keys.FindRouted(args, nil) {
		out = append(out, string(args[k.Pos]))
	}
	return out
}

// isScriptCall reports whether spec runs a script or function: Redis
// tracks a script's declared keys when the script reads.
func isScriptCall(spec *command) bool {
	switch spec.name {
	case "eval", "evalsha", "fcall", "eval_ro", "evalsha_ro", "fcall_ro":
		return true
	}
	return false
}

// trackRead remembers the keys of a read-only command c runs (spec with
// args), as Redis's trackingRememberKeys: before the read runs.
func (c *client) trackRead(spec *command, args [][]byte) {
	if isScriptCall(spec) || spec.flags&flagReadonly != 0 && spec.flags&flagPubsub == 0 {
		c.trackKeys(spec, args)
	}
}

// trackKeys remembers spec's keys in args for c, in OPTIN/OPTOUT as
// CLIENT CACHING says.
func (c *client) trackKeys(spec *command, args [][]byte) {
	t := &c.s.trk
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.trk.on || c.trk.bcast {
		return
	}
	if c.trk.optin && !c.trk.caching || c.trk.optout && c.trk.caching {
		return
	}
	keys := spec.keys.FindRouted(args, nil)
	if len(keys) == 0 {
		return
	}
	if t.keys == nil {
		t.keys = make(map[string]map[int64]struct{})
	}
	for _, k := range keys {
		key := string(args[k.Pos])
		ids := t.keys[key]
		if ids == nil {
			ids = make(map[int64]struct{}, 1)
			t.keys[key] = ids
		}
		if _, ok := ids[c.id]; !ok {
			ids[c.id] = struct{}{}
			t.items++
		}
	}
	c.s.limitTrackingLocked()
}

// trackRemoteRead is trackRead for a read forwarded to a group this node
// holds no replica of, whose writes the node never applies: the keys are
// invalidated right after the read's reply, so the client does not keep
// what it cannot be told of (a cluster client reads from a node that
// holds the slot, and caches there as usual).
func (c *client) trackRemoteRead(spec *command, args [][]byte) {
	if !isScriptCall(spec) && (spec.flags&flagReadonly == 0 || spec.flags&flagPubsub != 0) {
		return
	}
	t := &c.s.trk
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.trk.on || c.trk.bcast {
		return
	}
	if c.trk.optin && !c.trk.caching || c.trk.optout && c.trk.caching {
		return
	}
	if keys := keyArgs(spec, args); len(keys) > 0 {
		c.trk.writing = true // the invalidation follows the reply (finishWrites)
		c.trk.pending = append(c.trk.pending, pendingInval{keys: keys})
	}
}

// trackWrite marks the keys of a write c proposes as its own until its
// reply is written (finishWrites).
func (c *client) trackWrite(spec *command, args [][]byte) {
	keys := spec.keys.FindRouted(args, nil)
	t := &c.s.trk
	t.mu.Lock()
	c.trk.writing = true
	if c.trk.self == nil {
		c.trk.self = make(map[string]int)
	}
	for _, k := range keys {
		c.trk.self[string(args[k.Pos])]++
	}
	t.mu.Unlock()
}

// A transaction or a script both writes and reads; Redis remembers a
// read once it ran, so the client's own write of a key invalidates what
// it read before the write (in an earlier command, or earlier in the
// transaction), and a read after the last write leaves the key tracked.
// kvs marks the reads before the entry is applied, and sets, per key the
// client writes, what the write does to the client (selfOut).
const (
	selfQuiet uint8 = 1 << iota // no invalidation to the client
	selfKeep                    // the key stays tracked for it
)

// trackOp is one command of a transaction or script, for trackSequence.
type trackOp struct {
	spec        *command
	args        [][]byte
	write, read bool
}

// trackSequence tracks ops, run in order in one entry, as Redis would
// one after the other.
func (c *client) trackSequence(ops []trackOp) {
	t := &c.s.trk
	t.mu.Lock()
	tracks := c.trk.on && !c.trk.bcast && !(c.trk.optin && !c.trk.caching || c.trk.optout && c.trk.caching)
	type state struct{ sent, readSince, keep, written bool }
	keys := map[string]*state{}
	get := func(k string) *state {
		st := keys[k]
		if st == nil {
			st = &state{}
			if ids, ok := t.keys[k]; ok {
				_, st.readSince = ids[c.id] // tracked before
			}
			keys[k] = st
		}
		return st
	}
	for _, op := range ops {
		ks := keyArgs(op.spec, op.args)
		if op.write {
			for _, k := range ks {
				st := get(k)
				st.written = true
				st.sent = st.sent || st.readSince
				st.readSince, st.keep = false, false
			}
		}
		if op.read && tracks {
			for _, k := range ks {
				st := get(k)
				st.readSince, st.keep = true, true
			}
		}
	}
	if c.trk.selfOut == nil {
		c.trk.selfOut = make(map[string]uint8)
	}
	for k, st := range keys {
		if !st.written {
			continue
		}
		var out uint8
		if !st.sent {
			out |= selfQuiet
		}
		if st.keep {
			out |= selfKeep
		}
		c.trk.selfOut[k] = out
	}
	t.mu.Unlock()
	for _, op := range ops {
		if op.write {
			c.trackWrite(op.spec, op.args)
		}
		if op.read {
			c.trackKeys(op.spec, op.args)
		}
	}
}

// trackExec tracks a transaction's commands (trackSequence).
func (c *client) trackExec(queued []queuedCmd) {
	ops := make([]trackOp, 0, len(queued))
	for _, q := range queued {
		ops = append(ops, trackOp{spec: q.spec, args: q.args,
			write: q.spec.flags&flagWrite != 0 || isScriptCall(q.spec),
			read:  isScriptCall(q.spec) || q.spec.flags&flagReadonly != 0 && q.spec.flags&flagPubsub == 0})
	}
	c.trackSequence(ops)
}

// finishWrites ends c's writes (their replies are written) and sends the
// invalidations held for them.
func (c *client) finishWrites() {
	t := &c.s.trk
	t.mu.Lock()
	clear(c.trk.self)
	clear(c.trk.selfOut)
	c.trk.writing = false
	pending := c.trk.pending
	c.trk.pending = nil
	for _, p := range pending {
		c.s.sendInvalidationLocked(c, p.keys, p.null, true)
	}
	t.mu.Unlock()
}

// invalidate is the stores' modified hook: keys changed by an applied
// batch's commands, and deleted by the expiry or the eviction (flushed:
// the whole keyspace was replaced).
func (s *Server) invalidate(keys, deleted []string, flushed bool) {
	if !s.trackingOn() && !flushed {
		return
	}
	t := &s.trk
	t.mu.Lock()
	defer t.mu.Unlock()
	defer s.setStoresTracking() // off once no client tracks and the table is empty
	if flushed {
		for _, c := range t.recv {
			if !c.trk.on {
				continue
			}
			if c.trk.writing {
				c.trk.pending = append(c.trk.pending, pendingInval{null: true})
				continue
			}
			s.sendInvalidationLocked(c, nil, true, false)
		}
		t.keys, t.items = nil, 0
	}
	var bcast map[string][]string
	var sys map[string]bool // keys the expiry or the eviction deleted
	if len(deleted) > 0 {
		sys = make(map[string]bool, len(deleted))
		for _, k := range deleted {
			sys[k] = true
		}
		keys = append(deleted, keys...)
	}
	// A key changed twice in a batch is invalidated once, as the first
	// change in Redis forgets who tracked it.
	keys = dedupKeys(keys)
	for _, k := range keys {
		if len(t.prefixes) > 0 {
			for p := range t.prefixes {
				if strings.HasPrefix(k, p) {
					if bcast == nil {
						bcast = make(map[string][]string)
					}
					bcast[p] = append(bcast[p], k)
				}
			}
		}
		s.invalidateKeyLocked(k, sys[k])
	}
	for p, ks := range bcast {
		ks = dedupKeys(ks)
		for c := range t.prefixes[p] {
			send := ks
			if c.trk.writing {
				if c.trk.noloop {
					send = nil
					for _, k := range ks {
						if c.trk.self[k] == 0 || sys[k] {
							send = append(send, k)
						}
					}
					if len(send) == 0 {
						continue
					}
				}
				c.trk.pending = append(c.trk.pending, pendingInval{keys: send})
				continue
			}
			s.sendInvalidationLocked(c, send, false, false)
		}
	}
}

// invalidateKeyLocked sends the invalidation of key to the clients that
// track it, and forgets them.
func (s *Server) invalidateKeyLocked(k string, sys bool) {
	t := &s.trk
	ids, ok := t.keys[k]
	if !ok {
		return
	}
	delete(t.keys, k)
	t.items -= len(ids)
	var keep map[int64]struct{}
	for id := range ids {
		c := t.recv[id]
		if c == nil || !c.trk.on || c.trk.bcast {
			continue
		}
		if !sys && c.trk.self[k] > 0 {
			// The client's own write: the invalidation follows its
			// reply.
			out := c.trk.selfOut[k]
			if !c.trk.noloop && out&selfQuiet == 0 {
				c.trk.pending = append(c.trk.pending, pendingInval{keys: []string{k}})
			}
			if out&selfKeep != 0 {
				if keep == nil {
					keep = make(map[int64]struct{}, 1)
				}
				keep[id] = struct{}{}
			}
			continue
		}
		s.sendInvalidationLocked(c, []string{k}, false, false)
	}
	if keep != nil {
		t.keys[k] = keep
		t.items += len(keep)
	}
}

func dedupKeys(ks []string) []string {
	if len(ks) < 2 {
		return ks
	}
	seen := make(map[string]struct{}, len(ks))
	out := ks[:0]
	for _, k := range ks {
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}

// sendInvalidationLocked is Redis's sendTrackingMessage: keys (or a null,
// for a flush) to c, or to the client c redirects to. own says the caller
// is c's connection, which writes to c.out itself.
func (s *Server) sendInvalidationLocked(c *client, keys []string, null, own bool) {
	t := &s.trk
	dst, redirected := c, false
	if c.trk.redirect != 0 {
		r := t.recv[c.trk.redirect]
		if r == nil && !s.clientExists(c.trk.redirect) {
			c.trk.broken = true
			if int(c.protoSeen.Load()) == 3 {
				b := appendPushHeader(nil, 2, 3)
				b = appendBulkString(b, "tracking-redir-broken")
				b = appendInt(b, c.trk.redirect)
				s.pushTo(c, b, own)
			}
			return
		}
		if r == nil {
			return // a RESP2 connection not subscribed: nothing to send
		}
		dst, redirected, own = r, true, own && r == c
	}
	proto := int(dst.protoSeen.Load())
	var b []byte
	switch {
	case proto == 3:
		b = appendPushHeader(nil, 2, 3)
		b = appendBulkString(b, "invalidate")
	case redirected && dst.subscribed():
		b = appendPushHeader(nil, 3, 2)
		b = appendBulkString(b, "message")
		b = appendBulkString(b, "__redis__:invalidate")
	default:
		return // RESP2 has no pushes on the connection itself
	}
	if null {
		b = appendNull(b, proto)
	} else {
		b = appendArrayLen(b, len(keys))
		for _, k := range keys {
			b = appendBulkString(b, k)
		}
	}
	s.pushTo(dst, b, own)
}

// pushTo queues frame for c: in c.out when c's own connection sends it,
// else through c's pushState.
func (s *Server) pushTo(c *client, frame []byte, own bool) {
	if own {
		c.out = append(c.out, frame...)
		if c.replyMode != 0 {
			c.pushedEnd = len(c.out)
		}
		return
	}
	if c.ps == nil {
		return
	}
	s.deliver(c, frame)
}

// limitTrackingLocked is Redis's trackingLimitUsedSlots: past
// tracking-table-max-keys, tracked keys are invalidated, picked at random,
// with more effort each time the table stays over the limit.
func (s *Server) limitTrackingLocked() {
	t := &s.trk
	max := int(t.maxKeys.Load())
	if max == 0 || len(t.keys) <= max {
		t.evictEffort = 0
		return
	}
	effort := 100 * (t.evictEffort + 1)
	for ; effort > 0 && len(t.keys) > 0; effort-- {
		// Go's map order is not uniform; a random skip spreads the picks.
		skip := rand.IntN(min(len(t.keys), 16))
		var victim string
		for k := range t.keys {
			victim = k
			if skip == 0 {
				break
			}
			skip--
		}
		s.invalidateKeyLocked(victim, true)
		if len(t.keys) <= max {
			t.evictEffort = 0
			return
		}
	}
	t.evictEffort++
}

// setTrackingMaxKeys applies tracking-table-max-keys.
func (s *Server) setTrackingMaxKeys(n int64) {
	s.trk.maxKeys.Store(n)
	s.trk.mu.Lock()
	// Redis goes on from its cron with more effort each time; here at
	// once.
	for n > 0 && len(s.trk.keys) > int(n) {
		s.limitTrackingLocked()
	}
	s.trk.mu.Unlock()
}

// trackingStats are INFO's tracking_total_keys, tracking_total_items and
// tracking_total_prefixes.
func (s *Server) trackingStats() (keys, items, prefixes int) {
	t := &s.trk
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys), t.items, len(t.prefixes)
}
