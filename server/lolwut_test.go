package server

import (
	"strings"
	"testing"
)

// LOLWUT's drawings: Redis's sizes and trailing lines, the version INFO
// reports, and Redis's errors.
func TestLolwut(t *testing.T) {
	s := startServer(t, Config{})
	rc := dialRaw(t, s)
	ver := s.cfg.RedisVersion
	bulk := func(text string) string { return "$" + itoa(len(text)) + "\r\n" + text + "\r\n" }
	if got, want := rc.do("LOLWUT"), bulk("Redis ver. "+ver+"\n"); got != want {
		t.Errorf("LOLWUT: %q, want %q", got, want)
	}
	// One column, one square: a canvas 2 pixels wide and 2 tall (no
	// padding), one Braille character, as redis-server draws it.
	if got, want := rc.do("LOLWUT", "VERSION", "5", "1", "1", "1"), bulk("⠋\n\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. "+ver+"\n"); got != want {
		t.Errorf("LOLWUT VERSION 5 1 1 1: %q, want %q", got, want)
	}
	// A skyline of 10 columns and 5 rows: 5 lines of 10 coloured spaces,
	// then two lines of text (and the reply's CR LF).
	v := rc.do("LOLWUT", "VERSION", "6", "10", "5")
	lines := strings.Split(v[strings.Index(v, "\r\n")+2:], "\n")
	if len(lines) != 5+4 || !strings.HasPrefix(lines[5], "Dedicated to the 8 bit game developers") {
		t.Fatalf("LOLWUT VERSION 6 10 5: %d lines: %q", len(lines), v)
	}
	for _, l := range lines[:5] {
		if n := strings.Count(l, " \033[0m"); n != 10 {
			t.Errorf("LOLWUT VERSION 6 10 5: a row of %d pixels: %q", n, l)
		}
	}
	rc.do("HELLO", "3")
	if got, want := rc.do("LOLWUT", "VERSION", "9"), "="+itoa(len("Redis ver. "+ver+"\n")+4)+"\r\ntxt:Redis ver. "+ver+"\n\r\n"; got != want {
		t.Errorf("LOLWUT VERSION 9 in RESP3: %q, want %q", got, want)
	}
	if got := rc.do("LOLWUT", "VERSION", "5", "x"); got != "-"+errNotInteger+"\r\n" {
		t.Errorf("LOLWUT VERSION 5 x: %q", got)
	}
}
