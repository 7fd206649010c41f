package spec_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

// The fused encoders give the same bytes as stamping first and encoding after, on
// the fast path (no _meta) and the slow ones (an existing _meta, an escape, a
// non-object).
func TestEncodeSeqMatchesStamp(t *testing.T) {
	id := spec.ID(`9007199254740993`)
	for _, obj := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"_meta":{"x":true},"a":1}`, `{"\u005fmeta":{"x":1}}`,
		`{"_META":1}`, `[1,2]`, `"s"`, `null`,
	} {
		for _, seq := range []uint64{0, 1, 18446744073709551615} {
			raw := json.RawMessage(obj)
			stamped := raw
			if seq > 0 {
				stamped = spec.StampSeq(raw, seq)
			}
			if got, want := spec.EncodeResponseSeq(id, raw, seq), spec.EncodeResponse(id, stamped); !bytes.Equal(got, want) {
				t.Errorf("EncodeResponseSeq(%s, %d) = %s, want %s", obj, seq, got, want)
			}
			if got, want := spec.EncodeRequestSeq(nil, "m", raw, seq), spec.EncodeRequest(nil, "m", stamped); !bytes.Equal(got, want) {
				t.Errorf("EncodeRequestSeq(%s, %d) = %s, want %s", obj, seq, got, want)
			}
			if msg := spec.EncodeResponseSeq(id, raw, seq); !json.Valid(msg) {
				t.Errorf("EncodeResponseSeq(%s, %d) is not JSON: %s", obj, seq, msg)
			}
		}
	}
}

// Stamping a sequence number on the fast path costs no allocation beyond the
// message itself, whatever the number's width.
func TestEncodeSeqAllocatesOnce(t *testing.T) {
	result := json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`)
	for _, seq := range []uint64{0, 1, 18446744073709551615} {
		if n := testing.AllocsPerRun(100, func() { _ = spec.EncodeResponseSeq(spec.ID(`12345`), result, seq) }); n != 1 {
			t.Errorf("EncodeResponseSeq(seq %d): %v allocations, want 1", seq, n)
		}
		if n := testing.AllocsPerRun(100, func() { _ = spec.EncodeRequestSeq(nil, "notifications/progress", result, seq) }); n != 1 {
			t.Errorf("EncodeRequestSeq(seq %d): %v allocations, want 1", seq, n)
		}
	}
}

// A message the engine queues is kept as it was allocated: on the fast path
// it fills its allocation exactly, with or without an id, a sequence number
// of any width, or params (a result that is not an object takes no stamp:
// its room goes unused).
func TestEncodeSeqExactSize(t *testing.T) {
	obj := json.RawMessage(`{"progressToken":7,"progress":5,"total":300,"message":"step 5 of 300"}`)
	for _, seq := range []uint64{0, 1, 9, 10, 99999, 18446744073709551615} {
		for _, msg := range [][]byte{
			spec.EncodeRequestSeq(nil, "notifications/progress", obj, seq),
			spec.EncodeRequestSeq(spec.ID(`"a"`), "sampling/createMessage", obj, seq),
			spec.EncodeResponseSeq(spec.ID(`12345`), obj, seq),
		} {
			if cap(msg) != len(msg) {
				t.Errorf("seq %d: %s: %d bytes in an allocation of %d", seq, msg, len(msg), cap(msg))
			}
		}
	}
	if msg := spec.EncodeRequestSeq(nil, "m", nil, 0); cap(msg) < len(msg) || !json.Valid(msg) {
		t.Errorf("no params: %s", msg)
	}
}
