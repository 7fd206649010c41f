package oauth

import (
	"strings"
	"testing"
)

// The resource of a server URL and the metadata that may speak for it.
func TestResourceRules(t *testing.T) {
	for _, tc := range []struct {
		server, resource, from string
		want                   bool
	}{
		{"https://h/mcp", "https://h/mcp", "", true},
		{"https://h/mcp", "https://h/mcp/", "", true},
		{"https://H:443/mcp", "https://h/mcp", "", true},
		{"wss://h/mcp", "https://h/mcp", "", true},
		{"ws://h:8080/mcp", "http://h:8080/mcp", "", true},
		{"ws://h/ws", "http://h/mcp", "", false},
		{"wss://h/mcp", "http://h/mcp", "", false},
		{"https://h/a/mcp", "https://h/a", "", false},
		{"https://h/mcp?x=1", "https://h/mcp", "", false},
		{"https://h/mcp", "https://h/mcp#f", "", false},
		{"https://h/mcp", "https://u@h/mcp", "", false},
		{"https://h/mcp", "https://h", "https://h/.well-known/oauth-protected-resource", true},
		{"https://h/mcp", "https://h/", "https://h/.well-known/oauth-protected-resource", true},
		{"https://h/mcp", "https://h", "https://h/.well-known/oauth-protected-resource/mcp", false},
		{"https://h/mcp", "https://h", "https://h/evil/meta", false},
		{"https://h/mcp", "https://h", "https://other/.well-known/oauth-protected-resource", false},
		{"https://h/mcp", "https://h/x", "https://h/.well-known/oauth-protected-resource", false},
	} {
		su, err := resourceOf(tc.server)
		if err != nil {
			t.Fatal(err)
		}
		if got := sameResource(tc.resource, su) || (tc.from != "" && originWide(tc.resource, tc.from, su)); got != tc.want {
			t.Errorf("server %s, resource %s from %q: %v; want %v", tc.server, tc.resource, tc.from, got, tc.want)
		}
	}
}

func TestCheckEndpoint(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://sso.example.com/authorize?x=1": true, "http://127.0.0.1:8080/token": true, "http://localhost/t": true, "http://[::1]:9/t": true,
		"http://sso.example.com/token": false, "file:///etc/passwd": false, "javascript:alert(1)": false, "search-ms:query=x": false,
		"https://sso.example.com/a#f": false, "https://a@sso.example.com/": false, "https://sso.example.com/\x1b[2J": false,
		"https://sso.example.com/\u00e9": false, "https:///x": false, "//sso.example.com/x": false, "": false,
	} {
		if err := checkEndpoint("u", u); (err == nil) != ok {
			t.Errorf("checkEndpoint(%q): %v; want ok %v", u, err, ok)
		}
	}
	if got := printable("a\x1b[2Jb\u202ec\td\u009b"); strings.ContainsAny(got, "\x1b\u202e\t\u009b") {
		t.Errorf("printable: %q", got)
	}
}
