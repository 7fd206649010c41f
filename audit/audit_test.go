package audit_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/internal/telemetry"
	"github.com/mcp-resume/mcp-resume/testkit/otlptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Each rule on arguments as a client may send them: hash is of the
// canonical form (keys sorted, no space, numbers as sent), redact keeps the
// keys, keep compacts; a tool without a rule gets nothing.
func TestRules(t *testing.T) {
	rs, err := audit.NewRules(map[string]string{"h": "hash", "r": "redact", "k": "keep"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool, args string
		sum, kept  string
	}{
		{"h", `{ "b": 1, "a": "x<y" }`, sha(`{"a":"x<y","b":1}`), ""},
		{"h", `{"a":"x<y","b":1}`, sha(`{"a":"x<y","b":1}`), ""},
		{"h", `{"n":9007199254740993,"f":1e400}`, sha(`{"f":1e400,"n":9007199254740993}`), ""},
		{"h", ``, sha(`{}`), ""},
		{"h", `{"a":`, sha(`{"a":`), ""}, // not JSON: hashed as it is
		{"r", `{"user":"bob","password":"hunter2","nested":{"x":1}}`, "", `{"nested":"[redacted]","password":"[redacted]","user":"[redacted]"}`},
		{"r", `[1,2]`, "", `"[redacted]"`},
		{"r", `{"a":`, "", `"[redacted]"`},
		{"k", "{ \"a\" :\n [1, 2] }", "", `{"a":[1,2]}`},
		{"k", `{"a":`, "", `"[redacted]"`}, // never kept unless JSON
		{"none", `{"a":1}`, "", ""},
	} {
		var ev audit.Event
		rs.Apply(tc.tool, json.RawMessage(tc.args), &ev)
		if ev.ArgumentsSHA256 != tc.sum || string(ev.Arguments) != tc.kept {
			t.Errorf("%s(%s): hash %q, arguments %s; want %q, %s", tc.tool, tc.args, ev.ArgumentsSHA256, ev.Arguments, tc.sum, tc.kept)
		}
	}
	var none audit.Rules
	var ev audit.Event
	none.Apply("h", json.RawMessage(`{}`), &ev)
	if ev.ArgumentsSHA256 != "" || ev.Arguments != nil {
		t.Errorf("nil rules: %+v", ev)
	}
}

func TestParseRules(t *testing.T) {
	m, err := audit.ParseRules(" echo=hash, login = redact ,,countdown=keep")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := audit.NewRules(m)
	if err != nil || rs.String() != "countdown=keep,echo=hash,login=redact" {
		t.Errorf("rules %v, %v", rs, err)
	}
	for _, bad := range []string{"echo", "=hash", "echo=hash,echo=keep"} {
		if _, err := audit.ParseRules(bad); err == nil {
			t.Errorf("ParseRules(%q): no error", bad)
		}
	}
	if _, err := audit.NewRules(map[string]string{"echo": "md5"}); err == nil {
		t.Error("NewRules with rule md5: no error")
	}
}

// FuzzEventJSON: any event is one line of JSON, with the documented names
// only, that decodes back to itself.
func FuzzEventJSON(f *testing.F) {
	f.Add("alice", "echo", "1", "ok", "", int64(3), int64(4), "", `{"a":1}`)
	f.Add("a\nb\u2028", "t\"\\", `"x"`, "refused", "too_many_requests", int64(-1), int64(0), sha("x"), ``)
	f.Fuzz(func(t *testing.T, principal, tool, id, outcome, reason string, in, out int64, sum, args string) {
		ev := audit.Event{
			Start: time.Unix(1, 5).UTC(), End: time.Unix(2, 7).UTC(),
			Principal: principal, Tool: tool, RequestID: id, Outcome: audit.Outcome(outcome), Reason: reason,
			BytesIn: in, BytesOut: out, ArgumentsSHA256: sum,
		}
		if json.Valid([]byte(args)) {
			var b bytes.Buffer
			_ = json.Compact(&b, []byte(args))
			ev.Arguments = b.Bytes()
		}
		var buf bytes.Buffer
		if err := audit.JSONLines(&buf).Write(ev); err != nil {
			t.Fatal(err)
		}
		line := buf.String()
		if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
			t.Fatalf("not one line: %q", line)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Fatal(err)
		}
		for k := range fields {
			if !documented[k] {
				t.Errorf("field %q is not documented", k)
			}
		}
		var back audit.Event
		if err := json.Unmarshal([]byte(line), &back); err != nil {
			t.Fatal(err)
		}
		if !allValid(principal, tool, id, outcome, reason, sum) {
			return // encoding/json writes U+FFFD for each invalid byte: still one line
		}
		if !back.Start.Equal(ev.Start) || !back.End.Equal(ev.End) || !bytes.Equal(back.Arguments, ev.Arguments) {
			t.Fatalf("decoded %+v, want %+v", back, ev)
		}
		back.Start, back.End, back.Arguments, ev.Arguments = ev.Start, ev.End, nil, nil
		if !reflect.DeepEqual(back, ev) {
			t.Fatalf("decoded %+v, want %+v", back, ev)
		}
	})
}

func allValid(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// documented are the JSON fields docs/observability.md lists ("Audit trail").
var documented = map[string]bool{
	"start": true, "end": true, "principal": true, "tool": true, "request_id": true,
	"trace_id": true, "span_id": true, "transport": true, "protocol_version": true,
	"outcome": true, "reason": true, "bytes_in": true, "bytes_out": true,
	"arguments_sha256": true, "arguments": true,
}

// The docs list exactly the fields an event may have.
func TestDocumentedFields(t *testing.T) {
	doc, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Audit trail\n")
	if !ok {
		t.Fatal("docs/observability.md has no Audit trail section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for k := range documented {
		if !strings.Contains(section, "| `"+k+"` |") {
			t.Errorf("the field %q is not in the docs' table", k)
		}
	}
	full := audit.Event{Principal: "p", Tool: "t", RequestID: "1", TraceID: "a", SpanID: "b", Transport: "http",
		ProtocolVersion: "v", Outcome: audit.OK, Reason: "r", BytesIn: 1, BytesOut: 1, ArgumentsSHA256: "s", Arguments: json.RawMessage(`{}`)}
	b, _ := json.Marshal(full)
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(b, &fields)
	if len(fields) != len(documented) {
		t.Errorf("an event has %d fields, the docs %d: %s", len(fields), len(documented), b)
	}
}

// A Trail writes every event it was given before Close returns; a full
// buffer drops (counted, told to Warn once per WarnEvery) and never blocks
// the caller.
func TestTrail(t *testing.T) {
	var buf syncBuffer
	tr := audit.NewTrail(nil, audit.JSONLines(&buf))
	for i := range 100 {
		tr.Record(audit.Event{Tool: "echo", RequestID: string(rune('a' + i%26)), Outcome: audit.OK})
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "\n"); n != 100 || tr.Dropped() != 0 {
		t.Errorf("%d lines, %d dropped; want 100, 0", n, tr.Dropped())
	}
	tr.Record(audit.Event{})
	if tr.Dropped() != 1 {
		t.Errorf("an event after Close: dropped %d, want 1", tr.Dropped())
	}

	// A sink that does not move: a pipe nobody reads yet.
	pr, pw := io.Pipe()
	var warned []error
	var mu sync.Mutex
	tr = audit.NewTrail(&audit.Options{Buffer: 4, WarnEvery: time.Hour, Warn: func(err error) {
		mu.Lock()
		warned = append(warned, err)
		mu.Unlock()
	}}, audit.JSONLines(pw))
	start := time.Now()
	for range 50 {
		tr.Record(audit.Event{Tool: "echo", Outcome: audit.OK})
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("recording 50 events into a stuck sink took %v", d)
	}
	// One in the sink's Write, four buffered: the rest dropped.
	if got := tr.Dropped(); got < 45 || got > 46 {
		t.Errorf("dropped %d, want 45 or 46", got)
	}
	mu.Lock()
	if len(warned) != 1 || !errors.Is(warned[0], audit.ErrDropped) {
		t.Errorf("warnings %v; want one ErrDropped", warned)
	}
	mu.Unlock()
	read := make(chan int)
	go func() {
		n := 0
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			n++
		}
		read <- n
	}()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	if n := <-read; uint64(n)+tr.Dropped() != 50 {
		t.Errorf("%d written and %d dropped of 50", n, tr.Dropped())
	}
}

// A Trail writes what gathered in one batch: after Linger from the first
// event, at once when half its Buffer is taken, and at Close; never while
// nothing is queued.
func TestTrailLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sink batchSink
		tr := audit.NewTrail(&audit.Options{Buffer: 8, Linger: time.Second}, &sink)
		for range 3 {
			tr.Record(audit.Event{Tool: "echo", Outcome: audit.OK})
		}
		synctest.Wait()
		if got := sink.sizes(); len(got) != 0 {
			t.Errorf("before Linger: batches %v, want none", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := sink.sizes(); !slices.Equal(got, []int{3}) {
			t.Errorf("after Linger: batches %v, want [3]", got)
		}
		time.Sleep(time.Hour) // nothing queued: nothing written
		for range 4 {
			tr.Record(audit.Event{Tool: "echo", Outcome: audit.OK})
		}
		synctest.Wait()
		if got := sink.sizes(); !slices.Equal(got, []int{3, 4}) {
			t.Errorf("half the buffer taken: batches %v, want [3 4]", got)
		}
		tr.Record(audit.Event{Tool: "echo", Outcome: audit.OK})
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		if got := sink.sizes(); !slices.Equal(got, []int{3, 4, 1}) || tr.Dropped() != 0 {
			t.Errorf("after Close: batches %v, %d dropped; want [3 4 1], 0", got, tr.Dropped())
		}
	})
}

// writes keeps each Write.
type writes [][]byte

func (w *writes) Write(p []byte) (int, error) {
	*w = append(*w, bytes.Clone(p))
	return len(p), nil
}

// batchSink is a BatchSink that keeps the size of each batch.
type batchSink struct {
	mu sync.Mutex
	n  []int
}

func (s *batchSink) Write(audit.Event) error { return errors.New("batchSink: Write, not WriteBatch") }

func (s *batchSink) WriteBatch(evs []audit.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n = append(s.n, len(evs))
	return nil
}

func (s *batchSink) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.n)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// File: created 0600, appended to, and after Reopen written at its path
// again (the old file moved away by a rotation keeps what it had).
func TestFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(path, []byte(`{"earlier":true}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := audit.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(audit.Event{Tool: "a", Outcome: audit.OK}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Reopen(); err != nil {
		t.Fatal(err)
	}
	if err := f.Write(audit.Event{Tool: "b", Outcome: audit.OK}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	if strings.Count(string(old), "\n") != 2 || !strings.Contains(string(old), `"tool":"a"`) || !strings.Contains(string(cur), `"tool":"b"`) || strings.Count(string(cur), "\n") != 1 {
		t.Errorf("rotated %q, current %q", old, cur)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the new file's mode: %v, %v; want 0600", st.Mode(), err)
	}
	if err := f.Write(audit.Event{}); err == nil {
		t.Error("a write after Close: no error")
	}
}

// A File writes a batch in writes of complete lines (more than one past 64
// KiB), and leaves out an event it cannot encode, saying so, with the others
// written.
func TestFileBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := audit.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]audit.Event, 1000)
	for i := range evs {
		evs[i] = audit.Event{Tool: "echo", RequestID: strings.Repeat("x", 100), Outcome: audit.OK, BytesIn: int64(i)}
	}
	evs[500].End = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // no RFC 3339 for it
	if err := f.WriteBatch(evs); err == nil {
		t.Error("a batch with an event that cannot be encoded: no error")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var w writes
	_ = audit.JSONLines(&w).(audit.BatchSink).WriteBatch(evs)
	if len(w) < 2 {
		t.Errorf("%d writes of %d events; want more than one", len(w), len(evs))
	}
	for i, p := range w {
		if len(p) > 64<<10+1024 || !bytes.HasSuffix(p, []byte("\n")) {
			t.Errorf("write %d: %d bytes, ending %q", i, len(p), p[max(0, len(p)-10):])
		}
	}
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 999 || len(b) < 64<<10 {
		t.Fatalf("%d lines, %d bytes; want 999 lines, more than 64 KiB", len(lines), len(b))
	}
	for i, l := range lines {
		var e audit.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if want := int64(i + i/500); e.BytesIn != want {
			t.Fatalf("line %d is event %d, want %d", i, e.BytesIn, want)
		}
	}
}

// OTel through the binary's log export (telemetry.SetupLogs) to a real OTLP
// receiver: one record per event, its trace and span ids the event's, each
// field an attribute; over HTTP at the general endpoint, at the traces'
// endpoint alone (mirrored: /v1/logs), and over gRPC.
func TestOTel(t *testing.T) {
	for _, tc := range []struct {
		name string
		recv func(testing.TB) *otlptest.Receiver
		env  func(endpoint string) map[string]string
	}{
		{"http", otlptest.New, func(e string) map[string]string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": e} }},
		{"http traces endpoint", otlptest.New, func(e string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": e + "/v1/traces"}
		}},
		{"grpc", otlptest.NewGRPC, func(e string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": e, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.recv(t)
			for k, v := range tc.env(r.Endpoint()) {
				t.Setenv(k, v)
			}
			t.Setenv("OTEL_BLRP_SCHEDULE_DELAY", "50")
			logs, err := telemetry.SetupLogs(context.Background(), "mcp-resume", "test")
			if err != nil {
				t.Fatal(err)
			}
			tr := audit.NewTrail(nil, audit.OTel(logs.LoggerProvider()))
			start := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
			tr.Record(audit.Event{
				Start: start, End: start.Add(time.Second), Principal: "alice", Tool: "echo", RequestID: "7",
				TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331", Transport: "http",
				ProtocolVersion: "2025-11-25", Outcome: audit.Refused, Reason: "too_many_requests", BytesIn: 12,
				ArgumentsSHA256: sha("{}"),
			})
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			recs := r.WaitLogs(t, 10*time.Second, "the audit record", func(rs []otlptest.LogRecord) bool { return len(rs) == 1 })
			got := recs[0]
			want := map[string]string{
				"start": "2026-01-02T03:04:05.000000006Z", "end": "2026-01-02T03:04:06.000000006Z", "principal": "alice", "tool": "echo",
				"request_id": "7", "trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331", "transport": "http",
				"protocol_version": "2025-11-25", "outcome": "refused", "reason": "too_many_requests", "bytes_in": "12", "bytes_out": "0",
				"arguments_sha256": sha("{}"),
			}
			if got.EventName != audit.EventName || got.Service != "mcp-resume" || got.Severity != "Warn" ||
				got.TraceID != "0af7651916cd43dd8448eb211c80319c" || got.SpanID != "b7ad6b7169203331" || !got.Time.Equal(start.Add(time.Second)) {
				t.Errorf("record %+v", got)
			}
			if len(got.Attrs) != len(want) {
				t.Errorf("attributes %v, want %v", got.Attrs, want)
			}
			for k, v := range want {
				if !documented[k] || got.Attrs[k] != v {
					t.Errorf("attribute %s = %q, want %q", k, got.Attrs[k], v)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := logs.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// SetupLogs is asked for: nothing configured is an error, not silence.
func TestSetupLogsUnconfigured(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_TRACES_EXPORTER"} {
		t.Setenv(k, "")
	}
	if _, err := telemetry.SetupLogs(context.Background(), "mcp-resume", "test"); err == nil {
		t.Error("no endpoint: no error")
	}
}
