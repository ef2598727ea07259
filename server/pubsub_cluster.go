package server

import (
	"bufio"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"kvs/resp"
)

// In a cluster, a message published on any node reaches the subscribers of
// every node, as Redis Cluster's PUBLISH does over its cluster bus: the node
// that takes PUBLISH (or SPUBLISH: kvs's cluster is one shard, and every
// node is in it) delivers it to its own subscribers and queues one
// KVS.PUBLISH request per other member, each on that member's link. A link
// is one connection to the member's client address, written by one
// goroutine, so the messages of one node reach another in the order they
// were published; the receiver delivers them to its own subscribers and
// never passes them on, so each subscriber gets each message once.
// KVS.PUBLISH has no reply; the link reads to notice that the connection
// ended, or that the member refuses it.
//
// Delivery is at most once, as in Redis: a message is not logged or
// retried. While a member is unreachable, its link drops what it cannot
// send (and, past maxLinkQueue bytes queued, what it cannot queue); a
// message written to a connection that then fails may be lost. Nothing of
// pub/sub is in the Raft log or the append log, so a restart or a lagging
// follower never replays a message. The links follow the membership,
// refreshed by the cron loop every linkRefresh: a member that joins starts
// receiving within about that long.
//
// A link logs in as the node's peer login (acl_peer.go) with AUTH, and
// reads AUTH's reply before it writes anything else: a member that refuses
// the login is logged (once per login) and, while it refuses, dialled at
// most once per linkRefresh, its messages dropped. A node with no password
// sends no AUTH; a member with one answers its messages NOAUTH, logged
// once per connection. When the node's login
// changes, each link closes a connection that logged in otherwise and the
// next message dials anew.

const (
	// maxLinkQueue bounds the bytes queued for one member.
	maxLinkQueue = 32 << 20
	linkRefresh  = time.Second
)

// broadcaster holds a link per other member of the cluster.
type broadcaster struct {
	mu        sync.Mutex // guards the fields below
	links     map[string]*peerLink
	closed    bool
	refreshed time.Time

	wg      sync.WaitGroup // the links' goroutines
	dropped atomic.Int64   // messages dropped: member unreachable, queue full
}

type peerLink struct {
	addr    string
	timeout time.Duration
	dial    func(addr string, timeout time.Duration) (net.Conn, error) // Server.dialNode
	login   func() peerLogin                                           // Server.peerLogin
	log     *slog.Logger
	b       *broadcaster

	// refused is the login the member last refused, and when; only the
	// link's goroutine uses them.
	refused   *peerLogin
	refusedAt time.Time

	mu    sync.Mutex // guards queue, spare and n
	queue []byte     // KVS.PUBLISH requests not yet written
	spare []byte
	n     int // requests in queue

	wake chan struct{} // capacity 1: queue has requests
	stop chan struct{} // closed: return
}

// broadcast sends a message to every other member of the cluster.
func (s *Server) broadcast(shard bool, channel, payload []byte) {
	if !s.router.clustered() {
		return
	}
	b := &s.bcast
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.links) == 0 {
		return
	}
	flag := "0"
	if shard {
		flag = "1"
	}
	req := appendArrayLen(nil, 4)
	req = appendBulkString(req, "KVS.PUBLISH")
	req = appendBulkString(req, flag)
	req = appendBulk(req, channel)
	req = appendBulk(req, payload)
	for _, l := range b.links {
		l.enqueue(req)
	}
}

func (l *peerLink) enqueue(req []byte) {
	l.mu.Lock()
	if len(l.queue)+len(req) > maxLinkQueue {
		l.mu.Unlock()
		l.b.dropped.Add(1)
		return
	}
	l.queue = append(l.queue, req...)
	l.n++
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// refreshLinks makes the links match the cluster's members, at most once
// per linkRefresh; the cron loop calls it.
func (s *Server) refreshLinks(now time.Time) {
	cl := s.router.cluster
	if cl == nil {
		return
	}
	b := &s.bcast
	b.mu.Lock()
	due := !b.closed && now.Sub(b.refreshed) >= linkRefresh
	if due {
		b.refreshed = now
	}
	b.mu.Unlock()
	if !due {
		return
	}
	ms, err := cl.Members()
	if err != nil {
		return // the next refresh tries again
	}
	self := cl.Self().ID
	want := map[string]string{}
	for _, m := range ms {
		if m.ID != self && m.RESPAddr != "" {
			want[m.ID] = m.RESPAddr
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for id, l := range b.links {
		if want[id] != l.addr {
			close(l.stop)
			delete(b.links, id)
		}
	}
	for id, addr := range want {
		if b.links[id] != nil {
			continue
		}
		if b.links == nil {
			b.links = map[string]*peerLink{}
		}
		l := &peerLink{addr: addr, timeout: s.cfg.ForwardTimeout, dial: s.dialNode, login: s.peerLogin, log: s.cfg.Logger, b: b,
			wake: make(chan struct{}, 1), stop: make(chan struct{})}
		b.links[id] = l
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			l.run()
		}()
	}
}

// relogin wakes every link, to close a connection that logged in
// otherwise than the node now does.
func (b *broadcaster) relogin() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.links {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// close stops every link and waits for them. Idempotent.
func (b *broadcaster) close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		for _, l := range b.links {
			close(l.stop)
		}
		b.links = nil
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// run is the link's goroutine: it writes what is queued, connecting when it
// has no connection, and drops what it cannot write.
func (l *peerLink) run() {
	var conn *linkConn
	defer func() {
		if conn != nil {
			conn.close()
		}
	}()
	for {
		select {
		case <-l.wake:
		case <-l.stop:
			return
		}
		l.mu.Lock()
		q, n := l.queue, l.n
		l.queue, l.spare, l.n = l.spare[:0], nil, 0
		l.mu.Unlock()
		login := l.login()
		if conn != nil && (conn.ended() || conn.login != login) {
			conn.close()
			conn = nil
		}
		if len(q) == 0 {
			continue
		}
		if conn == nil {
			conn = l.connect(login)
		}
		if conn == nil || !conn.write(q, l.timeout) {
			if conn != nil {
				conn.close()
				conn = nil
			}
			l.b.dropped.Add(int64(n))
		}
		l.mu.Lock()
		if cap(q) <= 1<<20 {
			l.spare = q[:0]
		}
		l.mu.Unlock()
	}
}

// linkConn is a link's connection and the goroutine that reads it, which
// sees the connection end.
type linkConn struct {
	nc    net.Conn
	login peerLogin
	done  chan struct{} // closed when the reader returns
}

// connect dials the member and logs in as login; nil if either fails, or
// if the member refused login less than linkRefresh ago.
func (l *peerLink) connect(login peerLogin) *linkConn {
	if l.refused != nil && *l.refused == login && time.Since(l.refusedAt) < linkRefresh {
		return nil
	}
	nc, err := l.dial(l.addr, l.timeout)
	if err != nil {
		return nil
	}
	br := bufio.NewReader(nc)
	if auth := login.auth(); auth != nil {
		nc.SetDeadline(time.Now().Add(l.timeout))
		if _, err := nc.Write(auth); err != nil {
			nc.Close()
			return nil
		}
		r, err := resp.ReadReply(br, resp.Limits{})
		if err != nil {
			nc.Close()
			return nil
		}
		if r.Kind == resp.KindError {
			nc.Close()
			if l.refused == nil || *l.refused != login {
				l.refusedWarn(login, string(r.Str))
			}
			l.refused, l.refusedAt = &login, time.Now()
			return nil
		}
		nc.SetDeadline(time.Time{})
	}
	l.refused = nil
	c := &linkConn{nc: nc, login: login, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		// KVS.PUBLISH has no reply: an error is a refusal (NOAUTH, from a
		// member with a password this node has not been given), said once
		// per connection.
		warned := false
		for {
			r, err := resp.ReadReply(br, resp.Limits{})
			if err != nil {
				return
			}
			if r.Kind == resp.KindError && !warned {
				warned = true
				l.refusedWarn(login, string(r.Str))
			}
		}
	}()
	return c
}

func (l *peerLink) refusedWarn(login peerLogin, text string) {
	l.log.Warn("a member refused this node's login on its pub/sub link; messages to it are dropped until masteruser and masterauth give a login it accepts",
		"member", l.addr, "user", login.user, "err", text)
}

func (c *linkConn) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *linkConn) write(b []byte, timeout time.Duration) bool {
	c.nc.SetWriteDeadline(time.Now().Add(timeout))
	_, err := c.nc.Write(b)
	return err == nil
}

// close closes the connection and waits for its reader.
func (c *linkConn) close() {
	c.nc.Close()
	<-c.done
}
