package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// appendJSON writes what json.Marshal writes of wireEvent, byte for byte,
// and fails where it fails: any strings (invalid UTF-8, control characters,
// HTML characters, U+2028), any times (a zone, a year past 9999), any
// arguments (invalid JSON, spacing to compact).
func FuzzAppendJSON(f *testing.F) {
	f.Add(int64(1), int64(5), int64(2), int64(7), "alice", "echo", "1", "ok", "", int64(3), int64(4), "", `{"a":1}`)
	f.Add(int64(-62135596800), int64(0), int64(253402300800), int64(0), "a\nb\u2028\x00\x7f", "t\"\\<>&", "\xff\xfe", "refused", "x\u2029y", int64(-1), int64(0), "\b\f\r\t", ` { "a" : "<\u2028>" , "b":[1e400, 9007199254740993] } `)
	f.Add(int64(0), int64(0), int64(0), int64(0), "", "", "", "", "", int64(0), int64(0), "", `{`)
	f.Fuzz(func(t *testing.T, startSec, startNsec, endSec, endNsec int64, principal, tool, id, outcome, reason string, in, out int64, sum, args string) {
		zone := time.FixedZone("z", int(startNsec%86400))
		ev := Event{
			Start: time.Unix(startSec, startNsec).In(zone), End: time.Unix(endSec, endNsec),
			Principal: principal, Tool: tool, RequestID: id, TraceID: reason, SpanID: sum, Transport: principal,
			ProtocolVersion: tool, Outcome: Outcome(outcome), Reason: reason,
			BytesIn: in, BytesOut: out, ArgumentsSHA256: sum, Arguments: json.RawMessage(args),
		}
		got, gotErr := ev.appendJSON([]byte("prefix"))
		w := ev
		w.Start, w.End = w.Start.UTC(), w.End.UTC()
		want, wantErr := json.Marshal(wireEvent(w))
		if (gotErr != nil) != (wantErr != nil) {
			t.Fatalf("appendJSON's error %v, json.Marshal's %v", gotErr, wantErr)
		}
		if gotErr != nil {
			if string(got) != "prefix" {
				t.Fatalf("after an error: %q, want the buffer as it was", got)
			}
			return
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("appendJSON:\n%s\njson.Marshal:\n%s", got[len("prefix"):], want)
		}
		if m, err := json.Marshal(ev); err != nil || !bytes.Equal(m, want) {
			t.Fatalf("json.Marshal(Event): %s, %v; want %s", m, err, want)
		}
	})
}

// BenchmarkAppendJSON is the encoding of a hashed echo call's event, against
// json.Marshal of wireEvent (what MarshalJSON did before appendJSON).
func BenchmarkAppendJSON(b *testing.B) {
	now := time.Now()
	ev := Event{Start: now, End: now.Add(time.Millisecond), Tool: "echo", RequestID: "12345", Transport: "http",
		ProtocolVersion: "2025-06-18", Outcome: OK, BytesIn: 52, BytesOut: 120,
		ArgumentsSHA256: "1e8c3d7a2e95b4a1f58a6d1b2c3e4f5061728394a5b6c7d8e9f00112233445566"}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = ev.appendJSON(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(ev)
		}
	})
}
