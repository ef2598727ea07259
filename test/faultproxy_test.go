package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// A Proxy listens on its own loopback address and forwards every accepted
// connection to a target address, injecting faults on the way. It needs no
// root and no firewall, so chaos tests run the same on every OS.
//
// Faults (Cut, Reset, CutOneWay, Delay, Drop, SetLink) take effect at once
// for existing and new connections; Heal undoes all of them. TCP cannot lose
// bytes and carry on, so:
//
//   - Drop closes a connection instead of dropping a chunk;
//   - a connection that had bytes discarded (Cut, CutOneWay or a link) can
//     never be forwarded again: its stream has a hole. Healing closes every
//     such connection, and the peers redial (raft's TCP transport does so on the
//     next RPC). Connections that were only delayed survive Heal.
//
// Each direction of a connection has a reader, which stamps every chunk
// (up to 32 KiB) with the time it arrived, and a writer, which forwards it
// once the delay in force at arrival has passed. The pair keeps a steady
// stream at its true latency; one goroutine that slept per chunk would add
// the delay once per chunk queued behind it. Cuts and Drop are decided by
// the writer, when a chunk is due, so a fault also catches chunks that were
// already waiting in a delay.
//
// # A Proxy per raft listener
//
// A kvs node binds and advertises one Raft address (--raft-addr), and the
// replicated configuration holds one address per server that every peer
// dials. kvs has no flag to advertise an address other than the bound one,
// but the configuration can be pointed at a proxy after the cluster has
// formed: KVS.JOIN <id> <proxy addr> <client addr> sent to the leader moves
// a known id to a new address (cluster.Node.AddVoter). From then on every
// peer dials node j through proxy j. (A node restarted with --join re-joins
// with its bound address and so leaves its proxy; restart without --join.)
//
// In hashicorp/raft the node that sends an RPC dials the connection and
// reads the response from it. So proxy j carries every RPC *to* j from all
// peers, requests (ToTarget) and responses (FromTarget), and nothing that j
// sends: j's own RPCs go through the other nodes' proxies. All peers'
// connections arrive from 127.0.0.1 on ephemeral ports, so the address
// does not tell which peer is calling; the first request does.
//
// # Links: faults per (caller, callee) pair
//
// A proxy learns who is calling from the first request on each
// connection. Every hashicorp/raft request (AppendEntries, RequestVote,
// RequestPreVote, InstallSnapshot, TimeoutNow) starts with a one-byte RPC
// type followed by the msgpack-encoded request, whose RPCHeader carries the
// sender's server ID and address; and a connection carries one sender's
// RPCs only, since each transport dials its own. The proxy decodes that
// first request (it waits at most sniffTimeout for it, then forwards what
// it read untouched), remembers the sender's ID for the connection, and
// forwards the bytes it read.
//
// A node of a sharded cluster serves the raft traffic of all its groups
// on its one raft port, a connection per group: a connection to a group
// other than 0 opens with a header, muxMagic and the group's id (four
// bytes, big-endian), before raft's first request; group 0's carry none.
// The proxy reads past the header to the request, forwards the header
// with it untouched, and counts the connection under its group as well
// as its sender (ProxyStats.Groups), so a proxy in front of a node's raft
// port cuts, delays and links every group's traffic to that node alike.
//
// Link faults are then kept per sender: SetLink(from, toTarget,
// fromTarget) on proxy j discards the requests that node "from" sends to
// j, the replies j sends back to "from" on those connections, or both. A
// one-way network fault "nothing from i reaches j" is therefore
// SetLink(i, true, false) on proxy j (i's requests to j vanish) plus
// SetLink(j, false, true) on proxy i (j's requests arrive at i, but i's
// answers do not get back). RaftProxies.Block takes a table of blocked
// directed links and does exactly that translation, so any partition of
// any number of nodes can be expressed: isolating the leader both ways, a
// 1|2 split on either side of the leader, a bridge (A and C cut, B
// reaching both), one direction of one pair, and flapping a pair.
//
// Faults on the whole proxy (Cut, Reset, CutOneWay, Delay, Drop) still act
// on every caller alike, and connections whose sender the proxy could not
// learn (anything that is not raft) get those only. For node j they model:
//   - j deaf: Cut or Reset proxy j. No heartbeat, entry, vote or snapshot
//     reaches j; j's own vote requests still reach the others and are
//     answered. A deaf follower falls behind and campaigns; a deaf leader
//     keeps leading, because followers only dial the leader to campaign.
//   - lost acknowledgements: CutOneWay(FromTarget) on proxy j. j receives
//     and applies entries but its callers never learn that it did.
//   - a slow node: Delay on proxy j adds 2d to the round trip of every RPC
//     to j (d each way).
//   - a flaky node: Drop or repeated Reset/Heal forces redials.
//   - a restart on another port: SetTarget (or move the id with KVS.JOIN).
type Proxy struct {
	ln   net.Listener
	ctx  context.Context // cancelled by Close: stops dials and delay waits
	stop context.CancelFunc
	wg   sync.WaitGroup // every goroutine the proxy starts

	accepted, dropped           atomic.Int64
	toTarget, fromTarget, trash atomic.Int64 // bytes forwarded each way, bytes discarded

	mu     sync.Mutex // guards the fields below
	closed bool
	target string
	f      proxyFaults
	links  map[string][2]bool // sender ID -> per Direction: discard
	// groupCuts discards both directions of the connections of one raft
	// group: from a given sender, or from any ("").
	groupCuts map[groupSender]bool
	senders   map[string]int64            // connections by sender ID; "" for unknown
	groups    map[uint32]map[string]int64 // identified connections by raft group, then sender
	rng       *rand.Rand                  // Drop's source, not safe for concurrent use
	conns     map[*proxyConn]struct{}
	// identify, when set, names the sender of a connection from its
	// remote address before any byte is read (see SetIdentify).
	identify func(remote, local net.Addr) (from string, gone bool)
}

// SetIdentify makes the proxy learn each connection's sender from
// identify(remote address, local address) instead of from its first raft
// request, for traffic it cannot read (raft over TLS). A connection whose sender is
// gone (it died right after dialing) is not counted, as a connection
// closed before its first request is not; one identify cannot name falls
// back to the sniff.
func (p *Proxy) SetIdentify(identify func(remote, local net.Addr) (from string, gone bool)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.identify = identify
}

// Direction names one direction of a proxied connection.
type Direction int

const (
	ToTarget   Direction = iota // from the dialer to the target
	FromTarget                  // from the target back to the dialer
)

func (d Direction) String() string {
	if d == ToTarget {
		return "to-target"
	}
	return "from-target"
}

// ProxyStats counts a proxy's traffic since it was created.
type ProxyStats struct {
	Accepted   int64 // connections accepted, including those closed at once
	Dropped    int64 // connections closed by Drop
	ToTarget   int64 // bytes forwarded to the target
	FromTarget int64 // bytes forwarded back to the dialer
	Discarded  int64 // bytes read and thrown away by Cut, CutOneWay or a link
	// Senders counts connections by the sender ID their first raft
	// request named; "" counts those forwarded without a known sender
	// (not raft, or silent for sniffTimeout). A connection closed before
	// its first request was complete is not counted.
	Senders map[string]int64
	// Groups counts the connections whose sender the first request
	// named by their raft group (0 when the connection had no group
	// header), then by sender. A sender named by SetIdentify is counted
	// in Senders only: its traffic, TLS, cannot be read.
	Groups map[uint32]map[string]int64
}

// groupSender names the connections of one raft group from one sender, or
// from any when from is "".
type groupSender struct {
	group uint32
	from  string
}

// CutGroup discards, both ways, the traffic of the connections of raft
// group g from the node with server ID from, or from any node when from
// is "": a partition of one group that leaves the node's other groups
// alone. Heal or HealGroup lifts it. Connections whose group is not known
// (a sender named by SetIdentify) are left alone.
func (p *Proxy) CutGroup(g uint32, from string) {
	p.mu.Lock()
	if p.groupCuts == nil {
		p.groupCuts = map[groupSender]bool{}
	}
	p.groupCuts[groupSender{g, from}] = true
	p.mu.Unlock()
}

// HealGroup lifts the CutGroup cuts of group g, closing its connections
// that lost bytes.
func (p *Proxy) HealGroup(g uint32) {
	p.mu.Lock()
	for k := range p.groupCuts {
		if k.group == g {
			delete(p.groupCuts, k)
		}
	}
	p.mu.Unlock()
	p.closeHealed()
}

// proxyFaults is the fault state; its zero value forwards everything.
type proxyFaults struct {
	discard [2]bool // per Direction: read and throw away
	reset   bool    // close existing connections and every new one
	delay   time.Duration
	drop    float64 // probability per chunk of closing the connection
}

// NewProxy listens on 127.0.0.1:0 and forwards to target. It is closed at
// t's cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &Proxy{
		ln: ln, ctx: ctx, stop: stop, target: target, conns: map[*proxyConn]struct{}{},
		links: map[string][2]bool{}, senders: map[string]int64{}, groups: map[uint32]map[string]int64{},
	}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget makes new connections go to addr; existing ones keep theirs.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

// Cut blackholes both directions: connections stay open, every byte is read
// and discarded, and new connections are accepted but never reach the
// target. It is a partition in which packets vanish, so peers notice only
// by their timeouts.
func (p *Proxy) Cut() {
	p.setFaults(func(f *proxyFaults) { f.discard = [2]bool{true, true} })
}

// Reset closes every connection, and every new one as soon as it is
// accepted, until Heal: a partition in which the peer answers with resets.
func (p *Proxy) Reset() {
	p.setFaults(func(f *proxyFaults) { f.reset = true })
	p.closeConns(func(*proxyConn) bool { return true })
}

// CutOneWay discards the bytes flowing in dir and forwards the other
// direction.
func (p *Proxy) CutOneWay(dir Direction) {
	p.setFaults(func(f *proxyFaults) {
		f.discard = [2]bool{}
		f.discard[dir] = true
	})
}

// Delay forwards every chunk d after it arrived, in order. Zero removes the
// delay for chunks arriving from now on.
func (p *Proxy) Delay(d time.Duration) {
	p.setFaults(func(f *proxyFaults) { f.delay = d })
}

// Drop closes a connection with probability prob for each chunk it
// forwards, drawing from rng (which the proxy then owns).
func (p *Proxy) Drop(prob float64, rng *rand.Rand) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f.drop, p.rng = prob, rng
}

// Heal removes every fault, links included, and closes the connections
// that lost bytes to Cut, CutOneWay or a link, so that peers redial on a
// clean stream.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.f = proxyFaults{}
	clear(p.links)
	clear(p.groupCuts)
	p.mu.Unlock()
	p.closeHealed()
}

// SetLink sets the link faults for connections whose sender is the node
// with server ID from: toTarget discards its requests, fromTarget the
// target's replies to it. Both false heals the link, closing its
// connections that lost bytes. It takes effect at once for existing and
// new connections.
func (p *Proxy) SetLink(from string, toTarget, fromTarget bool) {
	p.mu.Lock()
	if toTarget || fromTarget {
		p.links[from] = [2]bool{toTarget, fromTarget}
	} else {
		delete(p.links, from)
	}
	p.mu.Unlock()
	p.closeHealed()
}

// closeHealed closes every connection that lost bytes in a direction no
// longer cut: its stream has a hole, and its peers must redial.
func (p *Proxy) closeHealed() {
	p.closeConns(func(c *proxyConn) bool {
		for _, dir := range []Direction{ToTarget, FromTarget} {
			if c.lossy[dir].Load() && !p.discardingLocked(c, dir) {
				return true
			}
		}
		return false
	})
}

// discardingLocked reports whether bytes of c flowing in dir are to be
// discarded now. p.mu must be held.
func (p *Proxy) discardingLocked(c *proxyConn, dir Direction) bool {
	if p.f.discard[dir] {
		return true
	}
	from, ok := c.sender()
	if g := c.group.Load(); ok && g != nil && (p.groupCuts[groupSender{*g, ""}] || p.groupCuts[groupSender{*g, from}]) {
		return true
	}
	return ok && p.links[from][dir]
}

func (p *Proxy) discarding(c *proxyConn, dir Direction) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.discardingLocked(c, dir)
}

// Stats returns the counters so far.
func (p *Proxy) Stats() ProxyStats {
	p.mu.Lock()
	senders := maps.Clone(p.senders)
	groups := map[uint32]map[string]int64{}
	for g, by := range p.groups {
		groups[g] = maps.Clone(by)
	}
	p.mu.Unlock()
	return ProxyStats{
		Senders:    senders,
		Groups:     groups,
		Accepted:   p.accepted.Load(),
		Dropped:    p.dropped.Load(),
		ToTarget:   p.toTarget.Load(),
		FromTarget: p.fromTarget.Load(),
		Discarded:  p.trash.Load(),
	}
}

// Close stops listening, closes every connection and waits for all of the
// proxy's goroutines. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.stop()
	p.ln.Close()
	p.closeConns(func(*proxyConn) bool { return true })
	p.wg.Wait()
}

func (p *Proxy) setFaults(change func(*proxyFaults)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change(&p.f)
}

func (p *Proxy) faults() proxyFaults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f
}

// rollDrop reports whether Drop picks this chunk's connection to close.
func (p *Proxy) rollDrop() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f.drop > 0 && p.rng != nil && p.rng.Float64() < p.f.drop
}

func (p *Proxy) closeConns(which func(*proxyConn) bool) {
	p.mu.Lock()
	var doomed []*proxyConn
	for c := range p.conns {
		if which(c) {
			doomed = append(doomed, c)
		}
	}
	p.mu.Unlock()
	for _, c := range doomed {
		c.close()
	}
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed by Close
		}
		p.accepted.Add(1)
		c := &proxyConn{p: p, client: client, done: make(chan struct{})}
		if !p.register(c) {
			client.Close()
			continue
		}
		p.wg.Add(1)
		go c.run()
	}
}

// register adds c to the live set unless the proxy is closed or resetting.
func (p *Proxy) register(c *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.f.reset {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) unregister(c *proxyConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// A proxyConn is one accepted connection and, unless it was accepted
// during a Cut, its connection to the target.
type proxyConn struct {
	p      *Proxy
	client net.Conn
	lossy  [2]atomic.Bool // per Direction: bytes were discarded, the stream has a hole
	done   chan struct{}  // closed by close
	once   sync.Once
	// from is the sender's server ID, set once by the ToTarget reader
	// before it queues the first chunk; nil until then and when unknown.
	from atomic.Pointer[string]
	// group is the connection's raft group, set with from when the first
	// request was read; nil when unknown.
	group atomic.Pointer[uint32]

	mu     sync.Mutex // guards target, which run sets after dialing
	target net.Conn   // nil when accepted during a Cut, or while dialing
}

// chunk is one read, due for forwarding at due.
type chunk struct {
	b   []byte
	due time.Time
}

// sender returns the server ID of the node that dialed c, if known.
func (c *proxyConn) sender() (string, bool) {
	if from := c.from.Load(); from != nil {
		return *from, true
	}
	return "", false
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.target != nil {
			c.target.Close()
		}
	})
}

// run dials the target and pumps both directions until the connection
// ends. A connection accepted during a Cut never dials: a blackhole does
// not reach the target, which may not even be up. It only reads and
// discards until Heal or Close closes it.
func (c *proxyConn) run() {
	p := c.p
	defer p.wg.Done()
	defer p.unregister(c)
	defer c.close()

	f := p.faults()
	if f.discard[ToTarget] && f.discard[FromTarget] {
		c.lossy[ToTarget].Store(true)
		c.pump(ToTarget, c.client, nil)
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	var d net.Dialer
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	conn, err := d.DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		return // the dialer sees a close, as if the target refused
	}
	// close may have run while dialing, when it saw no target to close.
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		conn.Close()
		return
	default:
	}
	c.target = conn
	c.mu.Unlock()

	var both sync.WaitGroup
	both.Add(2)
	for _, dir := range []Direction{ToTarget, FromTarget} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer both.Done()
			if dir == ToTarget {
				c.pump(dir, c.client, conn)
			} else {
				c.pump(dir, conn, c.client)
			}
		}()
	}
	both.Wait()
}

// pump moves one direction: this goroutine reads, a second one writes each
// chunk when it is due. It returns when the direction is finished; an error
// on either side closes the whole connection, a clean EOF is passed on as a
// half-close unless the direction is cut. A nil dst discards everything.
func (c *proxyConn) pump(dir Direction, src io.Reader, dst io.Writer) {
	p := c.p
	queue := make(chan chunk, 64)
	writerDone := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(writerDone)
		c.write(dir, queue, dst)
	}()
	// forward queues b (owned by the queue from here) and, on err, ends
	// the direction; it reports whether to go on reading.
	forward := func(b []byte, err error) bool {
		if len(b) > 0 {
			select {
			case queue <- chunk{b: b, due: time.Now().Add(p.faults().delay)}:
			case <-c.done:
				close(queue)
				<-writerDone
				return false
			}
		}
		if err != nil {
			close(queue)
			<-writerDone
			if !errors.Is(err, io.EOF) {
				c.close()
			}
			return false
		}
		return true
	}
	if dir == ToTarget {
		// The sender must be known before the first chunk is judged.
		if !forward(c.sniff()) {
			return
		}
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !forward(append([]byte(nil), buf[:n]...), err) {
			return
		}
	}
}

// sniffTimeout bounds the wait for a connection's first byte. A raft
// transport writes its request as soon as it has dialed; only a client
// that waits for the server to speak first waits this long. Once the first
// byte names a raft RPC type there is no deadline: a sender paused
// (SIGSTOP) in the middle of its first request finishes it when it wakes,
// and one that dies closes the connection.
const sniffTimeout = 2 * time.Second

// The raft RPC types that open a request, as hashicorp/raft's
// NetworkTransport numbers them: AppendEntries, RequestVote,
// InstallSnapshot, TimeoutNow, RequestPreVote.
const maxRaftRPCType = 4

// sniff reads the connection's first raft request, records its sender's ID
// in c.from, and returns every byte it read, to be forwarded first. Bytes
// that are not a raft request leave the sender unknown and are returned as
// they are. A read error other than the sniff's own deadline is returned
// with the bytes read before it; a connection that ends before its first
// request is complete carries nothing a link fault could miss.
func (c *proxyConn) sniff() ([]byte, error) {
	p := c.p
	p.mu.Lock()
	identify := p.identify
	p.mu.Unlock()
	if identify != nil {
		from, gone := identify(c.client.RemoteAddr(), c.client.LocalAddr())
		if from != "" {
			c.from.Store(&from)
			p.mu.Lock()
			p.senders[from]++
			p.mu.Unlock()
			return nil, nil
		}
		if gone {
			return nil, nil
		}
	}
	var got bytes.Buffer
	c.client.SetReadDeadline(time.Now().Add(sniffTimeout))
	defer c.client.SetReadDeadline(time.Time{})
	r := bufio.NewReader(io.TeeReader(c.client, &got))
	from, group, err := readRaftSender(r, func() { c.client.SetReadDeadline(time.Time{}) })
	switch {
	case err == nil:
		c.group.Store(&group)
		c.from.Store(&from)
		p.mu.Lock()
		p.senders[from]++
		if p.groups[group] == nil {
			p.groups[group] = map[string]int64{}
		}
		p.groups[group][from]++
		p.mu.Unlock()
		return got.Bytes(), nil
	case errors.Is(err, errNotRaft), errors.Is(err, os.ErrDeadlineExceeded):
		p.mu.Lock()
		p.senders[""]++
		p.mu.Unlock()
		return got.Bytes(), nil // forward what was read, and carry on
	case errors.Is(err, io.ErrUnexpectedEOF):
		return got.Bytes(), io.EOF
	default:
		return got.Bytes(), err
	}
}

var errNotRaft = errors.New("not a raft request")

// muxMagic opens the header that names a connection's raft group other
// than 0 (kvs's cluster.Mux): muxMagic, then the group id as four bytes,
// big-endian. raft's own first byte, an RPC type, is never muxMagic.
const muxMagic = 0xF7

// readRaftSender decodes one raft request from r, after the group header
// if there is one, and returns the server ID in its RPCHeader (or, from a
// sender too old to send IDs, its address) and the group. It calls
// isRaft once the first byte names a group header or a raft RPC type.
func readRaftSender(r *bufio.Reader, isRaft func()) (from string, group uint32, err error) {
	typ, err := r.ReadByte()
	if err != nil {
		return "", 0, err
	}
	if typ == muxMagic {
		isRaft()
		var id [4]byte
		if _, err := io.ReadFull(r, id[:]); err != nil {
			return "", 0, noEOF(err)
		}
		group = binary.BigEndian.Uint32(id[:])
		if typ, err = r.ReadByte(); err != nil {
			return "", 0, noEOF(err)
		}
	}
	if typ > maxRaftRPCType {
		return "", 0, errNotRaft
	}
	isRaft()
	// The request structs embed RPCHeader, which the msgpack codec
	// inlines: ID and Addr are top-level fields of the request.
	var req struct {
		ID   []byte
		Addr []byte
	}
	if err := codec.NewDecoder(r, &codec.MsgpackHandle{}).Decode(&req); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrDeadlineExceeded) {
			return "", 0, err
		}
		return "", 0, fmt.Errorf("%w: %v", errNotRaft, err)
	}
	switch {
	case len(req.ID) > 0:
		return string(req.ID), group, nil
	case len(req.Addr) > 0:
		return string(req.Addr), group, nil
	}
	return "", 0, fmt.Errorf("%w: no sender in the RPC header", errNotRaft)
}

// noEOF turns an end of stream inside a header into the unexpected end it
// is: the connection closed before its first request was complete.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// write forwards queued chunks of one direction, each when it is due and
// subject to the faults in force then. When the queue ends cleanly it
// half-closes dst.
func (c *proxyConn) write(dir Direction, queue <-chan chunk, dst io.Writer) {
	p := c.p
	forwarded := &p.toTarget
	if dir == FromTarget {
		forwarded = &p.fromTarget
	}
	for ch := range queue {
		if wait := time.Until(ch.due); wait > 0 && dst != nil {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.done:
				t.Stop()
				continue // drain, so the reader never blocks on a dead queue
			}
		}
		// Once a direction has a hole nothing more may pass, even in the
		// moment between Heal lifting the cut and closing the connection.
		if dst == nil || c.lossy[dir].Load() || p.discarding(c, dir) {
			c.lossy[dir].Store(true)
			p.trash.Add(int64(len(ch.b)))
			continue
		}
		if p.rollDrop() {
			p.dropped.Add(1)
			c.close()
			continue
		}
		if _, err := dst.Write(ch.b); err != nil {
			c.close()
			continue
		}
		forwarded.Add(int64(len(ch.b)))
	}
	// A FIN after a hole would tell the peer the stream ended cleanly.
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && !c.lossy[dir].Load() {
		cw.CloseWrite()
	}
}

// RaftProxies is one Proxy in front of each node's raft listener, index i
// for node i, which has server ID IDs[i]. See Proxy for how to point the
// raft configuration at them.
type RaftProxies struct {
	IDs []string
	P   []*Proxy
}

// NewRaftProxies starts a proxy for each raft address; ids[i] is the
// server ID of the node listening at raftAddrs[i].
func NewRaftProxies(t testing.TB, ids, raftAddrs []string) RaftProxies {
	t.Helper()
	if len(ids) != len(raftAddrs) {
		t.Fatalf("faultproxy: %d ids for %d addresses", len(ids), len(raftAddrs))
	}
	ps := RaftProxies{IDs: append([]string(nil), ids...), P: make([]*Proxy, len(raftAddrs))}
	for i, a := range raftAddrs {
		ps.P[i] = NewProxy(t, a)
	}
	return ps
}

// Block applies a table of blocked directed links, replacing the links set
// before: blocked[i][j] means nothing node i sends reaches node j, neither
// i's requests to j nor i's replies to j's requests. The diagonal is
// ignored. Faults on whole proxies (Cut, Delay, ...) are left as they are.
func (ps RaftProxies) Block(blocked [][]bool) error {
	n := len(ps.P)
	if len(blocked) != n {
		return fmt.Errorf("faultproxy: %d rows for %d nodes", len(blocked), n)
	}
	for i, row := range blocked {
		if len(row) != n {
			return fmt.Errorf("faultproxy: row %d has %d columns for %d nodes", i, len(row), n)
		}
	}
	for j, p := range ps.P {
		for i := range n {
			if i != j {
				// On proxy j, connections from i carry i's requests to j
				// and j's replies to i.
				p.SetLink(ps.IDs[i], blocked[i][j], blocked[j][i])
			}
		}
	}
	return nil
}

// Partition cuts every link between nodes in different groups, both ways,
// and heals every other link. A node in no group keeps all its links.
func (ps RaftProxies) Partition(groups ...[]int) error {
	blocked := noLinks(len(ps.P))
	group := map[int]int{}
	for g, members := range groups {
		for _, i := range members {
			group[i] = g + 1
		}
	}
	for i := range blocked {
		for j := range blocked[i] {
			blocked[i][j] = group[i] != 0 && group[j] != 0 && group[i] != group[j]
		}
	}
	return ps.Block(blocked)
}

// noLinks returns an n×n table with nothing blocked.
func noLinks(n int) [][]bool {
	t := make([][]bool, n)
	for i := range t {
		t[i] = make([]bool, n)
	}
	return t
}

// Deafen cuts every RPC to the given nodes; the RPCs they send still flow.
func (ps RaftProxies) Deafen(nodes ...int) {
	for _, j := range nodes {
		ps.P[j].Cut()
	}
}

// IsolateGroup cuts node i off from the others in raft group g alone,
// both ways: the RPCs of g to i, and those i sends in g. i's other groups
// go on as before.
func (ps RaftProxies) IsolateGroup(g uint32, i int) {
	for j, p := range ps.P {
		if j == i {
			p.CutGroup(g, "")
		} else {
			p.CutGroup(g, ps.IDs[i])
		}
	}
}

// CutGroupEverywhere cuts every connection of raft group g: no node
// reaches another in g, so g loses its leader.
func (ps RaftProxies) CutGroupEverywhere(g uint32) {
	for _, p := range ps.P {
		p.CutGroup(g, "")
	}
}

// HealGroup lifts the cuts of group g on every proxy.
func (ps RaftProxies) HealGroup(g uint32) {
	for _, p := range ps.P {
		p.HealGroup(g)
	}
}

// HealAll heals every proxy, links included.
func (ps RaftProxies) HealAll() {
	for _, p := range ps.P {
		p.Heal()
	}
}
