// Package config owns Redis's configuration parameters as kvs knows them:
// their table, the checking of values, CONFIG GET's matching, config files
// in redis.conf's syntax and CONFIG REWRITE of them.
//
// # Contract
//
//   - The table (table.go) is every parameter redis-server 7.0.15 has, with
//     its alias, type, bounds, enum names, flags and the default Redis
//     reports, in Redis's order; limits.go adds the encoding thresholds
//     (fsm.Limits) under their Redis 7 names, aliases, and the two Redis
//     7.2 names kvs has.
//   - Param.Normalize, SetLimit and CheckNames check a CONFIG SET value or
//     name as Redis does and return it as CONFIG GET then prints it, or
//     Redis's reason. Their errors' texts are Redis's reasons, without the
//     "ERR CONFIG SET failed (possibly related to argument '...') - " that
//     package server adds when it answers a client.
//   - Store keeps the values of the parameters kvs keeps but does not act
//     on. What a parameter change does (maxmemory, the store's thresholds,
//     TLS, the listening port, ...) is package server's: its CONFIG
//     command checks every pair here, then applies them itself.
//   - ReadFile splits a file's lines as Redis's sdssplitargs does
//     (fsm.SplitArgs) and reads includes in place; Rewrite keeps the
//     file's comments, order and kvs's own directives, as Redis's
//     rewriteConfig keeps them, and replaces the file atomically
//     (WriteFileAtomic).
//
// The package opens no sockets and knows no clients: it is given the
// values (CONFIG GET's map of every parameter) and returns values, errors
// and files.
package config
