package transport_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/testkit/redirect"
	"github.com/mcp-resume/mcp-resume/transport"
)

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"http://127.0.0.1:9001/mcp", "http://127.0.0.1:9001/other?x=1", true},
		{"http://example.com/mcp", "http://EXAMPLE.com:80/mcp/", true},
		{"https://example.com/mcp", "https://example.com:443/x", true},
		{"ws://example.com/ws", "http://example.com/ws", true},
		{"wss://example.com:8443/ws", "https://example.com:8443/", true},
		{"http://127.0.0.1:9001/mcp", "http://127.0.0.1:9002/mcp", false},
		{"http://127.0.0.1:9001/mcp", "http://localhost:9001/mcp", false},
		{"http://example.com/mcp", "https://example.com/mcp", false},
		{"http://example.com/mcp", "http://sub.example.com/mcp", false},
		{"ws://example.com/ws", "wss://example.com/ws", false},
		{"file:///etc/passwd", "file:///etc/passwd", false},
	} {
		a, _ := url.Parse(c.a)
		b, _ := url.Parse(c.b)
		if got := transport.SameOrigin(a, b); got != c.same {
			t.Errorf("SameOrigin(%s, %s) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}

// CheckRedirect follows a 307 or 308 within the origin, the body kept; it
// refuses one to another origin without sending anything there, one that
// would send a POST again as a GET, and an eleventh. A client's own policy
// still applies after it.
func TestCheckRedirect(t *testing.T) {
	p := redirect.New(t, http.StatusTemporaryRedirect)
	mux := http.NewServeMux()
	mux.Handle("/307", http.RedirectHandler("/echo", http.StatusTemporaryRedirect))
	mux.Handle("/302", http.RedirectHandler("/echo", http.StatusFound))
	mux.Handle("/away", http.RedirectHandler(p.To.URL+"/x", http.StatusPermanentRedirect))
	mux.Handle("/loop", http.RedirectHandler("/loop", http.StatusTemporaryRedirect))
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, r.Body)
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	c := transport.SameOriginClient(nil)
	post := func(path string) (string, error) {
		resp, err := c.Post(hs.URL+path, "application/json", strings.NewReader("body"))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := post("/307"); err != nil || got != "body" {
		t.Errorf("a 307 within the origin: %q, %v; want the body echoed", got, err)
	}
	var re *transport.RedirectError
	if _, err := post("/away"); !errors.As(err, &re) || re.Location != p.To.URL+"/x" || re.Status != "308 Permanent Redirect" ||
		!strings.Contains(err.Error(), "another origin (credentials go to "+hs.URL+" only)") {
		t.Errorf("a 308 to another origin: %v", err)
	}
	p.NothingReached(t, "")
	if _, err := post("/302"); !errors.As(err, &re) || !strings.Contains(err.Error(), "again as a GET") {
		t.Errorf("a 302 of a POST: %v, want it refused", err)
	}
	if _, err := post("/loop"); err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Errorf("a redirect loop: %v", err)
	}

	own := errors.New("the caller's own policy")
	c = transport.SameOriginClient(&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return own }})
	if _, err := post("/307"); !errors.Is(err, own) {
		t.Errorf("with the client's own CheckRedirect: %v, want its error", err)
	}
}
