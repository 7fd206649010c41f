package cluster

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/mcp-resume/mcp-resume/resume/internal/wire"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Calls, replies and delivered messages travel as small binary encodings, versioned
// by their first byte:
//
//	call:    1, op, hash (32 bytes), uvarint ack, uvarint budget (milliseconds the
//	         caller waits, 0 for unknown), uvarint len(from), from,
//	         uvarint len(inbox), inbox, data
//	reply:   1, state, flags (1 HasPending, 2 HasInput), uvarint dropped,
//	         uvarint queued bytes, err
//	message: 1, kind, uvarint seq, uvarint len(key), key, data
//
// A Deliver's answer is the text of deliver's error, empty for none.

const codecVersion = 1

var errCodec = errors.New("cluster: malformed peer message")

// call is a PeerCall with what travels beside it.
type call struct {
	from   string
	budget time.Duration // how long the caller waits for the reply; 0: unknown
	c      PeerCall
}

func encodeCall(from string, budget time.Duration, c PeerCall) []byte {
	b := make([]byte, 0, 2+len(c.Hash)+4*binary.MaxVarintLen64+len(from)+len(c.Inbox)+len(c.Data))
	b = append(b, codecVersion, byte(c.Op))
	b = append(b, c.Hash[:]...)
	b = binary.AppendUvarint(b, c.Ack)
	b = binary.AppendUvarint(b, uint64(max(budget.Milliseconds(), 0)))
	b = wire.AppendString(b, from)
	b = wire.AppendString(b, c.Inbox)
	return append(b, c.Data...)
}

func decodeCall(b []byte) (call, error) {
	var v call
	if len(b) < 2+len(v.c.Hash) || b[0] != codecVersion {
		return call{}, errCodec
	}
	v.c.Op = PeerOp(b[1])
	b = b[2+copy(v.c.Hash[:], b[2:]):]
	var ms uint64
	var ok bool
	if v.c.Ack, b, ok = wire.Uvarint(b); !ok {
		return call{}, errCodec
	}
	if ms, b, ok = wire.Uvarint(b); !ok || ms > uint64(24*time.Hour/time.Millisecond) {
		return call{}, errCodec
	}
	v.budget = time.Duration(ms) * time.Millisecond
	if v.from, b, ok = wire.CutString(b); !ok {
		return call{}, errCodec
	}
	if v.c.Inbox, b, ok = wire.CutString(b); !ok {
		return call{}, errCodec
	}
	if len(b) > 0 {
		v.c.Data = b
	}
	return v, nil
}

const (
	flagPending = 1 << iota
	flagInput
	flagDetached
)

func encodeReply(r PeerReply) []byte {
	s := r.Status
	b := make([]byte, 0, 3+2*binary.MaxVarintLen64+len(r.Err))
	var flags byte
	if s.HasPending {
		flags |= flagPending
	}
	if s.HasInput {
		flags |= flagInput
	}
	if r.Detached {
		flags |= flagDetached
	}
	b = append(b, codecVersion, byte(s.State), flags)
	b = binary.AppendUvarint(b, s.Dropped)
	b = binary.AppendUvarint(b, uint64(max(s.QueuedBytes, 0)))
	return append(b, r.Err...)
}

func decodeReply(b []byte) (PeerReply, error) {
	if len(b) < 3 || b[0] != codecVersion {
		return PeerReply{}, errCodec
	}
	var r PeerReply
	s := &r.Status
	s.State = resume.State(b[1])
	s.HasPending = b[2]&flagPending != 0
	s.HasInput = b[2]&flagInput != 0
	r.Detached = b[2]&flagDetached != 0
	b = b[3:]
	var ok bool
	if s.Dropped, b, ok = wire.Uvarint(b); !ok {
		return PeerReply{}, errCodec
	}
	var q uint64
	if q, b, ok = wire.Uvarint(b); !ok || q > uint64(math.MaxInt) {
		return PeerReply{}, errCodec
	}
	s.QueuedBytes = int(q)
	r.Err = string(b)
	return r, nil
}
