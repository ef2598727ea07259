package fsm

import lua "github.com/yuin/gopher-lua"

// A script reaches redis.call through two read-only tables: the global
// "redis" (a miss in the run's environment, then its __index, the hidden
// globals) and its field "call" (a miss in the library's proxy, then its
// __index, the real table): five table lookups per call, which the CPU
// profile of EVALSHA put at a quarter of the interpreter's share. The
// sandbox makes the answer fixed (no global can be assigned, no library
// changed, no environment replaced), so a compiled script's main chunk
// reads the two functions from upvalues instead: each
//
//	GETGLOBAL  A 'redis'
//	GETTABLEKS A A 'call'    (or 'pcall')
//
// becomes
//
//	GETUPVAL   A u
//	NOP
//
// Same register afterwards, same number of instructions (the budget counts
// every one, NOP too, so a script stops at the same point on a replica of
// any kvs version) and the same source line for each position. A pair is
// left alone when a jump lands on its second instruction, where the
// register may hold something else. Nested functions keep the plain reads:
// their upvalues are set by the code that creates them. The interpreter
// fills the upvalues with its own functions when it makes the chunk's
// function value (runEval).

// The upvalues of a specialized main chunk.
const (
	upvalueCall = iota
	upvaluePCall
	numRedisUpvalues
)

// gopher-lua's instruction layout (its opcode.go): the opcode in the top 6
// bits, A in the next 8, then C in 9 and B in the low 9; Bx is the low 18,
// sBx the same biased by half its range. An RK operand with bit 8 set
// names a constant.
const (
	opShift  = 26
	rkConst  = 1 << 8
	maxArgBx = 1<<18 - 1
)

func opcode(inst uint32) int { return int(inst >> opShift) }
func argA(inst uint32) int   { return int(inst>>18) & 0xff }
func argB(inst uint32) int   { return int(inst & 0x1ff) }
func argC(inst uint32) int   { return int(inst>>9) & 0x1ff }
func argBx(inst uint32) int  { return int(inst & maxArgBx) }
func argSBx(inst uint32) int { return argBx(inst) - maxArgBx>>1 }

func instABC(op, a, b, c int) uint32 {
	return uint32(op)<<opShift | uint32(a)<<18 | uint32(c)<<9 | uint32(b)
}

// specializeRedisCalls rewrites the main chunk p of a script as the
// comment above says. It must run before p is shared.
func specializeRedisCalls(p *lua.FunctionProto) {
	if p.NumUpvalues != 0 {
		return // not a main chunk
	}
	code := p.Code
	landed := jumpTargets(code)
	changed := false
	for i := 0; i+1 < len(code); i++ {
		get, field := code[i], code[i+1]
		if opcode(get) != lua.OP_GETGLOBAL || opcode(field) != lua.OP_GETTABLEKS || landed[i+1] ||
			constString(p, argBx(get)) != "redis" {
			continue
		}
		a, c := argA(get), argC(field)
		if argA(field) != a || argB(field) != a || c&rkConst == 0 {
			continue
		}
		u := upvalueCall
		switch constString(p, c&^rkConst) {
		case "call":
		case "pcall":
			u = upvaluePCall
		default:
			continue
		}
		code[i], code[i+1] = instABC(lua.OP_GETUPVAL, a, u, 0), instABC(lua.OP_NOP, 0, 0, 0)
		changed = true
		i++
	}
	if changed {
		p.NumUpvalues = numRedisUpvalues
		p.DbgUpvalues = []string{"redis.call", "redis.pcall"}
	}
}

// jumpTargets marks the instructions of code that something other than
// the instruction before it can continue at: a jump's target, or the
// instruction after the one a test or LOADBOOL skips. Words that are
// operands rather than instructions (after CLOSURE, MOVEN, a SETLIST with
// C = 0) decode as no jump.
func jumpTargets(code []uint32) []bool {
	landed := make([]bool, len(code)+2)
	mark := func(pc int) {
		if pc >= 0 && pc < len(landed) {
			landed[pc] = true
		}
	}
	for pc, inst := range code {
		switch opcode(inst) {
		case lua.OP_JMP, lua.OP_FORLOOP, lua.OP_FORPREP:
			mark(pc + 1 + argSBx(inst))
		case lua.OP_EQ, lua.OP_LT, lua.OP_LE, lua.OP_TEST, lua.OP_TESTSET, lua.OP_TFORLOOP:
			mark(pc + 2)
		case lua.OP_LOADBOOL:
			if argC(inst) != 0 {
				mark(pc + 2)
			}
		}
	}
	return landed
}

// constString returns p's constant i if it is a string, "" otherwise.
func constString(p *lua.FunctionProto, i int) string {
	if i < len(p.Constants) {
		if s, ok := p.Constants[i].(lua.LString); ok {
			return string(s)
		}
	}
	return ""
}

// redisUpvalues returns the upvalues a specialized chunk's function value
// takes: the functions call and pcall of redis, an interpreter's table.
func redisUpvalues(redis *lua.LTable) []*lua.Upvalue {
	ups := make([]*lua.Upvalue, numRedisUpvalues)
	for i, name := range []string{"call", "pcall"} {
		ups[i] = &lua.Upvalue{} // closed: it holds its value
		ups[i].SetValue(redis.RawGetString(name))
	}
	return ups
}
