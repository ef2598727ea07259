package acl

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"kvs/cmdspec"
	"kvs/fsm"
)

// Key pattern permissions (%R~, %W~; ~ is both), for FullKeyAccess.
const (
	Read      = 1
	Write     = 2
	readWrite = Read | Write
)

// Selector is a user's rules about commands, keys and channels.
type Selector struct {
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
	return fsm.MatchGlob(p.pattern, string(key))
}

func (p keyPattern) String() string {
	switch p.perm {
	case Read:
		return "%R~" + p.pattern
	case Write:
		return "%W~" + p.pattern
	}
	return "~" + p.pattern
}

func (s *Selector) bit(id int) bool { return s.allowed[id/64]&(1<<(id%64)) != 0 }

func (s *Selector) setBit(id int, on bool) {
	if on {
		s.allowed[id/64] |= 1 << (id % 64)
	} else {
		s.allowed[id/64] &^= 1 << (id % 64)
		s.allCommands = false
	}
}

// changePerm allows or denies a command and, for a container, all its
// subcommands (ACLChangeSelectorPerm).
func (s *Selector) changePerm(cmd *Command, on bool) {
	s.setBit(cmd.id, on)
	delete(s.firstArgs, cmd.id)
	for _, sub := range cmd.Subs {
		s.setBit(sub.id, on)
	}
}

func (s *Selector) setCategory(ac *Commands, cat Category, on bool) {
	for _, cmd := range ac.all {
		if cmd.cats&cat != 0 {
			s.changePerm(cmd, on)
		}
	}
}

func (s *Selector) clone() Selector {
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

// User is one user. Immutable once built (NewUser, ParseUser, WithRules).
type User struct {
	name   string
	on     bool
	nopass bool
	// sanitize is "", "sanitize-payload" or "skip-sanitize-payload":
	// shown as Redis shows it; kvs has no RESTORE payloads to sanitize.
	sanitize  string
	passwords []string // SHA-256 hex, in the order they were added
	sel       Selector
	// selectors are the user's further selectors ("(~k* +get)"): a
	// command is allowed when the root selector or any of them allows it.
	selectors []Selector
	// unrestricted: every command, key and channel; the check before a
	// command is skipped for it.
	unrestricted bool
}

func (u *User) clone() *User {
	n := *u
	n.passwords = append([]string(nil), u.passwords...)
	n.sel = u.sel.clone()
	n.selectors = nil
	for i := range u.selectors {
		n.selectors = append(n.selectors, u.selectors[i].clone())
	}
	return &n
}

// NewUser returns a new user named name as ACL SETUSER makes it: off,
// with no password and no rights.
func NewUser(ac *Commands, name string) *User {
	return &User{name: name, sel: Selector{allowed: make([]uint64, ac.words)}}
}

// HashPassword is a password as a user keeps it: SHA-256, in lowercase hex.
func HashPassword(p []byte) string {
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

// ValidUserName reports whether ACL SETUSER may name a user name: no
// spaces or null characters.
func ValidUserName(name string) bool { return !hasSpaces(name) }

// applyRule applies one ACL SETUSER rule to u (ACLSetUser), returning
// Redis's error text for a bad one.
func (u *User) applyRule(ac *Commands, op string) error {
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
			h = HashPassword([]byte(op[1:]))
		} else if !validHash(h) {
			return ErrHash
		}
		if !contains(u.passwords, h) {
			u.passwords = append(u.passwords, h)
		}
		u.nopass = false
	case op[0] == '<' || op[0] == '!':
		h := op[1:]
		if op[0] == '<' {
			h = HashPassword([]byte(op[1:]))
		} else if !validHash(h) {
			return ErrHash
		}
		i := index(u.passwords, h)
		if i < 0 {
			return ErrNoSuchPassword
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
		sel := Selector{allowed: make([]uint64, ac.words)}
		for _, r := range strings.Fields(op[1 : len(op)-1]) {
			if e := sel.applyRule(ac, r); e != nil {
				return e
			}
		}
		u.selectors = append(u.selectors, sel)
	case lower == "clearselectors":
		u.selectors = nil
	default:
		return u.sel.applyRule(ac, op)
	}
	return nil
}

// applyRule applies a selector rule (ACLSetSelector).
func (s *Selector) applyRule(ac *Commands, op string) error {
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
			return ErrKeysAll
		}
		perm, off := readWrite, 1
		if op[0] == '%' {
			perm = 0
			for ; off < len(op); off++ {
				c := op[off] | 0x20
				if c == 'r' && perm&Read == 0 {
					perm |= Read
				} else if c == 'w' && perm&Write == 0 {
					perm |= Write
				} else if op[off] == '~' {
					off++
					break
				} else {
					return ErrSyntax
				}
			}
		}
		pat := op[min(off, len(op)):]
		if perm == 0 || hasSpaces(pat) {
			return ErrSyntax
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
			return ErrChannelsAll
		}
		if hasSpaces(op[1:]) {
			return ErrSyntax
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
				return ErrUnknown
			}
			s.changePerm(cmd, true)
			return nil
		}
		cmd := ac.byName[name[:bar]]
		switch {
		case cmd == nil:
			return ErrUnknown
		case cmd.Parent != nil:
			return ErrFirstArgOfSubcommand
		case bar == len(name)-1:
			return ErrSyntax
		case len(cmd.Subs) > 0:
			sub := ac.byName[name]
			if sub == nil {
				return ErrUnknown
			}
			s.changePerm(sub, true)
		default:
			first := op[1+bar+1:]
			for _, a := range s.firstArgs[cmd.id] {
				if strings.EqualFold(a, first) {
					return nil
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
			return ErrUnknown
		}
		s.changePerm(cmd, false)
	case (op[0] == '+' || op[0] == '-') && strings.HasPrefix(op[1:], "@"):
		cat, ok := CategoryOf(op[2:])
		if !ok {
			return ErrUnknown
		}
		s.setCategory(ac, cat, op[0] == '+')
	default:
		return ErrSyntax
	}
	return nil
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

// ParseUser compiles a user from its rule line (Describe's form).
func ParseUser(ac *Commands, name, line string) (*User, error) {
	rules, open := MergeSelectors(strings.Fields(line))
	if open >= 0 {
		return nil, fmt.Errorf("acl: unmatched parenthesis in %q", line)
	}
	u, bad, err := NewUser(ac, name).WithRules(ac, rules)
	if err != nil {
		return nil, fmt.Errorf("acl: rule %q: %w", bad, err)
	}
	return u, nil
}

// WithRules returns a copy of u with rules applied in order (ACL
// SETUSER's, each a selector whole: see MergeSelectors), or the first
// rule that failed and why; u itself is left as it was.
func (u *User) WithRules(ac *Commands, rules []string) (*User, string, error) {
	n := u.clone()
	for _, r := range rules {
		if err := n.applyRule(ac, r); err != nil {
			return nil, r, err
		}
	}
	return n.finish(ac), "", nil
}

// finish computes the derived fields once all rules are applied.
func (u *User) finish(ac *Commands) *User {
	s := &u.sel
	all := s.bit(ac.future())
	for _, cmd := range ac.all {
		all = all && s.bit(cmd.id)
	}
	u.unrestricted = all && s.allKeys && s.allChannels
	return u
}

// Name is the user's name.
func (u *User) Name() string { return u.name }

// On reports whether the user may log in.
func (u *User) On() bool { return u.on }

// NoPass reports whether any password logs the user in.
func (u *User) NoPass() bool { return u.nopass }

// Unrestricted reports whether the user may run every command on every
// key and channel, so that no check is needed.
func (u *User) Unrestricted() bool { return u.unrestricted }

// Passwords are the user's password hashes (HashPassword), in the order
// they were added.
func (u *User) Passwords() []string { return u.passwords }

// Flags are ACL GETUSER's flags of the user: on or off, nopass, and the
// payload sanitizing one that was set.
func (u *User) Flags() []string {
	flags := []string{"off"}
	if u.on {
		flags[0] = "on"
	}
	if u.nopass {
		flags = append(flags, "nopass")
	}
	if u.sanitize != "" {
		flags = append(flags, u.sanitize)
	}
	return flags
}

// Selectors returns the user's selectors: its root one, then the "(...)"
// ones.
func (u *User) Selectors() []*Selector {
	out := make([]*Selector, 1+len(u.selectors))
	out[0] = &u.sel
	for i := range u.selectors {
		out[1+i] = &u.selectors[i]
	}
	return out
}

// CheckPassword reports whether password is one of u's (any is, for a
// nopass user). Comparisons take the same time whichever hash matches.
func (u *User) CheckPassword(password []byte) bool {
	if u.nopass {
		return true
	}
	h := HashPassword(password)
	ok := 0
	for _, p := range u.passwords {
		ok |= subtle.ConstantTimeCompare([]byte(h), []byte(p))
	}
	return ok == 1
}

// Describe returns u's rules as ACL LIST shows them after "user <name> "
// (ACLDescribeUser): flags, password hashes, keys, channels, commands.
// ParseUser reads it back to the same user.
func (u *User) Describe(ac *Commands) string {
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
func (s *Selector) describe(ac *Commands) string {
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
	b.WriteString(s.Commands(ac))
	return b.String()
}

// Keys and Channels are ACL GETUSER's keys and channels fields of s.
func (s *Selector) Keys() string {
	if s.allKeys {
		return "~*"
	}
	parts := make([]string, len(s.keys))
	for i, p := range s.keys {
		parts[i] = p.String()
	}
	return strings.Join(parts, " ")
}

func (s *Selector) Channels() string {
	if s.allChannels {
		return "&*"
	}
	parts := make([]string, len(s.channels))
	for i, p := range s.channels {
		parts[i] = "&" + p
	}
	return strings.Join(parts, " ")
}

// MergeSelectors joins the arguments of a selector split by spaces
// ("(~k*", "+get)") into one (ACLMergeSelectorArguments); it returns the
// index of an unclosed one's start when there is one.
func MergeSelectors(args []string) ([]string, int) {
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

// Commands returns the shortest rules Redis's heuristic finds
// that recreate the selector's command bitmap
// (ACLDescribeSelectorCommandRules): +@all or -@all, then the categories
// that fit best, then single commands. Redis emits the single commands in
// its hash table's order; kvs in name order.
func (s *Selector) Commands(ac *Commands) string {
	fake := Selector{allowed: make([]uint64, ac.words)}
	temp := Selector{allowed: append([]uint64(nil), s.allowed...)}
	var rules []string
	additive := !s.bit(ac.future())
	if additive {
		rules = append(rules, "-@all")
	} else {
		rules = append(rules, "+@all")
		fake.applyRule(ac, "+@all")
	}
	applied := make([]bool, len(CategoryNames))
	for {
		best, mindiff, maxsame := -1, int(^uint(0)>>1), 0
		for j := range CategoryNames {
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
		fake.applyRule(ac, sign+CategoryNames[best])
		temp.applyRule(ac, inv+CategoryNames[best])
		rules = append(rules, sign+CategoryNames[best])
		applied[best] = true
	}
	var single func(cmds []*Command)
	single = func(cmds []*Command) {
		for _, cmd := range cmds {
			user, f := s.bit(cmd.id), fake.bit(cmd.id)
			if user != f {
				if user {
					rules = append(rules, "+"+cmd.Name)
				} else {
					rules = append(rules, "-"+cmd.Name)
				}
				fake.changePerm(cmd, user)
			}
			single(cmd.Subs)
			if !user {
				for _, a := range s.firstArgs[cmd.id] {
					rules = append(rules, "+"+cmd.Name+"|"+a)
				}
			}
		}
	}
	single(ac.top)
	return strings.Join(rules, " ")
}

// Result is the result of a permission check (Redis's ACL_DENIED_*),
// in the order of their weight when selectors disagree.
type Result int

const (
	OK Result = iota
	DeniedCmd
	DeniedKey
	DeniedAuth
	DeniedChannel
)

// FullKeyAccess reports whether one of u's selectors both allows cmd with
// args and gives every key for perm (Redis's
// ACLUserCheckCmdWithUnrestrictedKeyAccess): SORT's BY and GET patterns
// read keys no key specification names, and need it.
func (u *User) FullKeyAccess(cmd *Command, args [][]byte, perm int) bool {
	if u.unrestricted {
		return true
	}
	if r, _ := u.sel.check(cmd, args); r == OK && u.sel.everyKey(perm) {
		return true
	}
	for i := range u.selectors {
		if r, _ := u.selectors[i].check(cmd, args); r == OK && u.selectors[i].everyKey(perm) {
			return true
		}
	}
	return false
}

// everyKey reports whether s gives every key for perm: allkeys, or a "*"
// pattern with that permission.
func (s *Selector) everyKey(perm int) bool {
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

// Check reports whether u may run cmd with args (its name included), and
// when not, why and the index of the argument at fault
// (ACLSelectorCheckCmd).
func (u *User) Check(cmd *Command, args [][]byte) (result Result, at int) {
	result, at = u.sel.check(cmd, args)
	if result == OK {
		return OK, 0
	}
	// With selectors: the first that allows the command wins; else the
	// worst refusal (a channel over a key over the command), and of those
	// the one furthest into the arguments (ACLCheckAllUserCommandPerm).
	for i := range u.selectors {
		r, a := u.selectors[i].check(cmd, args)
		if r == OK {
			return OK, 0
		}
		if r > result || r == result && a > at {
			result, at = r, a
		}
	}
	return result, at
}

func (s *Selector) check(cmd *Command, args [][]byte) (result Result, at int) {
	if !s.allCommands && !cmd.noAuth && !s.bit(cmd.id) {
		idx := 1
		if cmd.Parent != nil {
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
			return DeniedCmd, 0
		}
	}
	if !s.allKeys && cmd.oneKey > 0 && cmd.oneKey < len(args) {
		if !s.keyAllowed(args[cmd.oneKey], cmd.oneKeyFlags) {
			return DeniedKey, cmd.oneKey
		}
	} else if !s.allKeys && cmd.keys.HasKeys() {
		var buf [16]cmdspec.Key
		for _, k := range cmd.keys.Find(args, buf[:0]) {
			if !s.keyAllowed(args[k.Pos], k.Flags) {
				return DeniedKey, k.Pos
			}
		}
	}
	if !s.allChannels && cmd.channels != cmdspec.ChannelsNone {
		for i := 1; i < len(args); i++ {
			if cmd.channels == cmdspec.ChannelsPublish && i > 1 {
				break
			}
			if !s.channelAllowed(string(args[i]), cmd.channels == cmdspec.ChannelsPattern) {
				return DeniedChannel, i
			}
		}
	}
	return OK, 0
}

func (s *Selector) keyAllowed(key []byte, flags int) bool {
	need := 0
	if flags&cmdspec.Access != 0 {
		need |= Read
	}
	if flags&(cmdspec.Insert|cmdspec.Delete|cmdspec.Update) != 0 {
		need |= Write
	}
	for i := range s.keys {
		if p := &s.keys[i]; p.perm&need == need && p.match(key) {
			return true
		}
	}
	return false
}

// ChannelAllowed reports whether any of u's selectors allows channel ch
// (a pattern, matched literally, when pattern).
func (u *User) ChannelAllowed(ch string, pattern bool) bool {
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

func (s *Selector) channelAllowed(ch string, pattern bool) bool {
	for _, p := range s.channels {
		if pattern && p == ch || !pattern && fsm.MatchGlob(p, ch) {
			return true
		}
	}
	return false
}

// CheckEntry checks what a forwarded fsm command tells of the command a
// user sent, when its arguments are gone: one of u's selectors must allow
// one of cmds (when cmds is not empty; a nil entry allows nothing) and,
// for keys with the key-spec flags, each of keys, and every key when
// every. When none does, the root selector's refusal.
func (u *User) CheckEntry(cmds []*Command, keys [][]byte, every bool, flags int) Result {
	r := u.sel.checkEntry(cmds, keys, every, flags)
	for i := 0; r != OK && i < len(u.selectors); i++ {
		if u.selectors[i].checkEntry(cmds, keys, every, flags) == OK {
			r = OK
		}
	}
	return r
}

func (s *Selector) checkEntry(cmds []*Command, keys [][]byte, every bool, flags int) Result {
	if len(cmds) > 0 && !s.allCommands {
		ok := false
		for _, cmd := range cmds {
			if cmd != nil && s.bit(cmd.id) {
				ok = true
			}
		}
		if !ok {
			return DeniedCmd
		}
	}
	if s.allKeys {
		return OK
	}
	if every && !s.keyAllowed([]byte("*"), flags) {
		return DeniedKey
	}
	for _, k := range keys {
		if !s.keyAllowed(k, flags) {
			return DeniedKey
		}
	}
	return OK
}
