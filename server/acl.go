package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"kvs/cmdspec"
	"kvs/fsm"
	"sort"
	"strings"
)

// ACL users, as Redis 7 has them (src/acl.c): each user has flags (on or
// off, nopass), SHA-256 password hashes, and selectors of rules (its root
// one and any "(...)" ones; a command passes when one selector allows
// it): a bitmap of the commands (and subcommands) it may run, first
// arguments allowed for otherwise denied commands (+select|0), key
// patterns with read/write permissions, and channel patterns. The rules are applied in
// order, as ACL SETUSER gives them, to a copy of the user; a user is
// immutable once published, so connections hold a pointer to it without a
// lock.
//
// The users live in the fsm's replicated ACL table as rule lines (ACL
// LIST's form, which parses back to the same user); aclusers.go compiles
// the table into an aclState whenever its generation changes.
//
// Command ids index the bitmaps. They are given to every command of the
// command table and every subcommand Redis has of those commands (from the
// generated table of package cmdspec), in name order, once per process: the
// same on every node, though nothing outside the process depends on them.

// Key pattern permissions (%R~, %W~; ~ is both).
const (
	aclRead  = 1
	aclWrite = 2
	aclRW    = aclRead | aclWrite
)

// aclCategoryNames are Redis's categories in Redis's order (ACL CAT, the
// order COMMAND INFO lists a command's categories in). A category's bit is
// 1 << its index.
var aclCategoryNames = []string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
	"blocking", "dangerous", "connection", "transaction", "scripting",
}

func aclCategory(name string) (uint32, bool) {
	for i, n := range aclCategoryNames {
		if strings.EqualFold(n, name) {
			return 1 << i, true
		}
	}
	return 0, false
}

// kvsOwnCategories are the categories of the commands Redis does not have.
var kvsOwnCategories = map[string]string{
	"kvs.join":    "admin slow dangerous",
	"kvs.remove":  "admin slow dangerous",
	"kvs.status":  "admin slow",
	"kvs.peer":    "admin fast dangerous",
	"kvs.forward": "admin slow dangerous",
	"kvs.sync":    "admin fast dangerous",
	"kvs.publish": "pubsub admin fast dangerous",
}

// aclCmd is one command or subcommand as the ACL sees it.
type aclCmd struct {
	id       int
	name     string // "get", "config|get"
	cats     uint32
	parent   *aclCmd   // nil for a top-level command
	subs     []*aclCmd // a container's subcommands, by name
	noAuth   bool      // runs before AUTH (auth, hello, quit, reset)
	keys     cmdspec.KeyFinder
	channels channelKind
	// oneKey, when not 0, is the argument index of the command's only
	// key, with oneKeyFlags its spec's flags: GET, SET, INCR, HGET and
	// most others, checked without walking the specs.
	oneKey      int
	oneKeyFlags int
}

// aclCommands is the process's command id table.
type aclCommands struct {
	byName map[string]*aclCmd // top-level and "cmd|sub"
	top    []*aclCmd          // top-level commands, by name
	all    []*aclCmd          // by id
	words  int                // bitmap words: ids plus the "future commands" bit
}

func newACLCommands(table map[string]*command) *aclCommands {
	ac := &aclCommands{byName: make(map[string]*aclCmd)}
	names := make([]string, 0, len(table))
	for name := range table {
		names = append(names, name)
	}
	sort.Strings(names)
	subs := make([]string, 0, 64)
	for name := range cmdspec.Categories {
		if i := strings.IndexByte(name, '|'); i > 0 && table[name[:i]] != nil {
			subs = append(subs, name)
		}
	}
	sort.Strings(subs)
	add := func(name string, parent *aclCmd) *aclCmd {
		cats, ok := cmdspec.Categories[name]
		if !ok {
			cats = kvsOwnCategories[name]
		}
		cmd := &aclCmd{id: len(ac.all), name: name, parent: parent, keys: cmdspec.FinderOf(name)}
		for _, cat := range strings.Fields(cats) {
			bit, _ := aclCategory(cat)
			cmd.cats |= bit
		}
		switch name {
		case "auth", "hello", "quit", "reset", "kvs.peer":
			cmd.noAuth = true
		}
		cmd.channels = channelsOf(name)
		if specs := cmd.keys.Specs; len(specs) == 1 {
			ks := &specs[0]
			if ks.Keyword == "" && !ks.Unknown && !ks.UnknownKeys && !ks.KeyNum && ks.LastKey == 0 &&
				ks.Flags&(cmdspec.VariableFlags|cmdspec.NotKey|cmdspec.Incomplete) == 0 && ks.Index > 0 {
				cmd.oneKey, cmd.oneKeyFlags = ks.Index, ks.Flags
			}
		}
		ac.all = append(ac.all, cmd)
		ac.byName[name] = cmd
		return cmd
	}
	for _, name := range names {
		ac.top = append(ac.top, add(name, nil))
	}
	for _, name := range subs {
		parent := ac.byName[name[:strings.IndexByte(name, '|')]]
		parent.subs = append(parent.subs, add(name, parent))
	}
	ac.words = (len(ac.all) + 1 + 63) / 64
	return ac
}

// future is the bit +@all sets and only -@all clears: the user may run
// commands added later (Redis's reserved bit), which ACL LIST tells by
// starting with +@all rather than -@all.
func (ac *aclCommands) future() int { return len(ac.all) }

// aclSelector is a user's rules about commands, keys and channels.
type aclSelector struct {
	allowed     []uint64
	allCommands bool             // +@all and no command removed since
	firstArgs   map[int][]string // allowed first arguments by command id
	allKeys     bool
	keys        []keyPattern
	allChannels bool
	channels    []string
}

type keyPattern struct {
	perm    int
	pattern string
	// kind and lit match the common patterns without the glob matcher:
	// "*", a literal, or a literal prefix then "*".
	kind patternKind
	lit  string
}

type patternKind uint8

const (
	patternGlob patternKind = iota
	patternAll
	patternExact
	patternPrefix
)

func newKeyPattern(perm int, pattern string) keyPattern {
	p := keyPattern{perm: perm, pattern: pattern}
	body, star := pattern, false
	if strings.HasSuffix(body, "*") {
		body, star = body[:len(body)-1], true
	}
	switch {
	case strings.ContainsAny(body, "*?[\\"):
		p.kind = patternGlob
	case star && body == "":
		p.kind = patternAll
	case star:
		p.kind, p.lit = patternPrefix, body
	default:
		p.kind, p.lit = patternExact, body
	}
	return p
}

// match reports whether key matches the pattern, as Redis's stringmatch.
func (p *keyPattern) match(key []byte) bool {
	switch p.kind {
	case patternAll:
		return true
	case patternExact:
		return string(key) == p.lit
	case patternPrefix:
		return len(key) >= len(p.lit) && string(key[:len(p.lit)]) == p.lit
	}
	return globMatch(p.pattern, string(key))
}

func (p keyPattern) String() string {
	switch p.perm {
	case aclRead:
		return "%R~" + p.pattern
	case aclWrite:
		return "%W~" + p.pattern
	}
	return "~" + p.pattern
}

func (s *aclSelector) bit(id int) bool { return s.allowed[id/64]&(1<<(id%64)) != 0 }

func (s *aclSelector) setBit(id int, on bool) {
	if on {
		s.allowed[id/64] |= 1 << (id % 64)
	} else {
		s.allowed[id/64] &^= 1 << (id % 64)
		s.allCommands = false
	}
}

// changePerm allows or denies a command and, for a container, all its
// subcommands (ACLChangeSelectorPerm).
func (s *aclSelector) changePerm(cmd *aclCmd, on bool) {
	s.setBit(cmd.id, on)
	delete(s.firstArgs, cmd.id)
	for _, sub := range cmd.subs {
		s.setBit(sub.id, on)
	}
}

func (s *aclSelector) setCategory(ac *aclCommands, cat uint32, on bool) {
	for _, cmd := range ac.all {
		if cmd.cats&cat != 0 {
			s.changePerm(cmd, on)
		}
	}
}

func (s *aclSelector) clone() aclSelector {
	n := *s
	n.allowed = append([]uint64(nil), s.allowed...)
	n.keys = append([]keyPattern(nil), s.keys...)
	n.channels = append([]string(nil), s.channels...)
	if s.firstArgs != nil {
		n.firstArgs = make(map[int][]string, len(s.firstArgs))
		for id, a := range s.firstArgs {
			n.firstArgs[id] = append([]string(nil), a...)
		}
	}
	return n
}

// aclUser is one user. Immutable once in an aclState.
type aclUser struct {
	name   string
	on     bool
	nopass bool
	// sanitize is "", "sanitize-payload" or "skip-sanitize-payload":
	// shown as Redis shows it; kvs has no RESTORE payloads to sanitize.
	sanitize  string
	passwords []string // SHA-256 hex, in the order they were added
	sel       aclSelector
	// selectors are the user's further selectors ("(~k* +get)"): a
	// command is allowed when the root selector or any of them allows it.
	selectors []aclSelector
	// unrestricted: every command, key and channel; the check before a
	// command is skipped for it.
	unrestricted bool
}

func (u *aclUser) clone() *aclUser {
	n := *u
	n.passwords = append([]string(nil), u.passwords...)
	n.sel = u.sel.clone()
	n.selectors = nil
	for i := range u.selectors {
		n.selectors = append(n.selectors, u.selectors[i].clone())
	}
	return &n
}

func newACLUser(ac *aclCommands, name string) *aclUser {
	return &aclUser{name: name, sel: aclSelector{allowed: make([]uint64, ac.words)}}
}

func hashPassword(p []byte) string {
	h := sha256.Sum256(p)
	return hex.EncodeToString(h[:])
}

func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func hasSpaces(s string) bool { return strings.ContainsAny(s, " \t\r\n\x00") }

// applyRule applies one ACL SETUSER rule to u (ACLSetUser), returning
// Redis's error text for a bad one.
func (u *aclUser) applyRule(ac *aclCommands, op string) string {
	switch lower := strings.ToLower(op); {
	case op == "":
	case lower == "on":
		u.on = true
	case lower == "off":
		u.on = false
	case lower == "skip-sanitize-payload", lower == "sanitize-payload":
		u.sanitize = lower
	case lower == "nopass":
		u.nopass, u.passwords = true, nil
	case lower == "resetpass":
		u.nopass, u.passwords = false, nil
	case op[0] == '>' || op[0] == '#':
		h := op[1:]
		if op[0] == '>' {
			h = hashPassword([]byte(op[1:]))
		} else if !validHash(h) {
			return aclErrHash
		}
		if !contains(u.passwords, h) {
			u.passwords = append(u.passwords, h)
		}
		u.nopass = false
	case op[0] == '<' || op[0] == '!':
		h := op[1:]
		if op[0] == '<' {
			h = hashPassword([]byte(op[1:]))
		} else if !validHash(h) {
			return aclErrHash
		}
		i := index(u.passwords, h)
		if i < 0 {
			return aclErrNoPass
		}
		u.passwords = append(u.passwords[:i:i], u.passwords[i+1:]...)
	case lower == "reset":
		u.nopass, u.passwords = false, nil
		u.sel.allKeys, u.sel.keys = false, nil
		u.sel.allChannels, u.sel.channels = false, nil
		u.on = false
		u.sanitize = "sanitize-payload"
		u.selectors = nil
		u.applyRule(ac, "-@all")
	case op[0] == '(' && op[len(op)-1] == ')':
		sel := aclSelector{allowed: make([]uint64, ac.words)}
		for _, r := range strings.Fields(op[1 : len(op)-1]) {
			if e := sel.applyRule(ac, r); e != "" {
				return e
			}
		}
		u.selectors = append(u.selectors, sel)
	case lower == "clearselectors":
		u.selectors = nil
	default:
		return u.sel.applyRule(ac, op)
	}
	return ""
}

// applyRule applies a selector rule (ACLSetSelector).
func (s *aclSelector) applyRule(ac *aclCommands, op string) string {
	lower := strings.ToLower(op)
	switch {
	case lower == "allkeys" || op == "~*":
		s.allKeys, s.keys = true, nil
	case lower == "resetkeys":
		s.allKeys, s.keys = false, nil
	case lower == "allchannels" || op == "&*":
		s.allChannels, s.channels = true, nil
	case lower == "resetchannels":
		s.allChannels, s.channels = false, nil
	case lower == "allcommands" || lower == "+@all":
		for i := range s.allowed {
			s.allowed[i] = ^uint64(0)
		}
		s.allCommands, s.firstArgs = true, nil
	case lower == "nocommands" || lower == "-@all":
		clear(s.allowed)
		s.allCommands, s.firstArgs = false, nil
	case op[0] == '~' || op[0] == '%':
		if s.allKeys {
			return aclErrKeysAll
		}
		perm, off := aclRW, 1
		if op[0] == '%' {
			perm = 0
			for ; off < len(op); off++ {
				c := op[off] | 0x20
				if c == 'r' && perm&aclRead == 0 {
					perm |= aclRead
				} else if c == 'w' && perm&aclWrite == 0 {
					perm |= aclWrite
				} else if op[off] == '~' {
					off++
					break
				} else {
					return aclErrSyntax
				}
			}
		}
		pat := op[min(off, len(op)):]
		if perm == 0 || hasSpaces(pat) {
			return aclErrSyntax
		}
		found := false
		for i := range s.keys {
			if s.keys[i].pattern == pat {
				s.keys[i].perm |= perm
				found = true
			}
		}
		if !found {
			s.keys = append(s.keys, newKeyPattern(perm, pat))
		}
		s.allKeys = false
	case op[0] == '&':
		if s.allChannels {
			return aclErrChansAll
		}
		if hasSpaces(op[1:]) {
			return aclErrSyntax
		}
		if !contains(s.channels, op[1:]) {
			s.channels = append(s.channels, op[1:])
		}
		s.allChannels = false
	case op[0] == '+' && !strings.HasPrefix(op, "+@"):
		name := lower[1:]
		bar := strings.LastIndexByte(name, '|')
		if bar < 0 {
			cmd := ac.byName[name]
			if cmd == nil {
				return aclErrUnknown
			}
			s.changePerm(cmd, true)
			return ""
		}
		cmd := ac.byName[name[:bar]]
		switch {
		case cmd == nil:
			return aclErrUnknown
		case cmd.parent != nil:
			return aclErrChild
		case bar == len(name)-1:
			return aclErrSyntax
		case len(cmd.subs) > 0:
			sub := ac.byName[name]
			if sub == nil {
				return aclErrUnknown
			}
			s.changePerm(sub, true)
		default:
			first := op[1+bar+1:]
			for _, a := range s.firstArgs[cmd.id] {
				if strings.EqualFold(a, first) {
					return ""
				}
			}
			if s.firstArgs == nil {
				s.firstArgs = make(map[int][]string)
			}
			s.firstArgs[cmd.id] = append(s.firstArgs[cmd.id], first)
		}
	case op[0] == '-' && !strings.HasPrefix(op, "-@"):
		cmd := ac.byName[lower[1:]]
		if cmd == nil {
			return aclErrUnknown
		}
		s.changePerm(cmd, false)
	case (op[0] == '+' || op[0] == '-') && strings.HasPrefix(op[1:], "@"):
		cat, ok := aclCategory(op[2:])
		if !ok {
			return aclErrUnknown
		}
		s.setCategory(ac, cat, op[0] == '+')
	default:
		return aclErrSyntax
	}
	return ""
}

func contains(list []string, s string) bool { return index(list, s) >= 0 }

func index(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// finish computes the derived fields once all rules are applied.
func (u *aclUser) finish(ac *aclCommands) *aclUser {
	s := &u.sel
	all := s.bit(ac.future())
	for _, cmd := range ac.all {
		all = all && s.bit(cmd.id)
	}
	u.unrestricted = all && s.allKeys && s.allChannels
	return u
}

// checkPassword reports whether password is one of u's (any is, for a
// nopass user). Comparisons take the same time whichever hash matches.
func (u *aclUser) checkPassword(password []byte) bool {
	if u.nopass {
		return true
	}
	h := hashPassword(password)
	ok := 0
	for _, p := range u.passwords {
		ok |= subtle.ConstantTimeCompare([]byte(h), []byte(p))
	}
	return ok == 1
}

// describe returns u's rules as ACL LIST shows them after "user <name> "
// (ACLDescribeUser): flags, password hashes, keys, channels, commands.
func (u *aclUser) describe(ac *aclCommands) string {
	var b strings.Builder
	if u.on {
		b.WriteString("on ")
	} else {
		b.WriteString("off ")
	}
	if u.nopass {
		b.WriteString("nopass ")
	}
	if u.sanitize != "" {
		b.WriteString(u.sanitize + " ")
	}
	for _, p := range u.passwords {
		b.WriteString("#" + p + " ")
	}
	b.WriteString(u.sel.describe(ac))
	for i := range u.selectors {
		b.WriteString(" (" + u.selectors[i].describe(ac) + ")")
	}
	return b.String()
}

// describe is a selector's rules (ACLDescribeSelector): keys, channels,
// commands.
func (s *aclSelector) describe(ac *aclCommands) string {
	var b strings.Builder
	if s.allKeys {
		b.WriteString("~* ")
	} else {
		for _, p := range s.keys {
			b.WriteString(p.String() + " ")
		}
	}
	if s.allChannels {
		b.WriteString("&* ")
	} else {
		b.WriteString("resetchannels ")
		for _, p := range s.channels {
			b.WriteString("&" + p + " ")
		}
	}
	b.WriteString(s.describeCommands(ac))
	return b.String()
}

// keysText and channelsText are GETUSER's keys and channels fields.
func (s *aclSelector) keysText() string {
	if s.allKeys {
		return "~*"
	}
	parts := make([]string, len(s.keys))
	for i, p := range s.keys {
		parts[i] = p.String()
	}
	return strings.Join(parts, " ")
}

func (s *aclSelector) channelsText() string {
	if s.allChannels {
		return "&*"
	}
	parts := make([]string, len(s.channels))
	for i, p := range s.channels {
		parts[i] = "&" + p
	}
	return strings.Join(parts, " ")
}

// mergeSelectorArgs joins the arguments of a selector split by spaces
// ("(~k*", "+get)") into one (ACLMergeSelectorArguments); it returns the
// index of an unclosed one's start when there is one.
func mergeSelectorArgs(args []string) ([]string, int) {
	out := make([]string, 0, len(args))
	open := -1
	var sel string
	for j, op := range args {
		if open < 0 && len(op) > 0 && op[0] == '(' && op[len(op)-1] != ')' {
			sel, open = op, j
			continue
		}
		if open >= 0 {
			sel += " " + op
			if len(op) > 0 && op[len(op)-1] == ')' {
				out = append(out, sel)
				open = -1
			}
			continue
		}
		out = append(out, op)
	}
	if open >= 0 {
		return nil, open
	}
	return out, -1
}

// describeCommands returns the shortest rules Redis's heuristic finds
// that recreate the selector's command bitmap
// (ACLDescribeSelectorCommandRules): +@all or -@all, then the categories
// that fit best, then single commands. Redis emits the single commands in
// its hash table's order; kvs in name order.
func (s *aclSelector) describeCommands(ac *aclCommands) string {
	fake := aclSelector{allowed: make([]uint64, ac.words)}
	temp := aclSelector{allowed: append([]uint64(nil), s.allowed...)}
	var rules []string
	additive := !s.bit(ac.future())
	if additive {
		rules = append(rules, "-@all")
	} else {
		rules = append(rules, "+@all")
		fake.applyRule(ac, "+@all")
	}
	applied := make([]bool, len(aclCategoryNames))
	for {
		best, mindiff, maxsame := -1, int(^uint(0)>>1), 0
		for j := range aclCategoryNames {
			if applied[j] {
				continue
			}
			on, off := 0, 0
			for _, cmd := range ac.all {
				if cmd.cats&(1<<j) != 0 {
					if temp.bit(cmd.id) {
						on++
					} else {
						off++
					}
				}
			}
			diff, same := on, off
			if additive {
				diff, same = off, on
			}
			if same > diff && (diff < mindiff || diff == mindiff && same > maxsame) {
				best, mindiff, maxsame = j, diff, same
			}
		}
		if best < 0 {
			break
		}
		sign, inv := "+@", "-@"
		if !additive {
			sign, inv = "-@", "+@"
		}
		fake.applyRule(ac, sign+aclCategoryNames[best])
		temp.applyRule(ac, inv+aclCategoryNames[best])
		rules = append(rules, sign+aclCategoryNames[best])
		applied[best] = true
	}
	var single func(cmds []*aclCmd)
	single = func(cmds []*aclCmd) {
		for _, cmd := range cmds {
			user, f := s.bit(cmd.id), fake.bit(cmd.id)
			if user != f {
				if user {
					rules = append(rules, "+"+cmd.name)
				} else {
					rules = append(rules, "-"+cmd.name)
				}
				fake.changePerm(cmd, user)
			}
			single(cmd.subs)
			if !user {
				for _, a := range s.firstArgs[cmd.id] {
					rules = append(rules, "+"+cmd.name+"|"+a)
				}
			}
		}
	}
	single(ac.top)
	return strings.Join(rules, " ")
}

// Results of a permission check (Redis's ACL_DENIED_*).
const (
	aclOK = iota
	aclDeniedCmd
	aclDeniedKey
	aclDeniedAuth
	aclDeniedChannel
)

// resolve returns the command or subcommand that args run: a container's
// subcommand when Redis has it.
func (ac *aclCommands) resolve(name string, args [][]byte) *aclCmd {
	cmd := ac.byName[name]
	if cmd != nil && len(cmd.subs) > 0 && len(args) >= 2 {
		if sub := ac.byName[name+"|"+lowerName(args[1])]; sub != nil {
			return sub
		}
	}
	return cmd
}

// fullKeyAccess reports whether one of u's selectors both allows cmd with
// args and gives every key for perm (Redis's
// ACLUserCheckCmdWithUnrestrictedKeyAccess): SORT's BY and GET patterns
// read keys no key specification names, and need it.
func (u *aclUser) fullKeyAccess(cmd *aclCmd, args [][]byte, perm int) bool {
	if u.unrestricted {
		return true
	}
	if r, _ := u.sel.check(cmd, args); r == aclOK && u.sel.everyKey(perm) {
		return true
	}
	for i := range u.selectors {
		if r, _ := u.selectors[i].check(cmd, args); r == aclOK && u.selectors[i].everyKey(perm) {
			return true
		}
	}
	return false
}

// everyKey reports whether s gives every key for perm: allkeys, or a "*"
// pattern with that permission.
func (s *aclSelector) everyKey(perm int) bool {
	if s.allKeys {
		return true
	}
	for _, p := range s.keys {
		if p.perm&perm == perm && p.pattern == "*" {
			return true
		}
	}
	return false
}

// check reports whether u may run cmd with args, and when not, why and
// the index of the argument at fault (ACLSelectorCheckCmd).
func (u *aclUser) check(cmd *aclCmd, args [][]byte) (result, at int) {
	result, at = u.sel.check(cmd, args)
	if result == aclOK {
		return aclOK, 0
	}
	// With selectors: the first that allows the command wins; else the
	// worst refusal (a channel over a key over the command), and of those
	// the one furthest into the arguments (ACLCheckAllUserCommandPerm).
	for i := range u.selectors {
		r, a := u.selectors[i].check(cmd, args)
		if r == aclOK {
			return aclOK, 0
		}
		if r > result || r == result && a > at {
			result, at = r, a
		}
	}
	return result, at
}

func (s *aclSelector) check(cmd *aclCmd, args [][]byte) (result, at int) {
	if !s.allCommands && !cmd.noAuth && !s.bit(cmd.id) {
		idx := 1
		if cmd.parent != nil {
			idx = 2
		}
		ok := false
		if len(args) > idx {
			for _, a := range s.firstArgs[cmd.id] {
				if strings.EqualFold(a, string(args[idx])) {
					ok = true
					break
				}
			}
		}
		if !ok {
			return aclDeniedCmd, 0
		}
	}
	if !s.allKeys && cmd.oneKey > 0 && cmd.oneKey < len(args) {
		if !s.keyAllowed(args[cmd.oneKey], cmd.oneKeyFlags) {
			return aclDeniedKey, cmd.oneKey
		}
	} else if !s.allKeys && cmd.keys.HasKeys() {
		var buf [16]cmdspec.Key
		for _, k := range cmd.keys.Find(args, buf[:0]) {
			if !s.keyAllowed(args[k.Pos], k.Flags) {
				return aclDeniedKey, k.Pos
			}
		}
	}
	if !s.allChannels && cmd.channels != channelsNone {
		for i := 1; i < len(args); i++ {
			if cmd.channels == channelsPublish && i > 1 {
				break
			}
			if !s.channelAllowed(string(args[i]), cmd.channels == channelsPattern) {
				return aclDeniedChannel, i
			}
		}
	}
	return aclOK, 0
}

func (s *aclSelector) keyAllowed(key []byte, flags int) bool {
	need := 0
	if flags&cmdspec.Access != 0 {
		need |= aclRead
	}
	if flags&(cmdspec.Insert|cmdspec.Delete|cmdspec.Update) != 0 {
		need |= aclWrite
	}
	for i := range s.keys {
		if p := &s.keys[i]; p.perm&need == need && p.match(key) {
			return true
		}
	}
	return false
}

// channelAllowed reports whether any of u's selectors allows channel ch
// (a pattern, matched literally, when pattern).
func (u *aclUser) channelAllowed(ch string, pattern bool) bool {
	if u.sel.allChannels || u.sel.channelAllowed(ch, pattern) {
		return true
	}
	for i := range u.selectors {
		if s := &u.selectors[i]; s.allChannels || s.channelAllowed(ch, pattern) {
			return true
		}
	}
	return false
}

func (s *aclSelector) channelAllowed(ch string, pattern bool) bool {
	for _, p := range s.channels {
		if pattern && p == ch || !pattern && globMatch(p, ch) {
			return true
		}
	}
	return false
}

// channelKind says which arguments of a command name channels the ACL
// checks (getChannelsFromCommand; unsubscribing is never refused).
type channelKind uint8

const (
	channelsNone    channelKind = iota
	channelsPublish             // the first argument
	channelsAll                 // every argument
	channelsPattern             // every argument, a pattern matched literally
)

func channelsOf(name string) channelKind {
	switch name {
	case "publish", "spublish":
		return channelsPublish
	case "subscribe", "ssubscribe":
		return channelsAll
	case "psubscribe":
		return channelsPattern
	}
	return channelsNone
}

func globMatch(pattern, s string) bool { return fsm.MatchGlob(pattern, s) }
