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
//	message: see package wire (version 1): one message of a request
//	pack:    2, then for each of several messages of one request, in
//	         ascending seq: uvarint len(message), message (as above)
//	dropped: 3, uvarint count, then the discarded messages' seqs, ascending,
//	         each as a uvarint of its difference from the one before (the
//	         first from 0)
//	record:  6, state, varint created (Unix nanoseconds), uvarint len(id), id,
//	         uvarint len(principal), principal, uvarint len(owner), owner,
//	         uvarint epoch, flags, uvarint ttl in milliseconds (when flagTTL),
//	         uvarint len(traceparent), traceparent, uvarint len(tracestate),
//	         tracestate (when flagTrace), varint deadline in Unix
//	         milliseconds (when flagDeadline), payload (when flagPayload)
//
// There is one record format until the first release; 1 to 5 were the formats
// of development versions, which nothing deployed wrote: a record in one of
// them is unreadable (skipped by recovery, left in the bucket).
const recordVersion = 6

var errCodec = errors.New("malformed stored value")

// A stream message holds one queued message (wire's encoding, as every
// version before packs wrote), a pack of several (the write-behind sends a
// request's waiting messages as one: one publish, one acknowledgement and one
// stored message instead of one each), or the seqs of messages discarded
// from packs that still hold others (see sweep).
const (
	packVersion    = 2
	droppedVersion = 3
)

// encodePack packs parts, the encodings of several messages of one request
// in ascending seq, into one stream message; in returns each part as it sits
// in it.
func encodePack(parts [][]byte) (b []byte, in [][]byte) {
	n := 1
	for _, p := range parts {
		n += binary.MaxVarintLen64 + len(p)
	}
	b = make([]byte, 0, n)
	b = append(b, packVersion)
	at := make([]int, len(parts))
	for i, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		at[i] = len(b)
		b = append(b, p...)
	}
	in = make([][]byte, len(parts))
	for i, p := range parts {
		in[i] = b[at[i] : at[i]+len(p) : at[i]+len(p)]
	}
	return b, in
}

// encodeDropped is the stream message that says seqs, ascending, are
// discarded.
func encodeDropped(seqs []uint64) []byte {
	b := make([]byte, 0, 1+(len(seqs)+1)*binary.MaxVarintLen32)
	b = append(b, droppedVersion)
	b = binary.AppendUvarint(b, uint64(len(seqs)))
	prev := uint64(0)
	for _, q := range seqs {
		b = binary.AppendUvarint(b, q-prev)
		prev = q
	}
	return b
}

// decodeStored decodes a stream message: the messages it holds, in the order
// stored (one, or a pack's), or the seqs it says are discarded. The messages'
// Data share b's bytes.
func decodeStored(b []byte) (msgs []resume.Message, dropped []uint64, err error) {
	if len(b) == 0 {
		return nil, nil, errCodec
	}
	switch b[0] {
	case wire.Version:
		m, err := wire.DecodeMessage(b)
		if err != nil {
			return nil, nil, err
		}
		return []resume.Message{m}, nil, nil
	case packVersion:
		rest := b[1:]
		for len(rest) > 0 {
			n, r, ok := wire.Uvarint(rest)
			if !ok || n > uint64(len(r)) {
				return nil, nil, errCodec
			}
			m, err := wire.DecodeMessage(r[:n:n])
			if err != nil {
				return nil, nil, err
			}
			if len(msgs) > 0 && m.Seq <= msgs[len(msgs)-1].Seq {
				return nil, nil, errCodec
			}
			msgs = append(msgs, m)
			rest = r[n:]
		}
		if len(msgs) == 0 {
			return nil, nil, errCodec
		}
		return msgs, nil, nil
	case droppedVersion:
		n, rest, ok := wire.Uvarint(b[1:])
		if !ok || n == 0 || n > uint64(len(rest)) {
			return nil, nil, errCodec
		}
		dropped = make([]uint64, 0, n)
		prev := uint64(0)
		for range n {
			d, r, ok := wire.Uvarint(rest)
			if !ok || d == 0 || prev+d < prev {
				return nil, nil, errCodec
			}
			prev += d
			dropped = append(dropped, prev)
			rest = r
		}
		if len(rest) != 0 {
			return nil, nil, errCodec
		}
		return nil, dropped, nil
	}
	return nil, nil, errCodec
}

const (
	flagPayload = 1 << iota
	flagAckMode
	flagAcknowledged // a tombstone of an acknowledged request
	flagTask
	flagTTL      // a uvarint of milliseconds follows the flags
	flagTrace    // the trace context's two strings follow (and the ttl)
	flagDeadline // a varint of Unix milliseconds follows (the trace context)
)

func encodeRecord(rec resume.Record) []byte {
	b := make([]byte, 0, 3+7*binary.MaxVarintLen64+len(rec.ID)+len(rec.Principal)+len(rec.Owner)+len(rec.Trace.Parent)+len(rec.Trace.State)+len(rec.Payload))
	b = append(b, recordVersion, byte(rec.State))
	b = binary.AppendVarint(b, rec.Created.UnixNano())
	b = wire.AppendString(b, string(rec.ID))
	b = wire.AppendString(b, rec.Principal)
	b = wire.AppendString(b, rec.Owner)
	b = binary.AppendUvarint(b, uint64(rec.Epoch))
	var flags byte
	if rec.Payload != nil {
		flags |= flagPayload
	}
	if rec.AckMode {
		flags |= flagAckMode
	}
	if rec.Acknowledged {
		flags |= flagAcknowledged
	}
	if rec.Task {
		flags |= flagTask
	}
	if rec.TTL >= time.Millisecond { // stored in milliseconds
		flags |= flagTTL
	}
	if !rec.Trace.IsZero() {
		flags |= flagTrace
	}
	if !rec.Deadline.IsZero() {
		flags |= flagDeadline
	}
	b = append(b, flags)
	if flags&flagTTL != 0 {
		b = binary.AppendUvarint(b, uint64(rec.TTL.Milliseconds()))
	}
	if flags&flagTrace != 0 {
		b = wire.AppendString(b, rec.Trace.Parent)
		b = wire.AppendString(b, rec.Trace.State)
	}
	if flags&flagDeadline != 0 {
		b = binary.AppendVarint(b, rec.Deadline.UnixMilli())
	}
	return append(b, rec.Payload...)
}

func decodeRecord(h resume.TokenHash, b []byte) (*resume.Record, error) {
	if len(b) < 2 || b[0] != recordVersion {
		return nil, errCodec
	}
	rec := &resume.Record{Hash: h, State: resume.State(b[1])}
	ns, n := binary.Varint(b[2:])
	if n <= 0 {
		return nil, errCodec
	}
	rec.Created = time.Unix(0, ns)
	rest := b[2+n:]
	id, rest, ok := wire.CutString(rest)
	if !ok {
		return nil, errCodec
	}
	rec.ID = []byte(id)
	if rec.Principal, rest, ok = wire.CutString(rest); !ok {
		return nil, errCodec
	}
	if rec.Owner, rest, ok = wire.CutString(rest); !ok {
		return nil, errCodec
	}
	epoch, rest, ok := wire.Uvarint(rest)
	if !ok || epoch > math.MaxUint32 {
		return nil, errCodec
	}
	rec.Epoch = uint32(epoch)
	const allowed = flagPayload | flagAckMode | flagAcknowledged | flagTask | flagTTL | flagTrace | flagDeadline
	if len(rest) == 0 || rest[0]&^allowed != 0 {
		return nil, errCodec
	}
	flags := rest[0]
	rest = rest[1:]
	rec.AckMode = flags&flagAckMode != 0
	rec.Acknowledged = flags&flagAcknowledged != 0
	rec.Task = flags&flagTask != 0
	if flags&flagTTL != 0 {
		ms, r, ok := wire.Uvarint(rest)
		if !ok || ms == 0 || ms > math.MaxInt64/uint64(time.Millisecond) {
			return nil, errCodec
		}
		rec.TTL, rest = time.Duration(ms)*time.Millisecond, r
	}
	if flags&flagTrace != 0 {
		if rec.Trace.Parent, rest, ok = wire.CutString(rest); !ok {
			return nil, errCodec
		}
		if rec.Trace.State, rest, ok = wire.CutString(rest); !ok || rec.Trace.IsZero() {
			return nil, errCodec
		}
	}
	if flags&flagDeadline != 0 {
		ms, n := binary.Varint(rest)
		if n <= 0 {
			return nil, errCodec
		}
		rec.Deadline, rest = time.UnixMilli(ms), rest[n:]
	}
	if flags&flagPayload != 0 {
		rec.Payload = append([]byte{}, rest...)
	} else if len(rest) != 0 {
		return nil, errCodec
	}
	return rec, nil
}
