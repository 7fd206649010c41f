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

// A record is its version, state, creation time, then the id alone (version 1,
// as written before restartable requests) or the id's length, the id and the
// payload (version 2, written when there is a payload), or the id's length, the
// id, the principal's length, the principal, a byte 1 when a payload follows (0
// otherwise) and the payload (version 3, written when there is a principal), or
// as version 3 with the owner's length and the owner after the principal
// (version 4, written when there is an owner: a cluster's instance).
const (
	recordWithPayload   = 2
	recordWithPrincipal = 3
	recordWithOwner     = 4
)

func encodeRecord(rec resume.Record) []byte {
	b := make([]byte, 0, 3+4*binary.MaxVarintLen64+len(rec.ID)+len(rec.Principal)+len(rec.Owner)+len(rec.Payload))
	if rec.Principal != "" || rec.Owner != "" {
		v := byte(recordWithPrincipal)
		if rec.Owner != "" {
			v = recordWithOwner
		}
		b = append(b, v, byte(rec.State))
		b = binary.AppendVarint(b, rec.Created.UnixNano())
		b = binary.AppendUvarint(b, uint64(len(rec.ID)))
		b = append(b, rec.ID...)
		b = binary.AppendUvarint(b, uint64(len(rec.Principal)))
		b = append(b, rec.Principal...)
		if rec.Owner != "" {
			b = binary.AppendUvarint(b, uint64(len(rec.Owner)))
			b = append(b, rec.Owner...)
		}
		if rec.Payload == nil {
			return append(b, 0)
		}
		b = append(b, 1)
		return append(b, rec.Payload...)
	}
	if rec.Payload == nil {
		b = append(b, codecVersion, byte(rec.State))
		b = binary.AppendVarint(b, rec.Created.UnixNano())
		return append(b, rec.ID...)
	}
	b = append(b, recordWithPayload, byte(rec.State))
	b = binary.AppendVarint(b, rec.Created.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(rec.ID)))
	b = append(b, rec.ID...)
	return append(b, rec.Payload...)
}

func decodeRecord(h resume.TokenHash, b []byte) (*resume.Record, error) {
	if len(b) < 2 || b[0] < codecVersion || b[0] > recordWithOwner {
		return nil, errCodec
	}
	rec := &resume.Record{Hash: h, State: resume.State(b[1])}
	ns, n := binary.Varint(b[2:])
	if n <= 0 {
		return nil, errCodec
	}
	rec.Created = time.Unix(0, ns)
	rest := b[2+n:]
	if b[0] == codecVersion {
		rec.ID = append([]byte(nil), rest...)
		return rec, nil
	}
	idLen, n := binary.Uvarint(rest)
	if n <= 0 || idLen > uint64(len(rest)-n) {
		return nil, errCodec
	}
	rest = rest[n:]
	rec.ID = append([]byte(nil), rest[:idLen]...)
	rest = rest[idLen:]
	if b[0] == recordWithPayload {
		rec.Payload = append([]byte{}, rest...)
		return rec, nil
	}
	pLen, n := binary.Uvarint(rest)
	if n <= 0 || pLen >= uint64(len(rest)-n) { // the payload flag follows
		return nil, errCodec
	}
	rest = rest[n:]
	rec.Principal = string(rest[:pLen])
	rest = rest[pLen:]
	if b[0] == recordWithOwner {
		oLen, n := binary.Uvarint(rest)
		if n <= 0 || oLen >= uint64(len(rest)-n) { // the payload flag follows
			return nil, errCodec
		}
		rest = rest[n:]
		rec.Owner = string(rest[:oLen])
		rest = rest[oLen:]
	}
	switch rest[0] {
	case 0:
		if len(rest) != 1 {
			return nil, errCodec
		}
	case 1:
		rec.Payload = append([]byte{}, rest[1:]...)
	default:
		return nil, errCodec
	}
	return rec, nil
}
