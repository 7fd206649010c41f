package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/testkit/freeport"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// serve refuses to start with an issuer its metadata does not name as
// itself: exit status 2 and a message naming the issuer to give (the real
// provider's, named without its trailing slash and with one it does not
// spell; the MCP endpoint of a server the provider protects).
func TestServeRefusesWrongIssuer(t *testing.T) {
	op := oauthtest.Start(t)
	protected := spawnNet(t, "serve --http 127.0.0.1:0 --oauth-issuer "+op.Issuer, 1)[0]
	for _, wrong := range []string{op.Issuer + "/", protected.URL} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a serve that starts is stopped
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = self("serve --http 127.0.0.1:0 --oauth-issuer " + wrong).Env
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "give --oauth-issuer "+op.Issuer+" ") {
			t.Errorf("serve --oauth-issuer %s: %v, want exit status 2 naming --oauth-issuer %s; its output:\n%s", wrong, err, op.Issuer, out)
		}
	}
}

// serve starts while its issuer cannot be reached, saying so loudly, and
// checks the issuer again in the background: when it answers with metadata
// that names another issuer, the log says what to give instead.
func TestServeRechecksUnreachableIssuer(t *testing.T) {
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + addr
	s := spawnNet(t, "serve --http 127.0.0.1:0 --oauth-issuer "+issuer, 1)[0]
	if w := s.Warnings(); !strings.Contains(w, "cannot be reached") {
		t.Fatalf("no loud word of the issuer that cannot be reached: %s", w)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/oauth-authorization-server" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"` + issuer + `/","jwks_uri":"` + issuer + `/keys"}`))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	poll.Until(t, 30*time.Second, "the issuer's mistake in the log", func() bool {
		return strings.Contains(s.Warnings(), "give --oauth-issuer "+issuer+"/ ")
	})
}
