package oauth

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/mcp-resume/mcp-resume/transport"
)

// ErrCredentialsExpired ends the context of a request served through Bound
// when the credentials it was authenticated with stop being valid.
var ErrCredentialsExpired = errors.New("oauth: the request's credentials are no longer valid")

// Bound serves next with each request's context ending when the credentials
// its handler authenticated with Authenticate stop being valid: the token's
// expiry, or, for an introspected token asked about again every
// Options.Recheck, once its authorization server says it is no longer active.
// An event stream open on a token ends then, however long it would run, and
// the client's next request (a GET with Last-Event-ID, a resume) is checked
// again. A request authenticated otherwise (an API key, a
// token without an expiry) is served as it is.
func (rs *ResourceServer) Bound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(r.Context())
		b := &bound{cancel: cancel}
		defer b.stop()
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, boundKey{}, b)))
	})
}

// boundKey is the context key of a request's bound.
type boundKey struct{}

// bound ends a request's context when its credentials stop being valid.
type bound struct {
	cancel context.CancelCauseFunc

	mu    sync.Mutex // guards the fields below
	stops []func()   // the credentials' watches (transport.Expire)
	done  bool       // the request was served: nothing is watched any more
}

// arm ends the request's context when id's credentials stop being valid (see
// transport.Expire). Armed again (a handler that authenticates twice), the
// sooner end holds.
func (b *bound) arm(id transport.Identity) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || id.Expiry.IsZero() {
		return
	}
	b.stops = append(b.stops, transport.Expire(id, func() { b.cancel(ErrCredentialsExpired) }))
}

// stop ends the request's context and its watches: the request was served.
func (b *bound) stop() {
	b.mu.Lock()
	b.done = true
	stops := b.stops
	b.stops = nil
	b.mu.Unlock()
	for _, s := range stops {
		s()
	}
	b.cancel(context.Canceled)
}
