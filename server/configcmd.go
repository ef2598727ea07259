package server

import (
	"errors"
	"kvs/fsm"
	"net"
	"os"
	"strconv"
	"strings"

	"kvs/config"
)

func splitHostPort(a string) (string, string, error) { return net.SplitHostPort(a) }

// configParams are the parameters CONFIG GET knows, with their current
// values: every Redis 7 parameter (package config), hidden ones included,
// overlaid with the values of those kvs acts on or reports from its own
// state.
func (s *Server) configParams() map[string]string {
	host, _, _ := splitHostPort(s.cfg.Addr)
	p := make(map[string]string, 512)
	s.params.AddTo(p, true)
	for k, v := range map[string]string{
		"maxclients":           strconv.FormatInt(s.maxClients.Load(), 10),
		"proto-max-bulk-len":   strconv.FormatInt(s.maxBulk.Load(), 10),
		"hll-sparse-max-bytes": strconv.FormatInt(s.hllSparseMax.Load(), 10),
		"appendonly":           "no",
		"appendfsync":          "everysec",
		"databases":            strconv.Itoa(s.databases()),
		"port":                 s.port(),
		"bind":                 host,
		"cluster-enabled":      "no",
		"requirepass":          s.requirePass(),
	} {
		p[k] = v
	}
	p["lua-time-limit"] = strconv.FormatInt(s.luaTimeLimit(), 10)
	p["busy-reply-threshold"] = p["lua-time-limit"]
	p["slowlog-log-slower-than"] = strconv.FormatInt(s.slowlog.slowerThan.Load(), 10)
	p["slowlog-max-len"] = strconv.FormatInt(s.slowlog.maxLen.Load(), 10)
	p["latency-monitor-threshold"] = strconv.FormatInt(s.latency.threshold.Load(), 10)
	config.AddLimits(p, s.cfg.Store.Limits())
	s.addPubsubParams(p)
	s.addTLSParams(p)
	s.addSafetyParams(p)
	s.addEvictParams(p)
	s.addScriptParams(p)
	s.addMoveParams(p)
	for k, v := range s.cfg.ConfigParams {
		p[k] = v
	}
	if r := s.replicaOf(); r != nil {
		p["replicaof"] = r.host + " " + strconv.Itoa(r.port)
	}
	return p
}

// runConfig answers CONFIG GET pattern..., CONFIG SET param value...,
// CONFIG REWRITE, CONFIG RESETSTAT and CONFIG HELP.
func runConfig(c *client, args [][]byte) {
	sub := args[1]
	switch {
	case is(sub, "get"):
		c.configGet(args[2:])
	case is(sub, "set"):
		c.configSet(args[2:])
	case is(sub, "rewrite"):
		switch err := c.s.rewriteConfig(); {
		case errors.Is(err, errNoConfigFile):
			c.out = appendError(c.out, err.Error())
		case err != nil:
			c.s.cfg.Logger.Warn("CONFIG REWRITE failed", "file", c.s.cfg.ConfigFile, "err", err)
			c.out = appendError(c.out, "ERR Rewriting config file: "+rewriteErrText(err))
		default:
			c.s.cfg.Logger.Info("CONFIG REWRITE executed with success", "file", c.s.cfg.ConfigFile)
			c.out = appendStatus(c.out, "OK")
		}
	case is(sub, "resetstat"):
		c.s.stats.reset()
		c.s.resetLazyFreed()
		c.out = appendStatus(c.out, "OK")
	default:
		c.out = appendHelp(c.out, configHelp)
	}
}

var configHelp = []string{
	"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GET <pattern>",
	"    Return parameters matching the glob-like <pattern> and their values.",
	"SET <directive> <value>",
	"    Set the configuration <directive> to <value>.",
	"RESETSTAT",
	"    Reset statistics reported by the INFO command.",
	"REWRITE",
	"    Rewrite the configuration file.",
	"HELP",
	"    Prints this help.",
}

func (c *client) configGet(patterns [][]byte) {
	out := config.Get(c.s.configParams(), patterns)
	b := appendMapLen(c.out, len(out), c.proto)
	for _, o := range out {
		b = appendBulkString(b, o.Name)
		b = appendBulkString(b, o.Value)
	}
	c.out = b
}

// configSet applies CONFIG SET atomically: every pair is checked before any
// is applied, as Redis does.
func (c *client) configSet(pairs [][]byte) {
	if len(pairs)%2 != 0 {
		c.out = appendError(c.out, errSyntax)
		return
	}
	if e := c.s.setConfig(pairs, false); e != "" {
		c.out = appendError(c.out, e)
		return
	}
	c.out = appendStatus(c.out, "OK")
}

// checkedParams are the parameter families whose own code checks a value
// and returns the change to make once every pair has passed.
var checkedParams = []struct {
	is    func(name string) bool
	check func(s *Server, name string, val []byte) (apply func(), e string)
}{
	{isEvictParam, (*Server).checkEvictParam},
	{isSafetyParam, (*Server).checkSafetyParam},
	{isPubsubParam, (*Server).checkPubsubParam},
	{isScriptParam, (*Server).checkScriptParam},
	{isPeerAuthParam, (*Server).checkPeerAuthParam},
}

// checkedParamOf is checkedParam, and the parameters whose being there
// depends on the node (slot-move-rate).
func (s *Server) checkedParamOf(name string) func(*Server, string, []byte) (func(), string) {
	if s.isMoveParam(name) {
		return (*Server).checkMoveParam
	}
	return checkedParam(name)
}

func checkedParam(name string) func(*Server, string, []byte) (func(), string) {
	for _, f := range checkedParams {
		if f.is(name) {
			return f.check
		}
	}
	return nil
}

// setConfig applies parameter-value pairs atomically, as CONFIG SET does,
// and returns Redis's error text, or "". At startup (the --config file)
// immutable parameters are taken too, and those kvs sets from its flags
// (config.FromFlags) are left to the caller.
func (s *Server) setConfig(pairs [][]byte, startup bool) string {
	known := s.configParams()
	settable := func(name string) bool { return isScriptParam(name) || s.isMoveParam(name) }
	if ne := config.CheckNames(pairs, known, settable, startup); ne != nil {
		if ne.Reason == "" {
			return errConfigSetUnknown([]byte(ne.Name))
		}
		return errConfigSetFailed(ne.Name, ne.Reason)
	}
	type change struct {
		name string
		v    int64
	}
	var changes []change
	var applies []func()
	var requirePass *string
	limits := s.cfg.Store.Limits()
	limitsSet := map[string]bool{}
	var stored [][2]string
	tlsSet := map[string][]byte{}
	newPort := int64(-1)
	for j := 0; j < len(pairs); j += 2 {
		name := strings.ToLower(string(pairs[j]))
		val := pairs[j+1]
		if known, err := config.SetLimit(&limits, name, val); known {
			if err != nil {
				return errConfigSetFailed(name, err.Error())
			}
			limitsSet[name] = true
			continue
		}
		if isTLSParam(name) {
			tlsSet[name] = val
			continue
		}
		if check := s.checkedParamOf(name); check != nil {
			apply, e := check(s, name, val)
			if e != "" {
				return e
			}
			applies = append(applies, apply)
			continue
		}
		switch name {
		case "requirepass":
			v := string(val)
			requirePass = &v
		case "latency-tracking":
			v, err := config.Lookup(name).Normalize(string(val))
			if err != nil {
				return errConfigSetFailed(name, err.Error())
			}
			stored = append(stored, [2]string{name, v})
			applies = append(applies, func() { s.stats.cmds.noTracking.Store(v == "no") })
		case "tracking-table-max-keys":
			v, err := config.Lookup(name).Normalize(string(val))
			if err != nil {
				return errConfigSetFailed(name, err.Error())
			}
			stored = append(stored, [2]string{name, v})
			n, _ := strconv.ParseInt(v, 10, 64)
			applies = append(applies, func() { s.setTrackingMaxKeys(n) })
		case "lfu-log-factor", "lfu-decay-time":
			v, err := config.Lookup(name).Normalize(string(val))
			if err != nil {
				return errConfigSetFailed(name, err.Error())
			}
			stored = append(stored, [2]string{name, v})
			applies = append(applies, s.applyLFUParams)
		case "min-replicas-to-write", "min-slaves-to-write", "min-replicas-max-lag", "min-slaves-max-lag":
			p := config.Lookup(name)
			v, err := p.Normalize(string(val))
			if err != nil {
				return errConfigSetFailed(name, err.Error())
			}
			stored = append(stored, [2]string{p.Name(), v})
			applies = append(applies, func() { s.setMinReplicas(p.Name(), v) })
		case "maxclients", "proto-max-bulk-len", "lua-time-limit", "busy-reply-threshold",
			"slowlog-log-slower-than", "slowlog-max-len", "latency-monitor-threshold", "hll-sparse-max-bytes":
			norm, err := config.Lookup(name).Normalize(string(val))
			if err != nil {
				return errConfigSetFailed(name, err.Error())
			}
			v, _ := strconv.ParseInt(norm, 10, 64)
			changes = append(changes, change{name, v})
		default:
			p := config.Lookup(name)
			if p == nil {
				return errConfigSetUnknown(pairs[j])
			}
			v, err := p.Normalize(string(val))
			if err != nil {
				return errConfigSetFailed(name, err.Error())
			}
			if p.Name() == "port" && !startup && v != known["port"] {
				newPort, _ = strconv.ParseInt(v, 10, 64)
				continue
			}
			if why, owned := config.FromFlags(p.Name()); owned {
				if !startup && v != known[p.Name()] {
					return errConfigSetFailed(name, why)
				}
				continue
			}
			stored = append(stored, [2]string{p.Name(), v})
		}
	}
	applyTLS, e := s.checkTLSParams(tlsSet, known)
	if e != "" {
		return e
	}
	applies = append(applies, applyTLS)
	// The encoding thresholds first: the store may refuse them while a
	// script is busy, and then nothing is changed.
	if len(limitsSet) > 0 {
		if e := s.setLimits(limits); e != "" {
			return e
		}
	}
	// What may fail in applying comes after every check, as Redis's apply
	// functions do, and is undone if a later step fails: binding a new
	// port, then the password's write.
	var newLn net.Listener
	if newPort >= 0 {
		ln, e := s.bindPort(newPort)
		if e != "" {
			return errConfigSetFailed("port", e)
		}
		newLn = ln
		applies = append(applies, func() { s.installListener(ln) })
	}
	if requirePass != nil {
		// The default user's password is replicated state: a write
		// through the log, before the other changes apply.
		if err := s.setRequirePass(*requirePass); err != nil {
			if newLn != nil {
				newLn.Close()
			}
			return errProposal(err, true)
		}
	}
	for _, kv := range stored {
		s.params.Set(kv[0], kv[1])
	}
	for _, apply := range applies {
		apply()
	}
	for _, ch := range changes {
		switch ch.name {
		case "maxclients":
			s.maxClients.Store(ch.v)
		case "proto-max-bulk-len":
			s.maxBulk.Store(ch.v)
		case "hll-sparse-max-bytes":
			s.hllSparseMax.Store(ch.v)
		case "lua-time-limit", "busy-reply-threshold":
			v := ch.v
			s.luaLimit.Store(&v)
			s.router.everyStore(func(st *fsm.Store) { st.SetBusyThreshold(v) })
		case "slowlog-log-slower-than":
			s.slowlog.slowerThan.Store(ch.v)
		case "slowlog-max-len":
			s.slowlog.setMaxLen(ch.v)
		case "latency-monitor-threshold":
			s.latency.threshold.Store(ch.v)
		}
	}
	return ""
}

var errNoConfigFile = errors.New("ERR The server is running without a config file")

// rewriteConfig is CONFIG REWRITE of the file kvs serve read with
// --config.
func (s *Server) rewriteConfig() error {
	if s.cfg.ConfigFile == "" {
		return errNoConfigFile
	}
	return config.Rewrite(s.cfg.ConfigFile, s.configParams(), s.configDefaults)
}

// rewriteErrText is the system error of a failed rewrite, as Redis's
// strerror text reads (without Go's operation and path).
func rewriteErrText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	t := err.Error()
	if t != "" {
		t = strings.ToUpper(t[:1]) + t[1:]
	}
	return t
}

// setLimits gives every store of the node the encoding thresholds l, or
// answers BUSY when a script holds one.
func (s *Server) setLimits(l fsm.Limits) string {
	r := &s.router
	r.mu.Lock()
	defer r.mu.Unlock()
	for g := range r.local() {
		if !g.store.SetLimitsServing(l) {
			return errBusy(g.store.ScriptBusy())
		}
	}
	return ""
}
