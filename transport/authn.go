package transport

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/spec"
)

// An Authenticator decides who an HTTP request of the network transports (a
// Streamable HTTP message, a WebSocket handshake, /metrics) comes from: the
// Identity its credentials name, or it answers the request itself (401, 403,
// 503) and reports false. Implementations: *KeySet (API keys) and
// oauth.ResourceServer (OAuth 2.1 access tokens). Safe for concurrent use.
type Authenticator interface {
	Authenticate(w http.ResponseWriter, r *http.Request) (Identity, bool)
}

// Identity is who a request's credentials name, and what they allow.
type Identity struct {
	// Principal binds the requests, tasks, keys and limits of the request's
	// sessions ("" without authentication).
	Principal string
	// Expiry is when the credentials stop being valid (zero: never): a
	// WebSocket authenticated with them is closed then.
	Expiry time.Time
	// ToolRefusal, when set, is asked before a tools/call of tool: a non-nil
	// answer refuses the call (a token without the tool's scope).
	ToolRefusal func(tool string) *Refusal
	// Renew, when set, is asked at Expiry whether the credentials are still
	// valid (an introspected token, asked about again): their new expiry,
	// or false when they are not (revoked). Without it, Expiry is final.
	Renew func(ctx context.Context) (time.Time, bool)
	// Revoked, when set, is closed when the credentials are revoked (an API
	// key a reload removed): what they authenticate ends then, as at Expiry.
	Revoked <-chan struct{}
}

// renewTimeout bounds one Renew.
const renewTimeout = 10 * time.Second

// Expire calls expired, once, when id's credentials stop being valid: at
// id.Expiry (never when it is zero), unless id.Renew says they are still
// valid then, and so on at each expiry Renew gives; or when id.Revoked
// closes. stop disarms it and ends
// a Renew under way (an expired already called may still be running).
func Expire(id Identity, expired func()) (stop func()) {
	if id.Expiry.IsZero() && id.Revoked == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	end := expired
	expired = func() { once.Do(end) }
	if id.Revoked != nil {
		go func() {
			select {
			case <-id.Revoked:
				if ctx.Err() == nil {
					expired()
				}
			case <-ctx.Done():
			}
		}()
	}
	if id.Expiry.IsZero() {
		return cancel
	}
	var mu sync.Mutex // guards t, and cancel against a new t
	var t *time.Timer
	var fire func()
	fire = func() {
		if id.Renew != nil {
			rctx, done := context.WithTimeout(ctx, renewTimeout)
			exp, ok := id.Renew(rctx)
			done()
			if ok && exp.After(time.Now()) {
				mu.Lock()
				if ctx.Err() == nil {
					t = time.AfterFunc(time.Until(exp), fire)
				}
				mu.Unlock()
				return
			}
		}
		if ctx.Err() == nil {
			expired()
		}
	}
	mu.Lock()
	t = time.AfterFunc(time.Until(id.Expiry), fire)
	mu.Unlock()
	return func() {
		mu.Lock()
		cancel()
		t.Stop()
		mu.Unlock()
	}
}

// Refusal is the answer to a request its credentials do not allow: the HTTP
// status, the WWW-Authenticate challenge (RFC 6750; "" for none) and the
// JSON-RPC error (with its reason), written as the body, or sent alone where
// no HTTP response is left to write (a WebSocket's message).
type Refusal struct {
	Status    int
	Challenge string
	Err       *spec.Error
}

// Write answers w with the refusal, the error under id (nil: none).
func (f *Refusal) Write(w http.ResponseWriter, id spec.ID) {
	if f.Challenge != "" {
		w.Header().Set("WWW-Authenticate", f.Challenge)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_, _ = w.Write(spec.EncodeError(id, f.Err))
}
