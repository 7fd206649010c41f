package transport

import (
	"bytes"
	"io"
	"sync"
)

// readBufs holds the buffers ReadAll reads into.
var readBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledRead is the largest buffer ReadAll keeps for the next read.
const maxPooledRead = 64 << 10

// ReadAll reads r to its end, as io.ReadAll does, and returns what it read
// in a slice of its own size: a message a request keeps while it runs (its
// call's raw request, ids that point into it) holds its own bytes, not the
// buffer it was read into (at least 512 bytes, and 1 KB for a message of a
// few hundred: bytes.Buffer and io.ReadAll grow ahead of the read). The
// buffer goes back to a pool.
func ReadAll(r io.Reader) ([]byte, error) {
	buf := readBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledRead {
			buf.Reset()
			readBufs.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}
