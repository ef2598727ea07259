package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// cjson as Redis bundles it (lua-cjson 2.1 with Redis's settings): a
// table whose keys are all positive integers is an array (missing entries
// null; "excessively sparse" past twice as many slots as entries, beyond
// 10), any other table an object, an empty table {}; numbers are written
// with %.14g; '/' is escaped; cjson.null stands for JSON null. Object keys
// are written in the table's iteration order, which in kvs is insertion
// order (in Redis it is the hash order of its Lua; no script should depend
// on either).

func cjsonLib(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	null := L.NewUserData()
	t.RawSetString("null", null)
	t.RawSetString("encode", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() != 1 {
			L.ArgError(1, "expected 1 argument")
		}
		var b bytes.Buffer
		if err := cjsonEncode(&b, L.Get(1), null, 0); err != "" {
			L.RaiseError("%s", err)
		}
		L.Push(lua.LString(b.String()))
		return 1
	}))
	t.RawSetString("decode", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() != 1 {
			L.ArgError(1, "expected 1 argument")
		}
		d := json.NewDecoder(bytes.NewReader([]byte(L.CheckString(1))))
		d.UseNumber()
		v, err := cjsonDecode(L, d, null, 0)
		if err == nil {
			if _, e := d.Token(); e != io.EOF {
				err = errors.New("trailing data")
			}
		}
		if err != nil {
			L.RaiseError("Expected value but found invalid token: %s", err.Error())
		}
		L.Push(v)
		return 1
	}))
	for _, name := range []string{"encode_keep_buffer", "encode_max_depth", "decode_max_depth", "encode_number_precision", "encode_invalid_numbers", "decode_invalid_numbers", "encode_sparse_array"} {
		t.RawSetString(name, L.NewFunction(func(L *lua.LState) int { return 0 }))
	}
	return t
}

const cjsonMaxDepth = 1000

func cjsonEncode(b *bytes.Buffer, v lua.LValue, null lua.LValue, depth int) string {
	switch v := v.(type) {
	case lua.LString:
		cjsonString(b, string(v))
	case lua.LNumber:
		f := float64(v)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return "Cannot serialise number: must not be NaN or Inf"
		}
		b.WriteString(formatG14(f))
	case lua.LBool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case *lua.LNilType:
		b.WriteString("null")
	case *lua.LTable:
		if depth >= cjsonMaxDepth {
			return "Cannot serialise, excessive nesting (1001)"
		}
		n, isArray, e := cjsonArrayLen(v)
		if e != "" {
			return e
		}
		if isArray {
			b.WriteByte('[')
			for i := 1; i <= n; i++ {
				if i > 1 {
					b.WriteByte(',')
				}
				if e := cjsonEncode(b, v.RawGetInt(i), null, depth+1); e != "" {
					return e
				}
			}
			b.WriteByte(']')
			return ""
		}
		b.WriteByte('{')
		first := true
		for k, val := v.Next(lua.LNil); k != lua.LNil; k, val = v.Next(k) {
			if !first {
				b.WriteByte(',')
			}
			first = false
			switch k := k.(type) {
			case lua.LString:
				cjsonString(b, string(k))
			case lua.LNumber:
				cjsonString(b, formatG14(float64(k)))
			default:
				return "Cannot serialise " + k.Type().String() + ": table key must be a number or string"
			}
			b.WriteByte(':')
			if e := cjsonEncode(b, val, null, depth+1); e != "" {
				return e
			}
		}
		b.WriteByte('}')
	default:
		if v == null {
			b.WriteString("null")
			return ""
		}
		return "Cannot serialise " + v.Type().String() + ": type not supported"
	}
	return ""
}

// cjsonArrayLen is lua-cjson's lua_array_length: the array length of t if
// every key is a positive integer, and whether it is one.
func cjsonArrayLen(t *lua.LTable) (int, bool, string) {
	max, items := 0, 0
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		n, ok := k.(lua.LNumber)
		if !ok || float64(n) < 1 || float64(n) != math.Floor(float64(n)) {
			return 0, false, ""
		}
		if int(n) > max {
			max = int(n)
		}
		items++
	}
	if items == 0 {
		return 0, false, ""
	}
	if max > items*2 && max > 10 {
		return 0, false, "Cannot serialise table: excessively sparse array"
	}
	return max, true, ""
}

func formatG14(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e14 {
		if f == 0 && math.Signbit(f) {
			return "-0"
		}
		return strconv.FormatInt(int64(f), 10)
	}
	s := strconv.FormatFloat(f, 'g', 14, 64)
	// C's %g drops trailing zeros; Go's 'g' with a precision keeps them.
	if i := bytes.IndexAny([]byte(s), "e"); i >= 0 {
		return trimZeros(s[:i]) + s[i:]
	}
	return trimZeros(s)
}

func trimZeros(s string) string {
	if bytes.IndexByte([]byte(s), '.') < 0 {
		return s
	}
	for len(s) > 0 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if len(s) > 0 && s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

func cjsonString(b *bytes.Buffer, s string) {
	const hexd = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '/':
			b.WriteString(`\/`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c == 0x7f {
				b.WriteString(`\u00`)
				b.WriteByte(hexd[c>>4])
				b.WriteByte(hexd[c&15])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

func cjsonDecode(L *lua.LState, d *json.Decoder, null lua.LValue, depth int) (lua.LValue, error) {
	if depth > cjsonMaxDepth {
		return nil, errors.New("too many nested data structures")
	}
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		t := L.NewTable()
		switch tok {
		case '[':
			for i := 1; d.More(); i++ {
				v, err := cjsonDecode(L, d, null, depth+1)
				if err != nil {
					return nil, err
				}
				t.RawSetInt(i, v)
			}
		case '{':
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := cjsonDecode(L, d, null, depth+1)
				if err != nil {
					return nil, err
				}
				t.RawSetString(k.(string), v)
			}
		}
		if _, err := d.Token(); err != nil {
			return nil, err
		}
		return t, nil
	case string:
		return lua.LString(tok), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(tok), 64)
		if err != nil {
			return nil, err
		}
		return lua.LNumber(f), nil
	case bool:
		return lua.LBool(tok), nil
	case nil:
		return null, nil
	}
	return nil, errors.New("unexpected token")
}
