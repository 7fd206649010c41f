package transport

import (
	"context"
	"errors"
	"net/http"
	"sync"
)

// ErrCredentialsExpired ends the context of a request served through Bound
// when the credentials it was authenticated with stop being valid.
var ErrCredentialsExpired = errors.New("transport: the request's credentials are no longer valid")

// Bound serves next with each request's context ending when the credentials
// its handler authenticated with stop being valid (Arm, which an
// Authenticator calls: see Expire): a token's expiry, an introspected token
// its authorization server no longer says is active, an API key removed by a
// reload. An event stream open on such credentials ends then, however long it
// would run, and the client's next request (a GET with Last-Event-ID, a
// resume) is checked again. A request authenticated with credentials that
// neither expire nor can be revoked is served as it is.
func Bound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(r.Context())
		b := &bound{cancel: cancel}
		defer b.stop()
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, boundKey{}, b)))
	})
}

// Arm ends the context of the request ctx is of, when it is served through
// Bound, once id's credentials stop being valid. An Authenticator calls it
// with the Identity it returns.
func Arm(ctx context.Context, id Identity) {
	if b, ok := ctx.Value(boundKey{}).(*bound); ok {
		b.arm(id)
	}
}

// boundKey is the context key of a request's bound.
type boundKey struct{}

// bound ends a request's context when its credentials stop being valid.
type bound struct {
	cancel context.CancelCauseFunc

	mu    sync.Mutex // guards the fields below
	stops []func()   // the credentials' watches (Expire)
	done  bool       // the request was served: nothing is watched any more
}

// arm ends the request's context when id's credentials stop being valid (see
// Expire). Armed again (a handler that authenticates twice), the sooner end
// holds.
func (b *bound) arm(id Identity) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || id.Expiry.IsZero() && id.Revoked == nil {
		return
	}
	b.stops = append(b.stops, Expire(id, func() { b.cancel(ErrCredentialsExpired) }))
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
