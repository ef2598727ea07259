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

// TestCRC16Slicing checks the sliced crc16 against the CRC's definition,
// bit by bit, for every length around the four-byte steps.
func TestCRC16Slicing(t *testing.T) {
	bitwise := func(b []byte) uint16 {
		var crc uint16
		for _, c := range b {
			crc ^= uint16(c) << 8
			for range 8 {
				if crc&0x8000 != 0 {
					crc = crc<<1 ^ 0x1021
				} else {
					crc <<= 1
				}
			}
		}
		return crc
	}
	buf := make([]byte, 64)
	x := uint32(2463534242)
	for n := range len(buf) {
		for range 20 {
			for i := range buf[:n] {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				buf[i] = byte(x)
			}
			if got, want := crc16(buf[:n]), bitwise(buf[:n]); got != want {
				t.Fatalf("crc16(%x) = %#x, want %#x", buf[:n], got, want)
			}
			if got, want := crc16(string(buf[:n])), bitwise(buf[:n]); got != want {
				t.Fatalf("crc16(string %x) = %#x, want %#x", buf[:n], got, want)
			}
		}
	}
}
