package oauth

import (
	"sync"

	"golang.org/x/time/rate"
)

// Introspections of tokens not seen before, per remote address: a burst, then
// a steady rate. Past it a new opaque token from that address is refused for
// a moment (rate_limited) without asking the authorization server: a flood of
// made-up tokens costs it a bounded number of requests. A token already
// checked is answered from what was kept, whatever its address.
const (
	introspectBurst = 20
	introspectRate  = 2 // a second
	maxAddresses    = 10000
)

// addressLimit holds a limiter per remote address, forgetting full ones when
// it holds too many.
type addressLimit struct {
	mu sync.Mutex // guards m
	m  map[string]*rate.Limiter
}

// allow reports whether addr may have a new token introspected now.
func (l *addressLimit) allow(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*rate.Limiter{}
	}
	lim := l.m[addr]
	if lim == nil {
		if len(l.m) >= maxAddresses {
			for a, x := range l.m {
				if x.Tokens() >= introspectBurst {
					delete(l.m, a)
				}
			}
		}
		lim = rate.NewLimiter(introspectRate, introspectBurst)
		l.m[addr] = lim
	}
	return lim.Allow()
}
