package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcp-resume/mcp-resume/internal/faultproxy"
	"github.com/mcp-resume/mcp-resume/spec"
	mcphttp "github.com/mcp-resume/mcp-resume/transport/http"
)

// Fault test: 200 concurrent long calls through a proxy that cuts every connection
// at a random point, several times per call. Each client resumes from a new
// session with the ack extension until it has its result: every progress
// notification and every result arrives exactly once, in order.
func TestFaultProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := newServer(t, nil, nil)
	p := faultproxy.New(t, s.srv.Listener.Addr().String(), 300, 1500)
	url := "http://" + p.Addr() + "/mcp"
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	const calls = 200
	var reconnects atomic.Int64
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			if err := faultCall(client, url, i, &reconnects); err != nil {
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

// faultCall makes one countdown call and drives it to its result through any
// number of cuts.
func faultCall(client *http.Client, url string, n int, reconnects *atomic.Int64) error {
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
		sid, err := faultInit(client, url)
		if err != nil {
			continue
		}
		var body string
		if token == "" {
			id = fmt.Sprintf(`"c%d-%d"`, n, attempt)
			body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"steps":%d},"_meta":{"progressToken":%s}}}`, id, steps, id)
		} else {
			body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"requests/resume","params":{"resumeToken":%q,"_meta":{%q:%d}}}`, id, token, spec.MetaAck, ack)
		}
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcphttp.HeaderSessionID, sid)
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		if resp.Header.Get("Content-Type") != "text/event-stream" {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && len(b) > 0 {
				return fmt.Errorf("%s answered with JSON: %s", body, b)
			}
			continue // cut mid-answer
		}
		for e := range events(resp.Body) {
			if e.data == "" {
				continue
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal([]byte(e.data), &m); err != nil {
				return fmt.Errorf("bad event %q", e.data)
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
				return fmt.Errorf("error: %s", e.data)
			}
			obj := m.Params
			if m.Result != nil {
				obj = m.Result
			}
			seq := spec.ReadSeq(obj)
			if seq <= ack {
				return fmt.Errorf("seq %d delivered again after ack %d: %s", seq, ack, e.data)
			}
			ack = seq
			if m.Result != nil {
				results++
				if !strings.Contains(string(m.Result), fmt.Sprintf("countdown done: %d of %d steps", steps, steps)) {
					return fmt.Errorf("result %s", m.Result)
				}
				continue
			}
			var p struct {
				Progress int `json:"progress"`
			}
			_ = json.Unmarshal(m.Params, &p)
			progress = append(progress, p.Progress)
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

// faultInit opens a session with the ack extension; any failure is a cut.
func faultInit(client *http.Client, url string) (string, error) {
	post := func(sid, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set(mcphttp.HeaderSessionID, sid)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, err
	}
	resp, err := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"resumableRequests":{"extensions":["`+spec.ExtensionAck+`"]}},"clientInfo":{"name":"fault","version":"1"}}}`)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("initialize: %v", err)
	}
	sid := resp.Header.Get(mcphttp.HeaderSessionID)
	if resp, err := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("initialized: %v", err)
	}
	return sid, nil
}
