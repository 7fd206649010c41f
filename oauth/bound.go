package oauth

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// ErrCredentialsExpired ends the context of a request served through Bound
// when the credentials it was authenticated with stop being valid.
var ErrCredentialsExpired = errors.New("oauth: the request's credentials are no longer valid")

// Bound serves next with each request's context ending when the credentials
// its handler authenticated with Authenticate stop being valid (the
// Identity's Expiry: the token's expiry, or Options.Recheck after an
// introspection): an event stream open on a token ends then, however long it
// would run, and the client's next request (a GET with Last-Event-ID, a
// resume) is checked again. A request authenticated otherwise (an API key, a
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
	at    time.Time  // when the context ends (zero: not armed)
	timer *time.Timer
	done  bool // the request was served: no timer is armed any more
}

// arm ends the request's context at exp (zero: never). Armed again (a
// handler that authenticates twice), the sooner time holds.
func (b *bound) arm(exp time.Time) {
	if exp.IsZero() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || (!b.at.IsZero() && !exp.Before(b.at)) {
		return
	}
	if b.timer != nil && !b.timer.Stop() {
		return // it fired: the context has ended
	}
	b.at = exp
	b.timer = time.AfterFunc(time.Until(exp), func() { b.cancel(ErrCredentialsExpired) })
}

// stop ends the request's context and disarms its timer: the request was
// served.
func (b *bound) stop() {
	b.mu.Lock()
	b.done = true
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	b.cancel(context.Canceled)
}
