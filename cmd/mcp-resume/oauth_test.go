package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// postAuth posts a ping to url with authorization ("" for none) and returns
// the status, the challenge and the body.
func postAuth(t *testing.T, url, authorization string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// serve --oauth-issuer against a real OpenID provider: the protected resource
// metadata at both well-known paths; 401 with the challenge naming it and the
// scope; a token for another resource, or without the server's scope,
// refused; a good one works over HTTP and WebSocket and through call; a tool
// with a scope of its own steps up (403); the principal is the token's
// subject; an API key works beside; refusals are counted by reason in
// /metrics; no token reaches a log line.
func TestServeOAuth(t *testing.T) {
	op := oauthtest.Start(t)
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("ops:k-ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ls := spawnNet(t, "serve --http 127.0.0.1:0 --log-level debug --oauth-issuer "+op.Issuer+" --oauth-scope mcp:use --oauth-tool-scope countdown=tools:countdown --api-keys "+keys, 1)
	res := ls[0].URL
	base := strings.TrimSuffix(res, "/mcp")

	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			Scopes               []string `json:"scopes_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || doc.Resource != res || !slices.Equal(doc.AuthorizationServers, []string{op.Issuer}) || !slices.Equal(doc.Scopes, []string{"mcp:use", "tools:countdown"}) {
			t.Fatalf("GET %s: %s %+v %v", p, resp.Status, doc, err)
		}
	}

	status, ch, body := postAuth(t, res, "")
	if status != http.StatusUnauthorized || !strings.Contains(ch, `resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`) || !strings.Contains(ch, `scope="mcp:use"`) || !strings.Contains(body, "missing_token") {
		t.Fatalf("no token: %d %q %s", status, ch, body)
	}
	other := op.Token(t, "alice", "http://elsewhere.example/mcp", "mcp:use")
	if status, _, body := postAuth(t, res, "Bearer "+other); status != http.StatusUnauthorized || !strings.Contains(body, "wrong_audience") {
		t.Fatalf("a token for another resource: %d %s", status, body)
	}
	if status, ch, body := postAuth(t, res, "Bearer "+op.Token(t, "alice", res)); status != http.StatusForbidden || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(body, "insufficient_scope") {
		t.Fatalf("a token without the server's scope: %d %q %s", status, ch, body)
	}

	alice := op.Token(t, "alice", res, "mcp:use")
	hc := e2etest.NewClient(t, httptransport.Dial(res, &httptransport.ClientOptions{Client: &http.Client{Transport: transport.BearerTransport(alice, nil)}}))
	hc.Initialize(`{}`)
	hc.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"over http"}}}`)
	if resp, _ := hc.Response(`2`); e2etest.Text(resp) != "over http" {
		t.Fatalf("echo over HTTP: %s", resp.Raw)
	}
	hc.Close()
	wc, err := ws.Dial(t.Context(), ls[0].WS, &ws.DialOptions{Header: http.Header{"Authorization": {"Bearer " + alice}}})
	if err != nil {
		t.Fatal(err)
	}
	w := e2etest.NewClient(t, wc)
	w.Initialize(`{}`)
	w.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":1}}}`)
	if resp, _ := w.Response(`3`); resp.Error == nil || resp.Error.Reason != oauth.ReasonScope {
		t.Fatalf("countdown over WebSocket without tools:countdown: %s", resp.Raw)
	}
	w.Close()
	if _, err := ws.Dial(t.Context(), ls[0].WS, &ws.DialOptions{Header: http.Header{"Authorization": {"Bearer " + other}}}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("WebSocket with a token for another resource: %v; want 401", err)
	}

	t.Setenv(envClientKey, alice) // call presents it as a bearer token
	if err := run([]string{"call", "--url", res, "countdown", "seconds=0", "steps=1"}, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "insufficient_scope") {
		t.Fatalf("call countdown without tools:countdown: %v; want insufficient_scope", err)
	}
	writer := op.Token(t, "alice", res, "mcp:use", "tools:countdown")
	t.Setenv(envClientKey, writer)
	for _, flags := range [][]string{{"--url", res}, {"--ws", ls[0].WS}} {
		var out, errw bytes.Buffer
		args := append(append([]string{"call"}, flags...), "countdown", "seconds=0", "steps=1")
		if err := run(args, nil, &out, &errw); err != nil || out.String() != "countdown done: 1 of 1 steps\n" {
			t.Fatalf("%v with tools:countdown: %v %q\n%s", args, err, out.String(), errw.String())
		}
	}
	var errw bytes.Buffer
	if err := run([]string{"call", "--url", res, "-v", "echo", "text=hi"}, nil, io.Discard, &errw); err != nil {
		t.Fatalf("echo as alice: %v\n%s", err, errw.String())
	}
	m := regexp.MustCompile(`request (\S+) is resumable .*; resume token (\S+)`).FindStringSubmatch(errw.String())
	if m == nil {
		t.Fatalf("no id and token in %q", errw.String())
	}
	t.Setenv(envClientKey, op.Token(t, "bob", res, "mcp:use"))
	if err := run([]string{"status", "--url", res, m[1], m[2]}, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("status of alice's request as bob: %v; want not_found", err)
	}
	t.Setenv(envClientKey, "k-ops")
	if err := run([]string{"call", "--url", res, "countdown", "seconds=0", "steps=1"}, nil, io.Discard, io.Discard); err != nil {
		t.Fatalf("countdown with the API key: %v", err)
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer k-ops")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`mcp_resume_auth_refusals_total{reason="missing_token"} 1`, `mcp_resume_auth_refusals_total{reason="wrong_audience"} 2`, `mcp_resume_auth_refusals_total{reason="insufficient_scope"} 3`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics: no %q in\n%s", want, grepLines(string(b), "auth_refusals"))
		}
	}
	logs := ls[0].Logs()
	for _, tok := range []string{alice, writer, other} {
		for _, part := range strings.Split(tok, ".") {
			if strings.Contains(logs, part) {
				t.Fatalf("a part of a token (%.12s...) in the logs:\n%s", part, logs)
			}
		}
	}
}

// grepLines returns the lines of s with sub in them.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The gateway checks its clients' tokens and calls its upstream with its own
// (the client credentials grant at the authorization server the upstream's
// metadata names, for the resource it names): the upstream never sees a
// client's token, over HTTP or WebSocket; the same for an upstream of a
// gateway of several, whose client the file names (oauth).
func TestGatewayUpstreamCredentials(t *testing.T) {
	for _, name := range []string{"http", "ws", "config"} {
		upstreamWS := name == "ws"
		t.Run(name, func(t *testing.T) {
			op := oauthtest.Start(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			upURL := "http://" + ln.Addr().String() + "/mcp"
			rs, err := oauth.New(&oauth.Options{Resource: upURL, Issuers: []string{op.Issuer}})
			if err != nil {
				t.Fatal(err)
			}
			core, err := mcp.New(demo.Server(version), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer core.Close()
			var mu sync.Mutex
			var seen []string // the Authorization of every request the upstream got
			mux := http.NewServeMux()
			h := httptransport.NewHandler(core, &httptransport.Options{Auth: rs})
			wh := ws.NewHandler(core, &ws.AcceptOptions{Auth: rs})
			defer h.Close()
			defer wh.Close()
			mux.Handle("/mcp", orWebSocket(h, wh))
			for _, p := range rs.MetadataPaths() {
				mux.Handle(p, rs.MetadataHandler())
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Header.Get("Authorization"))
				mu.Unlock()
				mux.ServeHTTP(w, r)
			})}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Close()

			upstream := upURL
			if upstreamWS {
				upstream = "ws://" + ln.Addr().String() + "/mcp"
			}
			t.Setenv(envUpstreamSecret, oauthtest.Secret("gateway"))
			args, tool := "--upstream "+upstream+" --upstream-oauth-client-id gateway --upstream-oauth-issuer "+op.Issuer, "echo"
			if name == "config" {
				t.Setenv("UP_SECRET", oauthtest.Secret("gateway"))
				args = "--config " + upstreamsFile(t, "", fmt.Sprintf("{name: up, url: %q, oauth: {clientId: gateway, clientSecretEnv: UP_SECRET, issuer: %q}}", upstream, op.Issuer))
				tool = "up__echo"
			}
			ls := spawnNet(t, "gateway --http 127.0.0.1:0 --oauth-issuer "+op.Issuer+" "+args, 1)
			alice := op.Token(t, "alice", ls[0].URL)
			t.Setenv(envClientKey, alice)
			var out bytes.Buffer
			var callErr error
			poll.Until(t, 10*time.Second, "the call through the gateway", func() bool { // the upstream of a gateway of several comes up in the background
				out.Reset()
				callErr = run([]string{"call", "--url", ls[0].URL, tool, "text=through"}, nil, &out, io.Discard)
				return callErr == nil
			})
			if out.String() != "through\n" {
				t.Fatalf("echo through the gateway: %v %q", callErr, out.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 {
				t.Fatal("the upstream got no request")
			}
			own := 0
			for _, a := range seen {
				if strings.Contains(a, alice) {
					t.Fatal("the upstream got the client's token")
				}
				if a == "" {
					continue // the request that met the 401, the metadata's
				}
				tok, ref := rs.Check(t.Context(), a, "127.0.0.1")
				if ref != nil || !strings.HasSuffix(tok.Principal(), "#gateway") {
					t.Fatalf("the upstream got %v (%+v), want the gateway's own token", tok, ref)
				}
				own++
			}
			if own == 0 {
				t.Fatal("no request upstream carried the gateway's token")
			}
		})
	}
}
