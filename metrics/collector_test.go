package metrics_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/metrics"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scrape reads h's exposition text into "name{labels}" -> value.
func scrape(t testing.TB, h http.Handler) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	return parse(t, rec.Body)
}

func parse(t testing.TB, r io.Reader) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// recordSink takes every message (a client that reads everything).
type recordSink struct{}

func (*recordSink) Write(context.Context, resume.Message) error { return nil }

// mustNew returns an engine over st, failing t when it cannot be made. The
// caller closes it.
func mustNew(t testing.TB, st resume.Store) *resume.Engine {
	t.Helper()
	e, err := resume.New(t.Context(), st, nil)
	if err != nil {
		t.Fatalf("resume.New: %v", err)
	}
	return e
}

// Each metric follows the engine: requests by state, attached and detached,
// queued bytes, resumes, token failures.
func TestCollectorValues(t *testing.T) {
	e := mustNew(t, memstore.New())
	defer e.Close()
	h := metrics.Handler(e)
	m := scrape(t, h)
	for _, name := range []string{`mcp_resume_requests{state="processing"}`, "mcp_resume_requests_attached", "mcp_resume_requests_detached",
		"mcp_resume_queued_bytes", "mcp_resume_resumes_total", "mcp_resume_expired_total", "mcp_resume_token_failures_total", "mcp_resume_unreadable_records_total"} {
		if v, ok := m[name]; !ok || v != 0 {
			t.Errorf("new engine: %s = %v, %v; want 0", name, v, ok)
		}
	}
	r, tok, err := e.Start([]byte(`1`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Append(resume.KindNotification, "", func(uint64) []byte { return []byte(`{"jsonrpc":"2.0","method":"x"}`) }); err != nil {
		t.Fatal(err)
	}
	_, _ = e.Lookup(tok, []byte(`2`)) // wrong id
	m = scrape(t, h)
	for name, want := range map[string]float64{`mcp_resume_requests{state="processing"}`: 1, "mcp_resume_requests_detached": 1,
		"mcp_resume_requests_attached": 0, "mcp_resume_token_failures_total": 1} {
		if m[name] != want {
			t.Errorf("one detached request: %s = %v; want %v", name, m[name], want)
		}
	}
	if m["mcp_resume_queued_bytes"] <= 0 {
		t.Errorf("queued bytes %v after a queued message", m["mcp_resume_queued_bytes"])
	}
	s := &recordSink{}
	if err := r.Attach(s, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Complete(false, func(uint64) []byte { return []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`) }); err != nil {
		t.Fatal(err)
	}
	m = scrape(t, h)
	for name, want := range map[string]float64{`mcp_resume_requests{state="processing"}`: 0, `mcp_resume_requests{state="completed"}`: 1,
		// its result written, the request lets its client's stream go
		"mcp_resume_requests_attached": 0, "mcp_resume_requests_detached": 1, "mcp_resume_resumes_total": 1} {
		if m[name] != want {
			t.Errorf("resumed and completed: %s = %v; want %v", name, m[name], want)
		}
	}
	if _, ok := m["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
}

// The end-to-end suite over Streamable HTTP moves the counters: its resumes,
// its wrong tokens, its finished requests.
func TestMetricsMoveWithSuite(t *testing.T) {
	core, err := mcp.New(demo.Server("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	srv := httptest.NewServer(h)
	defer func() {
		h.Close()
		srv.Close()
		core.Close()
	}()
	mh := metrics.Handler(core.Engine())
	before := scrape(t, mh)
	e2etest.Run(t, e2etest.Harness{
		Dial: func(t testing.TB) transport.Conn {
			c := httptransport.Dial(srv.URL, &httptransport.ClientOptions{Client: srv.Client()})
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		Reconnect: true,
	})
	after := scrape(t, mh)
	for _, name := range []string{"mcp_resume_resumes_total", "mcp_resume_token_failures_total"} {
		if after[name] <= before[name] {
			t.Errorf("%s: %v before the suite, %v after; want it to grow", name, before[name], after[name])
		}
	}
	if after["mcp_resume_tombstones"] <= 0 {
		t.Errorf("tombstones after the suite: %v; want some (cancelled and expired requests)", after["mcp_resume_tombstones"])
	}
}

// Tasks are counted apart, by state, among the requests.
func TestCollectorTasks(t *testing.T) {
	e := mustNew(t, memstore.New())
	defer e.Close()
	h := metrics.Handler(e)
	if _, _, err := e.Start([]byte(`1`), nil); err != nil {
		t.Fatal(err)
	}
	task, _, err := e.Start([]byte(`2`), &resume.StartOptions{Task: true})
	if err != nil {
		t.Fatal(err)
	}
	m := scrape(t, h)
	if m[`mcp_resume_requests{state="processing"}`] != 2 || m[`mcp_resume_tasks{state="processing"}`] != 1 {
		t.Fatalf("a request and a task: %v", m)
	}
	if _, err := task.Complete(false, func(uint64) []byte { return []byte(`{"jsonrpc":"2.0","id":2,"result":{}}`) }); err != nil {
		t.Fatal(err)
	}
	m = scrape(t, h)
	if m[`mcp_resume_tasks{state="processing"}`] != 0 || m[`mcp_resume_tasks{state="completed"}`] != 1 {
		t.Fatalf("the task completed: %v", m)
	}
}
