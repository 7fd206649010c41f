package ws_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/mcp-resume/mcp-resume/testkit/redirect"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// A handshake answered with 307 or 308 to another origin (the server's
// address, another port) is not sent there: neither DialOptions.Header nor
// what Wrap's round tripper adds (an OAuth token) reaches that origin, and
// Dial's error names the Location.
func TestDialRedirectToAnotherOrigin(t *testing.T) {
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			p := redirect.New(t, code)
			c, err := ws.Dial(t.Context(), p.WS("/ws"), &ws.DialOptions{
				Header: http.Header{"X-Api-Key": {"header-secret"}},
				Wrap:   func(rt http.RoundTripper) http.RoundTripper { return transport.BearerTransport("token-secret", rt) },
			})
			if err == nil {
				_ = c.Close()
			}
			var re *transport.RedirectError
			if !errors.As(err, &re) || re.Location != p.To.URL+"/ws" {
				t.Errorf("Dial: %v, want a *transport.RedirectError naming %s/ws", err, p.To.URL)
			}
			p.NothingReached(t, "secret")
		})
	}
}
