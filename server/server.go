package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"kvs/config"
	"kvs/fsm"
)

// Server is a RESP server over one fsm.Store. Create it with New; start it
// with ListenAndServe (or Listen then Serve); stop it with Shutdown or Close.
type Server struct {
	cfg      Config
	router   router // where commands run (router.go)
	commands map[string]*command
	started  time.Time

	// maxClients and maxBulk are read on every accept and every request
	// read; CONFIG SET changes them.
	maxClients atomic.Int64
	maxBulk    atomic.Int64
	// hllSparseMax is hll-sparse-max-bytes, which PFADD and PFMERGE
	// carry to the store (cmd_hll.go).
	hllSparseMax atomic.Int64
	// params holds the Redis parameters kvs keeps without acting on them
	// (package config).
	params *config.Store
	// configDefaults are the parameters' values before any config file or
	// CONFIG SET: what CONFIG REWRITE leaves out.
	configDefaults map[string]string
	// maxQuery is client-query-buffer-limit, read before each read.
	maxQuery atomic.Int64
	// luaLimit is lua-time-limit (busy-reply-threshold) in ms, nil for
	// the default, which the store is given (busy.go); writeBudget is
	// script-write-budget (config_script.go).
	luaLimit    atomic.Pointer[int64]
	writeBudget atomic.Int64
	// protectedMode is protected-mode (protected.go), read at accept.
	protectedMode atomic.Bool
	// minReplicas is min-replicas-to-write and min-replicas-max-lag
	// (replicas.go).
	minReplicas minReplicas

	activeExpiry atomic.Bool // SetActiveExpiry; read by the cron loop

	// acl is the users as the store's ACL table has them, the ACL log and
	// the ACL file (acl_users.go).
	acl aclServer

	stats stats
	// slowlog is SLOWLOG's log (slowlog.go).
	slowlog slowLog
	// latency is LATENCY's monitor (latency.go).
	latency latencyMonitor
	// pauseMode is CLIENT PAUSE's mode, loaded once per command;
	// clientPause its state (cmd_client.go).
	pauseMode   atomic.Int32
	clientPause pauseState
	// pausedClients counts the clients clientPause holds.
	pausedClients atomic.Int64
	// monitoring counts the MONITOR connections, loaded once per command;
	// monitors are they (monitor.go).
	monitoring atomic.Int32
	monitors   monitorSet
	// memPeak is INFO's used_memory_peak (info_memory.go).
	memPeak memPeak
	// lazy is INFO's lazy freeing (lazyfree.go).
	lazy lazyFree
	// replID is INFO replication's master_replid outside a cluster: 40
	// random hex digits per process, as Redis makes one at start.
	replID string
	// passive holds the expired keys reads met, for the cron loop to
	// delete where a proposal waits (expire.go).
	passive passiveQueue

	// peers holds the connections to the leader that forwarded requests
	// use (cluster mode only; unused otherwise).
	peers *peerPool
	// behindWarn limits catchUp's warnings.
	behindWarn rateLimit
	// blocked holds the clients blocked in BLPOP and friends; the store's
	// ready hook wakes them (blocking.go).
	blocked blockRegistry
	order   orderBarrier
	// pubsub holds the subscriptions (pubsub.go), pubsubLimit
	// client-output-buffer-limit's pubsub class (nil: no limit), bcast
	// the links that carry PUBLISH to the other nodes (cluster mode).
	pubsub      pubsubRegistry
	trk         trackingTable // client-side caching (tracking.go)
	pubsubLimit atomic.Pointer[outputLimit]
	// normalLimit is client-output-buffer-limit's normal class (nil: no
	// limit; outbuf.go).
	normalLimit atomic.Pointer[outputLimit]
	// maxmemory, maxmemory-policy (an fsm.EvictPolicy) and
	// maxmemory-samples; mem computes used memory; evictKick wakes the
	// cron loop's evictor (evict.go).
	maxMemory    atomic.Int64
	evictPolicy  atomic.Uint32
	evictSamples atomic.Int64
	mem          memGauge
	evictKick    chan struct{}
	bcast        broadcaster
	psConfigMu   sync.Mutex    // guards psConfig
	psConfig     pubsubConfig  // config_pubsub.go
	notifyFlags  atomic.Uint32 // the classes keyspaceEvents publishes (notify.go)

	nextClientID atomic.Int64
	migrates     migrateCache // MIGRATE's cached connections (cmd_migrate.go)
	// repl is the link to a redis-server this node replicates
	// (replicaof.go); nil: a master. replMu orders its changes.
	repl     atomic.Pointer[replica]
	replMu   sync.Mutex
	shutdown atomic.Bool // set once Shutdown or Close began

	// wg counts every goroutine the server owns: the accept loop, one per
	// connection, and the cron loop. Shutdown and Close wait for it.
	wg sync.WaitGroup

	// loops serve the connections (loop_linux.go); nil when every
	// connection has a goroutine of its own. next picks the loop of the
	// next connection.
	loops []*loop
	next  atomic.Uint32

	mu       sync.Mutex // guards the fields below
	ln       net.Listener
	tlsLn    net.Listener // the TLS client listener (tls.go); nil without one
	unixLn   net.Listener // the Unix socket's listener; nil without one
	serving  bool
	clients  map[*client]struct{}
	cronStop chan struct{}         // closed to stop the cron loop; nil until Serve
	closed   bool                  // Close or Shutdown ran (idempotence)
	streams  map[net.Conn]struct{} // backups being streamed (backup.go)
	// portClosed: CONFIG SET port 0 closed ln (listenport.go).
	portClosed bool
	// lnChanged wakes the accept loop when CONFIG SET port changes ln.
	lnChanged chan struct{}

	// saves is SAVE, BGSAVE and LASTSAVE's state, memSaver memory mode's
	// Saver (backup.go).
	saves    saveState
	memSaver memorySaver
	// shutdownReq is closed by the first SHUTDOWN (shutdown.go), stopNow
	// set before when that one must not wait for a busy script.
	shutdownReq chan struct{}
	stopNow     atomic.Bool
	// stopping is closed as the server begins to stop: WAIT and WAITAOF
	// stop waiting (wait.go).
	stopping     chan struct{}
	shutdownOnce sync.Once
}

// New returns a Server for cfg, with defaults applied and cfg validated. It
// does not listen yet.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:         cfg,
		commands:    commandTable(),
		started:     time.Now(),
		clients:     make(map[*client]struct{}),
		shutdownReq: make(chan struct{}),
		stopping:    make(chan struct{}),
		lnChanged:   make(chan struct{}, 1),
	}
	s.router.init(&s.cfg)
	s.peers = newPeerPool(cfg.ForwardTimeout, s.dialNode, s.peerLogin)
	s.peers.applyingScript = s.scriptRunning
	s.saves.last = s.started // as Redis, which counts its start as a save
	s.memSaver.s = s
	s.acl.cmds, s.acl.file = newACLCommands(s.commands), cfg.ACLFile
	s.acl.requirePass.Store(&cfg.RequirePass)
	s.activeExpiry.Store(!cfg.DisableActiveExpiry)
	s.psConfig = defaultPubsubConfig()
	s.setBufferLimits(s.psConfig.limits)
	s.installScriptParsers()
	s.router.stores(s.setHooks)
	s.writeBudget.Store(DefaultScriptWriteBudget)
	s.maxClients.Store(int64(cfg.MaxClients))
	s.params = config.NewStore()
	s.slowlog.init()
	s.maxBulk.Store(cfg.ProtoMaxBulkLen)
	s.hllSparseMax.Store(fsm.HLLSparseMaxBytes)
	s.protectedMode.Store(!cfg.DisableProtectedMode)
	s.minReplicas.maxLag.Store(defaultMinReplicasMaxLag)
	s.maxQuery.Store(cfg.ClientQueryBufferLimit)
	s.maxMemory.Store(cfg.MaxMemory)
	p, _ := parsePolicy([]byte(cfg.MaxMemoryPolicy))
	s.setPolicy(p)
	s.evictSamples.Store(DefaultMaxmemorySamples)
	s.trk.maxKeys.Store(1000000) // tracking-table-max-keys
	s.evictKick = make(chan struct{}, 1)
	s.passive.kick = make(chan struct{}, 1)
	s.configDefaults = s.configParams()
	s.replID = randomHex(20)
	s.mem.startup.Store(max(0, s.usedMemory()-s.dataBytes()))
	s.mem.watch(s.dataBytes)
	return s, nil
}

// Listen binds the configured addresses (the plain one unless
// Config.PlainDisabled, and the TLS one if configured), so that a taken
// port is reported before anything is served. It returns the net.Listen
// error unchanged, e.g. "listen tcp 127.0.0.1:6379: bind: address already
// in use".
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	if s.ln != nil || s.tlsLn != nil || s.unixLn != nil {
		return nil
	}
	if !s.cfg.PlainDisabled {
		ln, err := net.Listen("tcp", s.cfg.Addr)
		if err != nil {
			return err
		}
		s.ln = ln
	}
	closeAll := func() {
		for _, l := range []*net.Listener{&s.ln, &s.tlsLn} {
			if *l != nil {
				(*l).Close()
				*l = nil
			}
		}
	}
	if s.cfg.TLS != nil && s.cfg.TLS.Params().Addr != "" {
		ln, err := net.Listen("tcp", s.cfg.TLS.Params().Addr)
		if err != nil {
			closeAll()
			return err
		}
		s.tlsLn = ln
	}
	if s.cfg.UnixSocket != "" {
		ln, err := listenUnix(s.cfg.UnixSocket, s.cfg.UnixSocketPerm)
		if err != nil {
			closeAll()
			return err
		}
		s.unixLn = ln
	}
	for _, l := range []net.Listener{s.ln, s.tlsLn} {
		if l != nil {
			s.warnExposed(l.Addr())
		}
	}
	return nil
}

// Serve accepts connections on the listener bound by Listen (binding it
// first if needed) until Shutdown or Close, then returns ErrServerClosed.
func (s *Server) Serve() error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	if s.serving {
		s.mu.Unlock()
		return ErrAlreadyServing
	}
	s.serving = true
	ln, tlsLn, unixLn := s.ln, s.tlsLn, s.unixLn
	if (ln != nil || unixLn != nil) && s.useLoops() {
		lps, err := newLoops(s, runtime.NumCPU())
		if err != nil {
			s.cfg.Logger.Warn("server: serving a goroutine per connection", "reason", err)
		}
		s.loops = lps
		stampArrivals(s, ln)
		for _, lp := range lps {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				lp.run()
			}()
		}
	}
	s.cronStop = make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.cron(s.cronStop)
	}()
	if tlsLn != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.acceptLoop(tlsLn, true)
		}()
	}
	if unixLn != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.acceptLoop(unixLn, false)
		}()
	}
	// The accept loop runs on the caller's goroutine but is counted in wg so
	// that Shutdown and Close return only after it has stopped.
	s.wg.Add(1)
	stop := s.cronStop
	s.mu.Unlock()
	defer s.wg.Done()
	if ln == nil {
		<-stop // TLS or Unix socket only: serve until stopped
		return ErrServerClosed
	}
	return s.acceptLoop(ln, false)
}

// useLoops reports whether connections are served by event loops
// (loop_linux.go), unless the Config asks for goroutines: in memory mode,
// where no command waits; in durable mode with a Proposer that works in
// rounds; and in cluster mode, where the loops run what waits for Raft or
// for other nodes off the loop (loop.offLoop).
func (s *Server) useLoops() bool {
	if s.cfg.ConnGoroutines {
		return false
	}
	if s.router.clustered() {
		return true
	}
	_, memory := s.cfg.Proposer.(MemoryProposer)
	return memory || s.roundProposer() != nil
}

// roundProposer returns the Proposer as a roundProposer, if it is one
// that works in rounds.
func (s *Server) roundProposer() roundProposer {
	rp, _ := s.cfg.Proposer.(roundProposer)
	return rp
}

// eventLoops is the number of event loops serving connections; 0 when
// every connection has a goroutine of its own.
func (s *Server) eventLoops() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.loops)
}

// ListenAndServe is Listen followed by Serve.
func (s *Server) ListenAndServe() error {
	if err := s.Listen(); err != nil {
		return err
	}
	return s.Serve()
}

// SetActiveExpiry turns the active expiry loop on or off at run time; a
// cluster node turns it on when it becomes leader and off when it stops
// being leader.
func (s *Server) SetActiveExpiry(on bool) { s.activeExpiry.Store(on) }

// Addr returns the bound plain address (the TLS one when the plain
// listener is disabled), or nil before Listen.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ln != nil:
		return s.ln.Addr()
	case s.tlsLn != nil:
		return s.tlsLn.Addr()
	case s.unixLn != nil:
		return s.unixLn.Addr()
	}
	return nil
}

// acceptLoop accepts connections on ln until it is closed; secure says ln
// is the TLS listener, whose connections are served on goroutines.
func (s *Server) acceptLoop(ln net.Listener, secure bool) error {
	var backoff time.Duration
	for {
		// Until its loop has read it, a new connection's requests are
		// counted as arrived and not yet run (order.go): from before the
		// kernel hands it over where there are loops to order.
		unixSock := ln == s.unixListener()
		entering := !secure && !unixSock && len(s.loops) > 1
		var nc net.Conn
		var err error
		if entering {
			nc, err = s.order.accept(ln)
		} else {
			nc, err = ln.Accept()
		}
		if err != nil {
			if !secure && !unixSock && acceptErrClosed(err) && !s.shutdown.Load() {
				// CONFIG SET port replaced the listener (listenport.go).
				if next, ok := s.nextListener(ln); ok {
					ln = next
					continue
				}
			}
			if s.shutdown.Load() || errors.Is(err, net.ErrClosed) {
				return ErrServerClosed
			}
			// Temporary failures such as EMFILE: back off as net/http does
			// rather than spin or give up.
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else if backoff *= 2; backoff > time.Second {
				backoff = time.Second
			}
			s.cfg.Logger.Error("server: accept", "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.cronStopChan():
				t.Stop()
				return ErrServerClosed
			}
			continue
		}
		backoff = 0
		s.stats.connectionsReceived.Add(1)
		if secure {
			tc := tls.Server(nc, s.cfg.TLS.ServerConfig())
			c := s.newClient(tc)
			if !s.register(c) {
				continue
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				c.serveTLS(tc)
			}()
			continue
		}
		c := s.newClient(nc)
		if unixSock {
			// As Redis names a Unix socket's clients.
			c.addr = s.cfg.UnixSocket + ":0"
			c.laddr = c.addr
			c.unixSock = true
		}
		c.entering = entering
		if !s.register(c) {
			c.entered()
			continue
		}
		if s.protectedRefuses(nc.RemoteAddr()) {
			c.entered()
			s.refuseProtected(c)
			continue
		}
		if len(s.loops) > 0 {
			lp := s.loops[int(s.next.Add(1))%len(s.loops)]
			if lp.add(c) {
				continue
			}
		}
		c.entered()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve()
		}()
	}
}

func (s *Server) cronStopChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cronStop
}

// register adds c to the client set, or rejects it (closing its connection)
// when the server is stopping or full.
func (s *Server) register(c *client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.nc.Close()
		return false
	}
	if int64(len(s.clients)) >= s.maxClients.Load() {
		s.stats.rejectedConnections.Add(1)
		// Best effort, as Redis: the client may not read it.
		c.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.nc.Write([]byte("-" + errMaxClients + "\r\n"))
		c.nc.Close()
		return false
	}
	s.clients[c] = struct{}{}
	return true
}

func (s *Server) unregister(c *client) {
	c.setPaused(false) // closed while a client pause held it
	c.leaveTracking()
	s.removeMonitor(c)
	if c.ps != nil && c.fd >= 0 {
		s.pubsub.removeAll(c) // a goroutine's connection did it in leavePubsub
		s.updateNotify()
	}
	s.mu.Lock()
	delete(s.clients, c)
	s.mu.Unlock()
	c.rd.Release()
}

// connectedClients is INFO's connected_clients.
func (s *Server) connectedClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// beginStop marks the server as stopping, closes the listener and stops the
// cron loop. It reports false when a stop had already begun.
func (s *Server) beginStop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closed = true
	s.shutdown.Store(true)
	close(s.stopping)
	s.clientPause.stopTimer() // held clients are closed with the rest
	if s.ln != nil {
		s.ln.Close()
	}
	if s.tlsLn != nil {
		s.tlsLn.Close()
	}
	if s.unixLn != nil {
		s.unixLn.Close() // and removes the socket's file
	}
	if s.cronStop != nil {
		close(s.cronStop)
	}
	s.mem.unwatch()
	s.migrates.closeIdle(time.Time{}, true)
	for _, lp := range s.loops {
		lp.stop(false)
	}
	// A script holding the store would hold the stop up, and no client can
	// kill it now: those a kill leaves no replica differing over end.
	s.router.stores((*fsm.Store).StopScripts)
	return true
}

// Shutdown stops the server gracefully: it stops accepting, lets every
// connection finish the pipeline it is executing and write its replies, then
// closes the connections. Commands a client sends after that are not read.
// If ctx ends first, Shutdown closes what remains as Close does and returns
// ctx's error. Calling it again (or after Close) waits for the same stop.
func (s *Server) Shutdown(ctx context.Context) error {
	// A replica's link first, while its writes can still be proposed.
	s.StopReplication()
	s.beginStop()
	s.mu.Lock()
	now := time.Now()
	for c := range s.clients {
		// Wake a connection blocked reading its next request; one that is
		// executing a pipeline sees the shutdown flag once it has replied.
		c.nc.SetReadDeadline(now)
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.peers.close()
		s.bcast.close()
		return nil
	case <-ctx.Done():
		s.closeClients()
		s.peers.close()
		<-done
		s.bcast.close()
		return ctx.Err()
	}
}

// Close stops the server at once: it closes the listener and every
// connection without waiting for replies, then waits for the server's
// goroutines (a connection waiting for its proposer finishes that wait).
// It is idempotent.
func (s *Server) Close() error {
	s.StopReplication()
	s.beginStop()
	s.closeClients()
	s.peers.close() // a connection waiting for the leader stops waiting
	s.wg.Wait()
	s.bcast.close()
	return nil
}

func (s *Server) closeClients() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.clients {
		c.nc.Close()
	}
	s.closeStreamsLocked()
	for _, lp := range s.loops {
		lp.stop(true)
	}
}

func (s *Server) unixListener() net.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unixLn
}

// listenUnix is Redis's anetUnixServer: the file at path removed first
// (whatever it was), then the socket bound there with perm's bits when
// they are not zero. Closing the listener removes the file.
func listenUnix(path string, perm os.FileMode) (net.Listener, error) {
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if perm != 0 {
		if err := os.Chmod(path, perm); err != nil {
			ln.Close()
			return nil, err
		}
	}
	return ln, nil
}
