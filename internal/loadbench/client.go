package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// result is one round of one target.
type result struct {
	EchoP50, EchoP99 time.Duration
	CallsPerSec      float64
	ProgressPerSec   float64
	// CPUPerCall and CPUPerProgress are the server's CPU time per echo call
	// and per progress notification: less moved by other load on the machine
	// than the wall-clock figures.
	CPUPerCall, CPUPerProgress time.Duration
	RSS                        int64
	Lossless                   bool
	Problem                    string `json:",omitempty"`
}

func (r result) String() string {
	s := fmt.Sprintf("echo p50 %v p99 %v, %.0f calls/s, %.0f progress/s, CPU %v/call %v/progress, RSS %d MB",
		r.EchoP50.Round(time.Microsecond), r.EchoP99.Round(time.Microsecond), r.CallsPerSec, r.ProgressPerSec,
		r.CPUPerCall.Round(100*time.Nanosecond), r.CPUPerProgress.Round(100*time.Nanosecond), r.RSS>>20)
	if !r.Lossless {
		s += ", LOST: " + r.Problem
	}
	return s
}

// session is one MCP session of the client, as a user's client holds it.
type session struct {
	t  *target
	id string
	n  int // request ids
}

// round runs one round against t (see the package doc).
func (t *target) round(cfg config) (result, error) {
	sessions := make([]*session, cfg.sessions)
	for i := range sessions {
		s, err := t.open()
		if err != nil {
			return result{}, err
		}
		sessions[i] = s
	}
	defer func() {
		for _, s := range sessions {
			s.close()
		}
	}()
	res := result{Lossless: true}
	lose := func(format string, a ...any) {
		if res.Lossless {
			res.Lossless, res.Problem = false, fmt.Sprintf(format, a...)
		}
	}

	lat := make([]time.Duration, cfg.echo)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	begin, cpu0 := time.Now(), t.cpu()
	for i, s := range sessions {
		wg.Go(func() {
			for j := i; j < cfg.echo; j += len(sessions) {
				text := fmt.Sprintf("echo %d", j)
				t0 := time.Now()
				got, _, err := s.callTool("echo", map[string]any{"text": text}, false)
				lat[j] = time.Since(t0)
				mu.Lock()
				switch {
				case err != nil && first == nil:
					first = err
				case err == nil && got != text:
					lose("echo %d answered %q", j, got)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return res, first
	}
	res.CallsPerSec = float64(cfg.echo) / time.Since(begin).Seconds()
	res.CPUPerCall = (t.cpu() - cpu0) / time.Duration(cfg.echo)
	slices.Sort(lat)
	res.EchoP50, res.EchoP99 = lat[len(lat)/2], lat[len(lat)*99/100]

	t0, cpu0 := time.Now(), t.cpu()
	got, progress, err := sessions[0].callTool("countdown", map[string]any{"seconds": 0, "steps": cfg.progress}, true)
	if err != nil {
		return res, err
	}
	res.ProgressPerSec = float64(len(progress)) / time.Since(t0).Seconds()
	res.CPUPerProgress = (t.cpu() - cpu0) / time.Duration(cfg.progress)
	if want := fmt.Sprintf("countdown done: %d of %d steps", cfg.progress, cfg.progress); got != want {
		lose("countdown answered %q", got)
	}
	if len(progress) != cfg.progress {
		lose("%d progress notifications of %d", len(progress), cfg.progress)
	}
	for i, p := range progress {
		if p != i+1 {
			lose("progress notification %d is %d", i+1, p)
			break
		}
	}
	res.RSS = t.rss()
	return res, nil
}

// open initializes a session, declaring resumable requests.
func (t *target) open() (*session, error) {
	s := &session{t: t}
	resp, err := s.post(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{"resumableRequests": map[string]any{}},
		"clientInfo":      map[string]any{"name": "loadbench", "version": "1"},
	}})
	if err != nil {
		return nil, err
	}
	s.id = resp.Header.Get("Mcp-Session-Id")
	if _, err := readMessages(resp, nil); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	resp, err = s.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	if err != nil {
		return nil, err
	}
	drain(resp)
	return s, nil
}

// close ends the session with a DELETE, as clients do.
func (s *session) close() {
	req, _ := http.NewRequest(http.MethodDelete, s.t.url, nil)
	req.Header.Set("Mcp-Session-Id", s.id)
	if resp, err := s.t.client.Do(req); err == nil {
		drain(resp)
	}
}

func (s *session) post(msg any) (*http.Response, error) {
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, s.t.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	resp, err := s.t.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %s: %s", resp.Status, b)
	}
	return resp, nil
}

// callTool calls tool name and returns the text of its result and the progress
// values of the notifications that came before it, in order.
func (s *session) callTool(name string, args map[string]any, withProgress bool) (string, []int, error) {
	s.n++
	params := map[string]any{"name": name, "arguments": args}
	if withProgress {
		params["_meta"] = map[string]any{"progressToken": "p"}
	}
	resp, err := s.post(map[string]any{"jsonrpc": "2.0", "id": s.n, "method": "tools/call", "params": params})
	if err != nil {
		return "", nil, err
	}
	var progress []int
	final, err := readMessages(resp, func(m *message) {
		if m.Method == "notifications/progress" {
			progress = append(progress, m.Params.Progress)
		}
	})
	if err != nil {
		return "", progress, fmt.Errorf("%s: %w", name, err)
	}
	if final.Error != nil {
		return "", progress, fmt.Errorf("%s: error %s", name, final.Error)
	}
	if len(final.Result.Content) != 1 {
		return "", progress, fmt.Errorf("%s: result %+v", name, final.Result)
	}
	return final.Result.Content[0].Text, progress, nil
}

// message is what the client reads of a server's message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Progress int `json:"progress"`
	} `json:"params"`
	Result struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
}

// readMessages reads resp's body, a JSON message or an SSE stream of them, to
// the response, handing every other message to each, and closes it.
func readMessages(resp *http.Response, each func(*message)) (*message, error) {
	defer drain(resp)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m message
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			return nil, err
		}
		return &m, nil
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("the stream ended before the response: %w", err)
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok || len(bytes.TrimSpace(data)) == 0 {
			continue // event, id, retry, comments, the blank line after an event, a priming event
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("an event's data: %w", err)
		}
		if m.Method == "" && len(m.ID) > 0 {
			return &m, nil
		}
		if each != nil {
			each(&m)
		}
	}
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
