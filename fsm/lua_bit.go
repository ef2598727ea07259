package fsm

import (
	"math"
	"math/bits"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// bit is LuaBitOp 1.0 as Redis bundles it: 32-bit operations on numbers
// normalised with tobit.

func tobit(L *lua.LState, i int) int32 {
	f := float64(L.CheckNumber(i))
	// LuaBitOp adds 2^52+2^51 and takes the low 32 bits: modulo 2^32.
	return int32(uint32(int64(math.Mod(math.Trunc(f), 1<<32))))
}

func bitLib(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	fold := func(op func(a, b int32) int32) lua.LGFunction {
		return func(L *lua.LState) int {
			r := tobit(L, 1)
			for i := 2; i <= L.GetTop(); i++ {
				r = op(r, tobit(L, i))
			}
			L.Push(lua.LNumber(r))
			return 1
		}
	}
	shift := func(op func(a int32, n uint) int32) lua.LGFunction {
		return func(L *lua.LState) int {
			L.Push(lua.LNumber(op(tobit(L, 1), uint(tobit(L, 2))&31)))
			return 1
		}
	}
	fns := []struct {
		name string
		fn   lua.LGFunction
	}{
		{"tobit", func(L *lua.LState) int { L.Push(lua.LNumber(tobit(L, 1))); return 1 }},
		{"bnot", func(L *lua.LState) int { L.Push(lua.LNumber(^tobit(L, 1))); return 1 }},
		{"band", fold(func(a, b int32) int32 { return a & b })},
		{"bor", fold(func(a, b int32) int32 { return a | b })},
		{"bxor", fold(func(a, b int32) int32 { return a ^ b })},
		{"lshift", shift(func(a int32, n uint) int32 { return int32(uint32(a) << n) })},
		{"rshift", shift(func(a int32, n uint) int32 { return int32(uint32(a) >> n) })},
		{"arshift", shift(func(a int32, n uint) int32 { return a >> n })},
		{"rol", shift(func(a int32, n uint) int32 { return int32(bits.RotateLeft32(uint32(a), int(n))) })},
		{"ror", shift(func(a int32, n uint) int32 { return int32(bits.RotateLeft32(uint32(a), -int(n))) })},
		{"bswap", func(L *lua.LState) int {
			L.Push(lua.LNumber(int32(bits.ReverseBytes32(uint32(tobit(L, 1))))))
			return 1
		}},
		{"tohex", func(L *lua.LState) int {
			x := uint32(tobit(L, 1))
			n := 8
			if L.GetTop() >= 2 {
				n = int(tobit(L, 2))
			}
			digits := "0123456789abcdef"
			if n < 0 {
				n, digits = -n, "0123456789ABCDEF"
			}
			if n > 8 {
				n = 8
			}
			var b strings.Builder
			for i := n - 1; i >= 0; i-- {
				b.WriteByte(digits[(x>>(4*uint(i)))&15])
			}
			L.Push(lua.LString(b.String()))
			return 1
		}},
	}
	for _, f := range fns {
		t.RawSetString(f.name, L.NewFunction(f.fn))
	}
	return t
}
