package main

import (
	"bufio"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/testkit/freeport"
	"github.com/mcp-resume/mcp-resume/testkit/oauthtest"
)

// started starts cmd and returns a channel closed when its stderr has shown
// a line containing mark, and a function that waits for it to exit (within
// limit, else it is killed and the test fails) and returns its stderr.
func started(t *testing.T, cmd *exec.Cmd, mark string, limit time.Duration) (<-chan struct{}, func() (string, error)) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan struct{})
	var mu sync.Mutex
	var all strings.Builder
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		once := sync.OnceFunc(func() { close(seen) })
		for sc.Scan() {
			mu.Lock()
			all.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), mark) {
				once()
			}
		}
	}()
	exited := make(chan error, 1)
	go func() {
		<-read
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return seen, func() (string, error) {
		select {
		case err := <-exited:
			mu.Lock()
			defer mu.Unlock()
			return all.String(), err
		case <-time.After(limit):
			_ = cmd.Process.Kill()
			<-exited
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%v still runs %s after it was expected to end; its stderr:\n%s", cmd.Args, limit, all.String())
			return "", nil
		}
	}
}

// Ctrl-C (SIGINT) or SIGTERM while call waits on the login it started ends it
// at once, saying so, over Streamable HTTP and WebSocket; so does tools.
func TestInterruptedLogin(t *testing.T) {
	op := oauthtest.Start(t)
	remote := oauthRemote(t, op, 0)
	t.Setenv("BROWSER", "true") // a browser that never comes back
	for _, tc := range []struct {
		args string
		sig  os.Signal
	}{
		{"call --client-id " + oauthtest.CodeClient + " --url " + remote.URL + " echo text=x", os.Interrupt},
		{"call --client-id " + oauthtest.CodeClient + " --ws " + wsOf(remote.URL) + " echo text=x", syscall.SIGTERM},
		{"tools --client-id " + oauthtest.CodeClient + " --url " + remote.URL, os.Interrupt},
	} {
		t.Run(tc.args, func(t *testing.T) {
			cmd := self(tc.args)
			waiting, wait := started(t, cmd, "log in at this URL", 10*time.Second)
			<-waiting
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			logs, err := wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !strings.Contains(logs, "interrupted") {
				t.Fatalf("exit %v; want a failure saying interrupted; stderr:\n%s", err, logs)
			}
		})
	}
}

// login of a URL that serves no MCP (the server's root, a page; a path with
// nothing) says so and fails, rather than "wants no login"; of the MCP
// endpoint, it logs in.
func TestLoginNotMCP(t *testing.T) {
	op := oauthtest.Start(t)
	remote := oauthRemote(t, op, 0)
	base := strings.TrimSuffix(remote.URL, "/mcp")
	for _, u := range []string{base, base + "/nothing", "ws" + strings.TrimPrefix(base, "http") + "/nothing"} {
		var out strings.Builder
		err := run([]string{"login", "--client-id", oauthtest.CodeClient, u}, nil, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "MCP endpoint") || strings.Contains(out.String(), "wants no login") {
			t.Errorf("login %s: %v, %q; want an error saying it is no MCP endpoint", u, err, out.String())
		}
	}
	var out strings.Builder
	if err := run([]string{"login", "--client-id", oauthtest.CodeClient, remote.URL}, nil, &out, io.Discard); err != nil || !strings.Contains(out.String(), "logged in") {
		t.Fatalf("login %s: %v %q", remote.URL, err, out.String())
	}
	// Its WebSocket, the scheme in capitals (RFC 3986 §3.1: any case), is
	// the same resource, logged in to.
	out.Reset()
	ws := "WS" + strings.TrimPrefix(remote.URL, "http")
	if err := run([]string{"login", "--client-id", oauthtest.CodeClient, ws}, nil, &out, io.Discard); err != nil || !strings.Contains(out.String(), "logged in") {
		t.Fatalf("login %s: %v %q", ws, err, out.String())
	}
}

// login of a URL where nothing listens says what the network said.
func TestLoginUnreachable(t *testing.T) {
	t.Setenv(envOAuthDir, t.TempDir())
	t.Setenv(envClientKey, "")
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://" + addr + "/mcp", "ws://" + addr + "/ws"} {
		err := run([]string{"login", u}, nil, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "%!") {
			t.Errorf("login %s: %v; want the network's error", u, err)
		}
	}
}

// connect's first login (none stored) runs while the local app waits for
// initialize: it says so and how to log in in a terminal instead, and a
// login that does not end within --login-timeout ends connect with that
// advice, not after minutes.
func TestConnectLoginTimeout(t *testing.T) {
	op := oauthtest.Start(t)
	remote := oauthRemote(t, op, 0)
	t.Setenv("BROWSER", "true")
	cmd := self("connect --client-id " + oauthtest.CodeClient + " --login-timeout 2s " + remote.URL)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	_, wait := started(t, cmd, "log in at this URL", 20*time.Second)
	logs, err := wait()
	if err == nil || !strings.Contains(logs, "wants a login (none is stored") || !strings.Contains(logs, "did not end within --login-timeout 2s") ||
		!strings.Contains(logs, "mcp-resume login "+remote.URL) {
		t.Fatalf("exit %v; want connect to end saying to run mcp-resume login; stderr:\n%s", err, logs)
	}
}

// The gateway's upstream client secret goes to the issuer the operator
// names (--upstream-oauth-issuer, required) and nowhere else: an upstream
// that answers every POST 401 with a bare challenge and no metadata never
// sees it (it got "Basic gw:s3cret" at its guessed /token).
func TestGatewayUpstreamSecretBound(t *testing.T) {
	op := oauthtest.Start(t)
	var mu sync.Mutex
	var seen []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(body))
		mu.Unlock()
		if r.Method == http.MethodPost {
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(upstream.Close)
	t.Setenv(envUpstreamSecret, "s3cret")
	for _, args := range []string{
		"gateway --http 127.0.0.1:0 --upstream " + upstream.URL + "/mcp --upstream-oauth-client-id gw",
		"gateway --http 127.0.0.1:0 --upstream " + upstream.URL + "/mcp --upstream-oauth-client-id gw --upstream-oauth-issuer " + op.Issuer,
	} {
		err := run(strings.Fields(args), nil, io.Discard, io.Discard)
		if err == nil {
			t.Fatalf("%s: started; want it refused", args)
		}
		if !strings.Contains(args, "issuer") && !strings.Contains(err.Error(), "--upstream-oauth-issuer") {
			t.Errorf("%s: %v; want the issuer asked for", args, err)
		}
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("gw:s3cret"))
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.Contains(s, basic) || strings.Contains(s, "s3cret") || strings.Contains(s, "/token") {
			t.Fatalf("the upstream got %q", s)
		}
	}
}
