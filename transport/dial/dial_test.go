package dial_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/testkit/redirect"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/dial"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// envChild makes the test binary the stdio server of TestDialStdio; envPassed
// is a variable the test passes on to it by name (Options.Env), envSecret one
// it does not.
const (
	envChild  = "DIAL_TEST_CHILD"
	envPassed = "DIAL_TEST_PASSED"
	envSecret = "DIAL_TEST_SECRET"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(serveChild())
	}
	goleak.VerifyTestMain(m)
}

// newCore is an MCP server with one tool, "where", which tells where it runs:
// its working directory and the variables envPassed and envSecret.
func newCore() (*mcp.Server, error) {
	srv := server.NewMCPServer("dial-test", "1", server.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewTool("where"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		dir, _ := os.Getwd()
		b, _ := json.Marshal(where{Dir: dir, Passed: os.Getenv(envPassed), Secret: os.Getenv(envSecret)})
		return mcpgo.NewToolResultText(string(b)), nil
	})
	return mcp.New(srv, nil)
}

type where struct{ Dir, Passed, Secret string }

// serveChild serves newCore on stdin and stdout until stdin closes.
func serveChild() int {
	core, err := newCore()
	if err != nil {
		return 1
	}
	defer core.Close()
	_ = core.Serve(context.Background(), stdio.New(os.Stdin, os.Stdout, nil))
	return 0
}

// callWhere connects to the server through d and calls "where".
func callWhere(t *testing.T, d func(context.Context) (transport.Conn, error)) where {
	t.Helper()
	c, err := client.Connect(t.Context(), d, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer c.Close()
	res, err := c.CallTool(t.Context(), "where", nil, nil)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	var w where
	if len(res.Content) != 1 {
		t.Fatalf("result %+v", res)
	}
	text, _ := res.Content[0].(mcpgo.TextContent)
	if err := json.Unmarshal([]byte(text.Text), &w); err != nil {
		t.Fatalf("result %q: %v", text.Text, err)
	}
	return w
}

// netServer serves newCore over Streamable HTTP at /mcp and WebSocket at /ws,
// and records the credentials of every request it gets.
type netServer struct {
	srv *httptest.Server

	mu   sync.Mutex // guards seen
	seen []string   // "path Authorization X-Wrapped" of each request
}

func newNetServer(t *testing.T) *netServer {
	core, err := newCore()
	if err != nil {
		t.Fatal(err)
	}
	h, wh := httptransport.NewHandler(core, nil), ws.NewHandler(core, nil)
	s := &netServer{}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/ws", wh)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.URL.Path+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Wrapped"))
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		wh.Close()
		h.Close()
		s.srv.Close()
		core.Close()
	})
	return s
}

// requests returns what seen holds.
func (s *netServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// credentials are Options that send an API key in Header and a mark that
// Wrap's round tripper adds.
func credentials() *dial.Options {
	return &dial.Options{
		Header: http.Header{"Authorization": {"Bearer key"}},
		Wrap: func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				r.Header.Set("X-Wrapped", "yes")
				return rt.RoundTrip(r)
			})
		},
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Each scheme is its transport, in any case: the client connects through the
// Dialer and calls a tool, and every request (each POST of Streamable HTTP,
// the WebSocket handshake) carries Header and what Wrap adds.
func TestDialNetwork(t *testing.T) {
	s := newNetServer(t)
	host := strings.TrimPrefix(s.srv.URL, "http://")
	for _, tc := range []struct {
		url  string
		kind dial.Kind
		path string
	}{
		{"http://" + host + "/mcp", dial.HTTP, "/mcp"},
		{"HTTP://" + host + "/mcp", dial.HTTP, "/mcp"},
		{"ws://" + host + "/ws", dial.WebSocket, "/ws"},
		{"Ws://" + host + "/ws", dial.WebSocket, "/ws"},
	} {
		t.Run(tc.url[:strings.Index(tc.url, ":")], func(t *testing.T) {
			ep, err := dial.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if ep.Kind() != tc.kind || ep.URL() != tc.url || ep.String() != tc.url || ep.Scheme() != strings.ToLower(tc.url[:strings.Index(tc.url, ":")]) {
				t.Errorf("Parse(%q) = %v %q %q", tc.url, ep.Kind(), ep.URL(), ep.Scheme())
			}
			before := len(s.requests())
			callWhere(t, ep.Dialer(credentials()))
			got := s.requests()[before:]
			if len(got) == 0 {
				t.Fatal("no request reached the server")
			}
			for _, r := range got {
				if r != tc.path+" Bearer key yes" {
					t.Errorf("a request reached the server as %q, want %q", r, tc.path+" Bearer key yes")
				}
			}
		})
	}
}

// Options.Keep keeps the Streamable HTTP session across the Dialer's
// connections: a client that connects twice holds one session.
func TestDialHTTPKeepsSession(t *testing.T) {
	s := newNetServer(t)
	ep, err := dial.Parse(s.srv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	keep := &httptransport.KeptSession{}
	d := ep.Dialer(&dial.Options{Keep: keep, FailOnStreamLoss: true})
	callWhere(t, d)
	first := keep.ID()
	callWhere(t, d)
	if first == "" || keep.ID() != first {
		t.Errorf("sessions %q then %q, want one kept", first, keep.ID())
	}
}

// A command is a stdio child in Dir, whose environment is what Env names and
// stdio.BaseEnv, never the rest of this process's.
func TestDialStdio(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envPassed, "passed")
	t.Setenv(envSecret, "secret")
	dir := t.TempDir()
	ep, err := dial.Command(exe, "-test.run=^$")
	if err != nil {
		t.Fatal(err)
	}
	if ep.Kind() != dial.Stdio || ep.URL() != "" || ep.String() != exe+" -test.run=^$" {
		t.Errorf("Command: %v %q %q", ep.Kind(), ep.URL(), ep.String())
	}
	w := callWhere(t, ep.Dialer(&dial.Options{Env: []string{envChild + "=1", envPassed}, Dir: dir}))
	want, _ := filepath.EvalSymlinks(dir)
	if got, _ := filepath.EvalSymlinks(w.Dir); got != want {
		t.Errorf("the child ran in %q, want %q", w.Dir, dir)
	}
	if w.Passed != "passed" || w.Secret != "" {
		t.Errorf("the child's %s=%q, %s=%q; want the first passed on, not the second", envPassed, w.Passed, envSecret, w.Secret)
	}
}

// A variable Env names badly, a program that is not there, and the zero
// Endpoint are errors of Dial, and nothing is started.
func TestDialErrors(t *testing.T) {
	ep, err := dial.Command("/nonexistent/mcp-server")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ep.Dial(t.Context(), nil); err == nil {
		_ = c.Close()
		t.Error("a program that is not there: no error")
	}
	if c, err := ep.Dial(t.Context(), &dial.Options{Env: []string{"NOT A NAME"}}); err == nil {
		_ = c.Close()
		t.Error("a bad variable name: no error")
	}
	if c, err := (dial.Endpoint{}).Dial(t.Context(), nil); err == nil {
		_ = c.Close()
		t.Error("the zero Endpoint: no error")
	}
	if _, err := dial.Command(); err == nil {
		t.Error("Command(): no error")
	}
	if _, err := dial.Command(""); err == nil {
		t.Error(`Command(""): no error`)
	}
}

// What is not an absolute URL with a host is ErrNotURL; a scheme of no MCP
// transport a *SchemeError naming it.
func TestParseRefuses(t *testing.T) {
	for _, raw := range []string{"", "localhost:8080", "127.0.0.1:8080/mcp", "//host/mcp", "/mcp", "http://", "http:///mcp",
		"mailto:a@b", "file:///etc/passwd", "ws://[::1", "http://a b/mcp", "http://%zz/"} {
		if ep, err := dial.Parse(raw); !errors.Is(err, dial.ErrNotURL) {
			t.Errorf("Parse(%q) = %v, %v; want ErrNotURL", raw, ep.Kind(), err)
		}
	}
	for raw, scheme := range map[string]string{"ftp://host/mcp": "ftp", "UNIX://host/x": "unix", "javascript://host/%0aalert(1)": "javascript"} {
		var se *dial.SchemeError
		if _, err := dial.Parse(raw); !errors.As(err, &se) || se.Scheme != scheme || se.URL != raw {
			t.Errorf("Parse(%q): %v, want a *SchemeError of %s", raw, err, scheme)
		}
	}
}

// A redirect to another origin is not followed, on either network
// transport, and nothing of the credentials reaches it.
func TestDialRedirectToAnotherOrigin(t *testing.T) {
	p := redirect.New(t, http.StatusTemporaryRedirect)
	opts := &dial.Options{
		Header: http.Header{"X-Api-Key": {"header-secret"}},
		Wrap:   func(rt http.RoundTripper) http.RoundTripper { return transport.BearerTransport("token-secret", rt) },
	}
	for _, raw := range []string{p.URL("/mcp"), p.WS("/ws")} {
		ep, err := dial.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ep.Dial(t.Context(), opts)
		if err == nil {
			err = c.Write(t.Context(), []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			_ = c.Close()
		}
		if re := (*transport.RedirectError)(nil); !errors.As(err, &re) {
			t.Errorf("%s: %v, want a *transport.RedirectError", raw, err)
		}
	}
	// HTTPClient (a login's probe) follows the same rule.
	resp, err := opts.HTTPClient().Post(p.URL("/mcp"), "application/json", strings.NewReader(`{}`))
	if err == nil {
		_ = resp.Body.Close()
	}
	if re := (*transport.RedirectError)(nil); !errors.As(err, &re) {
		t.Errorf("HTTPClient: %v, want a *transport.RedirectError", err)
	}
	p.NothingReached(t, "secret")
}
