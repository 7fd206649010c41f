package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport/ws"
	"github.com/rs/zerolog"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:0": true, "[::1]:8080": true, "localhost:80": true, "LOCALHOST:1": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:80": false, "example.com:80": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// serve refuses a listener other machines can reach without API keys, unless
// --insecure-no-auth; bad key files are refused at start-up.
func TestServeExposure(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("no-colon-here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ args, want string }{
		{"serve --http 0.0.0.0:0", "not a loopback address"},
		{"serve --http :0", "not a loopback address"},
		{"serve --http 127.0.0.1:0 --ws [::]:0", "--ws [::]:0 is not a loopback address"},
		{"serve --api-keys " + filepath.Join(t.TempDir(), "missing"), "--api-keys"},
		{"serve --api-keys " + bad, "want principal:key"},
	} {
		var out strings.Builder
		err := run(strings.Fields(tc.args), strings.NewReader(""), &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error with %q", tc.args, err, tc.want)
		}
	}
	t.Setenv(envServerKeys, "alice")
	if err := run([]string{"serve", "--http", "127.0.0.1:0"}, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), envServerKeys) {
		t.Errorf("malformed %s: %v; want an error naming it", envServerKeys, err)
	}
}

// --insecure-no-auth serves a non-loopback address without keys, and says so.
func TestServeInsecureNoAuth(t *testing.T) {
	spawnNet(t, "serve --http 0.0.0.0:0 --insecure-no-auth", 1)
}

// With --api-keys (and keys from the environment) the binary wants a key on HTTP
// and WebSocket; call and status present MCP_RESUME_API_KEY; a request is bound
// to its principal.
func TestServeAuth(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("# test keys\nalice:k-alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envServerKeys, "bob:k-bob")
	ls := spawnNet(t, "serve --http 127.0.0.1:0 --api-keys "+file, 1)
	httpURL, wsURL := ls[0].URL, ls[0].WS

	resp, err := http.Post(httpURL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "unauthorized") {
		t.Fatalf("POST without a key: %s %s", resp.Status, b)
	}

	t.Setenv(envClientKey, "k-alice")
	for _, flags := range [][]string{{"--url", httpURL}, {"--ws", wsURL}} {
		var out, errw bytes.Buffer
		args := append(append([]string{"call"}, flags...), "countdown", "seconds=0.05", "steps=2")
		if err := run(args, nil, &out, &errw); err != nil || out.String() != "countdown done: 2 of 2 steps\n" {
			t.Fatalf("%v as alice: %v, %q\n%s", args, err, out.String(), errw.String())
		}
	}
	var out, errw bytes.Buffer
	if err := run([]string{"call", "--url", httpURL, "-v", "echo", "text=hi"}, nil, &out, &errw); err != nil {
		t.Fatalf("echo as alice: %v\n%s", err, errw.String())
	}
	m := regexp.MustCompile(`request (\S+) is resumable .*; resume token (\S+)`).FindStringSubmatch(errw.String())
	if m == nil {
		t.Fatalf("no id and token in %q", errw.String())
	}
	out.Reset()
	if err := run([]string{"status", "--url", httpURL, m[1], m[2]}, nil, &out, io.Discard); err != nil || !strings.Contains(out.String(), "completed") {
		t.Fatalf("status as alice: %v, %q", err, out.String())
	}
	t.Setenv(envClientKey, "k-bob") // from the environment, not the file
	if err := run([]string{"status", "--url", httpURL, m[1], m[2]}, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("status of alice's request as bob: %v; want not_found", err)
	}
	t.Setenv(envClientKey, "k-mallory")
	for _, flags := range [][]string{{"--url", httpURL}, {"--ws", wsURL}} {
		args := append(append([]string{"call"}, flags...), "echo", "text=hi")
		if err := run(args, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "refused the API key in "+envClientKey) {
			t.Errorf("%v with an unknown key: %v; want a 401 error naming %s", args, err, envClientKey)
		}
	}
	t.Setenv(envClientKey, "")
	if err := run([]string{"tools", "--url", httpURL}, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "set "+envClientKey) {
		t.Errorf("tools without a key: %v; want an error that says to set %s", err, envClientKey)
	}
}

// SIGHUP reloads the key file: a new key works, a removed one gets 401; a bad
// file leaves the keys as they were.
func TestServeReloadKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("alice:k-old\n")
	ls := spawnNet(t, "serve --http 127.0.0.1:0 --api-keys "+file, 1)
	metricsURL := strings.TrimSuffix(ls[0].URL, "/mcp") + "/metrics"
	status := func(key string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, metricsURL, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if status("k-old") != http.StatusOK || status("k-new") != http.StatusUnauthorized {
		t.Fatal("before the reload: want k-old accepted and k-new refused")
	}
	write("alice:k-new\n")
	if err := syscall.Kill(ls[0].PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The server reaches it once the signal is handled.
	poll.Until(t, 10*time.Second, "k-new accepted after SIGHUP", func() bool { return status("k-new") == http.StatusOK })
	if got := status("k-old"); got != http.StatusUnauthorized {
		t.Errorf("removed key after the reload: %d; want 401", got)
	}
}

// logLines is a zerolog writer that hands each line to a channel.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) { l <- string(p); return len(p), nil }

// next returns the next log line with msg in it.
func (l logLines) next(t *testing.T, msg string) string {
	t.Helper()
	for {
		select {
		case line := <-l:
			if strings.Contains(line, msg) {
				return line
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no log line with %q", msg)
		}
	}
}

// A reload whose file does not parse keeps the old keys and says so; the next
// good one replaces them.
func TestReloadOnHUP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("alice:k-old\n")
	keys, err := loadKeys(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := make(logLines, 16)
	stop := reloadOnHUP(t.Context(), file, keys, zerolog.New(lines))
	defer stop()
	hup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	write("garbage-that-is-no-key\n")
	hup()
	if line := lines.next(t, "reloading API keys failed"); strings.Contains(line, "garbage-that-is-no-key") {
		t.Errorf("the log quotes the file's content: %s", line)
	}
	if p, ok := keys.Lookup("k-old"); !ok || p != "alice" {
		t.Fatalf("after a bad reload: k-old = %q, %v; want alice", p, ok)
	}
	write("alice:k-new\nbob:k-bob\n")
	hup()
	lines.next(t, "API keys reloaded")
	if _, ok := keys.Lookup("k-old"); ok {
		t.Error("k-old still works after the reload")
	}
	if p, ok := keys.Lookup("k-bob"); !ok || p != "bob" {
		t.Errorf("k-bob = %q, %v after the reload; want bob", p, ok)
	}
}

// An API key a reload removes ends what it authenticated: its WebSocket is
// closed (1008) and its session's event stream ends, while another key's
// WebSocket, kept by the reload, stays open.
func TestRevokedKeyEndsItsConnections(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("alice:k-alice\nbob:k-bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := spawnNet(t, "serve --http 127.0.0.1:0 --api-keys "+file, 1)[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dialWS := func(key string) *websocket.Conn {
		c, _, err := websocket.Dial(ctx, l.WS, &websocket.DialOptions{Subprotocols: []string{ws.Subprotocol},
			HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.CloseNow() })
		init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		if err := c.Write(ctx, websocket.MessageText, []byte(init)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Read(ctx); err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, bob := dialWS("k-alice"), dialWS("k-bob")

	// alice's session over Streamable HTTP, with its GET stream open.
	post := func(body, session string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer k-alice")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "")
	session := resp.Header.Get("Mcp-Session-Id")
	resp.Body.Close()
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, session).Body.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.URL, nil)
	req.Header.Set("Authorization", "Bearer k-alice")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("alice's GET stream: %v %v", stream, err)
	}
	defer stream.Body.Close()
	streamEnded := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, stream.Body); streamEnded <- err }()

	if err := os.WriteFile(file, []byte("bob:k-bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(l.PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if _, _, err := alice.Read(ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("alice's WebSocket after her key was removed: %v, want closed 1008", err)
	}
	select {
	case <-streamEnded:
	case <-ctx.Done():
		t.Fatal("alice's event stream still open after her key was removed")
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if err := bob.Write(ctx, websocket.MessageText, []byte(ping)); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := bob.Read(ctx); err != nil || !strings.Contains(string(msg), `"id":1`) {
		t.Fatalf("bob's WebSocket after the reload: %s, %v; want his ping answered", msg, err)
	}
}
