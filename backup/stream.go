package backup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrStream is wrapped by errors about a KVS.BACKUP reply that is not a
// whole stream (the node stopped midway, or sent something else).
var ErrStream = errors.New("backup: bad stream")

// ReplyError is an error reply a node sent instead of a backup.
type ReplyError struct{ Text string }

func (e *ReplyError) Error() string { return e.Text }

// maxChunk bounds one chunk of the stream, so that a bad length cannot
// make the reader allocate without limit.
const maxChunk = 64 << 20

// ReadStream copies the backup a node streams in answer to KVS.BACKUP (a
// RESP3 streamed string: "$?\r\n", chunks ";<len>\r\n<bytes>\r\n", then
// ";0\r\n") from r to w. It returns a *ReplyError for an error reply, and
// an error wrapping ErrStream for a stream that ends early or is framed
// wrongly. It does not check the backup inside: Verify does.
func ReadStream(r *bufio.Reader, w io.Writer) (int64, error) {
	line, err := readLine(r)
	if err != nil {
		return 0, err
	}
	switch {
	case strings.HasPrefix(line, "-"):
		return 0, &ReplyError{Text: line[1:]}
	case line != "$?":
		return 0, fmt.Errorf("%w: reply starts %q, want a streamed string", ErrStream, truncate(line))
	}
	var total int64
	for {
		line, err := readLine(r)
		if err != nil {
			return total, err
		}
		if !strings.HasPrefix(line, ";") {
			return total, fmt.Errorf("%w: chunk header %q after %d bytes", ErrStream, truncate(line), total)
		}
		n, err := strconv.ParseInt(line[1:], 10, 64)
		if err != nil || n < 0 || n > maxChunk {
			return total, fmt.Errorf("%w: chunk length %q after %d bytes", ErrStream, truncate(line), total)
		}
		if n == 0 {
			return total, nil
		}
		if _, err := io.CopyN(w, r, n); err != nil {
			return total, streamErr(err, total)
		}
		total += n
		var crlf [2]byte
		if _, err := io.ReadFull(r, crlf[:]); err != nil {
			return total, streamErr(err, total)
		}
		if crlf != [2]byte{'\r', '\n'} {
			return total, fmt.Errorf("%w: chunk not ended by CRLF after %d bytes", ErrStream, total)
		}
	}
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", streamErr(err, -1)
	}
	if !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("%w: line not ended by CRLF", ErrStream)
	}
	return line[:len(line)-2], nil
}

func streamErr(err error, at int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if at >= 0 {
			return fmt.Errorf("%w: the node closed the connection after %d bytes, before the end of the backup", ErrStream, at)
		}
		return fmt.Errorf("%w: the node closed the connection before the end of the backup", ErrStream)
	}
	return err
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
