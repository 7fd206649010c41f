package ws_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/faultproxy"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// Fault test: 200 concurrent long calls through a proxy that cuts every WebSocket
// connection at a random point (mid-handshake, mid-frame, between frames),
// several times per call. Each client resumes on a new connection with the ack
// extension until it has its result: every progress notification and every
// result arrives exactly once, in order.
func TestFaultProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := newServer(t, nil, nil)
	p := faultproxy.New(t, s.srv.Listener.Addr().String(), 300, 1500)
	url := "ws://" + p.Addr() + "/ws"

	const calls = 200
	var reconnects atomic.Int64
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			if err := faultCall(url, i, &reconnects); err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d calls, %d connections cut, %d reconnects", calls, p.Cuts(), reconnects.Load())
	if reconnects.Load() < 2*calls {
		t.Errorf("only %d reconnects for %d calls: the proxy did not cut enough to test anything", reconnects.Load(), calls)
	}
}

// faultMsg is what the fault client reads of a message.
type faultMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// faultCall makes one countdown call and drives it to its result through any
// number of cuts.
func faultCall(url string, n int, reconnects *atomic.Int64) error {
	const steps = 10
	var (
		id       string // the call's id; a new one until the policy arrives
		token    string
		ack      uint64
		progress []int
		results  int
	)
	for attempt := 0; results == 0; attempt++ {
		if attempt > 100 {
			return fmt.Errorf("no result after %d attempts (progress %v)", attempt, progress)
		}
		if attempt > 0 {
			reconnects.Add(1)
		}
		err := func() error {
			// Every read of an attempt is bounded: a cut always ends it, this only
			// guards the test against hanging.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := ws.Dial(ctx, url, &ws.DialOptions{Options: ws.Options{CloseTimeout: 100 * time.Millisecond}})
			if err != nil {
				return nil // cut during the handshake
			}
			defer c.Close()
			send := func(format string, args ...any) bool {
				return c.Write(ctx, fmt.Appendf(nil, format, args...)) == nil
			}
			if !send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"resumableRequests":{"extensions":[%q]}},"clientInfo":{"name":"fault","version":"1"}}}`, spec.ExtensionAck) {
				return nil
			}
			if b, err := c.Read(ctx); err != nil || !strings.Contains(string(b), `"id":"init"`) {
				return nil // cut before the answer
			}
			if !send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`) {
				return nil
			}
			if token == "" {
				id = fmt.Sprintf(`"c%d-%d"`, n, attempt)
				if !send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"steps":%d},"_meta":{"progressToken":%s}}}`, id, steps, id) {
					return nil
				}
			} else if !send(`{"jsonrpc":"2.0","id":%s,"method":"requests/resume","params":{"resumeToken":%q,"_meta":{%q:%d}}}`, id, token, spec.MetaAck, ack) {
				return nil
			}
			for {
				b, err := c.Read(ctx)
				if err != nil {
					return nil // cut
				}
				var m faultMsg
				if err := json.Unmarshal(b, &m); err != nil {
					return fmt.Errorf("bad message %q", b)
				}
				switch {
				case m.Method == spec.MethodResumePolicy:
					var p struct {
						ResumeToken string `json:"resumeToken"`
					}
					_ = json.Unmarshal(m.Params, &p)
					token = p.ResumeToken
					continue
				case m.Error != nil:
					return fmt.Errorf("error: %s", b)
				}
				obj := m.Params
				if m.Result != nil {
					obj = m.Result
				}
				seq := spec.ReadSeq(obj)
				if seq <= ack {
					return fmt.Errorf("seq %d delivered again after ack %d: %s", seq, ack, b)
				}
				ack = seq
				if m.Result != nil {
					if string(m.ID) != id {
						return fmt.Errorf("result for id %s, want %s", m.ID, id)
					}
					results++
					if !strings.Contains(string(m.Result), fmt.Sprintf("countdown done: %d of %d steps", steps, steps)) {
						return fmt.Errorf("result %s", m.Result)
					}
					return nil
				}
				var p struct {
					Progress int `json:"progress"`
				}
				_ = json.Unmarshal(m.Params, &p)
				progress = append(progress, p.Progress)
			}
		}()
		if err != nil {
			return err
		}
	}
	for i, v := range progress {
		if v != i+1 {
			return fmt.Errorf("progress %v, want 1..%d each once in order", progress, steps)
		}
	}
	if len(progress) != steps || results != 1 {
		return fmt.Errorf("progress %v, %d results", progress, results)
	}
	return nil
}
