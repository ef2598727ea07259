/*
 * kvs's glue between Go (lua.go) and Redis's Lua 5.1: the interpreters
 * Redis 7.0 builds for EVAL and for FUNCTION, the script API (redis.*),
 * the conversions between Lua values and RESP, and the count hook.
 * See glue.c.
 */
#ifndef KVS_GLUE_H
#define KVS_GLUE_H

#include <stddef.h>
#include <stdint.h>

#include "lua.h"

/* Which of Redis's two interpreters a state is built as. */
enum { KVS_EVAL = 0, KVS_FUNCTION = 1 };

/* What a Go callback is asked (kvsGoCall's op). */
enum {
  KVS_OP_CALL = 0,  /* redis.call and redis.pcall: the reply, as RESP */
  KVS_OP_ACL = 1,   /* redis.acl_check_cmd: :1, :0 or an error, as RESP */
  KVS_OP_SHA1 = 2   /* redis.sha1hex: 40 hex digits */
};

/* What a Go callback answers. */
enum {
  KVS_OK = 0,
  KVS_STOP = 1,  /* kvsGoCheckpoint: raise the error in the in buffer */
  KVS_PANIC = 2, /* Go panicked: unwind the script; Go panics again after */
  KVS_CHECKPOINT = 3 /* kvsGoCall (kvs): the reply is in the in buffer, and
                        kvsGoCheckpoint is to be called at the next
                        instruction */
};

/* What kvs_run and kvs_library answer (the text, if any, is in out). */
enum {
  KVS_RUN_OK = 0,       /* out holds the reply, as RESP3 */
  KVS_RUN_LOADFAIL = 1  /* a library's top level failed: out is the error */
};

typedef struct kvs_arg {
  const char *p;
  size_t len;
} kvs_arg;

typedef struct kvs_buf {
  char *p;
  size_t len, cap;
} kvs_buf;

/* The object number the objects a run makes start from (lua_setobjectseq). */
#define KVS_RUN_SEQ 0x01000000u

/* The small-block pool of an interpreter's allocator (glue.c, kvsAlloc). */
#define KVS_POOL_CLASSES 16
#define KVS_POOL_MAX 4096

/* A function a library registered (redis.register_function). */
typedef struct kvs_func {
  char *name, *desc;
  size_t namelen, desclen;
  int hasdesc;
  int flags; /* bit i: the i-th of kvs_flag_names */
  int ref;   /* the callback, in the registry */
} kvs_func;

typedef struct kvs_state {
  lua_State *L;
  int kind;
  uintptr_t handle; /* the Go State's cgo.Handle */
  int running;      /* inside kvs_run or kvs_fcall: the script API works */
  int loading;      /* a library's top level runs: register_function works */
  int resp;         /* what redis.call's replies are in (redis.setresp) */
  uint32_t rx[3], ra[3], rc; /* redisLrand48's state */
  void *cjson;               /* the cjson library's settings */
  kvs_buf in;                /* from Go: a reply, an error text */
  kvs_buf out;               /* to Go: a run's reply, a compile error */
  kvs_arg *argv;             /* redis.call's arguments */
  int argvcap;
  char *nums; /* the arguments that were numbers, formatted */
  size_t numscap;
  kvs_func *funcs; /* what the library being loaded registered */
  int nfuncs, funcscap;
  /* Registry references made once, so that a run allocates none of them:
   * the protected bodies of kvs_run, kvs_library and kvs_fcall, the
   * error handler, and the names KEYS and ARGV. */
  int evalrun, libraryrun, fcallrun, errhandler, keysname, argvname;
  void *pool[KVS_POOL_CLASSES]; /* free blocks, by 16-byte size class */
  int npool[KVS_POOL_CLASSES];
} kvs_state;

/* The flags a function may declare, in Redis's order. */
extern const char *kvs_flag_names[];

kvs_state *kvs_open(int kind, uintptr_t handle);
void kvs_close(kvs_state *st);
int kvs_reserve(kvs_buf *b, size_t n);

/* Compiles code as chunk name: the function's registry reference, or 0
 * with Lua's error message in out. */
int kvs_load(kvs_state *st, const char *code, size_t len, const char *name);
void kvs_unref(kvs_state *st, int ref);

/* Runs the script ref (EVAL's interpreter) with nkeys keys and nargs
 * arguments, held one after the other in args, lens[i] bytes each; its
 * reply, or error, goes to out as RESP3. name is what errors call the
 * script. seed seeds math.random; hook, if not 0, is the number of
 * instructions after which kvsGoCheckpoint is first called. */
int kvs_run(kvs_state *st, int ref, const char *name, const char *args,
            const size_t *lens, int nkeys, int nargs, uint64_t seed,
            int hook);

/* Runs the top level of the library ref (FUNCTION's interpreter), which
 * registers its functions in st->funcs. */
int kvs_library(kvs_state *st, int ref, int hook);

/* Runs the library ref's top level, then calls its function fname with
 * the keys and arguments as kvs_run does. */
int kvs_fcall(kvs_state *st, int ref, const char *fname, const char *args,
              const size_t *lens, int nkeys, int nargs, uint64_t seed,
              int hook);

/* Forgets what the last library registered. */
void kvs_release_funcs(kvs_state *st);

/* The bytes the interpreter's heap holds, in whole KiB (luaMemory). */
size_t kvs_memory(kvs_state *st);

#endif
