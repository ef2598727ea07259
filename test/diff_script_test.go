package test

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"hash/crc64"
	"slices"
	"strings"
)

// Scripts and functions in the differential test: a corpus of scripts
// (EVAL, EVALSHA and their _RO forms on the shared keys, so that they meet
// every type) covering the script API and every conversion between Lua
// and RESP both ways, in RESP2 and with redis.setresp(3), Lua's own
// errors, numbers and libraries (cjson, cmsgpack, struct, bit), the
// sandbox, and libraries of functions that the generator loads, replaces,
// deletes and calls; and scripts and a function that declare no keys and
// touch some (diffKeylessScripts).
//
// Left out, as docs/compatibility.md documents them as differing:
// math.random without math.randomseed and TIME (seeded and taken from the
// log entry), tostring of tables and functions (numbered, not addresses),
// collectgarbage's counts, and EVAL_RO's caching. FUNCTION LIST's
// libraries, and the functions of each, are compared without regard to
// order (Redis's is its hash tables').
func init() {
	registerDiffType(diffType{
		name:   "script", // no key has this type: nothing to dump
		weight: 10,
		gen:    genScriptCommand,
		dump:   func(*rawConn, string) string { return "" },
		same:   sameFunctionList,
	})
}

// sameFunctionList compares FUNCTION LIST replies as sets of libraries,
// each with a set of functions; FUNCTION DUMP payloads as the sets of
// library code they hold; and FUNCTION RESTORE's collision errors by kind
// (which of several colliding libraries Redis names depends on its hash
// table).
func sameFunctionList(cmd []string, ref, got Value) (equal, handled bool) {
	if len(cmd) >= 2 && strings.EqualFold(cmd[0], "FUNCTION") && strings.EqualFold(cmd[1], "DUMP") && ref.Kind == '$' {
		r, ok1 := payloadCodes(ref.Str)
		g, ok2 := payloadCodes(got.Str)
		return ok1 && ok2 && slices.Equal(r, g), true
	}
	if len(cmd) >= 2 && strings.EqualFold(cmd[0], "FUNCTION") && strings.EqualFold(cmd[1], "RESTORE") && ref.IsError() {
		for _, kind := range []string{"ERR Library ", "ERR Function "} {
			if strings.HasPrefix(ref.Str, kind) && strings.HasPrefix(got.Str, kind) &&
				strings.HasSuffix(ref.Str, " already exists") && strings.HasSuffix(got.Str, " already exists") {
				return true, true
			}
		}
		return false, false
	}
	if len(cmd) < 2 || !strings.EqualFold(cmd[0], "FUNCTION") || !strings.EqualFold(cmd[1], "LIST") || ref.Kind != '*' {
		return false, false
	}
	canonical := func(v Value) string {
		var libs []string
		for _, lib := range v.Elems {
			var b strings.Builder
			for i := 0; i+1 < len(lib.Elems); i += 2 {
				b.Write(lib.Elems[i].Raw)
				if lib.Elems[i].Str == "functions" {
					b.WriteString(strings.Join(sortedRaw(lib.Elems[i+1].Elems), ""))
				} else {
					b.Write(lib.Elems[i+1].Raw)
				}
			}
			libs = append(libs, b.String())
		}
		slices.Sort(libs)
		return strings.Join(libs, "|")
	}
	return len(ref.Elems) == len(got.Elems) && canonical(ref) == canonical(got), true
}

// diffScripts are the corpus. Each takes KEYS[1] and KEYS[2] and ARGV[1]
// and ARGV[2] (the generator passes shared keys and values).
var diffScripts = []string{
	// redis.call and redis.pcall, replies converted to Lua and back.
	`return redis.call('GET', KEYS[1])`,
	`return redis.call('SET', KEYS[1], ARGV[1])`,
	`return redis.call('INCR', KEYS[1])`,
	`return redis.pcall('INCR', KEYS[1])`,
	`return redis.call('LPUSH', KEYS[1], ARGV[1], ARGV[2])`,
	`return redis.call('LRANGE', KEYS[1], 0, -1)`,
	`return redis.call('HSET', KEYS[1], 'f', ARGV[1])`,
	`return redis.call('HGET', KEYS[1], 'f')`,
	`return redis.call('ZADD', KEYS[1], 1.5, ARGV[1])`,
	`return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')`,
	`return redis.call('ZSCORE', KEYS[1], ARGV[1])`,
	`return redis.call('SCARD', KEYS[1])`,
	`return redis.call('TYPE', KEYS[1])`,
	`return redis.call('DEL', KEYS[1], KEYS[2])`,
	`return redis.call('EXISTS', KEYS[1], KEYS[2])`,
	`return redis.call('PING')`,
	`local r = redis.pcall('LPOP', KEYS[1]) if type(r) == 'table' and r.err then return 'err: ' .. r.err end return r`,
	`local v = redis.call('GET', KEYS[1]) if v == false then return 'nil is false' end return type(v)`,
	`local s = redis.call('SET', KEYS[1], 'x') return {type(s), s.ok}`,
	`return redis.call('SET', KEYS[1], 3.5)`,
	`redis.call('SET', KEYS[1], 10) return redis.call('INCRBY', KEYS[1], 2.9)`,
	`return redis.call('MSET', KEYS[1], ARGV[1], KEYS[2], ARGV[2])`,
	`return redis.call('MGET', KEYS[1], KEYS[2])`,
	`return redis.call('EXPIRE', KEYS[1], 1000)`,
	`return redis.call('GETDEL', KEYS[1])`,
	`redis.call('DEL', KEYS[1]) redis.call('RPUSH', KEYS[1], 'a', 'b', 'c') return redis.call('LRANGE', KEYS[1], 1, 2)`,
	`redis.call('DEL', KEYS[1]) redis.call('HSET', KEYS[1], 'a', '1') return redis.call('HGETALL', KEYS[1])`,
	`return redis.call('SPOP', KEYS[1], 0)`,
	// Lua to RESP.
	`return 42`,
	`return -3.9`,
	`return 3.99999`,
	`return 'a string'`,
	`return true`,
	`return false`,
	`return nil`,
	`return {1, 'two', {3, {4}}, false, 5}`,
	`return {1, nil, 3}`,
	`return {}`,
	`return {ok = 'FINE'}`,
	`return {err = 'MYERR custom'}`,
	`return {err = 'no code here'}`,
	`return redis.status_reply('DONE')`,
	`return redis.error_reply('WRONG but mine')`,
	`return redis.error_reply('-PREFIXED with dash')`,
	`return {redis.status_reply('A'), redis.error_reply('B c'), 7}`,
	`return redis.sha1hex(ARGV[1])`,
	`return redis.sha1hex('')`,
	`return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}`,
	`return tonumber('16') + tonumber('2.5e1')`,
	`return string.format('%5.2f|%d|%s', 3.14159, 7, 'x')`,
	`return {string.byte('A'), string.char(72, 105), string.rep('ab', 3), ('x'):upper()}`,
	`local t = {} for i = 1, 5 do table.insert(t, i * i) end return t`,
	`local t = {5, 2, 8, 1} table.sort(t) return t`,
	`return table.concat({'a', 'b', 'c'}, '-')`,
	`return math.floor(7.8) + math.max(1, 9) + math.fmod(7, 3)`,
	`return {math.huge > 0 and 1 or 0, tostring(0/0 ~= 0/0)}`,
	`return redis.REDIS_VERSION_NUM >= 0x070000`,
	`return redis.REPL_ALL + redis.LOG_WARNING`,
	// cjson and bit.
	`return cjson.encode({1, 2, 3, 'x'})`,
	`return cjson.encode({key = ARGV[1]})`,
	`return cjson.encode({a = {1, 2}, })`,
	`return cjson.encode({})`,
	`return cjson.encode({true, false, cjson.null})`,
	`return cjson.encode('x/y"z')`,
	`return cjson.encode(12.5)`,
	`local t = cjson.decode('[1, 2.5, "x", true, null]') return {t[1], t[2], t[3], t[4], t[5] == cjson.null}`,
	`local t = cjson.decode('{"a": {"b": [10, 20]}}') return t.a.b[2]`,
	`return cjson.decode('"str"')`,
	`return {bit.band(0xff, 0x3c), bit.bor(1, 6), bit.bxor(5, 3), bit.lshift(1, 10), bit.rshift(256, 4)}`,
	`return {bit.bnot(0), bit.arshift(-256, 4), bit.tohex(255), bit.tohex(-1, 4), bit.tobit(2^32 + 5)}`,
	// Lua's own errors, in Lua 5.1's words.
	`return 1 +`,
	`return +`,
	"local x = 'a\n",
	`local x; return x.y`,
	`local t = {} return #t.list`,
	`local f; f()`,
	`local x; return x + 1`,
	`return #nil`,
	`return ('x'):nosuch()`,
	`return {} < {}`,
	`return nosuch()`,
	`return 'a' .. {}`,
	`local t = setmetatable({}, {__index = function(t, k) return k .. '!' end}) return t.x`,
	`return string.rep()`,
	`return ('x'):rep(3, 4, 5) .. math.floor('z')`,
	`local function f() return f() + 1 end return f()`,
	`return unpack({}, 1, 1e7)`,
	`return {pcall(redis.call, 'NOSUCH')}`,
	`return {pcall(error, {err = 'X y'})}`,
	`local ok, e = pcall(function() local x; return x.y end) return e`,
	`return {xpcall(function() error('boom') end, function(e) return 'handled: ' .. e end)}`,
	`error(nil)`,
	`error(42)`,
	`error({err = 42})`,
	`return {err = 'multi\nline\n'}`,
	`return redis.status_reply('multi\nline')`,
	// Numbers as Lua 5.1 reads and prints them.
	`return {tostring(tonumber('1e3')), tostring(tonumber('0x10')), tostring(tonumber(' 5 ')), tostring(tonumber('1e')), tostring(tonumber(ARGV[1])), tostring(tonumber(ARGV[2]))}`,
	`return {tostring(1/3), tostring(2^53), tostring(-0.0), tostring(1e15), tostring(100000000000000), tostring(0.1), tostring(123456789012)}`,
	`local z = 0 return {tostring(z/z), tostring(1/z), tostring(-1/z), tostring(-z), tostring(2^63), tostring(-2^63)}`,
	`return {tostring(tonumber('inf')), tostring(tonumber('-nan')), tostring(tonumber('1e400')), tostring(tonumber('0x')), tostring(tonumber('5', 8)), tostring(tonumber('zz', 36))}`,
	`return string.format('%d|%5.2f|%s|%q|%x|%g|%e|%c|%o|%-5s|', 3.9, 2.345, 'a', 'b\n"c', 255, 1e20, 12345.678, 65, 8, 'x')`,
	`return string.format('%.3f %10.4g %+d %5.1s %%', 1/3, 2/3, 5, 'abc')`,
	`return string.format('%d', 'x')`,
	`return {math.floor(-3.5), math.ceil(-3.5), math.fmod(-7, 3), math.abs(-2), math.max(3, 7.5, 1), math.sqrt(16), math.pow(2, 10), math.huge == 1/0}`,
	`return tostring(math.pi) .. ' ' .. tostring(math.exp(1)) .. ' ' .. tostring(math.log(10)) .. ' ' .. tostring(math.sin(1))`,
	`redis.call('SET', KEYS[1], 0.1 + 0.2) return redis.call('GET', KEYS[1])`,
	`redis.call('SET', KEYS[1], 1e300 * 10) return redis.call('GET', KEYS[1])`,
	`return {1e300 * 10, -1e300 * 10, 2^70, -2.5}`,
	// cjson, as Redis ships it: key order, errors, the smoke test.
	`return cjson.encode({a = 1, b = 'x', c = {1, 2}, d = {e = true}, f = 1.5, g = cjson.null})`,
	`return cjson.encode({[1] = 1, [100] = 1})`,
	`return cjson.encode({1, nil, 3})`,
	`return cjson.encode(function() end)`,
	`local z = 0 return cjson.encode(z/z)`,
	`return cjson.encode({[true] = 1})`,
	`return cjson.decode('{x')`,
	`return cjson.decode('[1 2]')`,
	`return cjson.decode('{"a":}')`,
	`return cjson.decode('"abc')`,
	`return cjson.decode('"\\u00e9\\ud83d\\ude00\\t"')`,
	`return cjson.encode(cjson.decode('{"a":[1,2,{"b":null}],"c":"\\u00e9","d":1e400,"e":-0}'))`,
	`return cjson.decode(ARGV[1])`,
	`return cjson.encode(cjson.decode(ARGV[2]))`,
	`local some_map = {s1="Some string", n1=100, a1={"Some","String","Array"}, nil1=nil, b1=true, b2=false}
	local encoded = cjson.encode(some_map)
	local decoded = cjson.decode(encoded)
	assert(table.concat(some_map) == table.concat(decoded))
	cjson.encode_keep_buffer(false)
	encoded = cjson.encode(some_map)
	decoded = cjson.decode(encoded)
	assert(table.concat(some_map) == table.concat(decoded))
	local table1 = {one="one", [1]="one"}
	encoded = cjson.encode(table1)
	decoded = cjson.decode(encoded)
	assert(decoded["one"] == table1["one"])
	assert(decoded["1"] == table1[1])
	local invalid_map = {}
	invalid_map[false] = "false"
	local ok, encoded = pcall(cjson.encode, invalid_map)
	assert(ok == false)
	cjson.encode_max_depth(1)
	ok, encoded = pcall(cjson.encode, some_map)
	assert(ok == false)
	cjson.decode_max_depth(1)
	ok, decoded = pcall(cjson.decode, '{"obj": {"array": [1,2,3,4]}}')
	assert(ok == false)
	local z = 0
	ok, encoded = pcall(cjson.encode, {num1=z/z})
	assert(ok == false)
	cjson.encode_invalid_numbers(true)
	ok, encoded = pcall(cjson.encode, {num1=z/z})
	assert(ok == true)
	cjson.decode_max_depth(1000)
	cjson.encode_max_depth(1000)
	cjson.encode_invalid_numbers(false)
	cjson.encode_keep_buffer(true)
	return {cjson.encode(some_map), encoded}`,
	// A script that changed cjson's settings changed them for itself only.
	`return {cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_invalid_numbers(), cjson.encode_keep_buffer(), cjson.encode_number_precision()}`,
	// cmsgpack, struct and bit.
	`return cmsgpack.unpack(cmsgpack.pack({1, 'a', {2, 3}, true, -3, 2^40}))`,
	`local t = cmsgpack.unpack(cmsgpack.pack({k = ARGV[1], n = {1, 2, 3}, f = 0.25})) return {t.k, t.n[3], tostring(t.f)}`,
	`local e = cmsgpack.pack({1, 'ab', {x = 1}, 0.5, -1, 65536, 2^33, -2^40, string.rep('y', 40)}) local h = '' for i = 1, #e do h = h .. string.format('%02x', e:byte(i)) end return h`,
	`return {cmsgpack.unpack(cmsgpack.pack(1, 'two', 3))}`,
	`return cmsgpack.unpack('\196')`,
	`return cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)`,
	`return {struct.unpack('>I2i4', struct.pack('>I2i4', 258, -5))}`,
	`return struct.pack('<hHbB', -2, 65535, -1, 255)`,
	`return {struct.size('i4d'), struct.size('!4bi')}`,
	`return struct.pack('s', 'abc') .. struct.pack('c3', 'xyzw') .. '|'`,
	`return struct.unpack('i8', 'short')`,
	`return struct.pack('q', 1)`,
	`return {bit.tobit(0xffffffff), bit.rol(1, 33), bit.ror(1, 1), bit.bswap(0x12345678), bit.tohex(-1), bit.tohex(255, -2)}`,
	// The sandbox.
	`setmetatable(_G, {})`,
	`rawset(_G, 'x', 1)`,
	`getmetatable('').__index.upper = nil`,
	`local g = getmetatable(_G) g.__index = {}`,
	`redis.call = function() end`,
	`cjson.encode = nil`,
	`KEYS = {}`,
	`_G = {}`,
	`table.insert(math, 1)`,
	`return loadstring(string.dump(function() return 1 end))()`,
	`return {loadstring('return 1 +')}`,
	`return loadstring('return 7')()`,
	`local f = loadstring('x = 1') return f()`,
	`return print`,
	`return os.time()`,
	`return {type(getfenv), type(setfenv), type(newproxy), type(dofile), type(module), type(require), type(io)}`,
	`return {type(coroutine.create), type(gcinfo), type(load), _VERSION}`,
	`local co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end) return {co(1), co(5)}`,
	`return redis.breakpoint()`,
	`return {redis.debug('x'), redis.replicate_commands()}`,
	`return redis.set_repl(redis.REPL_ALL)`,
	`return redis.set_repl(99)`,
	`return redis.setresp()`,
	`return redis.log()`,
	`return redis.acl_check_cmd('GET', KEYS[1])`,
	`return redis.acl_check_cmd('NOSUCH')`,
	`return redis.acl_check_cmd()`,
	`return redis.error_reply()`,
	`return redis.status_reply(1)`,
	// The PRNG, seeded as Redis seeds it.
	`math.randomseed(42) return {tostring(math.random()), math.random(100), math.random(5, 10)}`,
	`math.randomseed(tonumber(ARGV[1]) or 7) return tostring(math.random())`,
	`return math.random(0)`,
	`return math.random(1, 2, 3)`,
	// The standard library.
	`local t = {3, 1, 2} table.sort(t, function(a, b) return a > b end) return t`,
	`return table.concat({1, 2, 'x'}, ', ', 2, 3)`,
	`return {table.maxn({1, 2, nil, 4}), #'abc', select('#', 1, nil, 3), select(2, 'a', 'b', 'c')}`,
	`return {string.find('hello world', 'o w'), string.match('key:123', '(%a+):(%d+)'), string.gsub('aaa', 'a', 'b', 2)}`,
	`return {string.sub('hello', -3), string.len('\0ab'), string.lower('ABC'), string.reverse('abc'), ('%d'):rep(2, ',')}`,
	`local s = '' for w in string.gmatch('one two three', '%a+') do s = s .. w:upper() end return s`,
	`local t = {} for k, v in pairs({a = 1, b = 2, c = 3, [1] = 'x', [2.5] = 'y'}) do t[#t + 1] = tostring(k) .. '=' .. tostring(v) end return t`,
	`local t = {} for i = 1, 20 do t['k' .. i] = i end local o = {} for k in pairs(t) do o[#o + 1] = k end return o`,
	// Its key is a declared one, or one of diffKeylessKeys: in the
	// sharded modes a key of another group is "non local".
	`local k = KEYS[1] or 'k2' local t = {} for i = 1, 7999 do t[i] = k end return redis.call('DEL', unpack(t))`,
	// MEMORY USAGE, whose number is kvs's own estimate.
	`return type(redis.call('MEMORY', 'USAGE', KEYS[1]))`,
	`return type(redis.call('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', 0))`,
	`return redis.call('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', -1)`,
	`return redis.call('MEMORY', 'USAGE', KEYS[1], 'SAMPLES')`,
	`return redis.call('MEMORY', 'USAGE', KEYS[1], 'SAMPLES', 'x')`,
	`return redis.call('MEMORY', 'USAGE')`,
	`return redis.call('MEMORY', 'BOGUS')`,
	`return redis.call('MEMORY')`,
	`return redis.pcall('MEMORY', 'HELP', 'x')`,
	// SORT BY a constant sorts a set inside a script.
	`redis.call('DEL', KEYS[1]) redis.call('SADD', KEYS[1], 'c', 'a', 'b', 'aa', '10', '9') return redis.call('SORT', KEYS[1], 'BY', 'nosort')`,
	`redis.call('DEL', KEYS[1]) redis.call('SADD', KEYS[1], 'c', 'a', 'b') return redis.call('SORT', KEYS[1], 'BY', '_', 'GET', '#', 'GET', '_:*')`,
	`redis.call('DEL', KEYS[1]) redis.call('RPUSH', KEYS[1], 'c', 'a', 'b') return redis.call('SORT', KEYS[1], 'BY', 'nosort', 'DESC')`,
	// Shebangs, split as Redis's sdssplitargs splits them.
	"#!lua flags=no-writes,\nreturn 1",
	"#!lua flags=\nreturn 1",
	"#!lua \"flags=no-writes\"\nreturn redis.call('SET', KEYS[1], 'x')",
	"#!\"lua\"\nreturn 2",
	"#!lua flags=\"no-writes\nreturn 1",
	"#!lua flags=no-writes foo\nreturn 1",
	// RESP3.
	`redis.setresp(3) return redis.call('GET', KEYS[1])`,
	`redis.setresp(3) local v = redis.call('GET', KEYS[1]) return v == nil`,
	`redis.setresp(3) return redis.call('ZSCORE', KEYS[1], ARGV[1])`,
	`redis.setresp(3) redis.call('DEL', KEYS[1]) redis.call('HSET', KEYS[1], 'a', '1') return redis.call('HGETALL', KEYS[1])`,
	`redis.setresp(3) redis.call('DEL', KEYS[1]) redis.call('HSET', KEYS[1], 'a', '1') local m = redis.call('HGETALL', KEYS[1]) return m.map.a`,
	`redis.setresp(3) redis.call('DEL', KEYS[1]) redis.call('SADD', KEYS[1], 'm') return redis.call('SMEMBERS', KEYS[1])`,
	`redis.setresp(3) redis.call('DEL', KEYS[1]) redis.call('SADD', KEYS[1], 'm') local s = redis.call('SMEMBERS', KEYS[1]) return tostring(s.set.m)`,
	`redis.setresp(3) redis.call('DEL', KEYS[1]) redis.call('ZADD', KEYS[1], 2.5, 'm') local r = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES') return {r[1][1], r[1][2].double}`,
	`redis.setresp(3) return redis.call('SET', KEYS[1], 'v')`,
	`redis.setresp(3) return redis.pcall('INCR', KEYS[1])`,
	`redis.setresp(3) return {map = {only = 'one'}}`,
	`redis.setresp(3) return {set = {only = true}}`,
	`redis.setresp(3) return {double = 3.25}`,
	`redis.setresp(3) return {double = 1/0}`,
	`redis.setresp(3) return {big_number = '123456789012345678901234567890'}`,
	`redis.setresp(3) return {verbatim_string = {format = 'txt', string = 'hello'}}`,
	`redis.setresp(3) return true`,
	`redis.setresp(3) return false`,
	`redis.setresp(3) return nil`,
	`redis.setresp(3) return {1, true, false, {double = 0.5}}`,
	`redis.setresp(2) return redis.call('GET', KEYS[1])`,
	// Errors with Redis's own wording.
	`return redis.call('NOSUCH', KEYS[1])`,
	`return redis.pcall('NOSUCH')`,
	`return redis.call('GET')`,
	`return redis.call('GET', KEYS[1], KEYS[2])`,
	`return redis.call()`,
	`return redis.call('GET', {})`,
	`return redis.call('SUBSCRIBE', 'ch')`,
	`return redis.call('EVAL', 'return 1', 0)`,
	`return redis.call('SET', KEYS[1], 'v', 'BOGUS')`,
	`return redis.call('INCR', KEYS[1])`,
	`return redis.call('LPUSH', KEYS[1], 'x')`,
	`error('my failure')`,
	`error({err = 'CUSTOM table error'})`,
	`return undefined_global`,
	`newglobal = 1`,
	`string.upper = nil`,
	`redis.setresp(4)`,
	`return redis.sha1hex()`,
	`redis.log(redis.LOG_WARNING, 'logged') return 'after log'`,
	`return redis.log(99, 'x')`,
	"#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])",
	"#!lua flags=no-writes\nreturn redis.call('SET', KEYS[1], 'x')",
	"#!lua\nreturn redis.call('SET', KEYS[1], 'shebang')",
	"#!lua flags=bogus\nreturn 1",
	"#!python\nreturn 1",
	// PUBLISH and SPUBLISH: allowed where the script may write, refused
	// where it may not; no one subscribes, so Redis's count is kvs's 0.
	`return redis.call('PUBLISH', 'nobody-listens', ARGV[1])`,
	`local n = redis.call('SPUBLISH', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], n) return n`,
	`return redis.pcall('PUBLISH', 'nobody-listens')`,
	"#!lua flags=no-writes\nreturn redis.call('PUBLISH', 'nobody-listens', 'x')",
	"#!lua flags=no-writes\nlocal r = redis.pcall('SPUBLISH', KEYS[1], 'x') return r.err",
}

// diffLibraries are the libraries the generator loads. Each of the first
// two holds one function, so that FUNCTION LIST of it has one order;
// "dshadow" registers a name "dwrite" also registers, so that at most
// one of them loads.
var diffLibraries = []string{
	"#!lua name=dwrite\nredis.register_function('d_incr', function(keys, args) return {redis.call('INCRBY', keys[1], args[1] or 1), #keys, #args} end)",
	"#!lua name=dread\nredis.register_function{function_name='d_get', callback=function(keys, args) return redis.call('GET', keys[1]) end, flags={'no-writes', 'allow-stale'}, description='reads one key'}",
	"#!lua name=dmany\n" +
		"local function tag(x) return 'tag:' .. tostring(x) end\n" +
		"redis.register_function('d_tag', function(keys, args) return tag(args[1]) end)\n" +
		"redis.register_function('d_err', function(keys, args) return redis.error_reply('LIBERR ' .. (args[1] or '')) end)\n" +
		"redis.register_function('d_raise', function(keys, args) return redis.call('INCR', keys[1]) end)\n" +
		"redis.register_function('d_resp3', function(keys, args) redis.setresp(3) return {map = {k = {double = 1.5}}} end)\n" +
		"redis.register_function('d_keys', function(keys, args) return KEYS end)\n" +
		"redis.register_function{function_name='d_ro_write', callback=function(keys, args) return redis.call('SET', keys[1], 'x') end, flags={'no-writes'}}\n" +
		"redis.register_function('D_Mixed', function(keys, args) return {keys, args} end)\n" +
		"redis.register_function('d_pub', function(keys, args) return redis.call('PUBLISH', 'nobody-listens', args[1] or '') end)\n" +
		"redis.register_function('d_argset', function(keys, args) return redis.call('SET', args[1], args[2]) end)",
	"#!lua name=dshadow\nredis.register_function('d_incr', function(keys, args) return 'shadow' end)",
	// Libraries that do not load, each for its own error.
	"#!lua name=dbad\nreturn 1",
	"#!lua name=dbad\nredis.register_function('d-bad', function() end)",
	"#!lua name=dbad\nredis.call('SET', 'x', 'y')",
	"#!lua name=dbad\nredis.register_function{function_name='f', callback=function() end, flags={'fast'}}",
	"#!lua name=dbad\nredis.register_function('f')",
	"#!lua name=dbad\nredis.register_function{callback=function() end}",
	"#!lua name=dbad\nlocal x = math.floor(1)",
	"#!lua name=dbad\nglobal_x = 1",
	"#!lua\nredis.register_function('f', function() end)",
	"#!lua name=d-bad\n",
	"#!lua name=dbad foo=bar\n",
	"#!js name=dbad\n",
	"no header",
	"#!lua name=dbad",
	"#!lua name=\"dbad\nredis.register_function('f', function() end)",
	"#!lua name=\"dbad\" x\n",
	"#!lua name=\"d bad\"\nredis.register_function('f', function() end)",
	"#!lua NAME=dbad\nredis.register_function('test\\0test', function() end)",
}

// diffKeylessScripts declare no keys and touch ARGV[1], one of
// diffKeylessKeys: the shared keys whose slots (449, 4576, 325, 4452) are
// in the first third of the slots. A one-node kvs cluster of three groups
// runs a script without keys in the group holding them, as a Redis
// Cluster node serving every slot runs it on any key.
var (
	diffKeylessScripts = []string{
		`return redis.call('SET', ARGV[1], ARGV[2])`,
		`return redis.call('GET', ARGV[1])`,
		`return redis.pcall('INCR', ARGV[1])`,
		`redis.call('DEL', ARGV[1]) redis.call('RPUSH', ARGV[1], 'a', ARGV[2]) return redis.call('LRANGE', ARGV[1], 0, -1)`,
		`return {redis.call('EXISTS', ARGV[1]), redis.call('TYPE', ARGV[1])}`,
	}
	diffKeylessKeys = []string{"k2", "k3", "k6", "k7"}
)

var diffFunctions = []string{"d_incr", "D_INCR", "d_get", "d_tag", "d_err", "d_raise", "d_resp3", "d_keys", "d_ro_write", "d_mixed", "d_pub", "nosuch"}

func scriptSHA(body string) string {
	sum := sha1.Sum([]byte(body))
	return hex.EncodeToString(sum[:])
}

func genScriptCommand(g *cmdGen) []string {
	keysArgs := func(n int) []string {
		out := []string{}
		switch n {
		case 0:
			out = append(out, "0")
		case 1:
			out = append(out, "1", g.key())
		default:
			out = append(out, "2", g.key(), g.key())
		}
		return append(out, g.pick("5", "v", "-1", "3.5", ""), g.value())
	}
	body := g.pick(diffScripts...)
	switch g.r.Intn(22) {
	case 20:
		cmd := g.pick("EVAL", "EVAL", "EVAL_RO")
		return []string{cmd, g.pick(diffKeylessScripts...), "0", g.pick(diffKeylessKeys...), g.value()}
	case 21:
		return []string{"FCALL", "d_argset", "0", g.pick(diffKeylessKeys...), g.value()}
	case 0, 1, 2, 3, 4, 5:
		return append([]string{"EVAL", body}, keysArgs(2)...)
	case 6, 7:
		return append([]string{g.pick("EVALSHA", "evalsha"), g.pick(scriptSHA(body), strings.ToUpper(scriptSHA(body)))}, keysArgs(2)...)
	case 8:
		if g.chance(0.5) {
			return append([]string{"EVALSHA_RO", scriptSHA(body)}, keysArgs(2)...)
		}
		// Marked, so that no EVALSHA names it: Redis's EVAL_RO adds the
		// body to the script cache, kvs's does not (compatibility.md).
		return append([]string{"EVAL_RO", body + "\n-- ro"}, keysArgs(2)...)
	case 9:
		return []string{"SCRIPT", g.pick("LOAD", "EXISTS"), body}
	case 10:
		return append([]string{"EVAL", body}, g.pick("-1", "3", "x", "1"))
	case 11, 12:
		return []string{"FUNCTION", "LOAD", g.pick(diffLibraries[:4]...)}
	case 13:
		cmd := []string{"FUNCTION", "LOAD"}
		if g.chance(0.7) {
			cmd = append(cmd, g.pick("REPLACE", "replace", "BOGUS"))
		}
		return append(cmd, g.pick(diffLibraries...))
	case 14, 15, 16:
		return append([]string{g.pick("FCALL", "FCALL", "fcall_ro"), g.pick(diffFunctions...)}, keysArgs(g.r.Intn(3))...)
	case 17:
		return []string{"FCALL", g.pick(diffFunctions...), g.pick("-1", "5", "x")}
	case 18:
		switch g.r.Intn(8) {
		case 6:
			return []string{"FUNCTION", "DUMP"}
		case 7:
			cmd := []string{"FUNCTION", "RESTORE", g.pick(diffPayloads()...)}
			if g.chance(0.7) {
				cmd = append(cmd, g.pick("APPEND", "REPLACE", "FLUSH", "replace", "bogus"))
			}
			return cmd
		case 0:
			return []string{"FUNCTION", "DELETE", g.pick("dwrite", "dread", "dmany", "dshadow", "nosuch", "DWRITE")}
		case 1:
			return []string{"FUNCTION", "STATS"}
		case 2:
			return []string{"FUNCTION", "KILL"}
		case 3:
			return []string{"FUNCTION", g.pick("FLUSH", "flush"), g.pick("SYNC", "ASYNC", "bogus")}
		case 4:
			return []string{"FUNCTION", g.pick("BOGUS", "DELETE", "LIST"), g.pick("LIBRARYNAME", "x", "WITHCODE")}
		}
		return []string{"SCRIPT", g.pick("KILL", "FLUSH", "BOGUS")}
	}
	cmd := []string{"FUNCTION", "LIST", "LIBRARYNAME", g.pick("dwrite", "dread", "DREAD", "dr*d", "nosuch")}
	if g.chance(0.5) {
		cmd = append(cmd, "WITHCODE")
	}
	return cmd
}

// diffPayloads are FUNCTION RESTORE's payloads: libraries of
// diffLibraries alone and together, one twice, and payloads with a bad
// checksum, a later version, a wrong opcode, a truncated string.
func diffPayloads() []string {
	l := diffLibraries
	good := []string{
		functionPayload(l[0]), functionPayload(l[1]), functionPayload(l[0], l[1]), functionPayload(l[2]),
		functionPayload(l[3]), functionPayload(l[4]), functionPayload(l[0], l[0]), functionPayload(l[1], l[3]),
		functionPayload(),
	}
	bad := functionPayload(l[1])
	crc := bad[:len(bad)-1] + string(bad[len(bad)-1]^1)
	version := sealPayload(bad[:len(bad)-10], 11)
	opcode := sealPayload("\x07\x01x", 10)
	truncated := sealPayload("\xf5\x3fx", 10)
	return append(good, crc, version, opcode, truncated, "x", "")
}

// functionPayload is a FUNCTION DUMP payload of codes, its strings stored
// as they are (Redis would compress the longer ones, and reads both).
func functionPayload(codes ...string) string {
	var b []byte
	for _, code := range codes {
		b = append(b, 245)
		switch n := len(code); {
		case n < 1<<6:
			b = append(b, byte(n))
		case n < 1<<14:
			b = append(b, byte(n>>8)|0x40, byte(n))
		default:
			b = binary.BigEndian.AppendUint32(append(b, 0x80), uint32(n))
		}
		b = append(b, code...)
	}
	return sealPayload(string(b), 10)
}

// sealPayload adds a payload's footer: the RDB version and Redis's CRC-64.
func sealPayload(body string, version uint16) string {
	b := binary.LittleEndian.AppendUint16([]byte(body), version)
	return string(binary.LittleEndian.AppendUint64(b, redisCRC64(b)))
}

var jonesTable = crc64.MakeTable(0x95ac9329ac4bc9b5)

func redisCRC64(b []byte) uint64 { return ^crc64.Update(^uint64(0), jonesTable, b) }

// payloadCodes reads the library code a FUNCTION DUMP payload holds, in
// order, decompressing LZF strings.
func payloadCodes(p string) ([]string, bool) {
	if len(p) < 10 {
		return nil, false
	}
	b := []byte(p[:len(p)-10])
	var codes []string
	readLen := func() (int, bool, bool) {
		if len(b) == 0 {
			return 0, false, false
		}
		c := b[0]
		b = b[1:]
		switch {
		case c>>6 == 3:
			return int(c & 0x3f), true, true
		case c>>6 == 0:
			return int(c), false, true
		case c>>6 == 1 && len(b) > 0:
			n := int(c&0x3f)<<8 | int(b[0])
			b = b[1:]
			return n, false, true
		case c == 0x80 && len(b) >= 4:
			n := int(binary.BigEndian.Uint32(b))
			b = b[4:]
			return n, false, true
		}
		return 0, false, false
	}
	for len(b) > 0 {
		if b[0] != 245 {
			return nil, false
		}
		b = b[1:]
		n, encoded, ok := readLen()
		if !ok {
			return nil, false
		}
		if !encoded {
			if n > len(b) {
				return nil, false
			}
			codes = append(codes, string(b[:n]))
			b = b[n:]
			continue
		}
		clen, _, ok1 := readLen()
		plen, _, ok2 := readLen()
		if n != 3 || !ok1 || !ok2 || clen > len(b) {
			return nil, false
		}
		code, ok := lzfDecode(b[:clen], plen)
		if !ok {
			return nil, false
		}
		codes = append(codes, code)
		b = b[clen:]
	}
	slices.Sort(codes)
	return codes, true
}

// lzfDecode is liblzf's decompression.
func lzfDecode(in []byte, n int) (string, bool) {
	var out []byte
	for i := 0; i < len(in); {
		ctrl := int(in[i])
		i++
		if ctrl < 32 {
			if i+ctrl+1 > len(in) {
				return "", false
			}
			out = append(out, in[i:i+ctrl+1]...)
			i += ctrl + 1
			continue
		}
		l := ctrl >> 5
		if l == 7 && i < len(in) {
			l += int(in[i])
			i++
		}
		if i >= len(in) {
			return "", false
		}
		ref := len(out) - (ctrl&31)<<8 - int(in[i]) - 1
		i++
		if ref < 0 {
			return "", false
		}
		for j := 0; j < l+2; j++ {
			out = append(out, out[ref+j])
		}
	}
	return string(out), len(out) == n
}
