package mcp_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// auditEvents keeps what Options.Audit is told.
type auditEvents struct {
	mu  sync.Mutex
	evs []audit.Event
}

func (a *auditEvents) add(e audit.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, e)
}

func (a *auditEvents) got() []audit.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.evs)
}

// Options.Audit: one event per tools/call as it ends, whichever way (a
// result, a tool's error, cancelled, its connection lost, a resumable
// request resumed from another session and answered there), and one per
// call refused (a duplicate id, too many in flight for the principal);
// nothing for the other requests (initialize, requests/resume, ping). Each
// names the principal, the tool, the id, the span's trace, the sizes; the
// arguments only by the tool's rule; never the resume token.
func TestAudit(t *testing.T) {
	var rec auditEvents
	sp := newSpans()
	tools := demo.Policies()
	for name, r := range map[string]audit.Rule{"echo": audit.RuleHash, "countdown": audit.RuleRedact} {
		p := tools[name]
		p.Arguments = r
		tools[name] = p
	}
	core, err := mcp.New(demo.Server("test"), &mcp.Options{
		Tools: tools, Audit: rec.add,
		TracerProvider: sp.provider(), MaxConcurrentPerPrincipal: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	dial := serveSessions(t, core)
	alice := &mcp.SessionOptions{Transport: mcp.TransportStdio, Principal: "alice"}

	a := e2etest.NewClient(t, dial(t, alice))
	a.Initialize(`{"resumableRequests":{}}`)
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{ "text" : "hi" }}}`)
	a.Response(`1`)
	a.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":1,"fail":true}}}`)
	a.Response(`2`)
	a.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"steps":10},"_meta":{"progressToken":"p"}}}`)
	pol := e2etest.PolicyOf(t, a.Next())
	a.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"dup"}}}`)
	if m, _ := a.Response(`3`); m.Error == nil || m.Error.Reason != "duplicate_id" {
		t.Fatalf("a second call with id 3 in flight: %s; want duplicate_id", m.Raw)
	}
	a.Send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":30,"steps":30},"_meta":{"progressToken":"q"}}}`)
	a.Until(func(m e2etest.Msg) bool {
		return m.Method == "notifications/requests/resumePolicy" && strings.Contains(string(m.Params), `"requestId":4`)
	})
	a.Send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"three"}}}`)
	if m, _ := a.Response(`5`); m.Error == nil || m.Error.Reason != "too_many_requests" {
		t.Fatalf("a third call of alice's with two in flight: %s; want too_many_requests", m.Raw)
	}
	a.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`)
	a.Until(func(m e2etest.Msg) bool { return e2etest.Progress(m) == 2 && strings.Contains(string(m.Params), `"p"`) })
	a.Close() // call 3 runs on, detached
	b := e2etest.NewClient(t, dial(t, alice))
	b.Initialize(`{"resumableRequests":{}}`)
	b.Resume(`3`, pol.ResumeToken)
	b.Response(`3`)

	// A call of a client that cannot resume ends with its connection.
	c := e2etest.NewClient(t, dial(t, &mcp.SessionOptions{Transport: mcp.TransportStdio}))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":30,"steps":30},"_meta":{"progressToken":"r"}}}`)
	c.Until(func(m e2etest.Msg) bool { return e2etest.Progress(m) == 1 })
	c.Close()

	var evs []audit.Event
	poll.Until(t, 10*time.Second, "seven audit events", func() bool {
		evs = rec.got()
		return len(evs) >= 7
	})
	type key struct {
		id      string
		outcome audit.Outcome
	}
	byKey := map[key]audit.Event{}
	for _, e := range evs {
		byKey[key{e.RequestID, e.Outcome}] = e
	}
	want := []struct {
		id      string
		outcome audit.Outcome
		reason  string
		tool    string
	}{
		{"1", audit.OK, "", "echo"},
		{"2", audit.Error, "tool_error", "countdown"},
		{"3", audit.Refused, "duplicate_id", "echo"},
		{"5", audit.Refused, "too_many_requests", "echo"},
		{"4", audit.Cancelled, "", "countdown"},
		{"3", audit.OK, "", "countdown"},
		{"c1", audit.Lost, "connection_lost", "countdown"},
	}
	if len(evs) != len(want) {
		t.Errorf("%d events, want %d: %+v", len(evs), len(want), evs)
	}
	for _, w := range want {
		e, ok := byKey[key{w.id, w.outcome}]
		if !ok {
			t.Errorf("no event of call %s %s; got %+v", w.id, w.outcome, evs)
			continue
		}
		if e.Reason != w.reason || e.Tool != w.tool || e.Transport != "stdio" || e.ProtocolVersion != "2025-06-18" {
			t.Errorf("call %s: %+v; want reason %q, tool %s, transport stdio, version 2025-06-18", w.id, e, w.reason, w.tool)
		}
		if (e.Principal == "alice") == (w.id == "c1") {
			t.Errorf("call %s: principal %q", w.id, e.Principal)
		}
		if e.BytesIn == 0 || e.End.Before(e.Start) || e.TraceID == "" || e.SpanID == "" {
			t.Errorf("call %s: %+v; want its params' size, start before end, its span's ids", w.id, e)
		}
	}
	// The arguments, by the rules: echo's hashed, canonical (the spaces the
	// client sent do not count); countdown's redacted.
	sum := sha256.Sum256([]byte(`{"text":"hi"}`))
	if e := byKey[key{"1", audit.OK}]; e.ArgumentsSHA256 != hex.EncodeToString(sum[:]) || e.Arguments != nil || e.BytesOut == 0 {
		t.Errorf("echo's event: %+v; want its arguments' hash %x alone and its response's size", e, sum)
	}
	if e := byKey[key{"2", audit.Error}]; string(e.Arguments) != `{"fail":"[redacted]","seconds":"[redacted]","steps":"[redacted]"}` || e.ArgumentsSHA256 != "" {
		t.Errorf("countdown's event: arguments %s, hash %q; want its keys, redacted", e.Arguments, e.ArgumentsSHA256)
	}
	// The resumed call is one event of its whole life, on its span's trace.
	resumed := byKey[key{"3", audit.OK}]
	if resumed.End.Sub(resumed.Start) < time.Second || resumed.BytesOut == 0 {
		t.Errorf("the resumed call: %+v; want its whole life (at least 1 s) and its response's size", resumed)
	}
	spans := sp.wait(t, "the resumed call's span", func(ss []sdktrace.ReadOnlySpan) bool {
		return slices.ContainsFunc(ss, func(s sdktrace.ReadOnlySpan) bool { return s.SpanContext().SpanID().String() == resumed.SpanID })
	})
	for _, s := range spans {
		if s.SpanContext().SpanID().String() == resumed.SpanID && s.SpanContext().TraceID().String() != resumed.TraceID {
			t.Errorf("the resumed call's event names trace %s, its span is of %s", resumed.TraceID, s.SpanContext().TraceID())
		}
	}
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), pol.ResumeToken) {
			t.Errorf("an event holds the resume token: %s", b)
		}
	}
}
