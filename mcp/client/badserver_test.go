package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
)

// badServer speaks just enough Streamable HTTP to initialize; what it answers to
// tools/call and requests/resume is the test's.
type badServer struct {
	call, resume func(w http.ResponseWriter, r *http.Request, id json.RawMessage)

	mu      sync.Mutex // guards resumes
	resumes []json.RawMessage
}

func (b *badServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "no", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	switch m.Method {
	case "initialize":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s1")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"bad","version":"1"}}}`, m.ID)
	case "tools/call":
		b.call(w, r, m.ID)
	case "requests/resume":
		b.mu.Lock()
		b.resumes = append(b.resumes, m.Params)
		b.mu.Unlock()
		b.resume(w, r, m.ID)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

// sse writes events on a call's stream.
func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
	}
	w.(http.Flusher).Flush()
}

// hold keeps a stream open until the client goes.
func hold(r *http.Request) { <-r.Context().Done() }

func policy(id json.RawMessage, fields string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/requests/resumePolicy","params":{"requestId":%s%s}}`, id, fields)
}

func progress(id json.RawMessage, n int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":{"io.mcp-resume/seq":%d},"progressToken":%s,"progress":%d}}`, n, id, n)
}

func callBad(t *testing.T, b *badServer) error {
	t.Helper()
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	c := connect(t, httpDialer(t, srv.URL), fastOpts())
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(t.Context(), "x", nil, nil)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(15 * time.Second):
		t.Fatal("the call hangs")
		return nil
	}
}

func TestBadServerInvalidPolicy(t *testing.T) {
	for name, fields := range map[string]string{
		"no token":         `,"maxWait":60`,
		"empty token":      `,"resumeToken":"","maxWait":60`,
		"negative maxWait": `,"resumeToken":"t","maxWait":-1`,
		"token not string": `,"resumeToken":7`,
		"minWait > max":    `,"resumeToken":"t","minWait":9,"maxWait":1`,
	} {
		t.Run(name, func(t *testing.T) {
			err := callBad(t, &badServer{call: func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
				sse(w, policy(id, fields))
				hold(r)
			}})
			var pe *client.PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("err %v, want a PolicyError", err)
			}
			t.Log(err)
		})
	}
}

func TestBadServerResumeError(t *testing.T) {
	b := &badServer{
		call: func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
			sse(w, policy(id, `,"resumeToken":"tok","maxWait":60`), progress(id, 1)) // then the stream ends: a loss
		},
		resume: func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"request expired","data":{"reason":"expired"}}}`, id)
		},
	}
	err := callBad(t, b)
	var re *client.ResumeError
	if !errors.As(err, &re) || re.Reason() != spec.ReasonExpired {
		t.Fatalf("err %v, want a ResumeError (expired)", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.resumes) != 1 {
		t.Fatalf("%d resumes", len(b.resumes))
	}
	p, perr := spec.DecodeResumeParams(b.resumes[0])
	if perr != nil || p.ResumeToken != "tok" || p.Meta == nil || p.Meta.Ack == nil || *p.Meta.Ack != 1 {
		t.Fatalf("resume params %s", b.resumes[0])
	}
}

func TestBadServerGarbage(t *testing.T) {
	err := callBad(t, &badServer{call: func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		sse(w, policy(id, `,"resumeToken":"tok","maxWait":60`), `this is not JSON`)
		hold(r)
	}})
	var pe *client.ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("err %v, want a ProtocolError", err)
	}
}

// A server that takes every resume and drops it at once: the client gives up
// once maxWait has passed, instead of resuming forever.
func TestBadServerDropsResumes(t *testing.T) {
	err := callBad(t, &badServer{
		call: func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
			sse(w, policy(id, `,"resumeToken":"tok","maxWait":1`))
		},
		resume: func(w http.ResponseWriter, r *http.Request, id json.RawMessage) { sse(w) },
	})
	if !errors.Is(err, client.ErrGaveUp) {
		t.Fatalf("err %v, want ErrGaveUp", err)
	}
}

// A protocol error quotes the start of the offending message, but never a resume
// token in it: errors end up in logs.
func TestProtocolErrorQuotesNoToken(t *testing.T) {
	tok := "tok-" + strings.Repeat("s", 40)
	raw := []byte(`{"jsonrpc":"2.0","method":"notifications/requests/resumePolicy","params":{"requestId":1,"resumeToken":"` + tok + `","maxWait":"x"}`)
	msg := (&client.ProtocolError{Problem: "bad", Raw: raw}).Error()
	if strings.Contains(msg, "tok-") || !strings.Contains(msg, "resumePolicy") {
		t.Errorf("error %q: want the message's start without its token", msg)
	}
}

// A server that answers a resume not_found no longer knows the request (it
// started again without a store): an Idempotent call is sent again as a new
// one, and gets the new run's result; any other fails with the ResumeError.
func TestResumeNotFoundResendsIdempotent(t *testing.T) {
	for _, idempotent := range []bool{true, false} {
		t.Run(fmt.Sprint("idempotent=", idempotent), func(t *testing.T) {
			var mu sync.Mutex
			calls := 0
			b := &badServer{
				call: func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
					mu.Lock()
					calls++
					n := calls
					mu.Unlock()
					if n == 1 {
						sse(w, policy(id, `,"resumeToken":"tok","maxWait":60`)) // then the stream ends: a loss
						return
					}
					sse(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"run %d"}]}}`, id, n))
				},
				resume: func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no such request","data":{"reason":"not_found"}}}`, id)
				},
			}
			srv := httptest.NewServer(b)
			t.Cleanup(srv.Close)
			c := connect(t, httpDialer(t, srv.URL), fastOpts())
			resent := 0
			res, err := c.CallTool(t.Context(), "x", nil, &client.CallOptions{Idempotent: idempotent, Resent: func() { resent++ }})
			var re *client.ResumeError
			switch {
			case idempotent && (err != nil || res == nil || resent != 1):
				t.Fatalf("%v, %v after %d resends: want the second run's result, sent again once", res, err, resent)
			case !idempotent && (!errors.As(err, &re) || re.Reason() != spec.ReasonNotFound):
				t.Fatalf("err %v, want a ResumeError (not_found)", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := map[bool]int{true: 2, false: 1}[idempotent]; calls != want {
				t.Fatalf("%d calls, want %d", calls, want)
			}
		})
	}
}
