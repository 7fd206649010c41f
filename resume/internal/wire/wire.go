// Package wire is the binary encoding of a resume.Message that the JetStream store
// keeps (a stream message holds one, or a pack of several: see package jsstore)
// and that a cluster's instances
// send each other (inbox deliveries), with the varint helpers both codecs use.
//
//	message: version (1), kind (failedBit set for Message.Failed), varint seq,
//	         varint len(key), key, data
package wire

import (
	"encoding/binary"
	"errors"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Version is the message encoding's version byte.
const Version = 1

// failedBit marks, in the kind byte, a final response that failed.
const failedBit = 0x80

// ErrMalformed is what DecodeMessage returns for bytes it did not encode.
var ErrMalformed = errors.New("malformed message encoding")

// EncodeMessage encodes m.
func EncodeMessage(m resume.Message) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(m.Key)+len(m.Data))
	kind := byte(m.Kind)
	if m.Failed {
		kind |= failedBit
	}
	b = append(b, Version, kind)
	b = binary.AppendUvarint(b, m.Seq)
	b = AppendString(b, m.Key)
	return append(b, m.Data...)
}

// DecodeMessage decodes what EncodeMessage encoded. The message's Data shares b's
// bytes, and is nil when empty.
func DecodeMessage(b []byte) (resume.Message, error) {
	if len(b) < 2 || b[0] != Version {
		return resume.Message{}, ErrMalformed
	}
	m := resume.Message{Kind: resume.Kind(b[1] &^ failedBit), Failed: b[1]&failedBit != 0}
	b = b[2:]
	var ok bool
	if m.Seq, b, ok = Uvarint(b); !ok {
		return resume.Message{}, ErrMalformed
	}
	if m.Key, b, ok = CutString(b); !ok {
		return resume.Message{}, ErrMalformed
	}
	if len(b) > 0 {
		m.Data = b
	}
	return m, nil
}

// AppendString appends s with its length before it.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Uvarint reads a varint from the start of b and returns the rest.
func Uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

// CutString reads what AppendString appended from the start of b and returns the
// rest.
func CutString(b []byte) (string, []byte, bool) {
	n, b, ok := Uvarint(b)
	if !ok || n > uint64(len(b)) {
		return "", nil, false
	}
	return string(b[:n]), b[n:], true
}
