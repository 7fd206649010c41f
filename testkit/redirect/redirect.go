// Package redirect is the hostile peer of the tests of every client that
// carries a credential: a server that answers every request with a redirect
// to another loopback origin (the same address, another port: the case
// net/http's own header stripping, which compares host names, lets through),
// and that origin, which records what reaches it and answers 401 with a
// challenge that names metadata of its own, as a server that wants to be
// handed a token or to drive a client's OAuth discovery would.
package redirect

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Request is one request that reached the other origin.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         string
}

// Pair is the redirecting server (From) and the origin it sends clients to
// (To).
type Pair struct {
	From, To *httptest.Server

	mu  sync.Mutex // guards got
	got []Request
}

// New starts both servers, closed at the end of the test: From answers every
// request with code (307 or 308, which keep the method and body) and a
// Location on To with the request's path and query.
func New(tb testing.TB, code int) *Pair {
	p := &Pair{}
	p.To = httptest.NewServer(http.HandlerFunc(p.record))
	p.From = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, p.To.URL+r.URL.RequestURI(), code)
	}))
	tb.Cleanup(func() {
		p.From.Close()
		p.To.Close()
	})
	return p
}

func (p *Pair) record(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	p.mu.Lock()
	p.got = append(p.got, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: string(b)})
	p.mu.Unlock()
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource", error="invalid_token"`, p.To.URL))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"unauthorized"}}`)
}

// URL returns From's URL with path (the URL the client under test is given).
func (p *Pair) URL(path string) string { return p.From.URL + path }

// WS returns From's URL with path as a WebSocket URL.
func (p *Pair) WS(path string) string { return "ws" + strings.TrimPrefix(p.From.URL, "http") + path }

// Received returns what reached To so far.
func (p *Pair) Received() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.got...)
}

// NothingReached fails tb for each request that reached To, with the
// Authorization it carried and whether secret (a credential the test gave the
// client) appears anywhere in it.
func (p *Pair) NothingReached(tb testing.TB, secret string) {
	tb.Helper()
	for _, r := range p.Received() {
		text := fmt.Sprint(r.Header) + r.Body
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Basic "); ok {
			if d, err := base64.StdEncoding.DecodeString(b); err == nil {
				text += string(d) // id:secret of a client at a token endpoint
			}
		}
		leaked := secret != "" && strings.Contains(text, secret)
		tb.Errorf("the other origin %s received %s %s (Authorization %q; the test's secret in it: %v)",
			p.To.URL, r.Method, r.Path, r.Header.Get("Authorization"), leaked)
	}
}
