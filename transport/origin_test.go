package transport_test

import (
	"net/http/httptest"
	"testing"

	"github.com/mcp-resume/mcp-resume/transport"
)

func TestAllowedRequest(t *testing.T) {
	for _, tc := range []struct {
		name, host, origin string
		hosts, origins     []string
		want               bool
	}{
		{"loopback, no Origin", "127.0.0.1:8080", "", transport.LoopbackHosts, nil, true},
		{"IPv6 loopback", "[::1]:8080", "", transport.LoopbackHosts, nil, true},
		{"localhost any case", "LocalHost", "", transport.LoopbackHosts, nil, true},
		{"foreign Host", "evil.example.com", "", transport.LoopbackHosts, nil, false},
		{"loopback Origin by default", "localhost:8080", "http://localhost:3000", transport.LoopbackHosts, nil, true},
		{"foreign Origin by default", "localhost:8080", "http://evil.example.com", transport.LoopbackHosts, nil, false},
		{"odd Origin scheme", "localhost:8080", "file://localhost", transport.LoopbackHosts, nil, false},
		{"Origin on the list", "localhost", "https://app.example", transport.LoopbackHosts, []string{"https://app.example"}, true},
		{"loopback Origin not on the list", "localhost", "http://localhost", transport.LoopbackHosts, []string{"https://app.example"}, false},
		{"any Origin", "localhost", "https://x.example", transport.LoopbackHosts, []string{"*"}, true},
		{"any Host", "mcp.internal:443", "", []string{"*"}, nil, true},
		{"named Host", "mcp.internal:443", "", []string{"mcp.internal"}, nil, true},
	} {
		r := httptest.NewRequest("GET", "/mcp", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if got := transport.AllowedRequest(r, tc.hosts, tc.origins); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
