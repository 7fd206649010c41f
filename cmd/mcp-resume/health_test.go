package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /healthz is 200 throughout; /readyz turns 503 when shutdown begins.
func TestProbes(t *testing.T) {
	var p probes
	mux := http.NewServeMux()
	p.register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	check := func(path string, status int, body string) {
		t.Helper()
		if code, got := get(t, srv.URL+path); code != status || got != body {
			t.Errorf("GET %s: %d %q; want %d %q", path, code, got, status, body)
		}
	}
	check("/healthz", 200, "ok\n")
	check("/readyz", 200, "ready\n")
	p.shutdown()
	check("/healthz", 200, "ok\n")
	check("/readyz", 503, "shutting down\n")
}

// The --http listener serves the probes, without an API key and whatever the
// Host (an orchestrator probes the pod's address).
func TestServeProbes(t *testing.T) {
	t.Setenv(envServerKeys, "alice:k-alice")
	ls := spawnNet(t, "serve --http 127.0.0.1:0", 1)
	base := strings.TrimSuffix(ls[0].URL, "/mcp")
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Host = "10.1.2.3:8080"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != want {
			t.Errorf("GET %s: %s %q; want 200 %q", path, resp.Status, b, want)
		}
	}
	// The MCP endpoint still wants its key.
	if code, _ := get(t, ls[0].URL); code != http.StatusUnauthorized {
		t.Errorf("GET %s without a key: %d; want 401", ls[0].URL, code)
	}
}

// /metrics on the --http listener wants an API key when keys are configured, and
// its counters move as calls are made. (With --data-dir: without a store option
// there is no store to time.)
func TestServeMetrics(t *testing.T) {
	t.Setenv(envServerKeys, "alice:k-alice")
	ls := spawnNet(t, "serve --http 127.0.0.1:0 --data-dir "+t.TempDir(), 1)
	metricsURL := strings.TrimSuffix(ls[0].URL, "/mcp") + "/metrics"
	if code, _ := get(t, metricsURL); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without a key: %d; want 401", code)
	}
	scrape := func() string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, metricsURL, nil)
		req.Header.Set("Authorization", "Bearer k-alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %s %s", resp.Status, b)
		}
		return string(b)
	}
	if m := scrape(); !strings.Contains(m, "\nmcp_resume_token_failures_total 0\n") {
		t.Fatalf("before any call:\n%s", m)
	}
	t.Setenv(envClientKey, "k-alice")
	if err := run([]string{"status", "--url", ls[0].URL, "1", "wrong-token"}, nil, io.Discard, io.Discard); err == nil {
		t.Fatal("status with a wrong token succeeded")
	}
	if m := scrape(); !strings.Contains(m, "\nmcp_resume_token_failures_total 1\n") {
		t.Errorf("after a wrong token: token failures not 1:\n%s", m)
	}
	if err := run([]string{"call", "--url", ls[0].URL, "echo", "text=hi"}, nil, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if m := scrape(); !strings.Contains(m, `mcp_resume_store_seconds_count{op="put"}`) || strings.Contains(m, `mcp_resume_store_seconds_count{op="put"} 0`+"\n") {
		t.Errorf("after a call: no store put timed:\n%s", m)
	}
}
