package jsstore

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// The stream and the bucket hold small binary encodings, versioned by their first
// byte.
//
//	message: 1, kind, uvarint seq, uvarint len(key), key, data
//	record:  1, state, varint created (Unix nanoseconds), id

const codecVersion = 1

var errCodec = errors.New("malformed stored value")

func encodeMessage(m resume.Message) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(m.Key)+len(m.Data))
	b = append(b, codecVersion, byte(m.Kind))
	b = binary.AppendUvarint(b, m.Seq)
	b = binary.AppendUvarint(b, uint64(len(m.Key)))
	b = append(b, m.Key...)
	return append(b, m.Data...)
}

func decodeMessage(b []byte) (resume.Message, error) {
	if len(b) < 2 || b[0] != codecVersion {
		return resume.Message{}, errCodec
	}
	m := resume.Message{Kind: resume.Kind(b[1])}
	b = b[2:]
	var n int
	if m.Seq, n = binary.Uvarint(b); n <= 0 {
		return resume.Message{}, errCodec
	}
	b = b[n:]
	klen, n := binary.Uvarint(b)
	if n <= 0 || klen > uint64(len(b)-n) {
		return resume.Message{}, errCodec
	}
	b = b[n:]
	m.Key = string(b[:klen])
	m.Data = b[klen:]
	return m, nil
}

func encodeRecord(rec resume.Record) []byte {
	b := make([]byte, 0, 2+binary.MaxVarintLen64+len(rec.ID))
	b = append(b, codecVersion, byte(rec.State))
	b = binary.AppendVarint(b, rec.Created.UnixNano())
	return append(b, rec.ID...)
}

func decodeRecord(h resume.TokenHash, b []byte) (*resume.Record, error) {
	if len(b) < 2 || b[0] != codecVersion {
		return nil, errCodec
	}
	rec := &resume.Record{Hash: h, State: resume.State(b[1])}
	ns, n := binary.Varint(b[2:])
	if n <= 0 {
		return nil, errCodec
	}
	rec.Created = time.Unix(0, ns)
	rec.ID = append([]byte(nil), b[2+n:]...)
	return rec, nil
}
