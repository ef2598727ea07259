package fsm

import "testing"

func TestKeySlot(t *testing.T) {
	if got := crc16([]byte("123456789")); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	// Slots as redis-server's CLUSTER KEYSLOT reports them.
	cases := map[string]int{
		"foo":                  12182,
		"bar":                  5061,
		"somekey":              11058,
		"hello":                866,
		"":                     0,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // empty tag: the whole key
		"foo{{bar}}zap":        4015, // tag "{bar"
		"foo{bar}{zap}":        5061, // the first tag only
		"{foo":                 KeySlot([]byte("{foo")),
	}
	for key, want := range cases {
		if got := KeySlot([]byte(key)); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
}
