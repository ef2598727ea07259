package fsm

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestCRC64Jones: Redis's crc64 test vector.
func TestCRC64Jones(t *testing.T) {
	if got := crc64Jones([]byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("crc64 = %x", got)
	}
}

// bigLibrary is a library whose code LZF compresses with long back
// references and literal runs.
func bigLibrary() string {
	var b strings.Builder
	b.WriteString("#!lua name=big\nlocal function pad(s) return s .. string.rep(\"-\", 10) end\n")
	for i := 1; i <= 40; i++ {
		if i > 1 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "redis.register_function(\"fn%d\", function(keys, args) return pad(\"abcdefghijklmnopqrstuvwxyz%d\") end)", i, i)
	}
	return b.String()
}

// dumpVectors are FUNCTION DUMP's replies of redis-server 7.0.15 with one
// library loaded: stored as it is (short, or not compressible by 4
// bytes) and LZF compressed.
var dumpVectors = []struct{ code, payload string }{
	{"#!lua name=tiny\nredis.register_function(\"t\", function() return 1 end)",
		"f5404523216c7561206e616d653d74696e790a72656469732e72656769737465725f66756e6374696f6e282274222c2066756e6374696f6e28292072657475726e203120656e64290a00e0ecf897551098aa"},
	{"#!lua name=lib1\nredis.register_function(\"f1\", function(keys, args) return redis.call(\"GET\", keys[1]) end)",
		"f5c3406240691f23216c7561206e616d653d6c6962310a72656469732e72656769737465725f660d756e6374696f6e28226631222c20e0000e116b6579732c2061726773292072657475726e200640390863616c6c2822474554202d4024085b315d2920656e64290a008f7ccc774364d0de"},
	{bigLibrary(), "f5c341f14ffe1f23216c7561206e616d653d6269670a6c6f63616c2066756e6374696f6e2070611f642873292072657475726e2073202e2e20737472696e672e72657028222d222c0d2031302920656e640a72656469732016066769737465725fc042042822666e312026e0000f086b6579732c20617267e0015740651c226162636465666768696a6b6c6d6e6f707172737475767778797a312260610029e013620032e035620032e01a620033e035620033e01a620034e035620034e01a620035e035620035e01a620036e035620036e01a620037e035620037e01a620038e035620038e01a620039e035620039e01a62013130e03563203fe3197c0031e337e0e31be10031e336e2203fe01ac9e336e4203fe01a64e336e6203fe01a64e336e8203fe01a64e336ea203fe01a64e336ec203fe01a64e336ee203fe01a64e336f0203fe019640032e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe019640033e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe01a64e336f1203fe019640034e336f1203f40640164290a009f65a9c5ae71a214"},
}

// TestFunctionDumpMatchesRedis: FUNCTION DUMP writes the payload
// redis-server writes, and FUNCTION RESTORE of redis-server's payload
// loads the library.
func TestFunctionDumpMatchesRedis(t *testing.T) {
	for _, v := range dumpVectors {
		want, err := hex.DecodeString(v.payload)
		if err != nil {
			t.Fatal(err)
		}
		s := newScriptStore()
		if r := s.Apply(0, 1, []Command{c(OpFunctionLoad, v.code)})[0]; r.Kind != ReplyBulk {
			t.Fatalf("FUNCTION LOAD: %v", r)
		}
		if got := s.Read(1, c(OpFunctionDump)).Bulk; !bytes.Equal(got, want) {
			t.Errorf("FUNCTION DUMP of %.20q:\n got %x\nwant %x", v.code, got, want)
		}
		if !VerifyDumpPayload(want) {
			t.Fatalf("Redis's payload does not verify")
		}
		restored := newScriptStore()
		if r := restored.Apply(0, 1, []Command{{Op: OpFunctionRestore, Args: [][]byte{want}}})[0]; r.Kind != ReplyStatus {
			t.Fatalf("FUNCTION RESTORE of Redis's payload: %v", r)
		}
		if got := restored.MetaAll(); fmt.Sprint(got) != fmt.Sprint(s.MetaAll()) {
			t.Errorf("restored %v, loaded %v", got, s.MetaAll())
		}
	}
}

// TestLZF: what lzfCompress writes lzfDecompress reads back, for text and
// random bytes, and a compressed string is read as appendRDBString wrote
// it.
func TestLZF(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		n := 21 + r.IntN(20000)
		in := make([]byte, n)
		alphabet := 2 + r.IntN(254)
		for j := range in {
			if j > 10 && r.IntN(3) == 0 {
				in[j] = in[j-1-r.IntN(min(j, 9000))]
			} else {
				in[j] = byte(r.IntN(alphabet))
			}
		}
		enc := appendRDBString(nil, in)
		rd := rdbReader{b: enc}
		out, ok := rd.readString()
		if !ok || !bytes.Equal(out, in) || rd.pos != len(enc) {
			t.Fatalf("round trip of %d bytes (alphabet %d) failed", n, alphabet)
		}
	}
	for _, s := range []string{"0", "-1", "127", "-128", "128", "32767", "-32768", "32768", "2147483647", "-2147483648", "2147483648", "007", "+1", ""} {
		rd := rdbReader{b: appendRDBString(nil, []byte(s))}
		if out, ok := rd.readString(); !ok || string(out) != s {
			t.Errorf("%q: %q %v", s, out, ok)
		}
	}
}

// TestFunctionRestore: the policies and Redis's errors, each leaving the
// libraries as they were.
func TestFunctionRestore(t *testing.T) {
	lib := func(name, fn string) string {
		return "#!lua name=" + name + "\nredis.register_function('" + fn + "', function() return '" + name + "' end)"
	}
	dump := func(codes ...string) []byte {
		s := newScriptStore()
		for _, code := range codes {
			s.Apply(0, 1, []Command{c(OpFunctionLoad, code)})
		}
		return s.Read(1, c(OpFunctionDump)).Bulk
	}
	restore := func(p []byte, policy int64) Command {
		return Command{Op: OpFunctionRestore, Args: [][]byte{p}, Int: policy}
	}
	raw := func(body ...byte) []byte { return appendDumpFooter(body) }
	s := newScriptStore()
	s.Apply(0, 1, []Command{c(OpFunctionLoad, lib("a", "fa")), c(OpFunctionLoad, lib("b", "fb"))})
	before := fmt.Sprint(s.MetaAll())
	for _, tc := range []struct {
		cmd  Command
		want string
	}{
		{restore(dump(lib("a", "fa2")), RestoreAppend), "ERR Library a already exists"},
		{restore(dump(lib("c", "FB")), RestoreAppend), "ERR Function FB already exists"},
		{restore(dump(lib("a", "fb")), RestoreReplace), "ERR Function fb already exists"},
		{restore(raw(rdbOpcodeFunction2, 0x3f, 'x'), RestoreAppend), "ERR Failed loading library payload"},
		{restore(raw(7, 1, 'x'), RestoreAppend), "ERR given type is not a function"},
		{restore(raw(append([]byte{rdbOpcodeFunction2, 3}, "bad"...)...), RestoreAppend), "ERR Missing library metadata"},
		{restore(raw(append(append([]byte{rdbOpcodeFunction2}, appendRDBString(nil, []byte(lib("c", "fc")))...),
			append([]byte{rdbOpcodeFunction2}, appendRDBString(nil, []byte(lib("c", "fd")))...)...)...), RestoreFlush), "ERR Library 'c' already exists"},
		{restore(raw(append([]byte{rdbOpcodeFunction2}, appendRDBString(nil, []byte(lib("d", "f-d")))...)...), RestoreFlush),
			"ERR Error registering functions: ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"},
	} {
		if r := s.Apply(0, 1, []Command{tc.cmd})[0]; r.Str != tc.want {
			t.Errorf("policy %d: %v, want %q", tc.cmd.Int, r, tc.want)
		}
		if got := fmt.Sprint(s.MetaAll()); got != before {
			t.Fatalf("changed by a failed restore: %s", got)
		}
	}
	if r := s.Apply(0, 1, []Command{restore(dump(lib("a", "fa3"), lib("c", "fc")), RestoreReplace)})[0]; r.Str != "OK" {
		t.Fatal(r)
	}
	if found, _, _ := s.Function("fa"); found {
		t.Error("fa is still there after REPLACE")
	}
	for _, f := range []string{"fa3", "fb", "fc"} {
		if found, _, _ := s.Function(f); !found {
			t.Errorf("%s missing after REPLACE", f)
		}
	}
	if r := s.Apply(0, 1, []Command{restore(dump(lib("z", "fz")), RestoreFlush)})[0]; r.Str != "OK" {
		t.Fatal(r)
	}
	if libs := s.Read(1, c(OpFunctionList)); len(libs.Array) != 1 {
		t.Fatalf("after FLUSH: %v", libs)
	}
	// The release candidates' format: name, engine, description, code.
	old := []byte{rdbOpcodeFunction}
	for _, f := range []string{"old", "LUA"} {
		old = appendRDBString(old, []byte(f))
	}
	old = append(old, 1)
	old = appendRDBString(old, []byte("a description"))
	old = appendRDBString(old, []byte("redis.register_function('fold', function() return 1 end)"))
	if r := s.Apply(0, 1, []Command{restore(raw(old...), RestoreAppend)})[0]; r.Str != "OK" {
		t.Fatalf("a release candidate's payload: %v", r)
	}
}

// FuzzFunctionPayload: reading a payload never panics, and what a payload
// holds is read the same again.
func FuzzFunctionPayload(f *testing.F) {
	for _, v := range dumpVectors {
		p, _ := hex.DecodeString(v.payload)
		f.Add(p)
	}
	f.Add([]byte{rdbOpcodeFunction2, 0xc3, 5, 10, 0, 'a', 'b', 'c', 'd', 'e', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		codes, e := functionPayloadCodes(p)
		again, e2 := functionPayloadCodes(p)
		if e != e2 || fmt.Sprint(codes) != fmt.Sprint(again) {
			t.Fatal("two reads differ")
		}
		VerifyDumpPayload(p)
	})
}
