package http_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

func eventKey(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// A plain client's call stream is dropped mid-call; GET with Last-Event-ID gets the
// rest of that stream only, ending with the response, and nothing it had before.
func TestLastEventIDReconnect(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.raw(t)
	c.initialize(`{}`)

	// Another call on the same session, whose messages must not show up below.
	other := c.do(context.Background(), http.MethodPost, countdown("6", 0.4, 4))
	otherEvents := events(other.Body)

	ctx, drop := context.WithCancel(context.Background())
	resp := c.do(ctx, http.MethodPost, countdown("5", 0.5, 5))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("tools/call answered as %q", ct)
	}
	ch := events(resp.Body)
	prime := next(t, ch)
	if prime.id != eventKey("5")+".0" || !prime.retry || prime.data != "" {
		t.Fatalf("priming event %+v, want id %s.0, a retry field and empty data", prime, eventKey("5"))
	}
	var last event
	for last = next(t, ch); progressOf(last) != 2; last = next(t, ch) {
	}
	if strings.Contains(last.data, "io.mcp-resume") {
		t.Errorf("a plain client got our _meta: %s", last.data)
	}
	drop()

	get := c.do(context.Background(), http.MethodGet, "", httptransport.HeaderLastEventID+": "+last.id)
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET with Last-Event-ID: %s", get.Status)
	}
	want := 3
	for e := range events(get.Body) {
		if e.data == "" { // the priming event of the reconnected stream
			if e.id != last.id {
				t.Errorf("reconnect priming id %q, want %q", e.id, last.id)
			}
			continue
		}
		m := e.msg()
		if p := progressOf(e); p >= 0 {
			if p != want {
				t.Errorf("progress %d after reconnect, want %d", p, want)
			}
			want++
			continue
		}
		if string(mustJSON(m["id"])) != "5" || m["result"] == nil {
			t.Fatalf("unexpected event on the reconnected stream: %s", e.data)
		}
		if !strings.HasPrefix(e.id, eventKey("5")+".") {
			t.Errorf("response event id %q does not name request 5", e.id)
		}
		want = -1 // the response: the stream must end here
	}
	if want != -1 {
		t.Fatalf("the reconnected stream ended without the response (next progress %d)", want)
	}
	for e := range otherEvents {
		if m := e.msg(); m["id"] != nil && string(mustJSON(m["id"])) != "6" {
			t.Errorf("call 6's stream carried a message of another request: %s", e.data)
		}
	}
}

// A stream dropped after its priming event, its later events lost in the
// dying connection: GET with the priming event's id (a Last-Event-ID that
// acknowledges nothing but the stream) gets them again from the replay window,
// then the rest, once each.
func TestLastEventIDFromPriming(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.raw(t)
	c.initialize(`{}`)
	ctx, drop := context.WithCancel(context.Background())
	resp := c.do(ctx, http.MethodPost, countdown("5", 0.5, 5))
	ch := events(resp.Body)
	prime := next(t, ch)
	for e := next(t, ch); progressOf(e) != 2; e = next(t, ch) {
	}
	drop() // progress 1 and 2 were written: delivered, as far as the server can tell

	get := c.do(context.Background(), http.MethodGet, "", httptransport.HeaderLastEventID+": "+prime.id)
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET with Last-Event-ID: %s", get.Status)
	}
	var got []int
	for e := range events(get.Body) {
		if p := progressOf(e); p >= 0 {
			got = append(got, p)
		}
	}
	if fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("progress after the reconnect %v, want [1 2 3 4 5]", got)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Bad input over HTTP: each gets a precise status and a JSON-RPC error with a
// reason, and a call in flight on the session is undisturbed.
func TestBadInputHTTP(t *testing.T) {
	s := newServer(t, nil, &httptransport.Options{MaxMessageBytes: 4096})
	c := s.raw(t)
	c.initialize(`{"resumableRequests":{}}`)
	inflight := c.do(context.Background(), http.MethodPost, countdown(`"long"`, 0.3, 3))
	long := events(inflight.Body)
	// Once its policy is out, the call is a request of the engine, which the
	// Last-Event-ID cases below name (it runs as a plain call before: QuickCall).
	for e := next(t, long); e.msg()["method"] != spec.MethodResumePolicy; e = next(t, long) {
	}

	sid := httptransport.HeaderSessionID + ": " + c.session
	unknown := httptransport.HeaderLastEventID + ": " + eventKey("404") + ".1"
	ahead := httptransport.HeaderLastEventID + ": " + eventKey(`"long"`) + ".99" // the call in flight has given out 4 at most
	const (
		parse   = spec.CodeParseError
		invalid = spec.CodeInvalidRequest
		params  = spec.CodeInvalidParams
	)
	cases := []struct {
		name   string
		method string
		body   string
		hdr    []string
		status int
		code   int
		id     string // the error's id, raw JSON
		reason spec.Reason
	}{
		{"malformed JSON", "POST", `{"jsonrpc":"2.0","id":1,`, nil, 400, parse, "null", spec.ReasonParseError},
		{"batch", "POST", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, nil, 400, invalid, "null", spec.ReasonInvalidRequest},
		{"wrong jsonrpc keeps the id", "POST", `{"jsonrpc":"1.0","id":17,"method":"ping"}`, nil, 400, invalid, "17", spec.ReasonInvalidRequest},
		{"wrong content type", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Content-Type: text/plain"}, 415, invalid, "null", spec.ReasonUnsupportedMediaType},
		{"accepts only JSON", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Accept: application/json"}, 406, invalid, "null", spec.ReasonNotAcceptable},
		{"missing session", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{httptransport.HeaderSessionID + ": "}, 400, invalid, "1", spec.ReasonSessionRequired},
		{"unknown session", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{httptransport.HeaderSessionID + ": nope"}, 404, invalid, "1", spec.ReasonUnknownSession},
		{"unsupported protocol version", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{httptransport.HeaderProtocolVersion + ": 1999-01-01"}, 400, spec.CodeUnsupportedVersion, "1", spec.ReasonUnsupportedVersion},
		// The 2026-07-28 era: the body's envelope, its headers and the session disagree.
		{"2026 request in a 2025 session", "POST", modernPing(`"m1"`, spec.Version2026), []string{httptransport.HeaderProtocolVersion + ": 2025-11-25", "Mcp-Method: ping"}, 400, spec.CodeHeaderMismatch, `"m1"`, spec.ReasonHeaderMismatch},
		{"2025 request with 2026 headers", "POST", `{"jsonrpc":"2.0","id":"m2","method":"tools/list"}`, []string{httptransport.HeaderProtocolVersion + ": " + spec.Version2026, "Mcp-Method: tools/list"}, 400, params, `"m2"`, spec.ReasonEraMismatch},
		{"2026 request without MCP-Protocol-Version", "POST", modernPing(`"m3"`, spec.Version2026), []string{"Mcp-Method: tools/list"}, 400, spec.CodeHeaderMismatch, `"m3"`, spec.ReasonHeaderMismatch},
		{"Mcp-Method disagrees with the body", "POST", modernPing(`"m4"`, spec.Version2026), []string{httptransport.HeaderProtocolVersion + ": " + spec.Version2026, "Mcp-Method: prompts/list"}, 400, spec.CodeHeaderMismatch, `"m4"`, spec.ReasonHeaderMismatch},
		{"unknown version in both", "POST", modernPing(`"m5"`, "2099-01-01"), []string{httptransport.HeaderProtocolVersion + ": 2099-01-01", "Mcp-Method: tools/list"}, 400, spec.CodeUnsupportedVersion, `"m5"`, spec.ReasonUnsupportedVersion},
		{"GET in the 2026 era", "GET", "", []string{httptransport.HeaderProtocolVersion + ": " + spec.Version2026}, 405, invalid, "null", ""},
		{"oversize body", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("x", 5000) + `"}}`, nil, 413, invalid, "null", spec.ReasonMessageTooLarge},
		{"forbidden origin", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Origin: http://evil.example.com"}, 403, invalid, "null", spec.ReasonForbidden},
		{"forbidden host", "POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, []string{"Host: evil.example.com"}, 403, invalid, "null", spec.ReasonForbidden},
		{"resume with a malformed Last-Event-ID", "POST", `{"jsonrpc":"2.0","id":"long","method":"requests/resume","params":{"resumeToken":"abc"}}`, []string{httptransport.HeaderLastEventID + ": not-ours"}, 400, invalid, `"long"`, spec.ReasonInvalidEventID},
		{"bad Last-Event-ID", "GET", "", []string{httptransport.HeaderLastEventID + ": not-ours"}, 400, invalid, "null", spec.ReasonInvalidEventID},
		{"unknown Last-Event-ID", "GET", "", []string{unknown}, 410, params, "null", spec.ReasonNotFound},
		{"Last-Event-ID past the last event", "GET", "", []string{ahead}, 400, invalid, "null", spec.ReasonInvalidEventID},
		{"GET without SSE", "GET", "", []string{"Accept: application/json"}, 406, invalid, "null", spec.ReasonNotAcceptable},
		{"GET without session", "GET", "", []string{httptransport.HeaderSessionID + ": "}, 400, invalid, "null", spec.ReasonSessionRequired},
		{"GET unknown session", "GET", "", []string{httptransport.HeaderSessionID + ": nope"}, 404, invalid, "null", spec.ReasonUnknownSession},
		{"DELETE without session", "DELETE", "", []string{httptransport.HeaderSessionID + ": "}, 400, invalid, "null", spec.ReasonSessionRequired},
		{"PUT", "PUT", "", nil, 405, invalid, "null", ""},
	}
	for _, tc := range cases {
		resp := c.do(context.Background(), tc.method, tc.body, append([]string{sid}, tc.hdr...)...)
		var e struct {
			ID    json.RawMessage `json:"id"`
			Error *spec.Error     `json:"error"`
		}
		err := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tc.status || err != nil || e.Error == nil || e.Error.Reason != tc.reason || e.Error.Code != tc.code || string(e.ID) != tc.id {
			t.Errorf("%s: got %s id %s %+v (%v), want %d, id %s, code %d, reason %q", tc.name, resp.Status, e.ID, e.Error, err, tc.status, tc.id, tc.code, tc.reason)
		}
	}
	// The session and its call carry on.
	if resp, body := c.post(`{"jsonrpc":"2.0","id":"p","method":"ping"}`); resp.StatusCode != 200 || !strings.Contains(body, `"result"`) {
		t.Errorf("ping after bad input: %s %s", resp.Status, body)
	}
	var result string
	for e := range long {
		if m := e.msg(); m["result"] != nil {
			result = e.data
		}
	}
	if !strings.Contains(result, "countdown done: 3 of 3 steps") {
		t.Errorf("the call in flight did not finish: %q", result)
	}
}

// modernPing is a 2026-07-28 tools/list request declaring version.
func modernPing(id, version string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"_meta":{"` + spec.MetaProtocolVersion + `":"` + version +
		`","` + spec.MetaClientCapabilities + `":{}}}}`
}

// A second standalone GET stream on a session is refused; DELETE ends the session
// and its streams, and leaves a resumable request whose token the client holds
// running: another session finds it processing, resumes it, and gets its result.
func TestGetStreamAndDelete(t *testing.T) {
	s := newServer(t, &mcp.Options{QuickCall: -1}, nil)
	c := s.raw(t)
	c.initialize(`{"resumableRequests":{}}`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get := c.do(ctx, http.MethodGet, "")
	if get.StatusCode != 200 || get.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET stream: %s %s", get.Status, get.Header.Get("Content-Type"))
	}
	getEvents := events(get.Body)
	if again := c.do(context.Background(), http.MethodGet, ""); again.StatusCode != http.StatusConflict {
		t.Errorf("second GET stream: %s, want 409", again.Status)
	} else {
		again.Body.Close()
	}

	// A call answered before the DELETE: its client has its result.
	var answered string
	for ev := range events(c.do(context.Background(), http.MethodPost, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`).Body) {
		if params, _ := ev.msg()["params"].(map[string]any); params["resumeToken"] != nil {
			tok, _ := params["resumeToken"].(string)
			answered = tok
		}
	}
	if answered == "" {
		t.Fatal("the echo call got no policy")
	}
	call := c.do(context.Background(), http.MethodPost, countdown("9", 2, 4))
	ch := events(call.Body)
	next(t, ch) // priming
	pol := next(t, ch).msg()
	token, _ := pol["params"].(map[string]any)["resumeToken"].(string)
	if token == "" {
		t.Fatalf("no policy: %v", pol)
	}
	resp := c.do(context.Background(), http.MethodDelete, "")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("DELETE: %s", resp.Status)
	}
	for range ch { // the call's stream ends
	}
	for range getEvents { // and so does the GET stream
	}
	if resp, _ := c.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the deleted session answered %s, want 404", resp.Status)
	}
	d := s.raw(t)
	d.initialize(`{"resumableRequests":{}}`)
	_, body := d.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"requests/getStatus","params":{"requestId":9,"resumeToken":%q}}`, token))
	if !strings.Contains(body, `"status":"processing"`) {
		t.Fatalf("getStatus after DELETE: %s, want processing", body)
	}
	// The answered call's result is not kept for a client that is done: its
	// DELETE acknowledged it.
	_, body = d.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"requests/getStatus","params":{"requestId":8,"resumeToken":%q}}`, answered))
	if !strings.Contains(body, `"reason":"acknowledged"`) {
		t.Errorf("getStatus of the call answered before DELETE: %s, want reason acknowledged", body)
	}
	resumed := events(d.do(context.Background(), http.MethodPost, fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"requests/resume","params":{"resumeToken":%q}}`, token)).Body)
	var result string
	for ev := range resumed {
		if m := ev.msg(); m["result"] != nil && fmt.Sprint(m["id"]) == "9" {
			result = fmt.Sprint(m["result"])
		}
	}
	if !strings.Contains(result, "countdown done") {
		t.Errorf("the request resumed after DELETE: result %q, want its countdown's", result)
	}
}

// A session that expires leaves its resumable requests resumable from a new
// session: requests/resume by POST streams the rest and the response under the
// original id.
func TestSessionExpiryKeepsRequests(t *testing.T) {
	s := newServer(t, nil, &httptransport.Options{SessionIdle: 50 * time.Millisecond})
	c := s.raw(t)
	c.initialize(`{"resumableRequests":{}}`)
	ctx, drop := context.WithCancel(context.Background())
	call := c.do(ctx, http.MethodPost, countdown("3", 0.6, 6))
	ch := events(call.Body)
	next(t, ch)
	token, _ := next(t, ch).msg()["params"].(map[string]any)["resumeToken"].(string)
	for e := next(t, ch); progressOf(e) != 1; e = next(t, ch) {
	}
	drop()
	// Driven by the server's real timers (net/http cannot run in a synctest bubble).
	poll.Until(t, 10*time.Second, "the session to expire", func() bool { return s.h.Sessions() == 0 })
	if resp, _ := c.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the expired session answered %s, want 404", resp.Status)
	}

	d := s.raw(t)
	d.initialize(`{"resumableRequests":{}}`)
	resp := d.do(context.Background(), http.MethodPost, fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"requests/resume","params":{"resumeToken":%q}}`, token))
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("resume answered as %s", resp.Header.Get("Content-Type"))
	}
	var result string
	for e := range events(resp.Body) {
		if m := e.msg(); m["result"] != nil && string(mustJSON(m["id"])) == "3" {
			result = e.data
		}
	}
	if !strings.Contains(result, "countdown done: 6 of 6 steps") {
		t.Fatalf("no result after resuming from a new session: %q", result)
	}
}

// Concurrent calls on one session each get only their own messages, and a
// server-to-client request travels on its call's stream; the answer, POSTed
// separately, reaches the tool.
func TestCallStreamsIsolated(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.raw(t)
	c.initialize(`{"resumableRequests":{},"elicitation":{}}`)
	var wg sync.WaitGroup
	for _, id := range []string{"1", "2", "3"} {
		wg.Go(func() {
			resp := c.do(context.Background(), http.MethodPost, countdown(id, 0.2, 5))
			n := 0
			for e := range events(resp.Body) {
				m := e.msg()
				if m == nil {
					continue
				}
				if p, ok := m["params"].(map[string]any); ok && m["method"] == "notifications/progress" {
					n++
					if tok := string(mustJSON(p["progressToken"])); tok != id {
						t.Errorf("call %s's stream carried progress of %s", id, tok)
					}
				}
			}
			if n != 5 {
				t.Errorf("call %s: %d progress notifications, want 5", id, n)
			}
		})
	}
	wg.Wait()

	resp := c.do(context.Background(), http.MethodPost, `{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"ask","arguments":{"question":"Name?"}}}`)
	ch := events(resp.Body)
	var ask map[string]any
	for ask = next(t, ch).msg(); ask == nil || ask["method"] != "elicitation/create"; ask = next(t, ch).msg() {
	}
	answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"Ada"}}}`, mustJSON(ask["id"]))
	if r, body := c.post(answer); r.StatusCode != http.StatusAccepted {
		t.Fatalf("posting the answer: %s %s", r.Status, body)
	}
	for {
		e := next(t, ch)
		if m := e.msg(); m["result"] != nil {
			if !strings.Contains(e.data, "Ada") {
				t.Errorf("the tool did not get the answer: %s", e.data)
			}
			break
		}
	}
}

// A GET naming an event of a request that has finished answers 410 with what
// ended it, at once, never an open stream with nothing to come: the final
// response's own event id (the client has it all, which frees the request) gets
// acknowledged, the first time and again; any event id of a request whose result
// has gone (purged at the end of its retention) gets expired.
func TestLastEventIDEnded(t *testing.T) {
	s := newServer(t, &mcp.Options{Engine: &resume.Options{DeliveredRetention: 20 * time.Millisecond}}, nil)
	c := s.raw(t)
	c.initialize(`{}`)
	finish := func(id string) (first, last string) {
		t.Helper()
		resp := c.do(context.Background(), http.MethodPost, countdown(id, 0.02, 2))
		for e := range events(resp.Body) {
			if e.id != "" && first == "" {
				first = e.id
			}
			if e.id != "" {
				last = e.id
			}
		}
		return first, last
	}
	get := func(what, lastID string, reason spec.Reason) {
		t.Helper()
		resp := c.do(context.Background(), http.MethodGet, "", httptransport.HeaderLastEventID+": "+lastID)
		var e struct {
			Error *spec.Error `json:"error"`
		}
		err := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusGone || err != nil || e.Error == nil || e.Error.Code != spec.CodeInvalidParams || e.Error.Reason != reason {
			t.Errorf("%s: %s %+v (%v), want 410 with -32602 %s", what, resp.Status, e.Error, err, reason)
		}
	}
	_, final := finish("1")
	get("the final response's event id", final, spec.ReasonAcknowledged)
	get("the same id again", final, spec.ReasonAcknowledged)

	prime, _ := finish("2")
	poll.Until(t, 5*time.Second, "the result's retention to end", func() bool { return s.core.Engine().Live() == 0 })
	get("the priming event id of a purged request", prime, spec.ReasonExpired)
}

// With StreamIdle, the server closes a quiet call stream; the client polls back
// with Last-Event-ID, as often as it takes, and gets every message once and the
// response (SEP-1699 polling). The stream closes StreamIdle after its last event,
// not at the next keepalive (a minute here: the call would end first).
func TestStreamIdlePolling(t *testing.T) {
	s := newServer(t, nil, &httptransport.Options{StreamIdle: 30 * time.Millisecond, KeepAlive: time.Minute})
	c := s.raw(t)
	c.initialize(`{}`)
	resp := c.do(context.Background(), http.MethodPost, countdown("8", 0.6, 3))
	var progress []int
	var result string
	last, polls := "", 0
	for result == "" {
		for e := range events(resp.Body) {
			if e.id != "" {
				last = e.id
			}
			if p := progressOf(e); p >= 0 {
				progress = append(progress, p)
			} else if m := e.msg(); m["result"] != nil {
				result = e.data
			}
		}
		if result != "" {
			break
		}
		if polls++; polls > 100 {
			t.Fatal("no result after 100 polls")
		}
		resp = c.do(context.Background(), http.MethodGet, "", httptransport.HeaderLastEventID+": "+last)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("poll %d: %s", polls, resp.Status)
		}
	}
	if polls < 2 || fmt.Sprint(progress) != "[1 2 3]" || !strings.Contains(result, "3 of 3 steps") {
		t.Errorf("%d polls, progress %v, result %s; want at least 2 polls, [1 2 3] once each, the result", polls, progress, result)
	}
}

// Last-Event-ID on a requests/resume POST acknowledges what the client has, like the
// ack extension: an ack-mode client that kept messages 1 and 2 gets only the rest.
// A Last-Event-ID of another request is refused.
func TestResumeWithLastEventID(t *testing.T) {
	s := newServer(t, nil, nil)
	caps := `{"resumableRequests":{"extensions":["` + spec.ExtensionAck + `"]}}`
	c := s.raw(t)
	c.initialize(caps)
	ctx, drop := context.WithCancel(context.Background())
	call := c.do(ctx, http.MethodPost, countdown("4", 0.4, 4))
	ch := events(call.Body)
	next(t, ch)
	token, _ := next(t, ch).msg()["params"].(map[string]any)["resumeToken"].(string)
	var last event
	for last = next(t, ch); progressOf(last) != 2; last = next(t, ch) {
	}
	drop()

	d := s.raw(t)
	d.initialize(caps)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"requests/resume","params":{"resumeToken":%q}}`, token)
	if resp, got := d.post(body, httptransport.HeaderLastEventID+": "+eventKey("5")+".2"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(got, string(spec.ReasonInvalidEventID)) {
		t.Errorf("resume with another request's Last-Event-ID: %s %s", resp.Status, got)
	}
	resp := d.do(context.Background(), http.MethodPost, body, httptransport.HeaderLastEventID+": "+last.id)
	var progress []int
	var result string
	for e := range events(resp.Body) {
		if p := progressOf(e); p >= 0 {
			progress = append(progress, p)
		} else if m := e.msg(); m["result"] != nil {
			result = e.data
		}
	}
	if fmt.Sprint(progress) != "[3 4]" || !strings.Contains(result, "4 of 4 steps") {
		t.Errorf("after Last-Event-ID %s: progress %v, result %q; want [3 4] and the result", last.id, progress, result)
	}
}

// ClientConn's Get and Delete: a GET with an event id of an unknown request gets
// the server's 410, a GET without one opens the session's stream, and Delete ends
// the session (the next message gets 404 unknown_session).
func TestClientConnGetDelete(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.dial(t)
	cl := e2etest.NewClient(t, c)
	cl.Initialize(`{}`)
	if status, err := c.Get(eventKey("404") + ".1"); status != http.StatusGone || err == nil || !strings.Contains(err.Error(), string(spec.ReasonNotFound)) {
		t.Errorf("Get with an unknown event id: %d, %v; want 410 not_found", status, err)
	}
	if status, err := c.Get(""); status != http.StatusOK || err != nil {
		t.Errorf("Get of the session stream: %d, %v", status, err)
	}
	if err := c.Delete(context.Background()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	r := s.raw(t)
	r.session = c.SessionID()
	if resp, body := r.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, string(spec.ReasonUnknownSession)) {
		t.Errorf("after Delete: %s %s, want 404 unknown_session", resp.Status, body)
	}
}

// A quiet event stream gets keepalive comments every KeepAlive; the response still
// ends it.
func TestKeepAliveComments(t *testing.T) {
	s := newServer(t, nil, &httptransport.Options{KeepAlive: 20 * time.Millisecond})
	c := s.raw(t)
	c.initialize(`{}`)
	// One step of 0.3s: the stream is quiet for 0.3s between the priming event
	// and the progress notification.
	resp := c.do(context.Background(), http.MethodPost, countdown("9", 0.3, 1))
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(body), ": keepalive\n\n")
	if n < 3 || !strings.Contains(string(body), `"result"`) {
		t.Errorf("%d keepalive comments in a stream quiet for 0.3s with KeepAlive 20ms; want several, then the result:\n%s", n, body)
	}
}

// Media types are matched without regard to case or parameters, and Accept takes
// wildcards: each of these POSTs is answered.
func TestMediaTypesAccepted(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.raw(t)
	c.initialize(`{}`)
	sid := httptransport.HeaderSessionID + ": " + c.session
	for i, hdr := range [][]string{
		{"Content-Type: application/json; charset=utf-8"},
		{"Content-Type: Application/JSON"},
		{"Accept: */*"},
		{"Accept: application/*, text/*"},
		{"Accept: application/json;q=0.9, TEXT/EVENT-STREAM;q=0.5"},
		{"Accept: text/html, application/json, text/event-stream"},
	} {
		resp := c.do(context.Background(), http.MethodPost, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i), append([]string{sid}, hdr...)...)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"result"`) {
			t.Errorf("%q: %s %s", hdr, resp.Status, body)
		}
	}
}

// A request the server refuses before it can tie its error to the request (here:
// a body over MaxMessageBytes, answered with id null) fails the client's Write:
// nothing would ever answer it.
func TestClientRefusedRequest(t *testing.T) {
	s := newServer(t, nil, &httptransport.Options{MaxMessageBytes: 256})
	c := s.dial(t)
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"` + strings.Repeat("x", 300) + `"}}`
	err := c.Write(context.Background(), []byte(big))
	if err == nil || !strings.Contains(err.Error(), "413") || !strings.Contains(err.Error(), string(spec.ReasonMessageTooLarge)) {
		t.Fatalf("Write of an oversize request: %v; want the 413 message_too_large error", err)
	}
}

// After Handler.Close (a shutdown), every request gets 503 shutting_down, with a
// session id or without: not 404, which would send a client to initialize again
// on a server that is going away.
func TestClosedHandler(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.raw(t)
	c.initialize(`{}`)
	s.h.Close()
	for _, tc := range []struct {
		name, method, body string
		hdr                []string
	}{
		{"message of a session", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil},
		{"initialize", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, []string{httptransport.HeaderSessionID + ": "}},
		{"GET stream", http.MethodGet, "", nil},
		{"DELETE", http.MethodDelete, "", nil},
	} {
		resp := c.do(context.Background(), tc.method, tc.body, tc.hdr...)
		var e struct {
			Error *spec.Error `json:"error"`
		}
		err := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || err != nil || e.Error == nil || e.Error.Reason != spec.ReasonShuttingDown {
			t.Errorf("%s after Close: %s %+v (%v), want 503 shutting_down", tc.name, resp.Status, e.Error, err)
		}
	}
}

// A 2025-11-25 task outlives the session that created it, DELETE included (SDKs
// end a client that way by default): another session reads it working, and
// gets its result.
func TestTaskOutlivesDelete(t *testing.T) {
	s := newServer(t, &mcp.Options{Tools: demo.Policies()}, nil)
	a := s.raw(t)
	a.initialize(`{}`)
	_, body := a.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"steps":2},"task":{"ttl":60000}}}`)
	var created struct {
		Result struct {
			Task struct{ TaskID string } `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(lastData(body)), &created); err != nil || created.Result.Task.TaskID == "" {
		t.Fatalf("CreateTaskResult: %s", body)
	}
	id := created.Result.Task.TaskID
	if resp := a.do(context.Background(), http.MethodDelete, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", resp.Status)
	} else {
		resp.Body.Close()
	}
	b := s.raw(t)
	b.initialize(`{}`)
	if _, got := b.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":%q}}`, id)); !strings.Contains(got, `"status":"working"`) && !strings.Contains(got, `"status":"completed"`) {
		t.Fatalf("tasks/get after the creating session's DELETE: %s, want working or completed", got)
	}
	if _, got := b.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":%q}}`, id)); !strings.Contains(got, "countdown done") {
		t.Fatalf("tasks/result after the creating session's DELETE: %s, want the countdown's result", got)
	}
}

// A 2025-11-25 task's ttl is the one its client asked for, up to the server's
// maximum (then the CreateTaskResult's _meta says what was asked), the same in
// every tasks/get and tasks/list.
func TestTaskTTL(t *testing.T) {
	s := newServer(t, &mcp.Options{Tools: demo.Policies(), MaxTaskTTL: time.Hour}, nil)
	c := s.raw(t)
	c.initialize(`{}`)
	type task struct {
		TaskID string
		TTL    int64
	}
	create := func(id int, ttl string) (task, string) {
		_, body := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":60,"steps":2}%s}}`, id, ttl))
		var created struct {
			Result struct {
				Task task            `json:"task"`
				Meta json.RawMessage `json:"_meta"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(lastData(body)), &created); err != nil || created.Result.Task.TaskID == "" {
			t.Fatalf("CreateTaskResult: %s", body)
		}
		return created.Result.Task, string(created.Result.Meta)
	}
	asked, meta := create(1, `,"task":{"ttl":120000}`)
	if asked.TTL != 120000 || meta != "" {
		t.Errorf("ttl 120000 asked: %+v, _meta %s", asked, meta)
	}
	capped, meta := create(2, `,"task":{"ttl":86400000}`)
	if capped.TTL != 3600000 || !strings.Contains(meta, `"io.mcp-resume/requestedTtl":86400000`) {
		t.Errorf("a day asked, an hour the maximum: %+v, _meta %s", capped, meta)
	}
	for i, want := range map[string]int64{asked.TaskID: 120000, capped.TaskID: 3600000} {
		for n := range 2 {
			_, got := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":%q}}`, 10+n, i))
			if !strings.Contains(got, fmt.Sprintf(`"ttl":%d`, want)) {
				t.Errorf("tasks/get %d: %s, want ttl %d", n, got, want)
			}
		}
	}
	if _, got := c.post(`{"jsonrpc":"2.0","id":20,"method":"tasks/list"}`); !strings.Contains(got, `"ttl":120000`) || !strings.Contains(got, `"ttl":3600000`) {
		t.Errorf("tasks/list: %s", got)
	}
}

// lastData returns the message of a POST's answer: the body when it is JSON,
// else the last non-empty data line of its event stream.
func lastData(body string) string {
	if strings.HasPrefix(strings.TrimSpace(body), "{") {
		return body
	}
	last := ""
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data: "); ok && strings.TrimSpace(d) != "" {
			last = d
		}
	}
	return last
}

// A 2025-11-25 tools/list marks the tools whose calls may become tasks
// (execution.taskSupport): an absent one means forbidden in that revision.
func TestToolsListTaskSupport(t *testing.T) {
	s := newServer(t, &mcp.Options{Tools: demo.Policies()}, nil)
	c := s.raw(t)
	c.initialize(`{}`)
	_, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var list struct {
		Result struct {
			Tools []struct {
				Name      string
				Execution *struct{ TaskSupport string } `json:"execution"`
			}
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(lastData(body)), &list); err != nil || len(list.Result.Tools) == 0 {
		t.Fatalf("tools/list: %v %s", err, body)
	}
	for _, tool := range list.Result.Tools {
		want := ""
		if _, ok := demo.Policies()[tool.Name]; ok {
			want = "optional"
		}
		got := ""
		if tool.Execution != nil {
			got = tool.Execution.TaskSupport
		}
		if got != want {
			t.Errorf("tool %s: taskSupport %q, want %q", tool.Name, got, want)
		}
	}
}

// Abort closes a 2026-07-28 request's stream, which cancels the request at the
// server (its client declared no SEP-975); it does nothing for a request that is
// done, or unknown.
func TestClientConnAbort(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.dial(t)
	ctx := context.Background()
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":30,"steps":30},%s}}`, e2etest.Envelope(`{}`))
	// Without progress to send, the server answers with a JSON body at the
	// end: Write returns with the answer, or when the POST is aborted.
	written := make(chan error, 1)
	go func() { written <- c.Write(ctx, []byte(call)) }()
	poll.Until(t, 10*time.Second, "the call to run", func() bool { return s.core.Calls() == 1 })
	c.Abort([]byte(`"other"`))
	if s.core.Calls() != 1 {
		t.Fatal("Abort of another id ended the call")
	}
	c.Abort([]byte(`"c"`))
	if err := <-written; err == nil {
		t.Error("Write of the aborted call returned no error")
	}
	poll.Until(t, 10*time.Second, "the call to be cancelled", func() bool { return s.core.Calls() == 0 })
}

// A GET whose Last-Event-ID names a request the session did not deliver is a
// failed token check like a wrong resume token: past the session's burst such
// GETs are answered 429 with a Retry-After, while the call the session
// delivered still reconnects.
func TestLastEventIDRateLimited(t *testing.T) {
	s := newServer(t, &mcp.Options{TokenFailureBurst: 2, TokenFailureRefill: time.Hour}, nil)
	c := s.raw(t)
	c.initialize(`{}`)
	ctx, drop := context.WithCancel(context.Background())
	resp := c.do(ctx, http.MethodPost, countdown("5", 0.5, 5))
	ch := events(resp.Body)
	next(t, ch) // the priming event
	last := next(t, ch)
	drop()

	for i, want := range []int{http.StatusGone, http.StatusGone, http.StatusTooManyRequests} {
		get := c.do(context.Background(), http.MethodGet, "", httptransport.HeaderLastEventID+": "+eventKey(fmt.Sprint(70+i))+".1")
		_ = get.Body.Close()
		if get.StatusCode != want {
			t.Fatalf("GET #%d for a request not delivered here: %s, want %d", i+1, get.Status, want)
		}
		if want == http.StatusTooManyRequests && get.Header.Get("Retry-After") != "3600" {
			t.Errorf("Retry-After %q, want 3600", get.Header.Get("Retry-After"))
		}
	}
	get := c.do(context.Background(), http.MethodGet, "", httptransport.HeaderLastEventID+": "+last.id)
	defer get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET for the session's own call while limited: %s, want 200", get.Status)
	}
}
