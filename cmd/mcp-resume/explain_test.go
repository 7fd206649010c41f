package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/testkit/freeport"
	"github.com/mcp-resume/mcp-resume/web"
)

// A first connection that fails says what to do, and never that a connection
// was lost: nothing was connected.
func TestFirstConnectionErrors(t *testing.T) {
	t.Setenv(envClientKey, "")
	page := httptest.NewServer(web.Handler()) // what serve answers at / (405 to a POST)
	defer page.Close()
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	locked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
	}))
	defer locked.Close()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + addr + "/mcp"
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no /mcp", []string{"--url", page.URL}, []string{"405", "hint: nothing serves MCP at " + page.URL, page.URL + "/mcp"}},
		{"no scheme", []string{"--url", strings.TrimPrefix(page.URL, "http://")}, []string{"want a URL with its scheme", page.URL + "/mcp"}},
		{"ws scheme for --url", []string{"--url", "ws://127.0.0.1:1/ws"}, []string{"the scheme is ws:// here, want http://, https://"}},
		{"http scheme for --ws", []string{"--ws", page.URL + "/ws"}, []string{"--ws", "want ws://, wss://"}},
		{"refused", []string{"--url", closed}, []string{"hint: nothing listens at", "is the server running"}},
		{"untrusted TLS", []string{"--url", tlsSrv.URL + "/mcp"}, []string{"certificate", "hint: the server's TLS certificate is not trusted"}},
		{"https to plain", []string{"--url", "https://" + strings.TrimPrefix(page.URL, "http://") + "/mcp"}, []string{"hint: the server speaks plain HTTP: use http://"}},
		{"http to TLS", []string{"--url", "http://" + strings.TrimPrefix(tlsSrv.URL, "https://") + "/mcp"}, []string{"hint: the server speaks TLS: use https://"}},
		{"401 without a key", []string{"--url", locked.URL + "/mcp"}, []string{"401", "hint: the server wants credentials: set " + envClientKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(append([]string{"tools"}, tc.args...), nil, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "connection lost") {
				t.Errorf("error %q speaks of a lost connection", err)
			}
		})
	}
}
