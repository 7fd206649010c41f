package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/testkit/redirect"
)

// Every credential the commands attach stays with the origin it is for: a
// remote (connect, call) or an upstream (gateway) that answers 307 or 308 to
// another origin (its address, another port, which records what reaches it
// and answers 401 with a challenge of its own) gets nothing sent there, over
// Streamable HTTP and WebSocket alike: not --upstream-token-env's or connect
// --token-env's token, not --upstream-header's or connect --header's values,
// not call's API key, not the gateway's OAuth client's secret, and no login
// or discovery is started by that origin's 401. The command ends at
// once with an error that names the Location.
func TestCredentialsStayWithTheirOrigin(t *testing.T) {
	t.Setenv("MR_TEST_REDIRECT_TOKEN", "token-secret")
	t.Setenv(envOAuthDir, t.TempDir())
	t.Setenv(envUpstreamSecret, "client-secret")
	t.Setenv("BROWSER", "false") // a login started by mistake opens nothing
	for _, c := range []struct {
		name string
		args func(url string) []string
		key  bool // MCP_RESUME_API_KEY set
	}{
		{"gateway --upstream-token-env", func(u string) []string {
			return []string{"gateway", "--http", "127.0.0.1:0", "--upstream", u, "--upstream-token-env", "MR_TEST_REDIRECT_TOKEN"}
		}, false},
		{"gateway --upstream-header", func(u string) []string {
			return []string{"gateway", "--http", "127.0.0.1:0", "--upstream", u, "--upstream-header", "X-Api-Key: ${MR_TEST_REDIRECT_TOKEN}"}
		}, false},
		{"connect --header", func(u string) []string {
			return []string{"connect", "--header", "Authorization: Bearer ${MR_TEST_REDIRECT_TOKEN}", u}
		}, false},
		{"gateway --upstream-oauth-client-id", func(u string) []string {
			// (Its issuer is never reached: the upstream's redirect comes first.)
			return []string{"gateway", "--http", "127.0.0.1:0", "--upstream", u, "--upstream-oauth-client-id", "gw", "--upstream-oauth-issuer", "http://127.0.0.1:9"}
		}, false},
		{"connect --token-env", func(u string) []string { return []string{"connect", "--token-env", "MR_TEST_REDIRECT_TOKEN", u} }, false},
		{"connect with no credentials (a login's)", func(u string) []string { return []string{"connect", u} }, false},
		{"call with MCP_RESUME_API_KEY", func(u string) []string {
			if strings.HasPrefix(u, "ws") {
				return []string{"call", "--ws", u, "echo", "text=x"}
			}
			return []string{"call", "--url", u, "echo", "text=x"}
		}, true},
	} {
		for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			for _, ws := range []bool{false, true} {
				name := c.name + "/" + http.StatusText(code)
				if ws {
					name += "/WebSocket"
				}
				t.Run(name, func(t *testing.T) {
					key := ""
					if c.key {
						key = "key-secret"
					}
					t.Setenv(envClientKey, key)
					p := redirect.New(t, code)
					u, path := p.URL("/mcp"), "/mcp"
					if ws {
						u, path = p.WS("/ws"), "/ws"
					}
					var out strings.Builder
					err := run(c.args(u), strings.NewReader(""), &out, &out)
					if err == nil || !strings.Contains(err.Error(), "not followed") || !strings.Contains(err.Error(), p.To.URL+path) {
						t.Errorf("%v, want an error naming the redirect to %s%s\n%s", err, p.To.URL, path, out.String())
					}
					p.NothingReached(t, "secret")
				})
			}
		}
	}
}
