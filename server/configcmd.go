package server

import (
	"math"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/match"
)

func splitHostPort(a string) (string, string, error) { return net.SplitHostPort(a) }

// configParams are the parameters CONFIG GET knows, with their current
// values; maxclients and proto-max-bulk-len are the settable ones.
func (s *Server) configParams() map[string]string {
	host, _, _ := splitHostPort(s.cfg.Addr)
	p := map[string]string{
		"maxclients":         strconv.FormatInt(s.maxClients.Load(), 10),
		"proto-max-bulk-len": strconv.FormatInt(s.maxBulk.Load(), 10),
		"appendonly":         "no",
		"appendfsync":        "everysec",
		"save":               "",
		"databases":          "1",
		"port":               s.port(),
		"bind":               host,
		"timeout":            "0",
		"tcp-keepalive":      "300",
		"maxmemory":          "0",
		"maxmemory-policy":   "noeviction",
		"hz":                 "10",
		"cluster-enabled":    "no",
		"requirepass":        s.requirePass(),
	}
	p["lua-time-limit"] = strconv.FormatInt(s.luaTimeLimit(), 10)
	p["busy-reply-threshold"] = p["lua-time-limit"]
	s.addLimitParams(p)
	s.addPubsubParams(p)
	for k, v := range s.cfg.ConfigParams {
		p[k] = v
	}
	return p
}

// runConfig answers CONFIG GET pattern..., CONFIG SET param value...,
// CONFIG RESETSTAT and CONFIG HELP.
func runConfig(c *client, args [][]byte) {
	sub := args[1]
	c.noteSubcommand("config", sub)
	switch {
	case is(sub, "get"):
		if len(args) < 3 {
			c.out = appendError(c.out, errWrongArgs("config|get"))
			return
		}
		c.configGet(args[2:])
	case is(sub, "set"):
		if len(args) < 4 {
			c.out = appendError(c.out, errWrongArgs("config|set"))
			return
		}
		c.configSet(args[2:])
	case is(sub, "resetstat"):
		if len(args) != 2 {
			c.out = appendError(c.out, errWrongArgs("config|resetstat"))
			return
		}
		c.s.stats.reset()
		c.out = appendStatus(c.out, "OK")
	case is(sub, "help") && len(args) == 2:
		c.out = appendHelp(c.out, configHelp)
	default:
		c.out = appendError(c.out, errUnknownSubcommand(sub, "config"))
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
	"HELP",
	"    Prints this help.",
}

func (c *client) configGet(patterns [][]byte) {
	params := c.s.configParams()
	names := make([]string, 0, len(params))
	for n := range params {
		names = append(names, n)
	}
	sort.Strings(names)
	picked := map[string]bool{}
	var out []string
	for _, p := range patterns {
		pat := strings.ToLower(string(p))
		for _, n := range names {
			if picked[n] {
				continue
			}
			if match.Match(n, pat) {
				picked[n] = true
				out = append(out, n)
			}
		}
	}
	b := appendMapLen(c.out, len(out), c.proto)
	for _, n := range out {
		b = appendBulkString(b, n)
		b = appendBulkString(b, params[n])
	}
	c.out = b
}

// configSet applies CONFIG SET atomically: every pair is checked before any
// is applied, as Redis does.
func (c *client) configSet(pairs [][]byte) {
	if len(pairs)%2 != 0 {
		c.out = appendError(c.out, errWrongArgs("config|set"))
		return
	}
	known := c.s.configParams()
	if e := configSetNames(pairs, known); e != "" {
		c.out = appendError(c.out, e)
		return
	}
	type change struct {
		name string
		v    int64
	}
	var changes []change
	var applies []func()
	var requirePass *string
	limits := c.s.cfg.Store.Limits()
	limitsSet := map[string]bool{}
	for j := 0; j < len(pairs); j += 2 {
		name := strings.ToLower(string(pairs[j]))
		val := pairs[j+1]
		if limitsSet[name] {
			c.out = appendError(c.out, errConfigSetFailed(name, "duplicate parameter"))
			return
		}
		if known, e := setLimitParam(&limits, name, val); known {
			if e != "" {
				c.out = appendError(c.out, e)
				return
			}
			limitsSet[name] = true
			continue
		}
		if isPubsubParam(name) {
			apply, e := c.s.checkPubsubParam(name, val)
			if e != "" {
				c.out = appendError(c.out, e)
				return
			}
			applies = append(applies, apply)
			continue
		}
		switch name {
		case "requirepass":
			v := string(val)
			requirePass = &v
		case "maxclients", "proto-max-bulk-len", "lua-time-limit", "busy-reply-threshold":
			v, ok := parseInt(val)
			if !ok {
				c.out = appendError(c.out, errConfigSetFailed(name, "argument couldn't be parsed into an integer"))
				return
			}
			lo, hi := configRange(name)
			if v < lo || v > hi {
				c.out = appendError(c.out, errConfigSetFailed(name, "argument must be between "+strconv.FormatInt(lo, 10)+" and "+strconv.FormatInt(hi, 10)+" inclusive"))
				return
			}
			changes = append(changes, change{name, v})
		default:
			if _, ok := known[name]; ok {
				c.out = appendError(c.out, errConfigSetFailed(name, "can't set immutable config"))
			} else {
				c.out = appendError(c.out, errConfigSetUnknown(pairs[j]))
			}
			return
		}
	}
	if requirePass != nil && !c.setRequirePass(*requirePass) {
		return
	}
	if len(limitsSet) > 0 {
		c.s.cfg.Store.SetLimits(limits)
	}
	for _, apply := range applies {
		apply()
	}
	for _, ch := range changes {
		switch ch.name {
		case "maxclients":
			c.s.maxClients.Store(ch.v)
		case "proto-max-bulk-len":
			c.s.maxBulk.Store(ch.v)
		case "lua-time-limit", "busy-reply-threshold":
			v := ch.v
			c.s.luaLimit.Store(&v)
		}
	}
	c.out = appendStatus(c.out, "OK")
}

// configRange is the range Redis accepts for a settable parameter.
func configRange(name string) (lo, hi int64) {
	switch name {
	case "proto-max-bulk-len":
		return 1 << 20, math.MaxInt64
	case "lua-time-limit", "busy-reply-threshold":
		return 0, math.MaxInt64 / instructionsPerMs
	}
	return 1, math.MaxUint32
}
