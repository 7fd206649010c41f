package transport

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/mcp-resume/mcp-resume/spec"
)

// KeySet is a set of bearer API keys, each mapped to a principal (who holds it).
// It keeps only the SHA-256 of each key, and checks a presented key against every
// one of them in constant time. It is safe for concurrent use; Replace swaps its
// keys at once (a reload), without disturbing checks in progress.
type KeySet struct {
	keys atomic.Pointer[[]keyEntry]
}

type keyEntry struct {
	sum       [sha256.Size]byte
	principal string
	// revoked is closed when a reload (Replace) removes the key, or gives it
	// to another principal: what it authenticates ends (Identity.Revoked).
	revoked chan struct{}
}

// ParseKeys reads API keys from text: one "principal:key" per entry, entries
// separated by newlines or commas, blank entries and lines starting with '#'
// ignored. A principal or key that is empty, or a key given twice, is an error
// (which never quotes the key).
func ParseKeys(text string) (*KeySet, error) {
	var keys []keyEntry
	seen := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for entry := range strings.SplitSeq(l, ",") {
			if entry = strings.TrimSpace(entry); entry == "" {
				continue
			}
			p, k, ok := strings.Cut(entry, ":")
			p, k = strings.TrimSpace(p), strings.TrimSpace(k)
			if !ok || p == "" || k == "" {
				return nil, fmt.Errorf("api keys, line %d: want principal:key", line)
			}
			sum := sha256.Sum256([]byte(k))
			if seen[sum] {
				return nil, fmt.Errorf("api keys, line %d: principal %q: a key given twice", line, p)
			}
			seen[sum] = true
			keys = append(keys, keyEntry{sum: sum, principal: p, revoked: make(chan struct{})})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("api keys: %w", err)
	}
	if len(keys) == 0 {
		return nil, errors.New("api keys: no keys")
	}
	ks := &KeySet{}
	ks.keys.Store(&keys)
	return ks, nil
}

// Len returns the number of keys.
func (ks *KeySet) Len() int {
	if ks == nil {
		return 0
	}
	return len(*ks.keys.Load())
}

// Replace makes ks hold the keys of from from now on: a check that starts after
// Replace returns sees only them. A key of ks's that from does not hold for
// the same principal is revoked: the WebSockets and event streams it
// authenticated end (Identity.Revoked). ks and from are ks's from then on;
// from is not to be used apart.
func (ks *KeySet) Replace(from *KeySet) {
	next := *from.keys.Load()
	old := *ks.keys.Load()
	carried := map[[sha256.Size]byte]bool{}
	for i, e := range next {
		for _, o := range old {
			if o.sum == e.sum && o.principal == e.principal {
				next[i].revoked = o.revoked // the same key of the same principal
				carried[e.sum] = true
			}
		}
	}
	ks.keys.Store(&next)
	for _, e := range old {
		if !carried[e.sum] {
			close(e.revoked)
		}
	}
}

// Principal returns the principal of the key r presents in its Authorization
// header ("Bearer <key>"), or false when there is none or the key is unknown.
func (ks *KeySet) Principal(r *http.Request) (string, bool) {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return ks.Lookup(strings.TrimSpace(key))
}

// Authenticate returns the principal of the key r presents (Authenticator),
// or answers r with Unauthorized and returns false. A nil KeySet
// authenticates every request, as "" (no keys configured).
func (ks *KeySet) Authenticate(w http.ResponseWriter, r *http.Request) (Identity, bool) {
	if ks == nil {
		return Identity{}, true
	}
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	var e *keyEntry
	if ok && strings.EqualFold(scheme, "Bearer") {
		e = ks.lookup(strings.TrimSpace(key))
	}
	if e == nil {
		Unauthorized(w)
		return Identity{}, false
	}
	id := Identity{Principal: e.principal, Revoked: e.revoked}
	Arm(r.Context(), id)
	return id, true
}

var _ Authenticator = (*KeySet)(nil)

// Lookup returns the principal of key. Every stored key is compared, whether or
// not an earlier one matched, so the time taken does not depend on which key
// matched or how much of it.
func (ks *KeySet) Lookup(key string) (string, bool) {
	if e := ks.lookup(key); e != nil {
		return e.principal, true
	}
	return "", false
}

// lookup is Lookup's entry of key; nil when there is none.
func (ks *KeySet) lookup(key string) *keyEntry {
	if key == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(key))
	keys := *ks.keys.Load()
	found := -1
	for i := range keys {
		if subtle.ConstantTimeCompare(sum[:], keys[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil
	}
	return &keys[found]
}

// Unauthorized answers an HTTP request (a Streamable HTTP message, a WebSocket
// handshake, /metrics) that carries no known API key: 401, WWW-Authenticate, and
// a JSON-RPC error with reason unauthorized.
func Unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-resume"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(spec.EncodeError(nil, spec.NewError(spec.CodeInvalidRequest, spec.ReasonUnauthorized,
		"missing or unknown API key; send Authorization: Bearer <key>")))
}

// BearerTransport returns an http.RoundTripper that sends key as a bearer API key
// with every request, through next (http.DefaultTransport when nil).
func BearerTransport(key string, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return bearer{key: key, next: next}
}

type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// RemoteIP returns the IP address r came from (its RemoteAddr without the port),
// the key of the limit on failed token checks per remote address
// (mcp.SessionOptions.Remote). Forwarding headers are not trusted.
func RemoteIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
