package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

// browser is the test binary as $BROWSER: a person who logs in as user at
// the authorization URL u (oauthtest.Browse) and whose browser then follows
// the redirect to the client's loopback listener.
func browser(user, u string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	back, err := oauthtest.Browse(ctx, u, user)
	if err == nil {
		var resp *http.Response
		if resp, err = http.Get(back.String()); err == nil {
			resp.Body.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "browser:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// oauthRemote is `serve` requiring tokens of op for its demo tools, its
// tokens accepted for lifetime after they are issued (beyond the provider's
// own expiry: the server's 30 s of skew); the logins of this test's connects
// in a directory of their own, their browser this binary logging in as the
// provider's first user.
func oauthRemote(t *testing.T, op *oauthtest.OP, lifetime time.Duration) startLine {
	t.Setenv(envOAuthDir, t.TempDir())
	t.Setenv("BROWSER", os.Args[0])
	t.Setenv("MCP_RESUME_TEST_BROWSER", op.User())
	t.Setenv(envClientKey, "")
	if lifetime > 0 {
		// Issued expired by so much that the server takes them for lifetime
		// more: the provider's tokens live 5 minutes.
		op.ShiftExpiry(-5*time.Minute - 30*time.Second + lifetime)
	}
	return spawnNet(t, "serve --http 127.0.0.1:0 --oauth-issuer "+op.Issuer+" --oauth-scope mcp:tools --ws-ping 1s --ws-ping-timeout 1s", 1)[0]
}

// wsOf is the ws:// URL of the http:// URL u: serve's WebSocket at its MCP
// endpoint, the same resource as u.
func wsOf(u string) string { return "ws" + strings.TrimPrefix(u, "http") }

// connectClient starts `mcp-resume connect URL` with the provider's public
// client and initializes a client on its stdio.
func connectClient(t *testing.T, url string) *e2etest.Client {
	cmd := self("connect --client-id " + oauthtest.CodeClient + " --log-level info " + url)
	stdin, stdout := stdioPipes(t, cmd)
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := e2etest.NewClient(t, &procConn{Conn: stdio.New(stdout, stdin, nil), cmd: cmd})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("connect's log:\n%s", logs.String())
		}
	})
	c.Initialize(`{}`)
	return c
}

// connect in front of a server that wants OAuth: it logs in in the
// "browser" at start-up (the authorization code flow with PKCE at a real
// OpenID provider, the resource as the token's audience), and the calls go
// through; two connects started at once log in once.
func TestConnectOAuth(t *testing.T) {
	op := oauthtest.Start(t)
	remote := oauthRemote(t, op, 0)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			c := connectClient(t, remote.URL)
			c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"through connect %d"}}}`, i)
			if resp, _ := c.Response(`1`); e2etest.Text(resp) != fmt.Sprintf("through connect %d", i) {
				t.Errorf("echo through connect %d: %s", i, resp.Raw)
			}
		})
	}
	wg.Wait()
	if n := op.Requests("/auth"); n != 1 {
		t.Fatalf("%d authorization requests for two connects; want 1", n)
	}
	// A third, later, takes the stored login, over WebSocket at the same URL
	// (the same resource).
	c := connectClient(t, wsOf(remote.URL))
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"over ws"}}}`)
	if resp, _ := c.Response(`2`); e2etest.Text(resp) != "over ws" {
		t.Fatalf("echo through connect over WebSocket: %s", resp.Raw)
	}
	if n := op.Requests("/auth"); n != 1 {
		t.Fatalf("%d authorization requests; want 1", n)
	}
	// The end-to-end suite through connect, each connection a connect of its
	// own on the stored login.
	for name, url := range map[string]string{"HTTP": remote.URL, "WebSocket": wsOf(remote.URL)} {
		t.Run(name, func(t *testing.T) {
			e2etest.Run(t, e2etest.Harness{
				Dial: func(t testing.TB) transport.Conn {
					return spawn(t, "connect --client-id "+oauthtest.CodeClient+" "+url)
				},
			})
		})
	}
	if n := op.Requests("/auth"); n != 1 {
		t.Fatalf("%d authorization requests after the suite; want 1", n)
	}
}

// A token that expires in the middle of a call: over WebSocket the remote
// closes the connection when it does, connect reconnects with a refreshed
// token and resumes the call; over Streamable HTTP the call's stream runs to
// its end and later requests carry a refreshed token. No new login either
// way.
func TestConnectOAuthTokenExpiresMidCall(t *testing.T) {
	op := oauthtest.Start(t)
	remote := oauthRemote(t, op, 3*time.Second)
	for _, url := range []string{wsOf(remote.URL), remote.URL} {
		c := connectClient(t, url)
		tokens := op.Requests("/oauth/token")
		c.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":6,"steps":3}}}`)
		if resp, _ := c.Response(`3`); e2etest.Text(resp) != "countdown done: 3 of 3 steps" {
			t.Fatalf("%s: countdown across the token's expiry: %s", url, resp.Raw)
		}
		c.Send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
		if resp, _ := c.Response(`4`); e2etest.Text(resp) != "after" {
			t.Fatalf("%s: echo after the expiry: %s", url, resp.Raw)
		}
		if op.Requests("/oauth/token") == tokens {
			t.Errorf("%s: no token requested across the expiry; want a refresh", url)
		}
	}
	if n := op.Requests("/auth"); n != 1 {
		t.Fatalf("%d authorization requests; want 1 (refreshes, not logins)", n)
	}
}
