package cmdspec

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

var flagTableFrom = flag.String("cmdspec.table-from", "", "HOST:PORT of a redis-server whose COMMAND reply rewrites table.go (TestGenerateTable)")

// TestGenerateTable rewrites table.go from a running redis-server:
//
//	go test ./cmdspec/ -run TestGenerateTable -args -cmdspec.table-from=127.0.0.1:6379
//
// Without the flag it is skipped.
func TestGenerateTable(t *testing.T) {
	if *flagTableFrom == "" {
		t.Skip("no -cmdspec.table-from")
	}
	c := redis.NewClient(&redis.Options{Addr: *flagTableFrom, Protocol: 2})
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
	fmt.Fprintf(&b, "package cmdspec\n\n// Code generated from redis-server %s's COMMAND reply by\n", version)
	b.WriteString("// TestGenerateTable: every command's and subcommand's ACL categories (in\n")
	b.WriteString("// Redis's category order), key specifications and tips, and every\n")
	b.WriteString("// subcommand's arity and flags. DO NOT EDIT.\n\n")
	b.WriteString("// Categories maps a command (\"get\", \"config|get\") to its categories.\nvar Categories = map[string]string{\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%q: %q,\n", r.name, strings.Join(r.cats, " "))
	}
	b.WriteString("}\n\n// KeySpecs maps a command to its key specifications.\nvar KeySpecs = map[string][]KeySpec{\n")
	for _, r := range rows {
		if len(r.specs) > 0 {
			fmt.Fprintf(&b, "%q: {%s},\n", r.name, strings.Join(r.specs, ", "))
		}
	}
	b.WriteString("}\n\n// Tips maps a command to its tips for clients (COMMAND INFO).\nvar Tips = map[string]string{\n")
	for _, r := range rows {
		if len(r.tips) > 0 {
			fmt.Fprintf(&b, "%q: %q,\n", r.name, strings.Join(r.tips, " "))
		}
	}
	b.WriteString("}\n\n// Subcommands maps a subcommand to its arity and flags.\nvar Subcommands = map[string]Subcommand{\n")
	for _, r := range rows {
		if strings.Contains(r.name, "|") {
			fmt.Fprintf(&b, "%q: {Arity: %d, Flags: %q},\n", r.name, r.arity, r.flags)
		}
	}
	b.WriteString("}\n")
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("table.go", src, 0o644); err != nil {
		t.Fatal(err)
	}
}

// genFlags renders COMMAND INFO's command flags as Subcommand.Flags does.
func genFlags(v []any) string {
	names := make([]string, len(v))
	for i, f := range v {
		names[i] = f.(string)
	}
	return strings.Join(names, " ")
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
	names := map[string]string{"ro": "RO", "rw": "RW", "ow": "OW", "rm": "RM", "access": "Access",
		"update": "Update", "insert": "Insert", "delete": "Delete", "incomplete": "Incomplete",
		"variable_flags": "VariableFlags", "not_key": "NotKey"}
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
		begin = fmt.Sprintf("Index: %d", genPairs(bs["spec"])["index"])
	case "keyword":
		sp := genPairs(bs["spec"])
		begin = fmt.Sprintf("Keyword: %q, StartFrom: %d", sp["keyword"], sp["startfrom"])
	default:
		begin = "Unknown: true"
	}
	fk := genPairs(s["find_keys"])
	var find string
	switch fk["type"] {
	case "range":
		sp := genPairs(fk["spec"])
		find = fmt.Sprintf("LastKey: %d, KeyStep: %d, Limit: %d", sp["lastkey"], sp["keystep"], sp["limit"])
	case "keynum":
		sp := genPairs(fk["spec"])
		find = fmt.Sprintf("KeyNum: true, KeyNumIdx: %d, FirstKey: %d, KeyStep: %d", sp["keynumidx"], sp["firstkey"], sp["keystep"])
	default:
		find = "UnknownKeys: true"
	}
	notes := ""
	if n, ok := s["notes"]; ok {
		notes = fmt.Sprintf("Notes: %q, ", n)
	}
	return fmt.Sprintf("{%sFlags: %s, %s, %s}", notes, fl, begin, find)
}
