package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Loopback is the Authorizer of a person at this machine (RFC 8252): it
// listens on loopback for the redirect (http://127.0.0.1:PORT/callback, the
// port of the redirect registered before when it is free), prints the
// authorization URL on tell and has open show it (OpenBrowser; nil: only
// printed), and waits for the browser to come back with the login's state.
// A request to the listener with another state (a page the browser visits
// meanwhile may send one) is answered 400 and changes nothing: the login
// goes on waiting.
func Loopback(open func(string) error, tell io.Writer) Authorizer {
	return func(ctx context.Context, prev string, start func(string) (string, error)) (url.Values, error) {
		addr := "127.0.0.1:0"
		if u, err := url.Parse(prev); err == nil && u.Scheme == "http" && (u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost") && u.Port() != "" {
			addr = "127.0.0.1:" + u.Port()
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil && addr != "127.0.0.1:0" {
			ln, err = net.Listen("tcp", "127.0.0.1:0") // the old port is taken
		}
		if err != nil {
			return nil, fmt.Errorf("listening for the login's redirect: %w", err)
		}
		defer ln.Close()
		redirect := "http://" + ln.Addr().String() + "/callback"
		authURL, err := start(redirect)
		if err != nil {
			return nil, err
		}
		// What is printed and handed to the system's opener is an http(s)
		// URL of printable ASCII, whatever the authorization server named.
		if err := checkEndpoint("the authorization URL", authURL); err != nil {
			return nil, err
		}
		au, _ := url.Parse(authURL)
		state := au.Query().Get("state")
		if state == "" {
			return nil, errors.New("the authorization URL carries no state: refused")
		}
		got := make(chan url.Values, 1)
		// Served once the state is known: a request that comes before waits
		// in the listener's queue.
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: callback(state, got)}
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = srv.Serve(ln)
		}()
		defer func() {
			_ = srv.Close()
			<-served
		}()
		if tell != nil {
			fmt.Fprintf(tell, "mcp-resume: log in at this URL (opening it in a browser):\n\n  %s\n\n", authURL)
		}
		if open != nil {
			if err := open(authURL); err != nil && tell != nil {
				fmt.Fprintf(tell, "mcp-resume: no browser opened (%v): open the URL above yourself\n", err)
			}
		}
		select {
		case q := <-got:
			return q, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the login in the browser: %w", context.Cause(ctx))
		}
	}
}

// callback is the handler of the login's redirect: the first request to
// /callback with the login's state is sent on got, once; any other is
// refused.
func callback(state string, got chan<- url.Values) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		// [RFC 6749 §10.12] the client MUST implement CSRF protection for
		// its redirection URI: a redirect without the state sent is not this
		// login's, and must not end it.
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			http.Error(w, "mcp-resume: this is not the redirect of the login under way", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if e := q.Get("error"); e != "" {
			fmt.Fprintf(w, "<!doctype html><title>mcp-resume</title><p>The login failed: %s %s</p>", html.EscapeString(e), html.EscapeString(q.Get("error_description")))
		} else {
			fmt.Fprint(w, "<!doctype html><title>mcp-resume</title><p>Logged in. You can close this window.</p>")
		}
		select {
		case got <- q:
		default:
		}
	})
}

// OpenBrowser shows u in the user's browser: $BROWSER when set, else the
// system's opener (xdg-open, open, rundll32). Without a display on Linux it
// does not try. It opens only an http(s) URL of printable ASCII: the
// system's opener runs whatever handler a scheme names (file:, search-ms:).
func OpenBrowser(u string) error {
	if pu, err := url.Parse(u); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" || strings.IndexFunc(u, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0 {
		return fmt.Errorf("not an http(s) URL of printable ASCII: %+q", u)
	}
	if b := os.Getenv("BROWSER"); b != "" {
		return exec.Command(b, u).Start()
	}
	switch runtime.GOOS {
	case "darwin":
		return exec.Command("open", u).Start()
	case "windows":
		return exec.Command("rundll32", "url.dll,FileProtocolHandler", u).Start()
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return errors.New("no display")
	}
	return exec.Command("xdg-open", u).Start()
}

// Headless is the Authorizer of an authorization server that approves at
// once (a test's, the conformance suite's, the TypeScript SDK's demo): it
// asks for the authorization URL with client, following redirects until one
// goes to redirect, whose query it returns.
func Headless(client *http.Client, redirect string) Authorizer {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return func(ctx context.Context, _ string, start func(string) (string, error)) (url.Values, error) {
		authURL, err := start(redirect)
		if err != nil {
			return nil, err
		}
		c := *client
		c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
			if strings.HasPrefix(r.URL.String(), redirect) {
				return http.ErrUseLastResponse
			}
			if len(via) >= 10 {
				return errors.New("too many redirects")
			}
			return nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		loc, err := resp.Location()
		if err != nil || !strings.HasPrefix(loc.String(), redirect) {
			return nil, fmt.Errorf("the authorization endpoint answered %s, not a redirect to %s", resp.Status, redirect)
		}
		return loc.Query(), nil
	}
}
