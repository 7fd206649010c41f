package http_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
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
	reconnects := make([]int, calls) // per call: each goroutine writes its own
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			if err := faultCall(client, url, i, &reconnects[i]); err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	faultproxy.CheckReconnects(t, p, reconnects)
}

// faultCall makes one countdown call and drives it to its result through any
// number of cuts, each attempt on a new session.
func faultCall(client *http.Client, url string, n int, reconnects *int) error {
	call := &faultproxy.Call{N: n, Steps: 20}
	for attempt := 0; !call.Done(); attempt++ {
		if attempt > 100 {
			return fmt.Errorf("no result after %d attempts (progress %v)", attempt, call.Progress())
		}
		if attempt > 0 {
			*reconnects++
		}
		sid, err := faultInit(client, url)
		if err != nil {
			continue
		}
		body := call.Request(attempt)
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(httptransport.HeaderSessionID, sid)
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
			if _, err := call.Take([]byte(e.data)); err != nil {
				return err
			}
		}
	}
	return call.Check()
}

// faultInit opens a session with the ack extension; any failure is a cut.
func faultInit(client *http.Client, url string) (string, error) {
	post := func(sid, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set(httptransport.HeaderSessionID, sid)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, err
	}
	resp, err := post("", faultproxy.InitializeAck)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("initialize: %v", err)
	}
	sid := resp.Header.Get(httptransport.HeaderSessionID)
	if resp, err := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("initialized: %v", err)
	}
	return sid, nil
}
