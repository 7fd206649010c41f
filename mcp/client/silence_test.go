package client_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// A connection gone silent in the middle of a call (a laptop's sleep: no FIN,
// no RST, nothing) is taken for dead and the call resumed within 15 s of the
// silence, with every option at its default on both ends: well before a
// server's deferred answer (45 s behind connect) or a client's timeout. Over
// Streamable HTTP the client asks for a keepalive on its requests' streams
// (httptransport.ClientKeepAlive), over WebSocket it pings a quiet
// connection. Every progress value arrives once, and the result.
func TestSilenceNoticedWithin15s(t *testing.T) {
	for _, tc := range []struct {
		name string
		dial func(*memNet) client.Dialer
	}{
		{"http", func(n *memNet) client.Dialer { return n.httpDial }},
		{"ws", func(n *memNet) client.Dialer { return n.wsDial }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { silenceNoticed(t, tc.dial) })
		})
	}
}

func silenceNoticed(t *testing.T, dial func(*memNet) client.Dialer) {
	n := newMemNet(t, nil)
	var lost atomic.Int64 // when the connection was taken for dead (unix ns)
	c := connect(t, dial(n), &client.Options{
		MinBackoff:       time.Millisecond,
		OnConnectionLost: func(error) { lost.Store(time.Now().UnixNano()) },
	})
	const steps = 30
	var progress []int
	var stalled, resumed time.Time
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": steps, "steps": steps}, &client.CallOptions{
		Progress: func(p client.Progress) {
			progress = append(progress, int(p.Progress))
			if p.Progress == 2 && stalled.IsZero() {
				stalled = time.Now()
				if n.stall() == 0 {
					t.Error("nothing to stall")
				}
			}
		},
		ResumeAccepted: func() { resumed = time.Now() },
	})
	if err != nil {
		t.Fatalf("call: %v (progress %v)", err, progress)
	}
	if text(t, res) != "countdown done: 30 of 30 steps" {
		t.Fatalf("result %q", text(t, res))
	}
	if len(progress) != steps {
		t.Fatalf("progress %v, want 1..%d once each", progress, steps)
	}
	for i, v := range progress {
		if v != i+1 {
			t.Fatalf("progress %v, want 1..%d once each", progress, steps)
		}
	}
	switch noticed := time.Unix(0, lost.Load()).Sub(stalled); {
	case lost.Load() == 0 || resumed.IsZero():
		t.Fatalf("the silence was not noticed (lost at %d, resumed %v)", lost.Load(), resumed)
	case noticed > 15*time.Second || resumed.Sub(stalled) > 15*time.Second:
		t.Fatalf("the silence was noticed %v after it began and the call resumed after %v, want within 15 s", noticed, resumed.Sub(stalled))
	default:
		t.Logf("noticed after %v, resumed after %v", noticed, resumed.Sub(stalled))
	}
}

// A connection gone silent two seconds into a call that the server defers,
// while it is silent (10 s) or after the client resumed it (20 s): the client
// resumes the call on a new connection within 15 s of the silence, gets what
// was queued meanwhile, and the result, following a deferred answer when one
// reaches it. No progress is lost, before the deferral or after it: the
// caller sees 1..N, each once, whether the client declared the ack extension
// or not.
func TestDeferredAfterSilence(t *testing.T) {
	for _, within := range []time.Duration{10 * time.Second, 20 * time.Second} {
		for _, acks := range []string{"acks", "noacks"} {
			t.Run(within.String()+"/"+acks, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { deferredAfterSilence(t, within, acks == "acks") })
			})
		}
	}
}

func deferredAfterSilence(t *testing.T, within time.Duration, acks bool) {
	n := newMemNet(t, &mcp.Options{AnswerWithin: within, Tools: demo.Policies()})
	opts := fastOpts()
	opts.NoAckExtension = !acks
	c := connect(t, n.httpDial, opts)
	const steps = 30
	var progress []int
	stalled, deferred := false, 0
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": steps, "steps": steps}, &client.CallOptions{
		Progress: func(p client.Progress) {
			progress = append(progress, int(p.Progress))
			if p.Progress == 2 && !stalled {
				stalled = true
				n.stall()
			}
		},
		OnDeferred: func(client.Deferred) { deferred++ },
	})
	if err != nil {
		t.Fatalf("call: %v (progress %v)", err, progress)
	}
	if got := text(t, res); got != "countdown done: 30 of 30 steps" || c.Reconnects() == 0 {
		t.Fatalf("result %q after %d reconnects, want the countdown's own, after a reconnect", got, c.Reconnects())
	}
	t.Logf("%d deferred answers followed", deferred)
	wantSteps(t, progress, steps)
}

// A request the server answers only at its end, with nothing before (a
// 2025 task's tasks/result, a gateway's prompts/get of a slow upstream: 30 s
// here), is not taken for a silent connection, even when every stream the
// server announced so far has the short keepalive the client asks for: the
// wait for an answer's headers is bounded by httptransport.DefaultSilence
// (50 s), a stream by its own announcement.
func TestLongAnswerIsNoSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNetHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			m, _ := spec.Decode(body)
			if m.Method == "slow" {
				time.Sleep(30 * time.Second)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(spec.EncodeResponse(m.ID, json.RawMessage(`{"slow":true}`)))
				return
			}
			// An event stream at the keepalive the client asked for.
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set(httptransport.HeaderKeepAlive, r.Header.Get(httptransport.HeaderKeepAlive))
			_, _ = fmt.Fprintf(w, "data: %s\n\n", spec.EncodeResponse(m.ID, json.RawMessage(`{}`)))
		}), func() {}, func() {})
		conn, err := n.httpDial(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.Write(t.Context(), []byte(`{"jsonrpc":"2.0","id":1,"method":"quick"}`)); err != nil {
			t.Fatal(err)
		}
		if b, err := conn.Read(t.Context()); err != nil || !strings.Contains(string(b), `"id":1`) {
			t.Fatalf("the quick answer: %s %v", b, err)
		}
		if err := conn.Write(t.Context(), []byte(`{"jsonrpc":"2.0","id":2,"method":"slow"}`)); err != nil {
			t.Fatalf("a request answered after 30 s: %v, want its answer", err)
		}
		if b, err := conn.Read(t.Context()); err != nil || !strings.Contains(string(b), `"slow":true`) {
			t.Fatalf("the slow answer: %s %v", b, err)
		}
	})
}
