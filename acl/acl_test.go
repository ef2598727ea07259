package acl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kvs/cmdspec"
)

// testCommands is every command and subcommand Redis 7.0 has, described
// as server describes its own.
func testCommands(t testing.TB) *Commands {
	t.Helper()
	var specs []Spec
	for name, cats := range cmdspec.Categories {
		specs = append(specs, Spec{Name: name, Categories: cats, Keys: cmdspec.FinderOf(name),
			Channels: cmdspec.ChannelsOf(name), NoAuth: name == "auth" || name == "hello" || name == "quit" || name == "reset"})
	}
	return NewCommands(specs)
}

func argv(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

func mustUser(t *testing.T, ac *Commands, line string) *User {
	t.Helper()
	u, err := ParseUser(ac, "u", line)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return u
}

// A user's rule line parses back to the same user: the table stores users
// as lines, so every node compiles what the proposer described.
func TestDescribeRoundTrip(t *testing.T) {
	ac := testCommands(t)
	for _, rules := range []string{
		"on >pw ~k* %R~r* %W~w* &ch* -@all +get +set +config|get +select|0",
		"off nopass +@all -@dangerous -flushall allkeys allchannels",
		"on #" + strings.Repeat("0a", 32) + " -@all +@read +@hash -hget resetchannels",
		"reset on skip-sanitize-payload nocommands +@string -append",
		"on allcommands -client -config|set",
		"on ~a* +get (~b* +set) (%R~c* &ch +@read -hget)",
	} {
		merged, open := MergeSelectors(strings.Fields(rules))
		if open >= 0 {
			t.Fatalf("%q: unmatched selector at %d", rules, open)
		}
		u, bad, err := NewUser(ac, "u").WithRules(ac, merged)
		if err != nil {
			t.Fatalf("%q: rule %q: %v", rules, bad, err)
		}
		line := u.Describe(ac)
		again, err := ParseUser(ac, "u", line)
		if err != nil {
			t.Fatalf("%q described as %q, which does not parse: %v", rules, line, err)
		}
		if got := again.Describe(ac); got != line {
			t.Errorf("%q: described %q, then %q", rules, line, got)
		}
		for _, cmd := range ac.all {
			if u.sel.bit(cmd.id) != again.sel.bit(cmd.id) {
				t.Errorf("%q: %s differs after the round trip through %q", rules, cmd.Name, line)
			}
		}
	}
}

// Descriptions are ACL LIST's, as redis-server 7.0 gives them.
func TestDescribe(t *testing.T) {
	ac := testCommands(t)
	for rules, want := range map[string]string{
		DefaultUserLine:                         "on nopass ~* &* +@all",
		"on >pw ~k* +get":                       "on #" + HashPassword([]byte("pw")) + " ~k* resetchannels -@all +get",
		"off %R~r* %W~w* ~rw* &ch -@all +@hash": "off %R~r* %W~w* ~rw* resetchannels &ch -@all +@hash",
		"on nopass +@all -@dangerous":           "on nopass resetchannels +@all -@dangerous",
		"on -@all +select|0 +select|1":          "on resetchannels -@all +select|0 +select|1",
		"on ~a* +get (~b* +set)":                "on ~a* resetchannels -@all +get (~b* resetchannels -@all +set)",
		"on skip-sanitize-payload -@all":        "on skip-sanitize-payload resetchannels -@all",
	} {
		u := mustUser(t, ac, rules)
		if got := u.Describe(ac); got != want {
			t.Errorf("%q: described %q, want %q", rules, got, want)
		}
	}
}

// The default user is unrestricted (the check before each command is
// skipped) only while it may run everything.
func TestUnrestricted(t *testing.T) {
	ac := testCommands(t)
	for line, want := range map[string]bool{
		DefaultUserLine:                    true,
		"on nopass ~* &* +@all -get":       false,
		"on nopass ~k* &* +@all":           false,
		"on nopass ~* resetchannels +@all": false,
		"on nopass ~* &* -@all +@all":      true,
	} {
		if u := mustUser(t, ac, line); u.Unrestricted() != want {
			t.Errorf("%q: unrestricted %v, want %v", line, u.Unrestricted(), want)
		}
	}
}

// A bad rule is refused with Redis's error, naming the rule, and leaves
// the user as it was.
func TestRuleErrors(t *testing.T) {
	ac := testCommands(t)
	base := mustUser(t, ac, "on ~k* +get")
	for rule, want := range map[string]error{
		"+nosuch":        ErrUnknown,
		"+@nosuch":       ErrUnknown,
		"bogus":          ErrSyntax,
		"%X~k":           ErrSyntax,
		"#abc":           ErrHash,
		"<never-set":     ErrNoSuchPassword,
		"+config|get|x":  ErrFirstArgOfSubcommand,
		"+get|":          ErrSyntax,
		"+config|nosuch": ErrUnknown,
	} {
		u, bad, err := base.WithRules(ac, []string{"+set", rule})
		if !errors.Is(err, want) || bad != rule || u != nil {
			t.Errorf("%q: %v (rule %q), want %v", rule, err, bad, want)
		}
	}
	if _, _, err := mustUser(t, ac, "allkeys").WithRules(ac, []string{"~k"}); err != ErrKeysAll {
		t.Errorf("a pattern after allkeys: %v", err)
	}
	if _, _, err := mustUser(t, ac, "allchannels").WithRules(ac, []string{"&c"}); err != ErrChannelsAll {
		t.Errorf("a channel after allchannels: %v", err)
	}
	if got := base.Describe(ac); got != "on ~k* resetchannels -@all +get" {
		t.Errorf("the user changed: %q", got)
	}
	if _, err := ParseUser(ac, "u", "on (~k* +get"); err == nil {
		t.Error("an unclosed selector parsed")
	}
}

// Selectors split by spaces are joined; an unclosed one is reported at
// its start.
func TestMergeSelectors(t *testing.T) {
	got, open := MergeSelectors([]string{"on", "(~k*", "+get)", "(+set)", ">pw"})
	if open >= 0 || strings.Join(got, ",") != "on,(~k* +get),(+set),>pw" {
		t.Errorf("merged %q, %d", got, open)
	}
	if _, open := MergeSelectors([]string{"on", "(~k*", "+get"}); open != 1 {
		t.Errorf("unclosed selector at %d, want 1", open)
	}
}

// The check answers what Redis's ACLCheckAllUserCommandPerm answers: the
// kind of refusal and the argument at fault.
func TestCheck(t *testing.T) {
	ac := testCommands(t)
	for _, tc := range []struct {
		rules, args string
		res         Result
		at          int
	}{
		{"~k* +get", "get k1", OK, 0},
		{"~k* +get", "set k1 v", DeniedCmd, 0},
		{"~k* +get", "get other", DeniedKey, 1},
		{"~k* +mget", "mget k1 k2 x k3", DeniedKey, 3},
		{"%R~k* +@all", "set k1 v", DeniedKey, 1},
		{"%W~k* +@all", "set k1 v", OK, 0},
		{"%W~k* +@all", "set k1 v get", DeniedKey, 1},
		{"~* +config|get", "config get maxmemory", OK, 0},
		{"~* +config|get", "config set maxmemory 1", DeniedCmd, 0},
		{"~* +select|0", "select 0", OK, 0},
		{"~* +select|0", "select 1", DeniedCmd, 0},
		{"~* -@all", "auth pw", OK, 0},
		{"&news* +@all", "publish news1 m", OK, 0},
		{"&news* +@all", "publish other m", DeniedChannel, 1},
		{"&news* +@all", "subscribe news1 other", DeniedChannel, 2},
		{"&news* +@all", "psubscribe news1", DeniedChannel, 1},
		{"&news* +@all", "psubscribe news*", OK, 0},
		{"~a* +get (~b* +set)", "set b1 v", OK, 0},
		{"~a* +get (~b* +set)", "set a1 v", DeniedKey, 1},
		{"~a* +get (~b* +set)", "get b1", DeniedKey, 1},
		{"~a* +get (~b* +set)", "del a1", DeniedCmd, 0},
		{"~k* +eval", "eval s 2 k1 x", DeniedKey, 4},
	} {
		u := mustUser(t, ac, "on nopass "+tc.rules)
		args := argv(tc.args)
		cmd := ac.Resolve(strings.ToLower(string(args[0])), args)
		res, at := u.Check(cmd, args)
		if res != tc.res || at != tc.at {
			t.Errorf("%q running %q: %d at %d, want %d at %d", tc.rules, tc.args, res, at, tc.res, tc.at)
		}
	}
}

// SORT's BY and GET need every key, in one selector that allows the
// command.
func TestFullKeyAccess(t *testing.T) {
	ac := testCommands(t)
	args := argv("sort k by w*")
	cmd := ac.Lookup("sort")
	for rules, want := range map[string]bool{
		"~* +@all":             true,
		"%R~* +@all":           true,
		"%W~* +@all":           false,
		"~k* +@all":            false,
		"~* -@all":             false,
		"~k* +sort (~* +sort)": true,
		"~* +get (~k* +sort)":  false,
	} {
		if got := mustUser(t, ac, "on "+rules).FullKeyAccess(cmd, args, Read); got != want {
			t.Errorf("%q: %v, want %v", rules, got, want)
		}
	}
}

// A forwarded command is checked from its keys and the commands its op
// stands for.
func TestCheckEntry(t *testing.T) {
	ac := testCommands(t)
	flush := []*Command{ac.Lookup("flushall"), ac.Lookup("flushdb")}
	u := mustUser(t, ac, "on ~app:* %R~ro:* +@all -flushall")
	for _, tc := range []struct {
		cmds  []*Command
		keys  string
		every bool
		flags int
		want  Result
	}{
		{nil, "app:1", false, cmdspec.Update, OK},
		{nil, "ro:1", false, cmdspec.Update, DeniedKey},
		{nil, "ro:1", false, cmdspec.Access, OK},
		{flush, "", true, cmdspec.Update, DeniedKey},
		{[]*Command{nil}, "app:1", false, cmdspec.Update, DeniedCmd},
	} {
		if got := u.CheckEntry(tc.cmds, argv(tc.keys), tc.every, tc.flags); got != tc.want {
			t.Errorf("%+v: %d, want %d", tc, got, tc.want)
		}
	}
	if got := mustUser(t, ac, "on ~* -@all +flushdb").CheckEntry(flush, nil, true, cmdspec.Update); got != OK {
		t.Errorf("flushdb allowed, FLUSHALL's op: %d", got)
	}
	if got := mustUser(t, ac, "on ~* -@all (~* +flushall)").CheckEntry(flush, nil, true, cmdspec.Update); got != OK {
		t.Errorf("a selector allowing flushall: %d", got)
	}
}

func TestPasswords(t *testing.T) {
	ac := testCommands(t)
	u := mustUser(t, ac, "on >one >two <one")
	if u.CheckPassword([]byte("one")) || !u.CheckPassword([]byte("two")) {
		t.Error("passwords after >one >two <one")
	}
	if got := u.Passwords(); len(got) != 1 || got[0] != HashPassword([]byte("two")) {
		t.Errorf("hashes %q", got)
	}
	if !mustUser(t, ac, "on nopass").CheckPassword([]byte("any")) {
		t.Error("nopass refused a password")
	}
	if got := strings.Join(mustUser(t, ac, "off nopass sanitize-payload").Flags(), " "); got != "off nopass sanitize-payload" {
		t.Errorf("flags %q", got)
	}
}

// The compiled table adds the default user when the store has none,
// requires AUTH while it has a password or is off, and leaves out a line
// it cannot read.
func TestCompile(t *testing.T) {
	ac := testCommands(t)
	st := Compile(ac, 7, map[string]string{"app": "on >pw +get"}, func(name string, err error) {
		t.Errorf("%s: %v", name, err)
	})
	if st.Gen != 7 || strings.Join(st.Names, " ") != "app default" || st.AuthRequired {
		t.Fatalf("compiled %+v", st)
	}
	var bad []string
	st = Compile(ac, 8, map[string]string{"default": "on >pw ~* +@all", "x": "on +nosuch"}, func(name string, err error) {
		bad = append(bad, name)
	})
	if !st.AuthRequired || st.Users["x"] != nil || strings.Join(bad, " ") != "x" {
		t.Fatalf("compiled %+v, bad %q", st, bad)
	}
	if !st.RequirePass("pw") || st.RequirePass("other") || st.RequirePass("") {
		t.Error("RequirePass")
	}
	line := st.RequirePassLine(ac, "new")
	if line != "on #"+HashPassword([]byte("new"))+" ~* resetchannels +@all" {
		t.Errorf("requirepass line %q", line)
	}
	if line := st.RequirePassLine(ac, ""); line != "on nopass ~* resetchannels +@all" {
		t.Errorf("requirepass line without a password %q", line)
	}
}

// The ACL file is read as Redis reads it, every problem reported in
// Redis's words, and written back as ACL LIST's lines.
func TestFile(t *testing.T) {
	ac := testCommands(t)
	pairs, err := ParseFile(ac, "users.acl", "user app on >pw ~app:* +get\n\n  user ro off (~r* +get)\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"app", "on #" + HashPassword([]byte("pw")) + " ~app:* resetchannels -@all +get",
		"ro", "off resetchannels -@all (~r* resetchannels -@all +get)", "default", DefaultUserLine}
	if strings.Join(pairs, "|") != strings.Join(want, "|") {
		t.Fatalf("pairs %q\nwant %q", pairs, want)
	}
	_, err = ParseFile(ac, "users.acl", "user a on +nosuch +@nosuch bogus %X~k\nnot a user\nuser a on\nuser b (~k*")
	wantErr := "users.acl:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. " +
		"users.acl:1: Error in applying operation '+@nosuch': Unknown command or category name in ACL. " +
		"users.acl:1: Syntax error. " +
		"users.acl:2 should start with user keyword followed by the username. " +
		"WARNING: Duplicate user 'a' found on line 3. " +
		"users.acl:4: Unmatched parenthesis in selector definition." +
		"WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
	if err == nil || err.Error() != wantErr {
		t.Fatalf("errors:\n%v\nwant\n%s", err, wantErr)
	}

	path := filepath.Join(t.TempDir(), "users.acl")
	if _, err := ReadFile(ac, path); err == nil || err.Error() != "Error loading ACLs, opening file '"+path+"': No such file or directory" {
		t.Fatalf("missing file: %v", err)
	}
	lines := map[string]string{}
	for i := 0; i < len(pairs); i += 2 {
		lines[pairs[i]] = pairs[i+1]
	}
	st := Compile(ac, 1, lines, func(name string, err error) { t.Errorf("%s: %v", name, err) })
	if err := os.WriteFile(path, st.FileText(ac), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := ReadFile(ac, path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(again, "|") != strings.Join([]string{pairs[0], pairs[1], pairs[4], pairs[5], pairs[2], pairs[3]}, "|") {
		t.Errorf("written and read back: %q", again)
	}
}

// ACL LOG groups like denials of the last minute on one entry, newest
// first, and keeps at most LogMax.
func TestLog(t *testing.T) {
	ac := testCommands(t)
	var l Log
	now := time.Unix(1000, 0)
	get := ac.Lookup("get")
	l.AddDenial("toplevel", "u", "c1", now, DeniedCmd, get, argv("get k"), 0)
	l.AddDenial("toplevel", "u", "c2", now.Add(time.Second), DeniedKey, get, argv("get k"), 1)
	l.AddDenial("toplevel", "u", "c3", now.Add(2*time.Second), DeniedCmd, get, argv("get k"), 0)
	l.Add(&Entry{Reason: "auth", Context: "toplevel", Object: "AUTH", Username: "u", Updated: now.Add(2 * time.Minute)})
	e := l.Entries(10)
	if len(e) != 3 || e[0].Reason != "auth" || e[1].Reason != "command" || e[1].Count != 2 || e[1].ClientInfo != "c3" ||
		e[1].EntryID != 0 || e[2].Object != "k" || e[2].EntryID != 1 || e[0].EntryID != 2 {
		t.Fatalf("entries %+v", e)
	}
	for i := 0; i < LogMax+5; i++ {
		l.Add(&Entry{Reason: "key", Context: "toplevel", Object: strings.Repeat("k", i+1), Username: "u", Updated: now})
	}
	if n := len(l.Entries(1000)); n != LogMax {
		t.Errorf("%d entries, want %d", n, LogMax)
	}
	l.Reset()
	if n := len(l.Entries(10)); n != 0 {
		t.Errorf("%d entries after Reset", n)
	}
	if d := l.Denials(); d["command"] != 2 || d["key"] != LogMax+6 || d["auth"] != 1 || d["channel"] != 0 {
		t.Errorf("denials %v", d)
	}
}

// ACL CAT lists a category's commands, top-level commands first.
func TestCategories(t *testing.T) {
	ac := testCommands(t)
	cat, ok := CategoryOf("KEYSPACE")
	if !ok || cat != 1 {
		t.Fatalf("keyspace: %d %v", cat, ok)
	}
	if _, ok := CategoryOf("nosuch"); ok {
		t.Error("an unknown category")
	}
	names := ac.InCategory(cat)
	sawSub := false
	for _, n := range names {
		if strings.Contains(n, "|") {
			sawSub = true
		} else if sawSub {
			t.Fatalf("%s after a subcommand in %q", n, names)
		}
	}
	if got := strings.Join(ac.Lookup("get").Categories(), " "); got != "read string fast" {
		t.Errorf("get's categories %q", got)
	}
	if !ac.Lookup("auth").NoAuth() || ac.Lookup("config|get").NoAuth() || ac.Lookup("get").NoAuth() {
		t.Error("NoAuth")
	}
}
