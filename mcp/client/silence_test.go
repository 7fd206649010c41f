package client_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/client"
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
