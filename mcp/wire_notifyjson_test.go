package mcp

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// marshalParams writes what mcp-go's NotificationParams.MarshalJSON writes,
// byte for byte.
func TestMarshalParams(t *testing.T) {
	for _, p := range []mcp.NotificationParams{
		{},
		{AdditionalFields: map[string]any{}},
		{Meta: map[string]any{}},
		{AdditionalFields: map[string]any{"progressToken": "p", "progress": 3, "total": 10, "message": "step 3 of 10"}},
		{AdditionalFields: map[string]any{"progressToken": 7.0, "progress": 0.5, "total": 1e21, "tiny": 1e-7, "neg": -2.25, "zero": 0.0}},
		{AdditionalFields: map[string]any{"level": "info", "data": map[string]any{"b": []any{1, "x", nil}, "a": true}, "logger": "l"}},
		{AdditionalFields: map[string]any{"html": "<a href='x'>&</a>", "quote": `say "hi"\`, "ctl": "a\nb\x01", "utf": "é\u2028", "bad": "\xff"}},
		{AdditionalFields: map[string]any{"_meta": "ignored", "n": int64(-1), "u": uint64(1 << 63), "i32": int32(5), "raw": json.RawMessage(`{"x": 1}`)}, Meta: map[string]any{"k": 1}},
		{AdditionalFields: map[string]any{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9, "j": 10}},
		{AdditionalFields: map[string]any{"f32": float32(0.1), "max": math.MaxFloat64, "small": 5e-324}},
	} {
		want, wantErr := json.Marshal(p)
		got, err := marshalParams(p)
		if (err != nil) != (wantErr != nil) || string(got) != string(want) {
			t.Errorf("%+v:\n got %s (%v)\nwant %s (%v)", p, got, err, want, wantErr)
		}
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), func() {}} {
		if _, err := marshalParams(mcp.NotificationParams{AdditionalFields: map[string]any{"x": bad}}); err == nil {
			t.Errorf("%v: no error, as encoding/json gives", bad)
		}
	}
}

func FuzzMarshalParams(f *testing.F) {
	f.Add("progress", "step 1", 1.5, int64(3), true)
	f.Add("<&>", "\x00\"\\é", 1e21, int64(-9), false)
	f.Fuzz(func(t *testing.T, key, s string, x float64, n int64, ok bool) {
		p := mcp.NotificationParams{AdditionalFields: map[string]any{key: s, "x": x, "n": n, "ok": ok, "s" + key: []any{s, x}}}
		want, wantErr := json.Marshal(p)
		got, err := marshalParams(p)
		if (err != nil) != (wantErr != nil) || string(got) != string(want) {
			t.Errorf("got %s (%v), want %s (%v)", got, err, want, wantErr)
		}
	})
}

func BenchmarkMarshalParams(b *testing.B) {
	p := mcp.NotificationParams{AdditionalFields: map[string]any{"progressToken": "p", "progress": 3, "total": 10, "message": "step 3 of 10"}}
	b.Run("mcp-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(p)
		}
	})
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = marshalParams(p)
		}
	})
}
