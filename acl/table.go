package acl

import (
	"sort"
	"strings"
)

// DefaultUserLine is the default user's rules when the table has none:
// Redis's default user, open to all.
const DefaultUserLine = "on nopass ~* &* +@all"

// Table is the replicated ACL table compiled. Immutable.
type Table struct {
	Gen   uint64 // the store's ACL generation it was compiled at
	Users map[string]*User
	// Lines is the rule line each user of Users was compiled from (the
	// default user's DefaultUserLine when the store has none).
	Lines map[string]string
	Names []string // sorted
	// AuthRequired: the default user has a password or is off, so a new
	// connection must AUTH (authRequired in Redis's networking.c).
	AuthRequired bool
}

// Compile compiles the store's table at generation gen: each user's rule
// line by name, the default user DefaultUserLine's when lines has none. A
// line that does not parse leaves its user out (denied rather than
// admitted with wrong rights), and is reported to bad: lines are
// validated before they are proposed, so it came from another version.
func Compile(ac *Commands, gen uint64, lines map[string]string, bad func(name string, err error)) *Table {
	t := &Table{Gen: gen, Users: make(map[string]*User, len(lines)+1), Lines: make(map[string]string, len(lines))}
	add := func(name, line string) {
		u, err := ParseUser(ac, name, line)
		if err != nil {
			bad(name, err)
			return
		}
		t.Users[name] = u
		t.Lines[name] = line
		t.Names = append(t.Names, name)
	}
	for name, line := range lines {
		add(name, line)
	}
	if _, ok := lines["default"]; !ok {
		add("default", DefaultUserLine)
	}
	sort.Strings(t.Names)
	if d := t.Users["default"]; d == nil || !d.nopass || !d.on {
		t.AuthRequired = true
	}
	return t
}

// List returns ACL LIST's lines: "user <name> <rules>", by name.
func (t *Table) List(ac *Commands) []string {
	out := make([]string, len(t.Names))
	for i, name := range t.Names {
		out[i] = "user " + name + " " + t.Users[name].Describe(ac)
	}
	return out
}

// RequirePassLine is the default user's line with password as its only
// password ("" for none), as requirepass sets it
// (ACLUpdateDefaultUserPassword: resetpass, then >password or nopass).
func (t *Table) RequirePassLine(ac *Commands, password string) string {
	u := t.Users["default"]
	if u == nil {
		u, _ = ParseUser(ac, "default", DefaultUserLine)
	}
	rule := "nopass"
	if password != "" {
		rule = ">" + password
	}
	u, _, _ = u.WithRules(ac, []string{"resetpass", rule})
	return u.Describe(ac)
}

// RequirePass reports whether password is the default user's only
// password: what CONFIG GET requirepass shows, when this node knows it.
func (t *Table) RequirePass(password string) bool {
	d := t.Users["default"]
	return d != nil && password != "" && len(d.passwords) == 1 && d.passwords[0] == HashPassword([]byte(password))
}

// hasSpaces is Redis's check of a user name and of a pattern.
func hasSpaces(s string) bool { return strings.ContainsAny(s, " \t\r\n\x00") }
