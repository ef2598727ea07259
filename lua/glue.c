/*
 * kvs's glue between Go (lua.go) and Redis's Lua 5.1.
 *
 * Most of this file is Redis 7.0.15's own scripting code, adapted: the
 * sandbox and the script API from src/script_lua.c, EVAL's interpreter
 * from src/eval.c, FUNCTION's from src/function_lua.c, the RESP reader
 * from src/resp_parser.c and redisLrand48 from src/rand.c. It does what
 * they do, in their order, with their texts; what kvs does differently is
 * marked "kvs:". The parts that are Redis's are under Redis's license:
 *
 * Copyright (c) 2009-2021, Redis Ltd.
 * Copyright (c) 2009-2012, Salvatore Sanfilippo <antirez at gmail dot com>
 * All rights reserved.
 *
 * Redistribution and use in source and binary forms, with or without
 * modification, are permitted provided that the following conditions are met:
 *
 *   * Redistributions of source code must retain the above copyright notice,
 *     this list of conditions and the following disclaimer.
 *   * Redistributions in binary form must reproduce the above copyright
 *     notice, this list of conditions and the following disclaimer in the
 *     documentation and/or other materials provided with the distribution.
 *   * Neither the name of Redis nor the names of its contributors may be used
 *     to endorse or promote products derived from this software without
 *     specific prior written permission.
 *
 * THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
 * AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
 * IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE
 * ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT OWNER OR CONTRIBUTORS BE
 * LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR
 * CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF
 * SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS
 * INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN
 * CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE)
 * ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE
 * POSSIBILITY OF SUCH DAMAGE.
 *
 * The rules this file keeps:
 *
 * - No Lua error crosses a Go frame. Go calls into C (kvs_run, ...), whose
 *   every Lua call that may raise is under lua_pcall. C calls Go
 *   (kvsGoCall, kvsGoCheckpoint) only from C functions Lua called; the Go
 *   side returns a status, and the C side raises the Lua error, if any,
 *   after Go has returned.
 * - One redis.call is one call into Go: the arguments go as pointers into
 *   the Lua strings, the reply comes back as RESP bytes, which this file
 *   turns into Lua values (redisProtocolToLuaType). A script's result
 *   goes back to Go as RESP3 (luaReplyToRedisReply).
 * - Every replica runs a script alike: the objects a run creates are
 *   numbered from the same start (lua_setobjectseq), math.random is
 *   seeded from the log entry, cjson's settings and the collector's are
 *   back to their defaults, and collectgarbage reports nothing about the
 *   heap, which differs from node to node.
 */

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

#include "_cgo_export.h"
#include "glue.h"

#define REDIS_API_NAME "redis"
#define REGISTRY_ERROR_HANDLER_NAME "__ERROR_HANDLER__"
#define LIBRARY_API_NAME "__LIBRARY_API__"
#define GLOBALS_API_NAME "__GLOBALS_API__"

/* kvs: a script's reply nests at most this deep; deeper is Redis's
 * "reached lua stack limit" (Redis: where Lua's stack runs out). */
#define KVS_MAX_REPLY_DEPTH 32

/* The version scripts see: the one INFO and HELLO report. */
#define REDIS_VERSION "7.2.4"
#define REDIS_VERSION_NUM 0x00070204

#define LL_DEBUG 0
#define LL_VERBOSE 1
#define LL_NOTICE 2
#define LL_WARNING 3

#define PROPAGATE_NONE 0
#define PROPAGATE_AOF 1
#define PROPAGATE_REPL 2

const char *kvs_flag_names[] = {"no-writes", "allow-oom", "allow-stale",
                                "no-cluster", "allow-cross-slot-keys", NULL};

static kvs_state *stateOf(lua_State *L) {
  void *ud;
  lua_getallocf(L, &ud);
  return ud;
}

/* ---------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------- */

static void outOfMemory(void) {
  fputs("kvs: out of memory in the Lua glue\n", stderr);
  abort();
}

int kvs_reserve(kvs_buf *b, size_t n) {
  if (b->len + n <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) outOfMemory();
  b->p = p;
  b->cap = cap;
  return 0;
}

static void bufAppend(kvs_buf *b, const char *s, size_t n) {
  kvs_reserve(b, n);
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

static void bufAppendStr(kvs_buf *b, const char *s) { bufAppend(b, s, strlen(s)); }

/* formatInt writes n in decimal at the end of tmp[0:32], returning
 * where it starts. */
static char *formatInt(char *end, long long n) {
  unsigned long long u = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;
  char *p = end;
  do {
    *--p = '0' + u % 10;
    u /= 10;
  } while (u);
  if (n < 0) *--p = '-';
  return p;
}

static void bufAppendLen(kvs_buf *b, char type, long long n) {
  char tmp[32];
  char *end = tmp + sizeof(tmp) - 2;
  end[0] = '\r', end[1] = '\n';
  char *p = formatInt(end, n);
  *--p = type;
  bufAppend(b, p, tmp + sizeof(tmp) - p);
}

/* ---------------------------------------------------------------------------
 * redisLrand48 (src/rand.c), with its state in the interpreter's kvs_state
 * instead of static variables.
 * ------------------------------------------------------------------------- */

#define RAND_N 16
#define RAND_MASK ((1 << (RAND_N - 1)) + (1 << (RAND_N - 1)) - 1)
#define RAND_LOW(x) ((unsigned)(x)&RAND_MASK)
#define RAND_HIGH(x) RAND_LOW((x) >> RAND_N)
#define RAND_MUL(x, y, z) \
  { \
    int32_t l = (long)(x) * (long)(y); \
    (z)[0] = RAND_LOW(l); \
    (z)[1] = RAND_HIGH(l); \
  }
#define RAND_CARRY(x, y) ((int32_t)(x) + (long)(y) > RAND_MASK)
#define RAND_ADDEQU(x, y, z) (z = RAND_CARRY(x, (y)), x = RAND_LOW(x + (y)))
#define RAND_X0 0x330E
#define RAND_A0 0xE66D
#define RAND_A1 0xDEEC
#define RAND_A2 0x5
#define RAND_C 0xB
#define REDIS_LRAND48_MAX INT32_MAX

static void rand48Seed(kvs_state *st, uint32_t x0, uint32_t x1, uint32_t x2) {
  st->rx[0] = x0, st->rx[1] = x1, st->rx[2] = x2;
  st->ra[0] = RAND_A0, st->ra[1] = RAND_A1, st->ra[2] = RAND_A2;
  st->rc = RAND_C;
}

static void redisSrand48(kvs_state *st, int32_t seedval) {
  rand48Seed(st, RAND_X0, RAND_LOW(seedval), RAND_HIGH(seedval));
}

static void rand48Next(kvs_state *st) {
  uint32_t p[2], q[2], r[2], carry0, carry1;
  uint32_t *x = st->rx, *a = st->ra;

  RAND_MUL(a[0], x[0], p);
  RAND_ADDEQU(p[0], st->rc, carry0);
  RAND_ADDEQU(p[1], carry0, carry1);
  RAND_MUL(a[0], x[1], q);
  RAND_ADDEQU(p[1], q[0], carry0);
  RAND_MUL(a[1], x[0], r);
  x[2] = RAND_LOW(carry0 + carry1 + RAND_CARRY(p[1], r[0]) + q[1] + r[1] +
                  a[0] * x[2] + a[1] * x[1] + a[2] * x[0]);
  x[1] = RAND_LOW(p[1] + r[0]);
  x[0] = RAND_LOW(p[0]);
}

static int32_t redisLrand48(kvs_state *st) {
  rand48Next(st);
  return (((int32_t)st->rx[2] << (RAND_N - 1)) + (st->rx[1] >> 1));
}

/* ---------------------------------------------------------------------------
 * Errors as Redis's script API raises them: a table {err='CODE msg'}.
 * ------------------------------------------------------------------------- */

/* luaPushErrorBuff: buf is "-CODE msg" (the code taken from it), or
 * "msg" (the code is ERR); newlines at either end are trimmed. */
static void luaPushErrorBuff(lua_State *L, const char *buf, size_t len) {
  const char *code = "ERR", *msg = buf;
  size_t codelen = 3, msglen = len;
  const char *nul = memchr(buf, '\0', len);
  if (nul) len = nul - buf; /* Redis's buffers are C strings */
  msglen = len;
  if (len > 0 && buf[0] == '-') {
    const char *sp = memchr(buf, ' ', len);
    if (!sp) {
      msg = buf + 1;
      msglen = len - 1;
    } else {
      code = buf + 1;
      codelen = sp - code;
      msg = sp + 1;
      msglen = len - (msg - buf);
    }
  }
  while (msglen > 0 && (msg[0] == '\r' || msg[0] == '\n')) msg++, msglen--;
  while (msglen > 0 && (msg[msglen - 1] == '\r' || msg[msglen - 1] == '\n')) msglen--;

  luaL_Buffer b;
  lua_newtable(L);
  lua_pushstring(L, "err");
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, code, codelen);
  luaL_addchar(&b, ' ');
  luaL_addlstring(&b, msg, msglen);
  luaL_pushresult(&b);
  lua_settable(L, -3);
}

static void luaPushError(lua_State *L, const char *error) {
  luaPushErrorBuff(L, error, strlen(error));
}

static int luaError(lua_State *L) { return lua_error(L); }

/* ---------------------------------------------------------------------------
 * RESP to Lua (src/resp_parser.c with script_lua.c's callbacks). The
 * replies come from kvs's own encoder, but the reader still never reads
 * past the end.
 * ------------------------------------------------------------------------- */

typedef struct respReader {
  const char *p, *end;
} respReader;

static void respBad(lua_State *L) { luaL_error(L, "kvs: malformed reply from a command"); }

/* The line after the type byte, without its CRLF. */
static const char *respLine(lua_State *L, respReader *r, size_t *len) {
  const char *s = r->p + 1;
  const char *e = s;
  while (e + 1 < r->end && !(e[0] == '\r' && e[1] == '\n')) e++;
  if (e + 1 >= r->end) respBad(L);
  *len = e - s;
  r->p = e + 2;
  return s;
}

static long long respNum(lua_State *L, respReader *r) {
  size_t len;
  const char *s = respLine(L, r, &len);
  char tmp[32];
  if (len == 0 || len >= sizeof(tmp)) respBad(L);
  memcpy(tmp, s, len);
  tmp[len] = '\0';
  return strtoll(tmp, NULL, 10);
}

static const char *respBulk(lua_State *L, respReader *r, long long n) {
  if (n < 0 || r->end - r->p < n + 2) respBad(L);
  const char *s = r->p;
  r->p += n + 2;
  return s;
}

static void checkStack(lua_State *L, int n) {
  if (!lua_checkstack(L, n)) luaL_error(L, "lua stack limit reach when parsing redis.call reply");
}

static void redisProtocolToLuaType(lua_State *L, respReader *r) {
  if (r->p >= r->end) respBad(L);
  switch (r->p[0]) {
  case '$': {
    long long n = respNum(L, r);
    checkStack(L, 1);
    if (n == -1) {
      lua_pushboolean(L, 0);
    } else {
      const char *s = respBulk(L, r, n);
      lua_pushlstring(L, s, n);
    }
    break;
  }
  case '+': {
    size_t len;
    const char *s = respLine(L, r, &len);
    checkStack(L, 3);
    lua_newtable(L);
    lua_pushstring(L, "ok");
    lua_pushlstring(L, s, len);
    lua_settable(L, -3);
    break;
  }
  case '-': {
    size_t len;
    const char *s = respLine(L, r, &len);
    checkStack(L, 3);
    /* The error keeps its leading '-' for luaPushErrorBuff. */
    luaPushErrorBuff(L, s - 1, len + 1);
    lua_pushstring(L, "ignore_error_stats_update");
    lua_pushboolean(L, 1);
    lua_settable(L, -3);
    break;
  }
  case ':': {
    long long v = respNum(L, r);
    checkStack(L, 1);
    lua_pushnumber(L, (lua_Number)v);
    break;
  }
  case '*': {
    long long n = respNum(L, r);
    checkStack(L, 2);
    if (n == -1) {
      lua_pushboolean(L, 0);
      break;
    }
    lua_newtable(L);
    for (long long j = 0; j < n; j++) {
      lua_pushnumber(L, j + 1);
      redisProtocolToLuaType(L, r);
      lua_settable(L, -3);
    }
    break;
  }
  case '~': {
    long long n = respNum(L, r);
    checkStack(L, 3);
    lua_newtable(L);
    lua_pushstring(L, "set");
    lua_newtable(L);
    for (long long j = 0; j < n; j++) {
      redisProtocolToLuaType(L, r);
      checkStack(L, 1);
      lua_pushboolean(L, 1);
      lua_settable(L, -3);
    }
    lua_settable(L, -3);
    break;
  }
  case '%': {
    long long n = respNum(L, r);
    checkStack(L, 3);
    lua_newtable(L);
    lua_pushstring(L, "map");
    lua_newtable(L);
    for (long long j = 0; j < n; j++) {
      redisProtocolToLuaType(L, r);
      redisProtocolToLuaType(L, r);
      lua_settable(L, -3);
    }
    lua_settable(L, -3);
    break;
  }
  case '#': {
    size_t len;
    const char *s = respLine(L, r, &len);
    checkStack(L, 1);
    lua_pushboolean(L, len > 0 && s[0] == 't');
    break;
  }
  case ',': {
    size_t len;
    const char *s = respLine(L, r, &len);
    char tmp[64];
    double d = 0;
    if (len < sizeof(tmp)) {
      memcpy(tmp, s, len);
      tmp[len] = '\0';
      d = strtod(tmp, NULL);
    }
    checkStack(L, 3);
    lua_newtable(L);
    lua_pushstring(L, "double");
    lua_pushnumber(L, d);
    lua_settable(L, -3);
    break;
  }
  case '_': {
    size_t len;
    respLine(L, r, &len);
    checkStack(L, 1);
    lua_pushnil(L);
    break;
  }
  case '(': {
    size_t len;
    const char *s = respLine(L, r, &len);
    checkStack(L, 3);
    lua_newtable(L);
    lua_pushstring(L, "big_number");
    lua_pushlstring(L, s, len);
    lua_settable(L, -3);
    break;
  }
  case '=': {
    long long n = respNum(L, r);
    if (n < 4) respBad(L);
    const char *s = respBulk(L, r, n);
    checkStack(L, 5);
    lua_newtable(L);
    lua_pushstring(L, "verbatim_string");
    lua_newtable(L);
    lua_pushstring(L, "string");
    lua_pushlstring(L, s + 4, n - 4);
    lua_settable(L, -3);
    lua_pushstring(L, "format");
    lua_pushlstring(L, s, 3);
    lua_settable(L, -3);
    lua_settable(L, -3);
    break;
  }
  default:
    respBad(L);
  }
}

/* ---------------------------------------------------------------------------
 * Lua to RESP3 (luaReplyToRedisReply), into st->out. RESP3 is the form
 * every reply kind has; Go writes it to each client in the client's
 * protocol. A boolean is #t/#f, or, for a RESP2 script, :1 and _ (nil,
 * which the client gets in its own protocol), as Redis writes it.
 * ------------------------------------------------------------------------- */

/* An error reply: "-" + msg, newlines at the end trimmed and inside made
 * spaces, as addReplyErrorFormat writes it. */
static void outErrorTrimmed(kvs_buf *b, const char *msg, size_t len) {
  while (len > 0 && (msg[len - 1] == '\r' || msg[len - 1] == '\n')) len--;
  size_t start = b->len;
  bufAppend(b, "-", 1);
  bufAppend(b, msg, len);
  for (size_t i = start; i < b->len; i++)
    if (b->p[i] == '\r' || b->p[i] == '\n') b->p[i] = ' ';
  bufAppend(b, "\r\n", 2);
}

/* A simple string whose newlines become spaces (addReplyStatusSafe). */
static void outLineSafe(kvs_buf *b, char type, const char *s, size_t len) {
  size_t start = b->len;
  bufAppend(b, &type, 1);
  bufAppend(b, s, len);
  for (size_t i = start + 1; i < b->len; i++)
    if (b->p[i] == '\r' || b->p[i] == '\n') b->p[i] = ' ';
  bufAppend(b, "\r\n", 2);
}

static void outBulk(kvs_buf *b, const char *s, size_t len) {
  bufAppendLen(b, '$', (long long)len);
  bufAppend(b, s, len);
  bufAppend(b, "\r\n", 2);
}

/* addReplyDouble: inf and -inf spelled so, anything else as %.17g. */
static void outDouble(kvs_buf *b, double d) {
  char tmp[64];
  int len;
  if (isinf(d))
    len = snprintf(tmp, sizeof(tmp), ",%s\r\n", d > 0 ? "inf" : "-inf");
  else
    len = snprintf(tmp, sizeof(tmp), ",%.17g\r\n", d);
  bufAppend(b, tmp, len);
}

typedef struct errorInfo {
  const char *msg, *source, *line;
  int ignore_err_stats_update;
} errorInfo;

/* luaExtractErrorInformation: the fields of the error at the top of the
 * stack. The strings it points to are kept on the stack: the caller pops
 * 3 more values than it found there (errorInfoPop). */
static void luaExtractErrorInformation(lua_State *L, errorInfo *e) {
  int idx = lua_gettop(L);
  e->msg = e->source = e->line = NULL;
  e->ignore_err_stats_update = 0;
  if (lua_isstring(L, idx)) {
    lua_pushfstring(L, "ERR %s", lua_tostring(L, idx));
    e->msg = lua_tostring(L, -1);
  } else {
    lua_pushnil(L);
  }
  lua_getfield(L, idx, "err");
  if (lua_isstring(L, -1)) e->msg = lua_tostring(L, -1);
  lua_getfield(L, idx, "source");
  if (lua_isstring(L, -1)) e->source = lua_tostring(L, -1);
  lua_getfield(L, idx, "line");
  if (lua_isstring(L, -1)) e->line = lua_tostring(L, -1);
  lua_getfield(L, idx, "ignore_error_stats_update");
  if (lua_isboolean(L, -1)) e->ignore_err_stats_update = lua_toboolean(L, -1);
  lua_pop(L, 1);
}

#define errorInfoPop(L) lua_pop(L, 4)

/* kvs: an error table without an err string (error({})) crashes Redis
 * 7.0; kvs answers this text instead. */
#define ERR_NO_MESSAGE "ERR unknown error"

static void luaReplyToRedisReply(kvs_state *st, lua_State *L, int depth) {
  kvs_buf *b = &st->out;
  int t = lua_type(L, -1);

  if (depth > KVS_MAX_REPLY_DEPTH || !lua_checkstack(L, 8)) {
    bufAppendStr(b, "-ERR reached lua stack limit\r\n");
    lua_pop(L, 1);
    return;
  }

  switch (t) {
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    outBulk(b, s, len);
    break;
  }
  case LUA_TBOOLEAN:
    if (st->resp == 2)
      bufAppendStr(b, lua_toboolean(L, -1) ? ":1\r\n" : "_\r\n");
    else
      bufAppendStr(b, lua_toboolean(L, -1) ? "#t\r\n" : "#f\r\n");
    break;
  case LUA_TNUMBER:
    bufAppendLen(b, ':', (long long)lua_tonumber(L, -1));
    break;
  case LUA_TTABLE:
    /* Error reply: a table with an err string. */
    lua_pushstring(L, "err");
    lua_rawget(L, -2);
    t = lua_type(L, -1);
    if (t == LUA_TSTRING) {
      lua_pop(L, 1);
      errorInfo e;
      luaExtractErrorInformation(L, &e);
      const char *msg = e.msg ? e.msg : ERR_NO_MESSAGE;
      outErrorTrimmed(b, msg, strlen(msg));
      errorInfoPop(L);
      lua_pop(L, 1); /* the table */
      return;
    }
    lua_pop(L, 1);

    /* Status reply. */
    lua_pushstring(L, "ok");
    lua_rawget(L, -2);
    t = lua_type(L, -1);
    if (t == LUA_TSTRING) {
      const char *s = lua_tostring(L, -1);
      outLineSafe(b, '+', s, strlen(s));
      lua_pop(L, 2);
      return;
    }
    lua_pop(L, 1);

    /* Double reply. */
    lua_pushstring(L, "double");
    lua_rawget(L, -2);
    t = lua_type(L, -1);
    if (t == LUA_TNUMBER) {
      outDouble(b, lua_tonumber(L, -1));
      lua_pop(L, 2);
      return;
    }
    lua_pop(L, 1);

    /* Big number reply. */
    lua_pushstring(L, "big_number");
    lua_rawget(L, -2);
    t = lua_type(L, -1);
    if (t == LUA_TSTRING) {
      size_t len;
      const char *s = lua_tolstring(L, -1, &len);
      outLineSafe(b, '(', s, len);
      lua_pop(L, 2);
      return;
    }
    lua_pop(L, 1);

    /* Verbatim reply. */
    lua_pushstring(L, "verbatim_string");
    lua_rawget(L, -2);
    t = lua_type(L, -1);
    if (t == LUA_TTABLE) {
      lua_pushstring(L, "format");
      lua_rawget(L, -2);
      t = lua_type(L, -1);
      if (t == LUA_TSTRING) {
        const char *format = lua_tostring(L, -1);
        lua_pushstring(L, "string");
        lua_rawget(L, -3);
        t = lua_type(L, -1);
        if (t == LUA_TSTRING) {
          size_t len;
          const char *s = lua_tolstring(L, -1, &len);
          char ext[3];
          for (int i = 0; i < 3; i++) ext[i] = *format ? *format++ : ' ';
          bufAppendLen(b, '=', (long long)len + 4);
          bufAppend(b, ext, 3);
          bufAppend(b, ":", 1);
          bufAppend(b, s, len);
          bufAppend(b, "\r\n", 2);
          lua_pop(L, 4);
          return;
        }
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);

    /* Map reply. */
    lua_pushstring(L, "map");
    lua_rawget(L, -2);
    t = lua_type(L, -1);
    if (t == LUA_TTABLE) {
      int maplen = 0;
      size_t at = b->len;
      bufAppendStr(b, "%0000000000\r\n"); /* the length, set below */
      lua_pushnil(L);
      while (lua_next(L, -2)) {
        lua_pushvalue(L, -2);
        luaReplyToRedisReply(st, L, depth + 1); /* the key */
        luaReplyToRedisReply(st, L, depth + 1); /* the value */
        maplen++;
      }
      char tmp[16];
      snprintf(tmp, sizeof(tmp), "%010d", maplen);
      memcpy(b->p + at + 1, tmp, 10);
      lua_pop(L, 2);
      return;
    }
    lua_pop(L, 1);

    /* Set reply. */
    lua_pushstring(L, "set");
    lua_rawget(L, -2);
    t = lua_type(L, -1);
    if (t == LUA_TTABLE) {
      int setlen = 0;
      size_t at = b->len;
      bufAppendStr(b, "~0000000000\r\n");
      lua_pushnil(L);
      while (lua_next(L, -2)) {
        lua_pop(L, 1); /* the value */
        lua_pushvalue(L, -1);
        luaReplyToRedisReply(st, L, depth + 1);
        setlen++;
      }
      char tmp[16];
      snprintf(tmp, sizeof(tmp), "%010d", setlen);
      memcpy(b->p + at + 1, tmp, 10);
      lua_pop(L, 2);
      return;
    }
    lua_pop(L, 1);

    /* Array reply: [1], [2], ... up to the first nil. */
    {
      int j = 1, mbulklen = 0;
      size_t at = b->len;
      bufAppendStr(b, "*0000000000\r\n");
      while (1) {
        lua_pushnumber(L, j++);
        lua_rawget(L, -2);
        t = lua_type(L, -1);
        if (t == LUA_TNIL) {
          lua_pop(L, 1);
          break;
        }
        luaReplyToRedisReply(st, L, depth + 1);
        mbulklen++;
      }
      char tmp[16];
      snprintf(tmp, sizeof(tmp), "%010d", mbulklen);
      memcpy(b->p + at + 1, tmp, 10);
    }
    break;
  default:
    bufAppendStr(b, "_\r\n");
  }
  lua_pop(L, 1);
}

/* ---------------------------------------------------------------------------
 * The script API: redis.*
 * ------------------------------------------------------------------------- */

/* luaArgsToRedisArgv: the arguments on the stack as pointers into their
 * strings (numbers formatted %.17g into st->nums), in st->argv. They stay
 * valid while the arguments are on the stack. On error, an error table is
 * pushed in their place. */
static int luaArgsToRedisArgv(lua_State *L, kvs_state *st, int *argc) {
  int j;
  *argc = lua_gettop(L);
  if (*argc == 0) {
    luaPushError(L, "Please specify at least one argument for this redis lib call");
    return -1;
  }
  if (st->argvcap < *argc) {
    kvs_arg *a = realloc(st->argv, sizeof(kvs_arg) * *argc);
    if (!a) outOfMemory();
    st->argv = a;
    st->argvcap = *argc;
  }
  size_t numsneed = 0;
  for (j = 1; j <= *argc; j++)
    if (lua_type(L, j) == LUA_TNUMBER) numsneed += 32;
  if (st->numscap < numsneed) {
    char *p = realloc(st->nums, numsneed);
    if (!p) outOfMemory();
    st->nums = p;
    st->numscap = numsneed;
  }
  char *num = st->nums;
  for (j = 0; j < *argc; j++) {
    if (lua_type(L, j + 1) == LUA_TNUMBER) {
      /* Not lua_tolstring: Lua's number format loses precision. An
       * integer below 1e15 (a TTL, a count) is %.17g's digits, written
       * without printf. */
      lua_Number n = lua_tonumber(L, j + 1);
      int len;
      if (n > -1e15 && n < 1e15 && n == (lua_Number)(long long)n && (n != 0 || !signbit(n))) {
        char *start = formatInt(num + 32, (long long)n);
        len = num + 32 - start;
        memmove(num, start, len);
      } else {
        len = snprintf(num, 32, "%.17g", (double)n);
      }
      st->argv[j].p = num;
      st->argv[j].len = len;
      num += 32;
    } else {
      size_t len;
      const char *s = lua_tolstring(L, j + 1, &len);
      if (s == NULL) break; /* not a string */
      st->argv[j].p = s;
      st->argv[j].len = len;
    }
  }
  if (j != *argc) {
    lua_pop(L, *argc);
    luaPushError(L, "Lua redis lib command arguments must be strings or integers");
    return -1;
  }
  return 0;
}

static void kvsHook(lua_State *L, lua_Debug *ar);

/* A Go callback panicked: unwind the script with an error that is no
 * reply of its own (Go panics again once the run is over). */
static int raisePanic(lua_State *L) {
  luaPushError(L, "kvs: panic in a Go callback");
  return luaError(L);
}

static int luaRedisGenericCommand(lua_State *L, int raise_error) {
  kvs_state *st = stateOf(L);
  if (!st->running) {
    luaPushError(L, "redis.call/pcall can only be called inside a script invocation");
    return luaError(L);
  }
  int argc;
  if (luaArgsToRedisArgv(L, st, &argc) != 0) return raise_error ? luaError(L) : 1;

  st->in.len = 0;
  int rc = kvsGoCall(st->handle, KVS_OP_CALL, st->argv, argc);
  lua_pop(L, argc);
  if (rc == KVS_PANIC) return raisePanic(L);
  /* kvs: the call found the run stopped (a kill that came before its
   * first write): the hook stops it at the next instruction, after the
   * call's reply, so that it cannot go on unstopped until the next
   * count. */
  if (rc == KVS_CHECKPOINT) lua_sethook(L, kvsHook, LUA_MASKCOUNT, 1);

  respReader r = {st->in.p, st->in.p + st->in.len};
  if (raise_error && (st->in.len == 0 || st->in.p[0] != '-')) raise_error = 0;
  redisProtocolToLuaType(L, &r);
  if (raise_error) return luaError(L);
  return 1;
}

static int luaRedisCallCommand(lua_State *L) { return luaRedisGenericCommand(L, 1); }
static int luaRedisPCallCommand(lua_State *L) { return luaRedisGenericCommand(L, 0); }

/* pcall: Lua's, except that an error table's err string is what the
 * caller gets, as before Redis 7 (luaRedisPcall). */
static int luaRedisPcall(lua_State *L) {
  int argc = lua_gettop(L);
  lua_pushboolean(L, 1);
  lua_insert(L, 1);
  if (lua_pcall(L, argc - 1, LUA_MULTRET, 0)) {
    lua_remove(L, 1);
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "err");
      if (lua_isstring(L, -1)) {
        lua_replace(L, -2);
      } else {
        lua_pop(L, 1);
      }
    }
    lua_pushboolean(L, 0);
    lua_insert(L, 1);
  }
  return lua_gettop(L);
}

static int luaRedisSha1hexCommand(lua_State *L) {
  kvs_state *st = stateOf(L);
  int argc = lua_gettop(L);
  if (argc != 1) {
    luaPushError(L, "wrong number of arguments");
    return luaError(L);
  }
  kvs_arg a;
  a.p = lua_tolstring(L, 1, &a.len);
  if (!a.p) a.len = 0;
  st->in.len = 0;
  if (kvsGoCall(st->handle, KVS_OP_SHA1, &a, 1) == KVS_PANIC) return raisePanic(L);
  lua_pushlstring(L, st->in.p, st->in.len);
  return 1;
}

static int luaRedisReturnSingleFieldTable(lua_State *L, char *field) {
  if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
    luaPushError(L, "wrong number or type of arguments");
    return 1;
  }
  lua_newtable(L);
  lua_pushstring(L, field);
  lua_pushvalue(L, -3);
  lua_settable(L, -3);
  return 1;
}

static int luaRedisErrorReplyCommand(lua_State *L) {
  if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
    luaPushError(L, "wrong number or type of arguments");
    return 1;
  }
  const char *err = lua_tostring(L, -1);
  if (err[0] != '-') {
    lua_pushfstring(L, "-%s", err);
    err = lua_tostring(L, -1);
  }
  luaPushErrorBuff(L, err, strlen(err));
  return 1;
}

static int luaRedisStatusReplyCommand(lua_State *L) {
  return luaRedisReturnSingleFieldTable(L, "ok");
}

/* redis.set_repl: every kvs script's effects reach every replica through
 * the log, so the flags are checked as Redis checks them and change
 * nothing. */
static int luaRedisSetReplCommand(lua_State *L) {
  kvs_state *st = stateOf(L);
  int flags, argc = lua_gettop(L);
  if (!st->running) {
    luaPushError(L, "redis.set_repl can only be called inside a script invocation");
    return luaError(L);
  }
  if (argc != 1) {
    luaPushError(L, "redis.set_repl() requires two arguments.");
    return luaError(L);
  }
  flags = lua_tonumber(L, -1);
  if ((flags & ~(PROPAGATE_AOF | PROPAGATE_REPL)) != 0) {
    luaPushError(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
    return luaError(L);
  }
  return 0;
}

static int luaRedisAclCheckCmdPermissionsCommand(lua_State *L) {
  kvs_state *st = stateOf(L);
  if (!st->running) {
    luaPushError(L, "redis.acl_check_cmd can only be called inside a script invocation");
    return luaError(L);
  }
  int argc;
  if (luaArgsToRedisArgv(L, st, &argc) != 0) return luaError(L);
  st->in.len = 0;
  int rc = kvsGoCall(st->handle, KVS_OP_ACL, st->argv, argc);
  lua_pop(L, argc);
  if (rc == KVS_PANIC) return raisePanic(L);
  if (st->in.len > 0 && st->in.p[0] == '-') {
    luaPushErrorBuff(L, st->in.p, st->in.len);
    return luaError(L);
  }
  lua_pushboolean(L, st->in.len > 1 && st->in.p[1] == '1');
  return 1;
}

/* redis.log: checked as Redis checks it, and written nowhere: a script's
 * lines would be logged once per replica and per replay. */
static int luaLogCommand(lua_State *L) {
  int argc = lua_gettop(L);
  int level;
  if (argc < 2) {
    luaPushError(L, "redis.log() requires two arguments or more.");
    return luaError(L);
  } else if (!lua_isnumber(L, -argc)) {
    luaPushError(L, "First argument must be a number (log level).");
    return luaError(L);
  }
  level = lua_tonumber(L, -argc);
  if (level < LL_DEBUG || level > LL_WARNING) {
    luaPushError(L, "Invalid debug level.");
    return luaError(L);
  }
  return 0;
}

static int luaSetResp(lua_State *L) {
  kvs_state *st = stateOf(L);
  if (!st->running) {
    luaPushError(L, "redis.setresp can only be called inside a script invocation");
    return luaError(L);
  }
  int argc = lua_gettop(L);
  if (argc != 1) {
    luaPushError(L, "redis.setresp() requires one argument.");
    return luaError(L);
  }
  int resp = lua_tonumber(L, -argc);
  if (resp != 2 && resp != 3) {
    luaPushError(L, "RESP version must be 2 or 3.");
    return luaError(L);
  }
  st->resp = resp;
  return 0;
}

/* redis.breakpoint and redis.debug: kvs has no script debugger. */
static int luaRedisBreakpointCommand(lua_State *L) {
  lua_pushboolean(L, 0);
  return 1;
}

static int luaRedisDebugCommand(lua_State *L) {
  (void)L;
  return 0;
}

static int luaRedisReplicateCommandsCommand(lua_State *L) {
  lua_pushboolean(L, 1);
  return 1;
}

/* math.random and math.randomseed (redis_math_random): Lua's, with
 * redisLrand48 in place of rand(). */
static int redis_math_random(lua_State *L) {
  kvs_state *st = stateOf(L);
  if (!st->running) return luaL_error(L, "math.random can only be called inside a script invocation");
  lua_Number r = (lua_Number)(redisLrand48(st) % REDIS_LRAND48_MAX) / (lua_Number)REDIS_LRAND48_MAX;
  switch (lua_gettop(L)) {
  case 0:
    lua_pushnumber(L, r);
    break;
  case 1: {
    int u = luaL_checkint(L, 1);
    luaL_argcheck(L, 1 <= u, 1, "interval is empty");
    lua_pushnumber(L, floor(r * u) + 1);
    break;
  }
  case 2: {
    int l = luaL_checkint(L, 1);
    int u = luaL_checkint(L, 2);
    luaL_argcheck(L, l <= u, 2, "interval is empty");
    lua_pushnumber(L, floor(r * (u - l + 1)) + l);
    break;
  }
  default:
    return luaL_error(L, "wrong number of arguments");
  }
  return 1;
}

static int redis_math_randomseed(lua_State *L) {
  kvs_state *st = stateOf(L);
  if (!st->running) return luaL_error(L, "math.randomseed can only be called inside a script invocation");
  redisSrand48(st, luaL_checkint(L, 1));
  return 0;
}

/* kvs: collectgarbage and gcinfo take Lua's options and report nothing
 * about the heap (0, or true for a finished "step"): what the heap holds
 * differs from node to node, and a script's writes must not depend on it.
 * "collect" and "step" collect; "stop", "restart", "setpause" and
 * "setstepmul" change nothing, so that no script leaves the collector
 * changed for the next. */
static int kvsCollectGarbage(lua_State *L) {
  static const char *const opts[] = {"stop", "restart", "collect", "count", "step",
                                     "setpause", "setstepmul", NULL};
  int o = luaL_checkoption(L, 1, "collect", opts);
  (void)luaL_optint(L, 2, 0);
  switch (o) {
  case 2: /* collect */
    lua_gc(L, LUA_GCCOLLECT, 0);
    lua_pushnumber(L, 0);
    return 1;
  case 4: /* step */
    lua_gc(L, LUA_GCCOLLECT, 0);
    lua_pushboolean(L, 1);
    return 1;
  case 5: /* setpause: the previous value, Lua's default */
  case 6: /* setstepmul */
    lua_pushnumber(L, 200);
    return 1;
  default:
    lua_pushnumber(L, 0);
    return 1;
  }
}

static int kvsGcinfo(lua_State *L) {
  lua_pushinteger(L, 0);
  return 1;
}

/* ---------------------------------------------------------------------------
 * The sandbox (script_lua.c)
 * ------------------------------------------------------------------------- */

static char *libraries_allow_list[] = {
    "string", "cjson", "bit", "cmsgpack", "math", "table", "struct", NULL,
};

static char *redis_api_allow_list[] = {
    "redis", "__redis__err__handler", NULL,
};

static char *lua_builtins_allow_list[] = {
    "xpcall", "tostring", "setmetatable", "next", "assert", "tonumber",
    "rawequal", "collectgarbage", "getmetatable", "rawset", "pcall",
    "coroutine", "type", "_G", "select", "unpack", "gcinfo", "pairs",
    "rawget", "loadstring", "ipairs", "_VERSION", "load", "error", NULL,
};

static char *lua_builtins_removed_after_initialization_allow_list[] = {
    "debug", NULL,
};

static char **allow_lists[] = {
    libraries_allow_list,
    redis_api_allow_list,
    lua_builtins_allow_list,
    lua_builtins_removed_after_initialization_allow_list,
    NULL,
};

static int luaProtectedTableError(lua_State *L) {
  int argc = lua_gettop(L);
  if (argc != 2) luaL_error(L, "Wrong number of arguments to luaProtectedTableError");
  if (!lua_isstring(L, -1) && !lua_isnumber(L, -1))
    luaL_error(L, "Second argument to luaProtectedTableError must be a string or number");
  const char *variable_name = lua_tostring(L, -1);
  luaL_error(L, "Script attempted to access nonexistent global variable '%s'", variable_name);
  return 0;
}

static void luaSetErrorMetatable(lua_State *L) {
  lua_newtable(L);
  lua_pushcfunction(L, luaProtectedTableError);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
}

/* luaNewIndexAllowList: while the libraries load, only the allowed
 * globals are created; the others (print, dofile, setfenv, ...) are
 * dropped. The deprecated ones (setfenv, getfenv, newproxy) stay out:
 * kvs has no lua-enable-deprecated-api. */
static int luaNewIndexAllowList(lua_State *L) {
  int argc = lua_gettop(L);
  if (argc != 3) luaL_error(L, "Wrong number of arguments to luaNewIndexAllowList");
  if (!lua_istable(L, -3)) luaL_error(L, "first argument to luaNewIndexAllowList must be a table");
  if (!lua_isstring(L, -2) && !lua_isnumber(L, -2))
    luaL_error(L, "Second argument to luaNewIndexAllowList must be a string or number");
  const char *variable_name = lua_tostring(L, -2);
  char ***allow_l = allow_lists;
  for (; *allow_l; ++allow_l) {
    char **c = *allow_l;
    for (; *c; ++c)
      if (strcmp(*c, variable_name) == 0) break;
    if (*c) break;
  }
  if (*allow_l != NULL) lua_rawset(L, -3);
  return 0;
}

static void luaSetAllowListProtection(lua_State *L) {
  lua_newtable(L);
  lua_pushcfunction(L, luaNewIndexAllowList);
  lua_setfield(L, -2, "__newindex");
  lua_setmetatable(L, -2);
}

static void luaSetTableProtectionRecursively(lua_State *L) {
  if (lua_isreadonlytable(L, -1)) return;
  lua_enablereadonlytable(L, -1, 1);
  lua_checkstack(L, 2);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    if (lua_istable(L, -1)) luaSetTableProtectionRecursively(L);
    lua_pop(L, 1);
  }
  if (lua_getmetatable(L, -1)) {
    luaSetTableProtectionRecursively(L);
    lua_pop(L, 1);
  }
}

static void luaSetTableProtectionForBasicTypes(lua_State *L) {
  static const int types[] = {LUA_TSTRING, LUA_TNUMBER, LUA_TBOOLEAN, LUA_TNIL,
                              LUA_TFUNCTION, LUA_TTHREAD, LUA_TLIGHTUSERDATA};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
    switch (types[i]) {
    case LUA_TSTRING: lua_pushstring(L, ""); break;
    case LUA_TNUMBER: lua_pushnumber(L, 0); break;
    case LUA_TBOOLEAN: lua_pushboolean(L, 0); break;
    case LUA_TNIL: lua_pushnil(L); break;
    case LUA_TFUNCTION: lua_pushcfunction(L, NULL); break;
    case LUA_TTHREAD: lua_newthread(L); break;
    case LUA_TLIGHTUSERDATA: lua_pushlightuserdata(L, (void *)L); break;
    }
    if (lua_getmetatable(L, -1)) {
      luaSetTableProtectionRecursively(L);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

static void luaRegisterVersion(lua_State *L) {
  lua_pushstring(L, "REDIS_VERSION_NUM");
  lua_pushnumber(L, REDIS_VERSION_NUM);
  lua_settable(L, -3);
  lua_pushstring(L, "REDIS_VERSION");
  lua_pushstring(L, REDIS_VERSION);
  lua_settable(L, -3);
}

static void setField(lua_State *L, const char *name, lua_CFunction f) {
  lua_pushstring(L, name);
  lua_pushcfunction(L, f);
  lua_settable(L, -3);
}

static void setNumber(lua_State *L, const char *name, lua_Number n) {
  lua_pushstring(L, name);
  lua_pushnumber(L, n);
  lua_settable(L, -3);
}

static void luaRegisterLogFunction(lua_State *L) {
  setField(L, "log", luaLogCommand);
  setNumber(L, "LOG_DEBUG", LL_DEBUG);
  setNumber(L, "LOG_VERBOSE", LL_VERBOSE);
  setNumber(L, "LOG_NOTICE", LL_NOTICE);
  setNumber(L, "LOG_WARNING", LL_WARNING);
}

extern int luaopen_cjson(lua_State *L);
extern int luaopen_struct(lua_State *L);
extern int luaopen_cmsgpack(lua_State *L);
extern int luaopen_bit(lua_State *L);
extern void json_reset_config(void *cfg);

static void luaLoadLib(lua_State *L, const char *libname, lua_CFunction luafunc) {
  lua_pushcfunction(L, luafunc);
  lua_pushstring(L, libname);
  lua_call(L, 1, 0);
}

static void luaLoadLibraries(lua_State *L) {
  luaLoadLib(L, "", luaopen_base);
  luaLoadLib(L, LUA_TABLIBNAME, luaopen_table);
  luaLoadLib(L, LUA_STRLIBNAME, luaopen_string);
  luaLoadLib(L, LUA_MATHLIBNAME, luaopen_math);
  luaLoadLib(L, LUA_DBLIBNAME, luaopen_debug);
  luaLoadLib(L, "cjson", luaopen_cjson);
  luaLoadLib(L, "struct", luaopen_struct);
  luaLoadLib(L, "cmsgpack", luaopen_cmsgpack);
  luaLoadLib(L, "bit", luaopen_bit);
}

static void luaRegisterRedisAPI(lua_State *L) {
  lua_pushvalue(L, LUA_GLOBALSINDEX);
  luaSetAllowListProtection(L);
  lua_pop(L, 1);

  luaLoadLibraries(L);

  lua_pushcfunction(L, luaRedisPcall);
  lua_setglobal(L, "pcall");
  lua_pushcfunction(L, kvsCollectGarbage);
  lua_setglobal(L, "collectgarbage");
  lua_pushcfunction(L, kvsGcinfo);
  lua_setglobal(L, "gcinfo");

  lua_newtable(L);
  setField(L, "call", luaRedisCallCommand);
  setField(L, "pcall", luaRedisPCallCommand);
  luaRegisterLogFunction(L);
  luaRegisterVersion(L);
  setField(L, "setresp", luaSetResp);
  setField(L, "sha1hex", luaRedisSha1hexCommand);
  setField(L, "error_reply", luaRedisErrorReplyCommand);
  setField(L, "status_reply", luaRedisStatusReplyCommand);
  setField(L, "set_repl", luaRedisSetReplCommand);
  setNumber(L, "REPL_NONE", PROPAGATE_NONE);
  setNumber(L, "REPL_AOF", PROPAGATE_AOF);
  setNumber(L, "REPL_SLAVE", PROPAGATE_REPL);
  setNumber(L, "REPL_REPLICA", PROPAGATE_REPL);
  setNumber(L, "REPL_ALL", PROPAGATE_AOF | PROPAGATE_REPL);
  setField(L, "acl_check_cmd", luaRedisAclCheckCmdPermissionsCommand);
  lua_setglobal(L, REDIS_API_NAME);

  lua_getglobal(L, "math");
  setField(L, "random", redis_math_random);
  setField(L, "randomseed", redis_math_randomseed);
  lua_setglobal(L, "math");
}

/* The error handler both interpreters use: the error as a table, with the
 * position of the Lua code that raised it. */
#define ERROR_HANDLER_BODY \
  "  local i = dbg.getinfo(2,'nSl')\n" \
  "  if i and i.what == 'C' then\n" \
  "    i = dbg.getinfo(3,'nSl')\n" \
  "  end\n" \
  "  if type(err) ~= 'table' then\n" \
  "    err = {err='ERR ' .. tostring(err)}" \
  "  end" \
  "  if i then\n" \
  "    err['source'] = i.source\n" \
  "    err['line'] = i.currentline\n" \
  "  end" \
  "  return err\n" \
  "end\n"

/* scriptingInit */
static void evalInit(lua_State *L) {
  luaRegisterRedisAPI(L);

  lua_getglobal(L, "redis");
  setField(L, "breakpoint", luaRedisBreakpointCommand);
  setField(L, "debug", luaRedisDebugCommand);
  setField(L, "replicate_commands", luaRedisReplicateCommandsCommand);
  lua_setglobal(L, "redis");

  const char *errh_func =
      "local dbg = debug\n"
      "debug = nil\n"
      "function __redis__err__handler(err)\n" ERROR_HANDLER_BODY;
  luaL_loadbuffer(L, errh_func, strlen(errh_func), "@err_handler_def");
  lua_pcall(L, 0, 0, 0);

  lua_pushvalue(L, LUA_GLOBALSINDEX);
  luaSetErrorMetatable(L);
  luaSetTableProtectionRecursively(L);
  lua_pop(L, 1);
  luaSetTableProtectionForBasicTypes(L);
}

static int luaRegisterFunction(lua_State *L);

/* luaEngineInitEngine */
static void functionInit(lua_State *L) {
  luaRegisterRedisAPI(L);

  lua_newtable(L); /* load library globals */
  lua_newtable(L); /* load library `redis` table */
  setField(L, "register_function", luaRegisterFunction);
  luaRegisterLogFunction(L);
  luaRegisterVersion(L);
  luaSetErrorMetatable(L);
  lua_setfield(L, -2, REDIS_API_NAME);
  luaSetErrorMetatable(L);
  luaSetTableProtectionRecursively(L);
  lua_setfield(L, LUA_REGISTRYINDEX, LIBRARY_API_NAME);

  lua_pushstring(L, REGISTRY_ERROR_HANDLER_NAME);
  const char *errh_func =
      "local dbg = debug\n"
      "debug = nil\n"
      "local error_handler = function (err)\n" ERROR_HANDLER_BODY
      "return error_handler";
  luaL_loadbuffer(L, errh_func, strlen(errh_func), "@err_handler_def");
  lua_pcall(L, 0, 1, 0);
  lua_settable(L, LUA_REGISTRYINDEX);

  lua_pushvalue(L, LUA_GLOBALSINDEX);
  luaSetErrorMetatable(L);
  luaSetTableProtectionRecursively(L);
  lua_pop(L, 1);

  lua_pushvalue(L, LUA_GLOBALSINDEX);
  lua_setfield(L, LUA_REGISTRYINDEX, GLOBALS_API_NAME);

  /* The functions' globals: an empty read-only table whose metatable
   * reads through to the real ones (or, while a library loads, to the
   * library API). */
  lua_newtable(L);
  lua_newtable(L);
  lua_pushvalue(L, LUA_GLOBALSINDEX);
  lua_setfield(L, -2, "__index");
  lua_enablereadonlytable(L, -1, 1);
  lua_setmetatable(L, -2);
  lua_enablereadonlytable(L, -1, 1);
  lua_replace(L, LUA_GLOBALSINDEX);

  luaSetTableProtectionForBasicTypes(L);
}

/* ---------------------------------------------------------------------------
 * States
 * ------------------------------------------------------------------------- */

/* The interpreter's allocator (lua_Alloc). Blocks of up to
 * KVS_POOL_CLASSES * 16 bytes are kept, once freed, on free lists of the
 * interpreter's own, one per 16-byte size class, and handed out again:
 * a run makes and drops the same few small objects (KEYS, ARGV, strings),
 * and malloc's and free's own work cost more than the rest of an empty
 * run. A list keeps at most KVS_POOL_MAX blocks; past that they go back
 * to free(). Lua always passes a block's size (osize), which gives its
 * class. */
static int poolClass(size_t size) { return size > 0 && size <= KVS_POOL_CLASSES * 16 ? (int)((size - 1) / 16) : -1; }

static void *poolAlloc(kvs_state *st, size_t size) {
  int c = poolClass(size);
  if (c < 0) return malloc(size);
  void *p = st->pool[c];
  if (p) {
    st->pool[c] = *(void **)p;
    st->npool[c]--;
    return p;
  }
  return malloc((size_t)(c + 1) * 16);
}

static void poolFree(kvs_state *st, void *p, size_t size) {
  int c = poolClass(size);
  if (c < 0 || st->npool[c] >= KVS_POOL_MAX) {
    free(p);
    return;
  }
  *(void **)p = st->pool[c];
  st->pool[c] = p;
  st->npool[c]++;
}

static void *kvsAlloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  kvs_state *st = ud;
  if (nsize == 0) {
    if (ptr) poolFree(st, ptr, osize);
    return NULL;
  }
  if (!ptr) return poolAlloc(st, nsize);
  int oc = poolClass(osize), nc = poolClass(nsize);
  if (oc < 0 && nc < 0) return realloc(ptr, nsize);
  if (oc >= 0 && oc == nc) return ptr;
  void *p = poolAlloc(st, nsize);
  if (!p) return NULL;
  memcpy(p, ptr, osize < nsize ? osize : nsize);
  poolFree(st, ptr, osize);
  return p;
}

static void poolRelease(kvs_state *st) {
  for (int c = 0; c < KVS_POOL_CLASSES; c++) {
    while (st->pool[c]) {
      void *p = st->pool[c];
      st->pool[c] = *(void **)p;
      free(p);
    }
    st->npool[c] = 0;
  }
}

static int kvsPanic(lua_State *L) {
  fprintf(stderr, "kvs: unprotected error in the Lua interpreter: %s\n",
          lua_isstring(L, -1) ? lua_tostring(L, -1) : "?");
  abort();
  return 0;
}

static int evalRun(lua_State *L);
static int libraryRun(lua_State *L);
static int fcallRun(lua_State *L);

static int refString(lua_State *L, const char *s) {
  lua_pushstring(L, s);
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

static int refFunction(lua_State *L, lua_CFunction f) {
  lua_pushcfunction(L, f);
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

kvs_state *kvs_open(int kind, uintptr_t handle) {
  kvs_state *st = calloc(1, sizeof(*st));
  if (!st) outOfMemory();
  st->kind = kind;
  st->handle = handle;
  st->resp = 2;
  lua_State *L = lua_newstate(kvsAlloc, st);
  if (!L) outOfMemory();
  st->L = L;
  lua_atpanic(L, kvsPanic);
  if (kind == KVS_EVAL)
    evalInit(L);
  else
    functionInit(L);

  /* The cjson settings: the first upvalue of its functions. */
  lua_getglobal(L, "cjson");
  lua_getfield(L, -1, "encode");
  lua_getupvalue(L, -1, 1);
  st->cjson = lua_touserdata(L, -1);
  lua_pop(L, 3);

  st->evalrun = refFunction(L, evalRun);
  st->libraryrun = refFunction(L, libraryRun);
  st->fcallrun = refFunction(L, fcallRun);
  if (kind == KVS_EVAL)
    lua_getglobal(L, "__redis__err__handler");
  else
    lua_getfield(L, LUA_REGISTRYINDEX, REGISTRY_ERROR_HANDLER_NAME);
  st->errhandler = luaL_ref(L, LUA_REGISTRYINDEX);
  st->keysname = refString(L, "KEYS");
  st->argvname = refString(L, "ARGV");

  lua_settop(L, 0);
  if (lua_getobjectseq(L) >= KVS_RUN_SEQ) {
    fputs("kvs: the interpreter made more objects than KVS_RUN_SEQ allows\n", stderr);
    abort();
  }
  return st;
}

/* Runs f(ud), one of the protected bodies, as lua_cpcall would, but
 * without making a new closure each time. */
static int protectedCall(kvs_state *st, int f, void *ud) {
  lua_State *L = st->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, f);
  lua_pushlightuserdata(L, ud);
  return lua_pcall(L, 1, 0, 0);
}

void kvs_close(kvs_state *st) {
  kvs_release_funcs(st);
  lua_close(st->L);
  poolRelease(st);
  free(st->in.p);
  free(st->out.p);
  free(st->argv);
  free(st->nums);
  free(st->funcs);
  free(st);
}

int kvs_load(kvs_state *st, const char *code, size_t len, const char *name) {
  lua_State *L = st->L;
  st->out.len = 0;
  if (luaL_loadbuffer(L, code, len, name)) {
    size_t n;
    const char *msg = lua_tolstring(L, -1, &n);
    bufAppend(&st->out, msg ? msg : "?", msg ? n : 1);
    lua_pop(L, 1);
    return 0;
  }
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

void kvs_unref(kvs_state *st, int ref) { luaL_unref(st->L, LUA_REGISTRYINDEX, ref); }

/* ---------------------------------------------------------------------------
 * Runs
 * ------------------------------------------------------------------------- */

/* The count hook (luaMaskCountHook): the one place a run stops. Go's
 * checkpoint says how many instructions to run before the next call, or
 * stops the run with an error; from then on every instruction raises it
 * again, in this thread and the main one, so that no pcall catches it for
 * good. */
static void kvsHook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  kvs_state *st = stateOf(L);
  int executed = lua_gethookcount(L);
  int next = executed;
  st->in.len = 0;
  int rc = kvsGoCheckpoint(st->handle, executed, &next);
  if (rc == KVS_OK) {
    if (next > 0 && next != executed) lua_sethook(L, kvsHook, LUA_MASKCOUNT, next);
    return;
  }
  lua_sethook(L, kvsHook, LUA_MASKCOUNT, 1);
  if (L != st->L) lua_sethook(st->L, kvsHook, LUA_MASKCOUNT, 1);
  if (rc == KVS_PANIC) {
    raisePanic(L);
    return;
  }
  luaPushErrorBuff(L, st->in.p, st->in.len);
  luaError(L);
}

/* What every run starts from, as a fresh interpreter: RESP2 replies, the
 * random source seeded from the entry, cjson's defaults, and the object
 * numbers every replica gives this run's objects. They start at
 * KVS_RUN_SEQ, above every number the interpreter's own objects got when
 * it was built, so that they do not depend on how many those were: a
 * replica running another kvs version, whose interpreter may be built
 * with more or fewer objects, still numbers a script's objects alike. */
static void beginRun(kvs_state *st, uint64_t seed, int hook) {
  lua_State *L = st->L;
  lua_settop(L, 0);
  st->resp = 2;
  rand48Seed(st, RAND_LOW(seed), RAND_LOW(seed >> 16), RAND_LOW(seed >> 32));
  if (st->cjson) json_reset_config(st->cjson);
  lua_setobjectseq(L, KVS_RUN_SEQ);
  if (hook > 0) lua_sethook(L, kvsHook, LUA_MASKCOUNT, hook);
}

static void endRun(kvs_state *st) {
  lua_State *L = st->L;
  lua_sethook(L, NULL, 0, 0);
  st->running = 0;
  st->loading = 0;
  lua_settop(L, 0);
}

/* luaCreateArray */
static void luaCreateArray(lua_State *L, const char **args, const size_t *lens, int n) {
  lua_createtable(L, n, 0);
  for (int j = 0; j < n; j++) {
    lua_pushlstring(L, *args, lens[j]);
    *args += lens[j];
    lua_rawseti(L, -2, j + 1);
  }
}

/* The result of the pcall at the top of the stack, as RESP3 in out
 * (luaCallFunction's ending). */
static void replyResult(kvs_state *st, int err, const char *name) {
  lua_State *L = st->L;
  kvs_buf *b = &st->out;
  b->len = 0;
  if (!err) {
    luaReplyToRedisReply(st, L, 0);
    return;
  }
  if (!lua_istable(L, -1)) {
    const char *msg = "execution failure";
    if (lua_isstring(L, -1)) msg = lua_tostring(L, -1);
    char tmp[512];
    int n = snprintf(tmp, sizeof(tmp), "ERR Error running script %s, %.100s\n", name, msg);
    if (n >= (int)sizeof(tmp)) n = sizeof(tmp) - 1;
    outErrorTrimmed(b, tmp, n);
    lua_pop(L, 1);
    return;
  }
  errorInfo e;
  luaExtractErrorInformation(L, &e);
  size_t start = b->len;
  bufAppend(b, "-", 1);
  bufAppendStr(b, e.msg ? e.msg : ERR_NO_MESSAGE);
  if (e.line && e.source) {
    bufAppendStr(b, " script: ");
    bufAppendStr(b, name);
    bufAppendStr(b, ", on ");
    bufAppendStr(b, e.source);
    bufAppendStr(b, ":");
    bufAppendStr(b, e.line);
    bufAppendStr(b, ".");
  }
  for (size_t i = start; i < b->len; i++)
    if (b->p[i] == '\r' || b->p[i] == '\n') b->p[i] = ' ';
  bufAppend(b, "\r\n", 2);
  errorInfoPop(L);
  lua_pop(L, 1);
}

/* What a protected run does, between beginRun and endRun. */
typedef struct runArgs {
  kvs_state *st;
  int ref;
  const char *name; /* the script's SHA1, or the function's name */
  const char *args;
  const size_t *lens;
  int nkeys, nargs;
  int loadfail; /* the library's top level failed: out holds why */
} runArgs;

/* evalGenericCommand's run, protected: the script's function under EVAL's
 * error handler, KEYS and ARGV as globals, then its reply. kvs: Redis
 * also forces a collector step every 50 runs (LUA_GC_CYCLE_PERIOD);
 * kvs leaves the collector to its own pace, which keeps the heap within
 * twice what is live, and saves the CPU the forced steps cost. */
static int evalRun(lua_State *L) {
  runArgs *a = lua_touserdata(L, 1);
  kvs_state *st = a->st;
  lua_pop(L, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, st->errhandler);
  lua_rawgeti(L, LUA_REGISTRYINDEX, a->ref);
  const char *args = a->args;
  lua_rawgeti(L, LUA_REGISTRYINDEX, st->keysname);
  luaCreateArray(L, &args, a->lens, a->nkeys);
  lua_enablereadonlytable(L, LUA_GLOBALSINDEX, 0);
  lua_rawset(L, LUA_GLOBALSINDEX);
  lua_enablereadonlytable(L, LUA_GLOBALSINDEX, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, st->argvname);
  luaCreateArray(L, &args, a->lens + a->nkeys, a->nargs);
  lua_enablereadonlytable(L, LUA_GLOBALSINDEX, 0);
  lua_rawset(L, LUA_GLOBALSINDEX);
  lua_enablereadonlytable(L, LUA_GLOBALSINDEX, 1);
  int err = lua_pcall(L, 0, 1, -2);
  replyResult(a->st, err, a->name);
  return 0;
}

/* The run failed outside the script (out of memory setting it up, or
 * converting its reply): the error at the top of the stack, as the reply
 * to a script that failed without an error table. */
static void runFailed(kvs_state *st, const char *name) {
  lua_State *L = st->L;
  char tmp[512];
  const char *msg = lua_isstring(L, -1) ? lua_tostring(L, -1) : "execution failure";
  int n = snprintf(tmp, sizeof(tmp), "ERR Error running script %s, %.100s\n", name, msg);
  if (n >= (int)sizeof(tmp)) n = sizeof(tmp) - 1;
  st->out.len = 0;
  outErrorTrimmed(&st->out, tmp, n);
}

int kvs_run(kvs_state *st, int ref, const char *name, const char *args, const size_t *lens,
            int nkeys, int nargs, uint64_t seed, int hook) {
  runArgs a = {st, ref, name, args, lens, nkeys, nargs, 0};
  st->running = 1;
  beginRun(st, seed, hook);
  if (protectedCall(st, st->evalrun, &a) != 0) runFailed(st, name);
  endRun(st);
  return KVS_RUN_OK;
}

/* ---------------------------------------------------------------------------
 * Libraries (function_lua.c)
 * ------------------------------------------------------------------------- */

void kvs_release_funcs(kvs_state *st) {
  for (int i = 0; i < st->nfuncs; i++) {
    free(st->funcs[i].name);
    free(st->funcs[i].desc);
    luaL_unref(st->L, LUA_REGISTRYINDEX, st->funcs[i].ref);
  }
  st->nfuncs = 0;
}

/* functionsVerifyName */
static int functionsVerifyName(const char *name, size_t len) {
  if (len == 0) return -1;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (!isalnum((unsigned char)c) && c != '_') return -1;
  }
  return 0;
}

static char *dupString(const char *s, size_t len) {
  char *p = malloc(len + 1);
  if (!p) outOfMemory();
  memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

/* luaGetStringSds */
static char *luaGetString(lua_State *L, int index, size_t *len) {
  if (!lua_isstring(L, index)) return NULL;
  const char *s = lua_tolstring(L, index, len);
  return dupString(s, *len);
}

static int luaRegisterFunctionReadFlags(lua_State *L, int *flags) {
  int j = 1;
  int f_flags = 0;
  while (1) {
    lua_pushnumber(L, j++);
    lua_gettable(L, -2);
    int t = lua_type(L, -1);
    if (t == LUA_TNIL) {
      lua_pop(L, 1);
      break;
    }
    if (!lua_isstring(L, -1)) {
      lua_pop(L, 1);
      return -1;
    }
    const char *flag_str = lua_tostring(L, -1);
    int found = 0;
    for (int i = 0; kvs_flag_names[i]; i++) {
      if (!strcasecmp(kvs_flag_names[i], flag_str)) {
        f_flags |= 1 << i;
        found = 1;
        break;
      }
    }
    lua_pop(L, 1);
    if (!found) return -1;
  }
  *flags = f_flags;
  return 0;
}

static int luaRegisterFunctionReadNamedArgs(lua_State *L, kvs_func *f) {
  char *err = NULL;
  char *name = NULL, *desc = NULL;
  size_t namelen, desclen = 0;
  int ref = LUA_NOREF;
  int flags = 0;
  if (!lua_istable(L, 1)) {
    err = "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).";
    goto error;
  }
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    if (!lua_isstring(L, -2)) {
      err = "named argument key given to redis.register_function is not a string";
      goto error;
    }
    const char *key = lua_tostring(L, -2);
    if (!strcasecmp(key, "function_name")) {
      free(name);
      if (!(name = luaGetString(L, -1, &namelen))) {
        err = "function_name argument given to redis.register_function must be a string";
        goto error;
      }
    } else if (!strcasecmp(key, "description")) {
      free(desc);
      if (!(desc = luaGetString(L, -1, &desclen))) {
        err = "description argument given to redis.register_function must be a string";
        goto error;
      }
    } else if (!strcasecmp(key, "callback")) {
      if (!lua_isfunction(L, -1)) {
        err = "callback argument given to redis.register_function must be a function";
        goto error;
      }
      if (ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, ref);
      ref = luaL_ref(L, LUA_REGISTRYINDEX);
      continue;
    } else if (!strcasecmp(key, "flags")) {
      if (!lua_istable(L, -1)) {
        err = "flags argument to redis.register_function must be a table representing function flags";
        goto error;
      }
      if (luaRegisterFunctionReadFlags(L, &flags) != 0) {
        err = "unknown flag given";
        goto error;
      }
    } else {
      err = "unknown argument given to redis.register_function";
      goto error;
    }
    lua_pop(L, 1);
  }
  if (!name) {
    err = "redis.register_function must get a function name argument";
    goto error;
  }
  if (ref == LUA_NOREF) {
    err = "redis.register_function must get a callback argument";
    goto error;
  }
  f->name = name;
  f->namelen = namelen;
  f->desc = desc;
  f->desclen = desclen;
  f->hasdesc = desc != NULL;
  f->flags = flags;
  f->ref = ref;
  return 0;

error:
  free(name);
  free(desc);
  if (ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, ref);
  luaPushError(L, err);
  return -1;
}

static int luaRegisterFunctionReadPositionalArgs(lua_State *L, kvs_func *f) {
  char *err = NULL;
  char *name = NULL;
  size_t namelen;
  if (!(name = luaGetString(L, 1, &namelen))) {
    err = "first argument to redis.register_function must be a string";
    goto error;
  }
  if (!lua_isfunction(L, 2)) {
    err = "second argument to redis.register_function must be a function";
    goto error;
  }
  f->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  f->name = name;
  f->namelen = namelen;
  f->desc = NULL;
  f->desclen = 0;
  f->hasdesc = 0;
  f->flags = 0;
  return 0;

error:
  free(name);
  luaPushError(L, err);
  return -1;
}

static int luaRegisterFunctionReadArgs(lua_State *L, kvs_func *f) {
  int argc = lua_gettop(L);
  if (argc < 1 || argc > 2) {
    luaPushError(L, "wrong number of arguments to redis.register_function");
    return -1;
  }
  if (argc == 1) return luaRegisterFunctionReadNamedArgs(L, f);
  return luaRegisterFunctionReadPositionalArgs(L, f);
}

static int luaRegisterFunction(lua_State *L) {
  kvs_state *st = stateOf(L);
  kvs_func f;
  if (!st->loading) {
    luaPushError(L, "redis.register_function can only be called on FUNCTION LOAD command");
    return luaError(L);
  }
  if (luaRegisterFunctionReadArgs(L, &f) != 0) return luaError(L);

  /* functionLibCreateFunction */
  const char *err = NULL;
  if (functionsVerifyName(f.name, f.namelen) != 0) {
    err = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";
  } else {
    for (int i = 0; i < st->nfuncs; i++)
      if (st->funcs[i].namelen == f.namelen && !memcmp(st->funcs[i].name, f.name, f.namelen))
        err = "Function already exists in the library";
  }
  if (err) {
    free(f.name);
    free(f.desc);
    luaL_unref(L, LUA_REGISTRYINDEX, f.ref);
    luaPushError(L, err);
    return luaError(L);
  }
  if (st->nfuncs == st->funcscap) {
    int cap = st->funcscap ? st->funcscap * 2 : 8;
    kvs_func *p = realloc(st->funcs, sizeof(kvs_func) * cap);
    if (!p) outOfMemory();
    st->funcs = p;
    st->funcscap = cap;
  }
  st->funcs[st->nfuncs++] = f;
  return 0;
}

/* Points the functions' globals at the library API (while a library's top
 * level runs) or back at the real globals. kvs: the metatable is
 * read-only again afterwards (Redis 7.0 protects the globals table twice
 * instead, leaving the metatable writable). */
static void setGlobalsIndex(lua_State *L, const char *registry_name) {
  lua_getmetatable(L, LUA_GLOBALSINDEX);
  lua_enablereadonlytable(L, -1, 0);
  lua_getfield(L, LUA_REGISTRYINDEX, registry_name);
  lua_setfield(L, -2, "__index");
  lua_enablereadonlytable(L, -1, 1);
  lua_pop(L, 1);
}

/* luaEngineCreate's run of the library's top level, in a protected
 * call: its functions land in st->funcs; on error, out holds the text
 * Redis puts after "Error registering functions: ". */
static int libraryTopLevel(lua_State *L, kvs_state *st, int ref) {
  setGlobalsIndex(L, LIBRARY_API_NAME);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  st->loading = 1;
  int err = lua_pcall(L, 0, 0, 0);
  st->loading = 0;
  setGlobalsIndex(L, GLOBALS_API_NAME);
  if (err) {
    st->out.len = 0;
    /* kvs: only a table's or string's fields are read (Redis 7.0 reads
     * them from any value, and dies on error(nil)). */
    if (lua_istable(L, -1) || lua_isstring(L, -1)) {
      errorInfo e;
      luaExtractErrorInformation(L, &e);
      bufAppendStr(&st->out, e.msg ? e.msg : ERR_NO_MESSAGE);
      errorInfoPop(L);
    } else {
      bufAppendStr(&st->out, ERR_NO_MESSAGE);
    }
    lua_pop(L, 1);
  }
  return err;
}

static int libraryRun(lua_State *L) {
  runArgs *a = lua_touserdata(L, 1);
  lua_pop(L, 1);
  a->loadfail = libraryTopLevel(L, a->st, a->ref) != 0;
  return 0;
}

/* The registered functions, in out: for each, its name, its flags, and
 * its description (hasdesc 0 or 1, then the bytes), the lengths and
 * numbers as 4-byte little-endian words. */
static void putWord(kvs_buf *b, uint32_t v) {
  unsigned char w[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};
  bufAppend(b, (char *)w, 4);
}

static void listFuncs(kvs_state *st) {
  kvs_buf *b = &st->out;
  b->len = 0;
  for (int i = 0; i < st->nfuncs; i++) {
    kvs_func *f = &st->funcs[i];
    size_t n = f->namelen;
    putWord(b, n);
    bufAppend(b, f->name, n);
    putWord(b, f->flags);
    putWord(b, f->hasdesc);
    putWord(b, f->desclen);
    bufAppend(b, f->desc ? f->desc : "", f->desclen);
  }
}

int kvs_library(kvs_state *st, int ref, int hook) {
  runArgs a = {st, ref, NULL, NULL, NULL, 0, 0, 0};
  kvs_release_funcs(st);
  beginRun(st, 0, hook);
  if (protectedCall(st, st->libraryrun, &a) != 0) {
    st->out.len = 0;
    bufAppendStr(&st->out, "ERR out of memory");
    a.loadfail = 1;
  }
  if (!a.loadfail) listFuncs(st);
  kvs_release_funcs(st);
  endRun(st);
  return a.loadfail ? KVS_RUN_LOADFAIL : KVS_RUN_OK;
}

/* luaEngineCall, protected: the library's top level again, then its
 * function under FUNCTION's error handler, with the keys and arguments as
 * its two parameters, then its reply. */
static int fcallRun(lua_State *L) {
  runArgs *a = lua_touserdata(L, 1);
  kvs_state *st = a->st;
  lua_pop(L, 1);
  if (libraryTopLevel(L, st, a->ref) != 0) {
    a->loadfail = 1;
    return 0;
  }
  int ref = LUA_NOREF;
  for (int i = 0; i < st->nfuncs; i++)
    if (!strcmp(st->funcs[i].name, a->name)) ref = st->funcs[i].ref;
  if (ref == LUA_NOREF) {
    st->out.len = 0;
    bufAppendStr(&st->out, "ERR Function not found");
    a->loadfail = 1;
    return 0;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, st->errhandler);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  const char *args = a->args;
  luaCreateArray(L, &args, a->lens, a->nkeys);
  luaCreateArray(L, &args, a->lens + a->nkeys, a->nargs);
  int err = lua_pcall(L, 2, 1, -4);
  replyResult(st, err, a->name);
  return 0;
}

int kvs_fcall(kvs_state *st, int ref, const char *fname, const char *args, const size_t *lens,
              int nkeys, int nargs, uint64_t seed, int hook) {
  runArgs a = {st, ref, fname, args, lens, nkeys, nargs, 0};
  kvs_release_funcs(st);
  st->running = 1;
  beginRun(st, seed, hook);
  if (protectedCall(st, st->fcallrun, &a) != 0) runFailed(st, fname);
  kvs_release_funcs(st);
  endRun(st);
  return a.loadfail ? KVS_RUN_LOADFAIL : KVS_RUN_OK;
}

size_t kvs_memory(kvs_state *st) { return (size_t)lua_gc(st->L, LUA_GCCOUNT, 0) * 1024; }
