package config

import (
	"sort"
	"strings"

	"github.com/tidwall/match"
)

// Pair is one parameter CONFIG GET answers, under the name it answers it.
type Pair struct{ Name, Value string }

// Get picks CONFIG GET's answer from params (every parameter it knows,
// with its value) for patterns, as Redis 7.0 does: each parameter once, in
// the order the patterns pick them; a glob pattern matches names in
// sorted order and never a hidden parameter; a bare name is looked up,
// hidden parameters too, and answered under the name as given.
func Get(params map[string]string, patterns [][]byte) []Pair {
	names := make([]string, 0, len(params))
	for n := range params {
		if p := byName[n]; p == nil || p.flags&paramHidden == 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	picked := map[string]bool{}
	var out []Pair
	for _, p := range patterns {
		pat := strings.ToLower(string(p))
		if !strings.ContainsAny(pat, "[*?") {
			if v, ok := params[pat]; ok && !picked[pat] {
				picked[pat] = true
				out = append(out, Pair{string(p), v})
			}
			continue
		}
		for _, n := range names {
			if picked[n] {
				continue
			}
			if match.Match(n, pat) {
				picked[n] = true
				out = append(out, Pair{n, params[n]})
			}
		}
	}
	return out
}
