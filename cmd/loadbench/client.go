package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
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
	rs, err := roundOf(cfg, []*target{t})
	if len(rs) == 0 {
		return result{}, err
	}
	return rs[0], err
}

// roundOf runs one round of each of ts, whose echo calls run at once: each of
// cfg.sessions workers holds a session on every target and calls them in turn,
// call by call, the order rotating, so that the targets meet the machine at
// the same moments (-paired); then each target's countdown, in the order of ts.
// With one target it is that target's round.
func roundOf(cfg config, ts []*target) ([]result, error) {
	sides := make([][]*session, len(ts))
	defer func() {
		for _, ss := range sides {
			for _, s := range ss {
				s.close()
			}
		}
	}()
	for k, t := range ts {
		for range cfg.sessions {
			s, err := t.open()
			if err != nil {
				return nil, err
			}
			sides[k] = append(sides[k], s)
		}
	}
	res := make([]result, len(ts))
	for k := range res {
		res[k].Lossless = true
	}
	if err := echo(cfg, ts, sides, res); err != nil {
		return res, err
	}
	for k, t := range ts {
		if err := t.countdown(cfg, sides[k][0], &res[k]); err != nil {
			return res, err
		}
		res[k].RSS = t.rss()
	}
	return res, nil
}

// lose marks r lossy, keeping the first problem.
func (r *result) lose(format string, a ...any) {
	if r.Lossless {
		r.Lossless, r.Problem = false, fmt.Sprintf(format, a...)
	}
}

// echo makes cfg.echo echo calls on each of ts (see roundOf) and sets their
// echo figures in res. Paired, a target's calls/s is its share of calls over
// the phase, which all targets took together.
func echo(cfg config, ts []*target, sides [][]*session, res []result) error {
	lat := make([][]time.Duration, len(ts))
	cpu0 := make([]time.Duration, len(ts))
	for k, t := range ts {
		lat[k] = make([]time.Duration, cfg.echo)
		cpu0[k] = t.cpu()
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	begin := time.Now()
	for i := range cfg.sessions {
		wg.Go(func() {
			for j := i; j < cfg.echo; j += cfg.sessions {
				text := fmt.Sprintf("echo %d", j)
				for n := range ts {
					k := (j + n) % len(ts)
					t0 := time.Now()
					got, _, err := sides[k][i].callTool("echo", map[string]any{"text": text}, false)
					lat[k][j] = time.Since(t0)
					mu.Lock()
					switch {
					case err != nil && first == nil:
						first = fmt.Errorf("%s: %w", ts[k].name, err)
					case err == nil && got != text:
						res[k].lose("echo %d answered %q", j, got)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	took := time.Since(begin)
	for k, t := range ts {
		res[k].CallsPerSec = float64(cfg.echo) / took.Seconds()
		res[k].CPUPerCall = (t.cpu() - cpu0[k]) / time.Duration(cfg.echo)
		slices.Sort(lat[k])
		res[k].EchoP50, res[k].EchoP99 = lat[k][len(lat[k])/2], lat[k][len(lat[k])*99/100]
	}
	return nil
}

// countdown makes the round's countdown call on s, a session of t, and sets
// res's progress figures.
func (t *target) countdown(cfg config, s *session, res *result) error {
	t0, cpu0 := time.Now(), t.cpu()
	got, progress, err := s.callTool("countdown", map[string]any{"seconds": 0, "steps": cfg.progress}, true)
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	res.ProgressPerSec = float64(len(progress)) / time.Since(t0).Seconds()
	res.CPUPerProgress = (t.cpu() - cpu0) / time.Duration(cfg.progress)
	if want := fmt.Sprintf("countdown done: %d of %d steps", cfg.progress, cfg.progress); got != want {
		res.lose("countdown answered %q", got)
	}
	if len(progress) != cfg.progress {
		res.lose("%d progress notifications of %d", len(progress), cfg.progress)
	}
	for i, p := range progress {
		if p != i+1 {
			res.lose("progress notification %d is %d", i+1, p)
			break
		}
	}
	return nil
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
	switch {
	case withProgress:
		params["_meta"] = map[string]any{"progressToken": "p"}
	case s.t.keyed:
		params["_meta"] = map[string]any{"io.mcp-resume/key": rand.Text() + rand.Text()[:17]} // 43 characters, as our client's
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

// readers are the event streams' line readers, reused from call to call: a
// client that allocated one a call would make the servers that answer with an
// event stream (the floor, ours) pay its garbage collection beside those that
// answer with a JSON body (mcp-go), on the cores they share.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

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
	br := readers.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	defer func() { br.Reset(nil); readers.Put(br) }()
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
