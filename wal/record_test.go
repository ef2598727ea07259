package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func encode(index uint64, payload []byte) []byte {
	return appendRecord(nil, index, payload, payloadCRC(payload))
}

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		index   uint64
		payload []byte
	}{
		{"empty", 1, nil},
		{"one byte", 2, []byte{0}},
		{"text", 42, []byte("hello, world")},
		{"large index", 1<<64 - 1, []byte("x")},
		{"64 KiB", 7, bytes.Repeat([]byte{0xab}, 64<<10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := encode(tc.index, tc.payload)
			if len(b) != headerSize+len(tc.payload) {
				t.Fatalf("encoded %d bytes, want %d", len(b), headerSize+len(tc.payload))
			}
			// Trailing bytes belong to the next record and must be left alone.
			b = append(b, 0xff, 0xee)
			index, payload, n, err := decodeRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			if index != tc.index || !bytes.Equal(payload, tc.payload) || n != len(b)-2 {
				t.Fatalf("decoded (%d, %q, %d), want (%d, %q, %d)", index, payload, n, tc.index, tc.payload, len(b)-2)
			}
		})
	}
}

func TestRecordDecodeErrors(t *testing.T) {
	good := encode(5, []byte("payload"))
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"nothing", nil, errShortHeader},
		{"half header", good[:headerSize/2], errShortHeader},
		{"header only", good[:headerSize], errShortPayload},
		{"payload cut", good[:len(good)-1], errShortPayload},
		{"huge length", mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[4:], MaxRecordSize+1)
			return b
		}), errBadLength},
		{"flipped crc", mutate(func(b []byte) []byte { b[0] ^= 1; return b }), errChecksum},
		{"flipped length", mutate(func(b []byte) []byte { b[4] ^= 1; return b }), errChecksum},
		{"flipped index", mutate(func(b []byte) []byte { b[8] ^= 1; return b }), errChecksum},
		{"flipped payload", mutate(func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }), errChecksum},
		{"zeros", make([]byte, 64), errChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := decodeRecord(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add(encode(1, nil))
	f.Add(encode(2, []byte("hello")))
	f.Add(append(encode(3, []byte("a")), encode(4, []byte("b"))...))
	f.Add(make([]byte, headerSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		index, payload, n, err := decodeRecord(data)
		if err != nil {
			return
		}
		if n > len(data) || n != headerSize+len(payload) {
			t.Fatalf("n = %d for %d bytes with payload %d", n, len(data), len(payload))
		}
		if re := encode(index, payload); !bytes.Equal(re, data[:n]) {
			t.Fatalf("re-encoding differs: %x vs %x", re, data[:n])
		}
	})
}
