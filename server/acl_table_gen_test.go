package server

import (
	"context"
	"flag"
	"fmt"
	"go/format"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

var flagACLTableFrom = flag.String("acl.table-from", "", "HOST:PORT of a redis-server whose COMMAND reply rewrites acl_table.go (TestGenerateACLTable)")

// TestGenerateACLTable rewrites acl_table.go from a running redis-server:
//
//	go test ./server/ -run TestGenerateACLTable -args -acl.table-from=127.0.0.1:6379
//
// Without the flag it is skipped.
func TestGenerateACLTable(t *testing.T) {
	if *flagACLTableFrom == "" {
		t.Skip("no -acl.table-from")
	}
	c := redis.NewClient(&redis.Options{Addr: *flagACLTableFrom, Protocol: 2})
	defer c.Close()
	res, err := c.Do(context.Background(), "COMMAND").Slice()
	if err != nil {
		t.Fatal(err)
	}
	version, _ := c.Do(context.Background(), "INFO", "server").Text()
	for _, l := range strings.Split(version, "\r\n") {
		if v, ok := strings.CutPrefix(l, "redis_version:"); ok {
			version = v
		}
	}
	type row struct {
		name  string
		arity int64
		flags string
		cats  []string
		tips  []string
		specs []string
	}
	var rows []row
	var walk func(v []any)
	walk = func(v []any) {
		r := row{name: v[0].(string), arity: v[1].(int64), flags: genFlags(v[2].([]any))}
		for _, x := range v[7].([]any) {
			r.tips = append(r.tips, x.(string))
		}
		for _, x := range v[6].([]any) {
			r.cats = append(r.cats, strings.TrimPrefix(x.(string), "@"))
		}
		for _, ks := range v[8].([]any) {
			r.specs = append(r.specs, genKeySpec(ks))
		}
		rows = append(rows, r)
		for _, s := range v[9].([]any) {
			walk(s.([]any))
		}
	}
	for _, x := range res {
		walk(x.([]any))
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	var b strings.Builder
	fmt.Fprintf(&b, "package server\n\n// Code generated from redis-server %s's COMMAND reply by\n", version)
	b.WriteString("// TestGenerateACLTable: every command's and subcommand's ACL categories (in\n")
	b.WriteString("// Redis's category order), key specifications and tips, and every\n")
	b.WriteString("// subcommand's arity and flags. DO NOT EDIT.\n\n")
	b.WriteString("// redisCategories maps a command (\"get\", \"config|get\") to its categories.\nvar redisCategories = map[string]string{\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%q: %q,\n", r.name, strings.Join(r.cats, " "))
	}
	b.WriteString("}\n\n// redisKeySpecs maps a command to its key specifications.\nvar redisKeySpecs = map[string][]keySpec{\n")
	for _, r := range rows {
		if len(r.specs) > 0 {
			fmt.Fprintf(&b, "%q: {%s},\n", r.name, strings.Join(r.specs, ", "))
		}
	}
	b.WriteString("}\n\n// redisTips maps a command to its tips for clients (COMMAND INFO).\nvar redisTips = map[string]string{\n")
	for _, r := range rows {
		if len(r.tips) > 0 {
			fmt.Fprintf(&b, "%q: %q,\n", r.name, strings.Join(r.tips, " "))
		}
	}
	b.WriteString("}\n\n// redisSubcommands maps a subcommand to its arity and flags.\nvar redisSubcommands = map[string]subcommandInfo{\n")
	for _, r := range rows {
		if strings.Contains(r.name, "|") {
			fmt.Fprintf(&b, "%q: {%d, %s},\n", r.name, r.arity, r.flags)
		}
	}
	b.WriteString("}\n")
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("acl_table.go", src, 0o644); err != nil {
		t.Fatal(err)
	}
}

// genFlags renders COMMAND INFO's command flags as a cmdFlags expression.
func genFlags(v []any) string {
	var names []string
	for _, f := range v {
		found := false
		for _, fn := range flagNames {
			if fn.name == f.(string) {
				names = append(names, flagConstNames[fn.f])
				found = true
			}
		}
		if !found {
			panic("server: a command flag kvs does not know: " + f.(string))
		}
	}
	if len(names) == 0 {
		return "0"
	}
	return strings.Join(names, "|")
}

var flagConstNames = map[cmdFlags]string{
	flagWrite: "flagWrite", flagReadonly: "flagReadonly", flagDenyOOM: "flagDenyOOM", flagFast: "flagFast",
	flagAdmin: "flagAdmin", flagNoScript: "flagNoScript", flagLoading: "flagLoading", flagStale: "flagStale",
	flagPubsub: "flagPubsub", flagBlocking: "flagBlocking", flagSkipMonitor: "flagSkipMonitor",
	flagSkipSlowlog: "flagSkipSlowlog", flagAsking: "flagAsking", flagNoAuth: "flagNoAuth",
	flagNoMandatoryKeys: "flagNoMandatoryKeys", flagNoAsyncLoading: "flagNoAsyncLoading",
	flagNoMulti: "flagNoMulti", flagMovableKeys: "flagMovableKeys", flagAllowBusy: "flagAllowBusy",
}

func genPairs(v any) map[string]any {
	out := map[string]any{}
	a := v.([]any)
	for i := 0; i+1 < len(a); i += 2 {
		out[a[i].(string)] = a[i+1]
	}
	return out
}

// genKeySpec renders one COMMAND INFO key specification as a keySpec
// literal.
func genKeySpec(v any) string {
	s := genPairs(v)
	names := map[string]string{"ro": "ksRO", "rw": "ksRW", "ow": "ksOW", "rm": "ksRM", "access": "ksAccess",
		"update": "ksUpdate", "insert": "ksInsert", "delete": "ksDelete", "incomplete": "ksIncomplete",
		"variable_flags": "ksVariable", "not_key": "ksNotKey"}
	var flags []string
	for _, f := range s["flags"].([]any) {
		if n, ok := names[strings.ToLower(f.(string))]; ok {
			flags = append(flags, n)
		}
	}
	fl := "0"
	if len(flags) > 0 {
		fl = strings.Join(flags, "|")
	}
	bs := genPairs(s["begin_search"])
	var begin string
	switch bs["type"] {
	case "index":
		begin = fmt.Sprintf("index: %d", genPairs(bs["spec"])["index"])
	case "keyword":
		sp := genPairs(bs["spec"])
		begin = fmt.Sprintf("keyword: %q, startFrom: %d", sp["keyword"], sp["startfrom"])
	default:
		begin = "unknown: true"
	}
	fk := genPairs(s["find_keys"])
	var find string
	switch fk["type"] {
	case "range":
		sp := genPairs(fk["spec"])
		find = fmt.Sprintf("lastKey: %d, keyStep: %d, limit: %d", sp["lastkey"], sp["keystep"], sp["limit"])
	case "keynum":
		sp := genPairs(fk["spec"])
		find = fmt.Sprintf("keyNum: true, keyNumIdx: %d, firstKey: %d, keyStep: %d", sp["keynumidx"], sp["firstkey"], sp["keystep"])
	default:
		find = "unknownKeys: true"
	}
	notes := ""
	if n, ok := s["notes"]; ok {
		notes = fmt.Sprintf("notes: %q, ", n)
	}
	return fmt.Sprintf("{%sflags: %s, %s, %s}", notes, fl, begin, find)
}
