package spec

import (
	"bytes"
	"errors"
	"fmt"
)

// ID is a JSON-RPC request id kept as the exact bytes the peer sent: a JSON string
// or a JSON number. It is written back unchanged, so an integer above 2^53 or a
// number spelled 1.0 round-trips byte for byte (decoding into float64 would not).
// Two ids are the same id when their bytes are equal.
type ID []byte

var errBadID = errors.New("id must be a string or a number")

// ParseID validates raw as a JSON-RPC id and returns a copy of it.
func ParseID(raw []byte) (ID, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, errBadID
	}
	// One JSON string or number, as encoding/json would accept it into a string
	// or a json.Number: the grammar (scan.go), nothing after it.
	end, ok := 0, false
	switch c := raw[0]; {
	case c == '"':
		end, _, ok = skipString(raw, 0)
	case c == '-' || (c >= '0' && c <= '9'):
		end, ok = skipNumber(raw, 0)
	}
	if !ok || end != len(raw) {
		return nil, fmt.Errorf("id %.40q: %w", raw, errBadID)
	}
	return ID(bytes.Clone(raw)), nil
}

// MarshalJSON writes the id's bytes unchanged.
func (id ID) MarshalJSON() ([]byte, error) {
	if len(id) == 0 {
		return []byte("null"), nil
	}
	return id, nil
}

// UnmarshalJSON accepts a string or a number.
func (id *ID) UnmarshalJSON(b []byte) error {
	v, err := ParseID(b)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Equal reports whether two ids are the same id.
func (id ID) Equal(o ID) bool { return bytes.Equal(id, o) }

// String returns the id's JSON text, for logs and map keys.
func (id ID) String() string { return string(id) }
