package http_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcp-resume/mcp-resume/testkit/redirect"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// A server that answers a POST with 307 or 308 to another origin (its
// address, another port) does not get the ClientConn's credentials sent
// there: neither ClientOptions.Header nor what the Client's round tripper
// adds (an API key, an OAuth token) reaches that origin, nothing does, and
// Write's error names the Location.
func TestClientRedirectToAnotherOrigin(t *testing.T) {
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			p := redirect.New(t, code)
			c := httptransport.Dial(p.URL("/mcp"), &httptransport.ClientOptions{
				Client: &http.Client{Transport: transport.BearerTransport("token-secret", nil)},
				Header: http.Header{"X-Api-Key": {"header-secret"}},
			})
			t.Cleanup(func() { _ = c.Close() })
			err := c.Write(t.Context(), []byte(initialize))
			var re *transport.RedirectError
			if !errors.As(err, &re) || re.Location != p.To.URL+"/mcp" {
				t.Errorf("Write: %v, want a *transport.RedirectError naming %s/mcp", err, p.To.URL)
			}
			p.NothingReached(t, "secret")
		})
	}
}

// A redirect within the server's origin (/mcp to /mcp/, as a router that
// wants the trailing slash answers) is followed, the POST's body and
// credentials with it.
func TestClientRedirectWithinOrigin(t *testing.T) {
	got := make(chan string, 1)
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.RedirectHandler("/mcp/", http.StatusTemporaryRedirect))
	mux.HandleFunc("/mcp/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("X-Api-Key") + " " + string(b)
		w.WriteHeader(http.StatusAccepted)
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	c := httptransport.Dial(hs.URL+"/mcp", &httptransport.ClientOptions{Header: http.Header{"X-Api-Key": {"k"}}})
	t.Cleanup(func() { _ = c.Close() })
	const note = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	if err := c.Write(t.Context(), []byte(note)); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != "k "+note {
		t.Fatalf("/mcp/ received %q, want the key and the message", g)
	}
}
