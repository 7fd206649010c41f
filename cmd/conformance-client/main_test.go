package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/servers/conformance"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve serves the project's conformance fixtures through the core over
// Streamable HTTP, behind wrap, and returns the endpoint's URL.
func serve(t *testing.T, wrap func(http.Handler) http.Handler) string {
	core, err := mcp.New(conformance.Server("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	srv := httptest.NewServer(wrap(h))
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		core.Close()
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return srv.URL + "/mcp"
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestRun(t *testing.T) {
	url := serve(t, func(h http.Handler) http.Handler { return h })
	for _, tc := range []struct {
		name     string
		args     []string
		vars     map[string]string
		code     int
		mentions string
	}{
		{"no URL", nil, map[string]string{"MCP_CONFORMANCE_SCENARIO": "initialize"}, 2, "usage"},
		{"no scenario", []string{url}, nil, 2, "MCP_CONFORMANCE_SCENARIO"},
		{"unknown version", []string{url}, map[string]string{"MCP_CONFORMANCE_SCENARIO": "initialize", "MCP_CONFORMANCE_PROTOCOL_VERSION": "2099-01-01"}, 2, "2099-01-01"},
		{"unknown scenario", []string{url}, map[string]string{"MCP_CONFORMANCE_SCENARIO": "no-such"}, 1, "unknown scenario"},
		{"an extension not built", []string{url}, map[string]string{"MCP_CONFORMANCE_SCENARIO": "auth/dpop"}, 1, "does not do auth/dpop"},
		{"2025 era", []string{url}, map[string]string{"MCP_CONFORMANCE_SCENARIO": "initialize"}, 0, ""},
		{"2026 era", []string{"--flag", url}, map[string]string{"MCP_CONFORMANCE_SCENARIO": "request-metadata", "MCP_CONFORMANCE_PROTOCOL_VERSION": "2026-07-28"}, 0, ""},
		{"calls from the context", []string{url}, map[string]string{"MCP_CONFORMANCE_SCENARIO": "http-custom-headers", "MCP_CONFORMANCE_PROTOCOL_VERSION": "2026-07-28",
			"MCP_CONFORMANCE_CONTEXT": `{"name":"http-custom-headers","toolCalls":[{"name":"test_custom_headers","arguments":{"region":"eu west","priority":2,"dryRun":null}}]}`}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(t.Context(), tc.args, env(tc.vars), &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.mentions) {
				t.Fatalf("exit %d, stderr %q; want %d, mentioning %q", code, stderr.String(), tc.code, tc.mentions)
			}
		})
	}
}

// An auth/* scenario runs over the transport oauthTransport gives.
func TestOAuthHook(t *testing.T) {
	var authorized atomic.Int64
	url := serve(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "Bearer test-token" {
				authorized.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	oauthTransport = func(_ context.Context, _ *scenario, base http.RoundTripper) (http.RoundTripper, error) {
		return bearer{base}, nil
	}
	t.Cleanup(func() { oauthTransport = authorize })
	var stderr bytes.Buffer
	// Listing the tools is enough: calling each of the fixtures' needs their arguments.
	steps["auth/test"] = listTools
	t.Cleanup(func() { delete(steps, "auth/test") })
	if code := run(t.Context(), []string{url}, env(map[string]string{"MCP_CONFORMANCE_SCENARIO": "auth/test"}), &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if authorized.Load() == 0 {
		t.Fatal("no request went through the OAuth transport")
	}
}

type bearer struct{ base http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer test-token")
	return b.base.RoundTrip(r)
}
