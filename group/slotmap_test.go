package group

import (
	"errors"
	"slices"
	"testing"

	"kvs/fsm"
)

func TestInitialSlotMap(t *testing.T) {
	for n, want := range map[int]string{
		1: "1 0-16383:0",
		2: "1 0-8191:1,8192-16383:2",
		3: "1 0-5460:1,5461-10922:2,10923-16383:3",
	} {
		m, err := InitialSlotMap(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.String(); got != want {
			t.Errorf("InitialSlotMap(%d) = %q, want %q", n, got, want)
		}
		if m.Version() != 1 || m.Groups() != n {
			t.Errorf("InitialSlotMap(%d): version %d, groups %d", n, m.Version(), m.Groups())
		}
	}
	// The owners are EvenSlots's, numbered from 1 when there are several.
	for _, n := range []int{1, 2, 7, 16, MaxGroups} {
		m, err := InitialSlotMap(n)
		if err != nil {
			t.Fatal(err)
		}
		even, _ := EvenSlots(n)
		for s, g := range even {
			if n > 1 {
				g++
			}
			if m.Owner(s) != g {
				t.Fatalf("%d groups: slot %d owned by %d, want %d", n, s, m.Owner(s), g)
			}
		}
		back, err := ParseSlotMap(m.String(), n)
		if err != nil || !back.Equal(m) {
			t.Fatalf("%d groups: %q parsed back as %q, %v", n, m.String(), back.String(), err)
		}
	}
	if _, err := InitialSlotMap(0); err == nil {
		t.Fatal("InitialSlotMap(0) made a map")
	}
}

func TestParseSlotMapRejects(t *testing.T) {
	for name, v := range map[string]string{
		"empty":            "",
		"no runs":          "1 ",
		"no version":       "0-16383:1",
		"version 0":        "0 0-8191:1,8192-16383:2",
		"version sign":     "+1 0-8191:1,8192-16383:2",
		"version zero pad": "01 0-8191:1,8192-16383:2",
		"version huge":     "18446744073709551616 0-8191:1,8192-16383:2",
		"two spaces":       "1  0-8191:1,8192-16383:2",
		"trailing space":   "1 0-8191:1,8192-16383:2 ",
		"trailing comma":   "1 0-8191:1,8192-16383:2,",
		"gap":              "1 0-8190:1,8192-16383:2",
		"overlap":          "1 0-8192:1,8192-16383:2",
		"out of order":     "1 8192-16383:2,0-8191:1",
		"short":            "1 0-8191:1,8192-16382:2",
		"past the end":     "1 0-8191:1,8192-16384:2",
		"not from 0":       "1 1-8191:1,8192-16383:2",
		"backwards":        "1 0-8191:1,8192-8000:2,8001-16383:1",
		"group 0":          "1 0-8191:0,8192-16383:2",
		"unknown group":    "1 0-8191:1,8192-16383:3",
		"same as previous": "1 0-100:1,101-16383:1",
		"single slot form": "1 0:1,1-16383:2",
		"no group":         "1 0-8191,8192-16383:2",
		"negative":         "1 -1-8191:1,8192-16383:2",
		"slot zero pad":    "1 0-8191:1,08192-16383:2",
		"group zero pad":   "1 0-8191:01,8192-16383:2",
		"letters":          "1 0-8191:a,8192-16383:2",
	} {
		if m, err := ParseSlotMap(v, 2); !errors.Is(err, ErrBadSlotMap) {
			t.Errorf("%s: ParseSlotMap(%q) = %q, %v; want ErrBadSlotMap", name, v, m.String(), err)
		}
	}
	// A cluster of one group has only group 0.
	if _, err := ParseSlotMap("1 0-16383:1", 1); !errors.Is(err, ErrBadSlotMap) {
		t.Errorf("group 1 of a one-group cluster: %v", err)
	}
	if _, err := ParseSlotMap("1 0-16383:0", 1); err != nil {
		t.Errorf("the one-group map: %v", err)
	}
	if _, err := ParseSlotMap("1 0-16383:1", 0); !errors.Is(err, ErrBadSlotMap) {
		t.Errorf("0 data groups: %v", err)
	}
}

func TestSlotMapFlip(t *testing.T) {
	m, _ := InitialSlotMap(3)
	next, err := m.Flip([]SlotRange{{0, 99}, {5461, 5461}, {16383, 16383}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	const want = "2 0-99:3,100-5460:1,5461-5461:3,5462-10922:2,10923-16383:3"
	if got := next.String(); got != want {
		t.Fatalf("flipped map %q, want %q", got, want)
	}
	// m itself is unchanged: a SlotMap is a value.
	if got := m.String(); got != "1 0-5460:1,5461-10922:2,10923-16383:3" {
		t.Fatalf("Flip changed the map it was called on: %q", got)
	}
	back, err := ParseSlotMap(next.String(), 3)
	if err != nil || !back.Equal(next) {
		t.Fatalf("flipped map parsed back as %q, %v", back.String(), err)
	}
	// Flipping back merges the runs again, at the next version.
	again, err := next.Flip([]SlotRange{{0, 99}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.String(); got != "3 0-5460:1,5461-5461:3,5462-10922:2,10923-16383:3" {
		t.Fatalf("flipped back: %q", got)
	}
	if again.Equal(next) || again.Equal(m) {
		t.Fatal("Equal ignores versions or owners")
	}
	tab := again.Table()
	tab[0] = 2
	if again.Owner(0) != 1 {
		t.Fatal("Table returned the map's own slice")
	}

	for name, tc := range map[string]struct {
		ranges []SlotRange
		to     uint32
	}{
		"group 0":       {[]SlotRange{{0, 1}}, 0},
		"unknown group": {[]SlotRange{{0, 1}}, 4},
		"negative":      {[]SlotRange{{-1, 1}}, 2},
		"past the end":  {[]SlotRange{{16000, fsm.ClusterSlots}}, 2},
		"backwards":     {[]SlotRange{{5, 4}}, 2},
	} {
		if got, err := m.Flip(tc.ranges, tc.to); !errors.Is(err, ErrBadSlotMap) {
			t.Errorf("%s: Flip = %q, %v; want ErrBadSlotMap", name, got.String(), err)
		}
	}
	if _, err := (SlotMap{}).Flip([]SlotRange{{0, 1}}, 1); !errors.Is(err, ErrBadSlotMap) {
		t.Errorf("Flip of the zero map: %v", err)
	}
}

// FuzzParseSlotMap checks that whatever ParseSlotMap accepts is the one
// encoding of the map it returns.
func FuzzParseSlotMap(f *testing.F) {
	for _, n := range []int{2, 3, 5} {
		m, _ := InitialSlotMap(n)
		f.Add(m.String(), n)
	}
	f.Add("2 0-99:3,100-5460:1,5461-5461:3,5462-10922:2,10923-16383:3", 3)
	f.Add("1 0-8191:1,8192-16383:1", 2)
	f.Fuzz(func(t *testing.T, v string, groups int) {
		m, err := ParseSlotMap(v, groups)
		if err != nil {
			if !errors.Is(err, ErrBadSlotMap) {
				t.Fatalf("error %v does not wrap ErrBadSlotMap", err)
			}
			return
		}
		if got := m.String(); got != v {
			t.Fatalf("%q parsed, encodes as %q", v, got)
		}
		if m.Version() == 0 || slices.ContainsFunc(m.Table(), func(g uint16) bool { return !m.validGroup(uint64(g)) }) {
			t.Fatalf("%q parsed into a map with version 0 or an unknown group", v)
		}
	})
}
