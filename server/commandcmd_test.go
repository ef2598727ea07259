package server

import (
	"strings"
	"testing"

	"kvs/cmdspec"
)

// The key range a row declares for COMMAND INFO is the one Redis derives
// from the command's key specs, and the movablekeys flag follows them.
func TestCommandRowsMatchKeySpecs(t *testing.T) {
	for name, cmd := range commandTable() {
		first, last, step, movable := cmdspec.LegacyRange(cmdspec.KeySpecs[name])
		if cmd.firstKey != first || cmd.lastKey != last || cmd.keyStep != step {
			t.Errorf("%s: row's keys %d %d %d, key specs' %d %d %d", name,
				cmd.firstKey, cmd.lastKey, cmd.keyStep, first, last, step)
		}
		if movable != (cmd.flags&flagMovableKeys != 0) {
			t.Errorf("%s: movablekeys %v, key specs say %v", name, !movable, movable)
		}
	}
}

// Every command Redis has subcommands of names the ones it answers, and
// answers each of them: none gets "unknown subcommand".
func TestContainersNameTheirSubcommands(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for name, cmd := range s.commands {
		if cmd.container != (cmd.subs != "") {
			t.Errorf("%s: a Redis container %v, names subcommands %q", name, cmd.container, cmd.subs)
		}
		for _, sub := range cmd.subcommands {
			if strings.HasPrefix(sub.name, "client|") && (strings.HasSuffix(sub.name, "|pause") ||
				strings.HasSuffix(sub.name, "|kill") || strings.HasSuffix(sub.name, "|reply")) {
				continue // would change this connection; no argument is a wrong number
			}
			args := strings.Split(sub.name, "|")
			for len(args) < -sub.arity || len(args) < sub.arity {
				args = append(args, "x")
			}
			if got := rc.do(args...); strings.Contains(got, "unknown subcommand") {
				t.Errorf("%s: %q", sub.name, got)
			}
		}
	}
}

func TestCommandGetKeys(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, tc := range []struct{ args, want string }{
		{"GETKEYS get key", "*1\r\n$3\r\nkey\r\n"},
		{"GETKEYS memory usage key", "*1\r\n$3\r\nkey\r\n"},
		{"GETKEYS lcs a b", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{"GETKEYS mset a 1 b 2", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{"GETKEYS eval s 1 k", "*1\r\n$1\r\nk\r\n"},
		{"GETKEYS eval s 0", "*0\r\n"},
		{"GETKEYS eval s x", "*0\r\n"},
		{"GETKEYS zunionstore d 2 a b", "*3\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\nb\r\n"},
		// a count the arguments cannot hold: the specs fail, and Redis's
		// own finder finds nothing
		{"GETKEYS zunionstore d 3 a b", "-ERR Invalid arguments specified for command\r\n"},
		{"GETKEYS zunion 0 a", "-ERR Invalid arguments specified for command\r\n"},
		{"GETKEYS sort a by store store", "*1\r\n$1\r\na\r\n"},
		{"GETKEYS sort a limit 0 1 store b store c", "*2\r\n$1\r\na\r\n$1\r\nc\r\n"},
		{"GETKEYS sort_ro a by k get g", "*1\r\n$1\r\na\r\n"},
		{"GETKEYSANDFLAGS sort a store b", "*2\r\n*2\r\n$1\r\na\r\n*2\r\n+RO\r\n+access\r\n*2\r\n$1\r\nb\r\n*2\r\n+OW\r\n+update\r\n"},
		{"GETKEYSANDFLAGS set a b", "*1\r\n*2\r\n$1\r\na\r\n*2\r\n+OW\r\n+update\r\n"},
		{"GETKEYSANDFLAGS set a b get", "*1\r\n*2\r\n$1\r\na\r\n*3\r\n+RW\r\n+access\r\n+update\r\n"},
		{"GETKEYSANDFLAGS bitfield a get u8 0", "*1\r\n*2\r\n$1\r\na\r\n*2\r\n+RO\r\n+access\r\n"},
		{"GETKEYSANDFLAGS lmove a b left right", "*2\r\n*2\r\n$1\r\na\r\n*3\r\n+RW\r\n+access\r\n+delete\r\n*2\r\n$1\r\nb\r\n*2\r\n+RW\r\n+insert\r\n"},
		{"GETKEYSANDFLAGS zunionstore d 3 a b c", "*4\r\n*2\r\n$1\r\nd\r\n*2\r\n+OW\r\n+update\r\n*2\r\n$1\r\na\r\n*2\r\n+RO\r\n+access\r\n" +
			"*2\r\n$1\r\nb\r\n*2\r\n+RO\r\n+access\r\n*2\r\n$1\r\nc\r\n*2\r\n+RO\r\n+access\r\n"},
		{"GETKEYS nosuch a", "-ERR Invalid command specified\r\n"},
		{"GETKEYS object nosuch a", "-ERR Invalid command specified\r\n"},
		{"GETKEYS ping x", "-ERR The command has no key arguments\r\n"},
		{"GETKEYS spublish ch msg", "-ERR The command has no key arguments\r\n"},
		{"GETKEYS get a b", "-ERR Invalid number of arguments specified for command\r\n"},
		{"GETKEYS", "-ERR wrong number of arguments for 'command|getkeys' command\r\n"},
	} {
		if got := rc.do(append([]string{"COMMAND"}, strings.Fields(tc.args)...)...); got != tc.want {
			t.Errorf("COMMAND %s: %q, want %q", tc.args, got, tc.want)
		}
	}
	many := []string{"COMMAND", "GETKEYS", "zunionstore", "d", "300"}
	want := "*301\r\n$1\r\nd\r\n"
	for i := 0; i < 300; i++ {
		k := "k" + itoa(i)
		many = append(many, k)
		want += "$" + itoa(len(k)) + "\r\n" + k + "\r\n"
	}
	if got := rc.do(many...); got != want {
		t.Errorf("COMMAND GETKEYS of 301 keys: %q", got)
	}
}

func TestCommandList(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	list := func(args ...string) []string {
		reply := rc.do(append([]string{"COMMAND", "LIST"}, args...)...)
		var names []string
		for _, l := range strings.Split(reply, "\r\n")[1:] {
			if l != "" && l[0] != '$' {
				names = append(names, l)
			}
		}
		return names
	}
	has := func(names []string, name string) bool {
		for _, n := range names {
			if n == name {
				return true
			}
		}
		return false
	}
	all := list()
	for _, name := range []string{"set", "client", "client|list", "config|get", "command|getkeys",
		"client|tracking", "client|caching", "client|getredir", "client|trackinginfo"} {
		if !has(all, name) {
			t.Errorf("COMMAND LIST has no %s", name)
		}
	}
	if has(all, "client|nosuch") {
		t.Error("COMMAND LIST names a CLIENT subcommand kvs does not answer")
	}
	if got := list("FILTERBY", "PATTERN", "SET"); len(got) != 1 || got[0] != "set" {
		t.Errorf("FILTERBY PATTERN SET: %q", got)
	}
	if got := list("filterby", "pattern", "config|*re*"); strings.Join(got, " ") != "config|resetstat config|rewrite" {
		t.Errorf("FILTERBY PATTERN config|*re*: %q", got)
	}
	scripting := list("filterby", "aclcat", "scripting")
	if !has(scripting, "eval") || !has(scripting, "script|kill") || has(scripting, "set") {
		t.Errorf("FILTERBY ACLCAT scripting: %q", scripting)
	}
	for _, args := range [][]string{{"filterby", "aclcat", "nosuch"}, {"filterby", "module", "json"}} {
		if got := list(args...); len(got) != 0 {
			t.Errorf("%q: %q", args, got)
		}
	}
	for _, args := range [][]string{{"bad"}, {"filterby", "bad"}, {"filterby", "bad", "x"}, {"filterby", "pattern", "a", "b"}} {
		if got := rc.do(append([]string{"COMMAND", "LIST"}, args...)...); got != "-ERR syntax error\r\n" {
			t.Errorf("COMMAND LIST %q: %q", args, got)
		}
	}
}

// The subcommands of Redis 7.2 that kvs answers (CLIENT SETINFO, CLUSTER
// MYSHARDID) are checked before they run as the others are, and counted
// apart, but COMMAND, which describes Redis 7.0, names none of them.
func TestLaterSubcommands(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"CLIENT", "SETINFO", "lib-name"}, "-ERR wrong number of arguments for 'client|setinfo' command\r\n"},
		{[]string{"CLIENT", "SETINFO", "lib-name", "kvs-test"}, "+OK\r\n"},
		{[]string{"CLUSTER", "MYSHARDID", "x"}, "-ERR wrong number of arguments for 'cluster|myshardid' command\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"CLIENT", "SETINFO", "lib-ver"}, "-ERR wrong number of arguments for 'client|setinfo' command\r\n"},
		{[]string{"EXEC"}, "-" + errExecAbort + "\r\n"},
		{[]string{"COMMAND", "INFO", "client|setinfo", "cluster|myshardid"}, "*2\r\n$-1\r\n$-1\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "PATTERN", "client|set*"}, "*1\r\n$14\r\nclient|setname\r\n"},
		{[]string{"COMMAND", "GETKEYS", "client", "setinfo", "lib-name", "x"}, "-ERR Invalid command specified\r\n"},
	} {
		if got := rc.do(tc.args...); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
	info := rc.do("COMMAND", "INFO", "client")
	if strings.Contains(info, "setinfo") {
		t.Errorf("COMMAND INFO client describes SETINFO: %q", info)
	}
	if stats := rc.do("INFO", "commandstats"); !strings.Contains(stats, "cmdstat_client|setinfo:calls=1,") {
		t.Errorf("INFO commandstats: %q", stats)
	}
}
