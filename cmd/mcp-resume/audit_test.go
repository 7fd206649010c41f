package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/testkit/otlptest"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// readAudit returns the events of an audit file, failing on a line that is
// not one.
func readAudit(t *testing.T, path string) ([]audit.Event, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var evs []audit.Event
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		var e audit.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return evs, b
}

// serve --audit FILE over WebSocket with an API key: a call that completes
// (its arguments hashed by --audit-arguments), one refused (the principal's
// third in flight with --max-concurrent-per-principal 2), one cancelled, and
// a resumable call that completes after its client left and is resumed from
// a new connection: one line each, with its outcome and reason, the key's
// principal, and neither the key nor the resume token anywhere in the file.
func TestAuditTrail(t *testing.T) {
	dir := t.TempDir()
	const key = "k-alice-3f9a7c2e"
	keys, file := filepath.Join(dir, "keys"), filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(keys, []byte("alice:"+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := spawnNet(t, "serve --http 127.0.0.1:0 --api-keys "+keys+" --max-concurrent-per-principal 2 --audit "+file+" --audit-arguments echo=hash", 1)[0]
	dial := func() transport.Conn {
		c, err := ws.Dial(t.Context(), srv.WS, &ws.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := e2etest.NewClient(t, dial())
	a.Initialize(`{"resumableRequests":{}}`)
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	a.Response(`1`)
	a.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"steps":4},"_meta":{"progressToken":"p"}}}`)
	pol := e2etest.PolicyOf(t, a.Next())
	a.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":60,"steps":60},"_meta":{"progressToken":"q"}}}`)
	a.Until(func(m e2etest.Msg) bool {
		return m.Method == "notifications/requests/resumePolicy" && strings.Contains(string(m.Params), `"requestId":3`)
	})
	a.Send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"third"}}}`)
	if m, _ := a.Response(`4`); m.Error == nil || m.Error.Reason != "too_many_requests" {
		t.Fatalf("alice's third call in flight: %s; want too_many_requests", m.Raw)
	}
	a.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`)
	a.Close() // call 2 runs on without its client, and completes

	b := e2etest.NewClient(t, dial())
	b.Initialize(`{"resumableRequests":{}}`)
	b.WaitStatus(`2`, pol.ResumeToken, func(s e2etest.Status) bool { return s.Status == "completed" })
	b.Resume(`2`, pol.ResumeToken)
	if m, _ := b.Response(`2`); m.Error != nil {
		t.Fatalf("the resumed call: %s", m.Raw)
	}
	b.Close()
	if err := srv.Stop(syscall.SIGTERM); err != nil { // every event written
		t.Fatal(err)
	}

	evs, raw := readAudit(t, file)
	byID := map[string]audit.Event{}
	for _, e := range evs {
		byID[e.RequestID] = e
	}
	want := map[string]struct {
		tool    string
		outcome audit.Outcome
		reason  string
	}{
		"1": {"echo", audit.OK, ""},
		"2": {"countdown", audit.OK, ""},
		"3": {"countdown", audit.Cancelled, ""},
		"4": {"echo", audit.Refused, "too_many_requests"},
	}
	if len(evs) != len(want) {
		t.Errorf("%d events, want %d:\n%s", len(evs), len(want), raw)
	}
	for id, w := range want {
		e := byID[id]
		if e.Tool != w.tool || e.Outcome != w.outcome || e.Reason != w.reason || e.Principal != "alice" || e.Transport != "websocket" || e.BytesIn == 0 {
			t.Errorf("call %s: %+v; want %s %s %q by alice over websocket", id, e, w.tool, w.outcome, w.reason)
		}
	}
	sum := sha256.Sum256([]byte(`{"text":"hi"}`))
	if e := byID["1"]; e.ArgumentsSHA256 != hex.EncodeToString(sum[:]) || e.BytesOut == 0 {
		t.Errorf("echo's event: %+v; want its arguments' hash and its response's size", e)
	}
	if e := byID["2"]; e.ArgumentsSHA256 != "" || e.Arguments != nil || e.End.Sub(e.Start) < time.Second || e.BytesOut == 0 {
		t.Errorf("the resumed call's event: %+v; want no arguments (no rule), its whole life, its response's size", e)
	}
	for _, secret := range []string{key, pol.ResumeToken} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit file holds a secret (%.8s...)", secret)
		}
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the audit file's mode: %v; want 0600", st.Mode())
	}
}

// gateway --audit in front of a stdio upstream, with --audit-otlp to the
// OTLP endpoint its traces go to: the call is one line in the file and one
// log record at the receiver, both on the trace of the gateway's span of
// the call; its arguments redacted by the rule.
func TestAuditGateway(t *testing.T) {
	rcv := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	t.Setenv("OTEL_BLRP_SCHEDULE_DELAY", "20")
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	ls := spawnNet(t, "gateway --http 127.0.0.1:0 --audit "+file+" --audit-otlp --audit-arguments echo=redact -- "+os.Args[0], 2)
	gw := ls[0]
	if gw.URL == "" { // the upstream's line came first
		gw = ls[1]
	}
	c := e2etest.NewClient(t, httptransport.Dial(gw.URL, nil))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"g1","method":"tools/call","params":{"name":"echo","arguments":{"text":"through"}}}`)
	if m, _ := c.Response(`"g1"`); e2etest.Text(m) != "through" {
		t.Fatalf("echo through the gateway: %s", m.Raw)
	}
	c.Close()
	if err := gw.Stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	evs, raw := readAudit(t, file)
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1:\n%s", len(evs), raw)
	}
	e := evs[0]
	if e.RequestID != "g1" || e.Tool != "echo" || e.Outcome != audit.OK || e.Transport != "http" || string(e.Arguments) != `{"text":"[redacted]"}` || e.TraceID == "" {
		t.Errorf("the gateway's event: %+v", e)
	}
	recs := rcv.WaitLogs(t, 10*time.Second, "the audit record", func(rs []otlptest.LogRecord) bool { return len(rs) > 0 })
	if len(recs) != 1 || recs[0].EventName != audit.EventName || recs[0].TraceID != e.TraceID || recs[0].SpanID != e.SpanID || recs[0].Attrs["request_id"] != "g1" || recs[0].Attrs["arguments"] != `{"text":"[redacted]"}` {
		t.Errorf("records %+v; want one of call g1 on its trace %s", recs, e.TraceID)
	}
	server := func(ss []otlptest.Span) (otlptest.Span, bool) {
		for _, sp := range ss {
			if sp.Name == "tools/call echo" && sp.Kind == "Server" {
				return sp, true
			}
		}
		return otlptest.Span{}, false
	}
	spans := rcv.Wait(t, 10*time.Second, "the gateway's SERVER span of the call", func(ss []otlptest.Span) bool {
		_, ok := server(ss)
		return ok
	})
	if sp, _ := server(spans); sp.TraceID != e.TraceID || sp.SpanID != e.SpanID {
		t.Errorf("the SERVER span of the call %s/%s, the event's %s/%s", sp.TraceID, sp.SpanID, e.TraceID, e.SpanID)
	}
}

// The flags' mistakes stop the command before it serves.
func TestAuditFlags(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"serve --stdio --audit -", "stdout carries MCP"},
		{"serve --stdio --audit-arguments echo=hash", "audit trail is off"},
		{"serve --stdio --audit /dev/null --audit-arguments echo=md5", "want hash, redact or keep"},
		{"serve --stdio --audit " + filepath.Join(t.TempDir(), "no", "such", "dir"), "--audit"},
	} {
		err := run(strings.Fields(tc.args), strings.NewReader(""), &strings.Builder{}, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %q", tc.args, err, tc.want)
		}
	}
}
