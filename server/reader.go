package server

import (
	"io"

	"kvs/resp"
)

// newReader returns the request reader of c's connection, read from r,
// with the limits Redis sets: proto-max-bulk-len, client-query-buffer-limit
// and, while c must authenticate and has not, the tighter limits of an
// unauthenticated client (resp.Reader.SetAuthRequired). Its buffer counts
// in used memory (memory.go) until the connection closes (unregister).
func (c *client) newReader(r io.Reader) *resp.Reader {
	rd := resp.NewReader(r, c.s.maxBulk.Load)
	rd.SetQueryLimit(c.s.maxQuery.Load)
	rd.SetAuthRequired(c.authRequired)
	rd.SetBufferAccount(c.s.accountReadBuffer)
	return rd
}
