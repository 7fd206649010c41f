package jsstore

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/internal/wire"
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
// (version 4, written when there is an owner: a cluster's instance), or as version
// 4 with the epoch (uvarint) after the owner and flags in place of the payload
// byte: 1 a payload follows, 2 ack mode, 4 a tombstone of an acknowledged request
// (version 5, written when the request is in ack mode or past its first epoch, or
// for such a tombstone; a version 5 reader that predates flag 4 takes that
// tombstone for an unreadable record, whose lookup answers not_found). Each version is written only when the older
// ones cannot say it. A process older than version 5 cannot read such records (it
// takes them for unknown requests, and its recovery stops at the first): upgrade
// every instance sharing a store before one writes them, and do not go back while
// the store holds them.
const (
	recordWithPayload   = 2
	recordWithPrincipal = 3
	recordWithOwner     = 4
	recordWithFlags     = 5
)

const (
	flagPayload = 1 << iota
	flagAckMode
	flagAcknowledged
)

func encodeRecord(rec resume.Record) []byte {
	b := make([]byte, 0, 3+5*binary.MaxVarintLen64+len(rec.ID)+len(rec.Principal)+len(rec.Owner)+len(rec.Payload))
	// The oldest version that can say everything rec holds.
	var v byte
	switch {
	case rec.AckMode || rec.Epoch > 0 || rec.Acknowledged:
		v = recordWithFlags
	case rec.Owner != "":
		v = recordWithOwner
	case rec.Principal != "":
		v = recordWithPrincipal
	case rec.Payload != nil:
		v = recordWithPayload
	default:
		v = codecVersion
	}
	b = append(b, v, byte(rec.State))
	b = binary.AppendVarint(b, rec.Created.UnixNano())
	if v == codecVersion {
		return append(b, rec.ID...)
	}
	b = wire.AppendString(b, string(rec.ID))
	if v == recordWithPayload {
		return append(b, rec.Payload...)
	}
	b = wire.AppendString(b, rec.Principal)
	if v >= recordWithOwner {
		b = wire.AppendString(b, rec.Owner)
	}
	if v >= recordWithFlags {
		b = binary.AppendUvarint(b, uint64(rec.Epoch))
	}
	var flags byte // before version 5 a payload byte: 0 or 1, as flagPayload
	if rec.Payload != nil {
		flags |= flagPayload
	}
	if rec.AckMode {
		flags |= flagAckMode
	}
	if rec.Acknowledged {
		flags |= flagAcknowledged
	}
	b = append(b, flags)
	return append(b, rec.Payload...)
}

func decodeRecord(h resume.TokenHash, b []byte) (*resume.Record, error) {
	if len(b) < 2 || b[0] < codecVersion || b[0] > recordWithFlags {
		return nil, errCodec
	}
	v := b[0]
	rec := &resume.Record{Hash: h, State: resume.State(b[1])}
	ns, n := binary.Varint(b[2:])
	if n <= 0 {
		return nil, errCodec
	}
	rec.Created = time.Unix(0, ns)
	rest := b[2+n:]
	if v == codecVersion {
		rec.ID = append([]byte(nil), rest...)
		return rec, nil
	}
	id, rest, ok := wire.CutString(rest)
	if !ok {
		return nil, errCodec
	}
	rec.ID = []byte(id)
	if v == recordWithPayload {
		rec.Payload = append([]byte{}, rest...)
		return rec, nil
	}
	if rec.Principal, rest, ok = wire.CutString(rest); !ok {
		return nil, errCodec
	}
	if v >= recordWithOwner {
		if rec.Owner, rest, ok = wire.CutString(rest); !ok {
			return nil, errCodec
		}
	}
	allowed := byte(flagPayload)
	if v >= recordWithFlags {
		epoch, r, ok := wire.Uvarint(rest)
		if !ok || epoch > math.MaxUint32 {
			return nil, errCodec
		}
		rec.Epoch, rest, allowed = uint32(epoch), r, flagPayload|flagAckMode|flagAcknowledged
	}
	if len(rest) == 0 || rest[0]&^allowed != 0 {
		return nil, errCodec
	}
	rec.AckMode = rest[0]&flagAckMode != 0
	rec.Acknowledged = rest[0]&flagAcknowledged != 0
	if rest[0]&flagPayload != 0 {
		rec.Payload = append([]byte{}, rest[1:]...)
	} else if len(rest) != 1 {
		return nil, errCodec
	}
	return rec, nil
}
