package oauth

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The limit on introspections protects the authorization server's
// introspection endpoint from made-up tokens: each opaque token not seen
// before costs it a request. Tokens already checked are answered from what
// was kept (cache.go), and a token once found active skips the limit when it
// is introspected again (introspector.good), so that the limit only ever
// meets tokens nobody has shown to be good. Those are limited per source (a
// burst, then a steady rate) and, beside that, in all: one source cannot
// spend another's allowance, and many sources together cannot cost the
// authorization server more than the global rate.
const (
	introspectBurst = 20
	introspectRate  = 2 // a second
	// The global allowance is several sources' worth: one source never
	// spends it alone.
	introspectGlobalBurst = 100
	introspectGlobalRate  = 20 // a second
	// maxSources bounds the sources a limit keeps a bucket for; past it the
	// least recently seen is forgotten (a source forgotten comes back with a
	// full bucket, which the global allowance bounds).
	maxSources = 10000
)

// introspectLimit is the allowance of new tokens' introspections: one bucket
// per source, least recently seen forgotten first, and one for all. Safe for
// concurrent use.
type introspectLimit struct {
	mu     sync.Mutex // guards the fields below
	global *rate.Limiter
	byKey  map[string]*list.Element // of lru; each Value a *sourceBucket
	lru    list.List                // front: the most recently seen source
}

// sourceBucket is one source's allowance.
type sourceBucket struct {
	key string
	lim *rate.Limiter
}

// allow reports whether source may have a new token introspected at now,
// spending its bucket's and the global allowance when it may. A source
// refused spends neither: its flood does not use up what others have.
func (l *introspectLimit) allow(source string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey == nil {
		l.byKey = map[string]*list.Element{}
		l.global = rate.NewLimiter(introspectGlobalRate, introspectGlobalBurst)
	}
	var b *sourceBucket
	if e := l.byKey[source]; e != nil {
		l.lru.MoveToFront(e)
		b = e.Value.(*sourceBucket)
	} else {
		if l.lru.Len() >= maxSources {
			oldest := l.lru.Back()
			l.lru.Remove(oldest)
			delete(l.byKey, oldest.Value.(*sourceBucket).key)
		}
		b = &sourceBucket{key: source, lim: rate.NewLimiter(introspectRate, introspectBurst)}
		l.byKey[source] = l.lru.PushFront(b)
	}
	r := b.lim.ReserveN(now, 1)
	if r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		return false
	}
	if !l.global.AllowN(now, 1) {
		r.CancelAt(now)
		return false
	}
	return true
}

// sources returns the number of sources l keeps a bucket for.
func (l *introspectLimit) sources() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

// sourceKey is the key of a request's source for the limit on
// introspections: an IPv4 address as it is; an IPv6 address by its /64, the
// prefix a single subscriber or host is given, so that walking the addresses
// of one's own /64 makes no new source; anything else (no address) as it is.
func sourceKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.String()
}

// clientAddr is the address r comes from: its peer's, or, when the peer is
// one of Options.TrustedProxies, the address that proxy (and any trusted
// proxies before it) says it forwards for, the last untrusted one of
// X-Forwarded-For. forwarded reports an X-Forwarded-For from a peer that is
// not trusted (and so not read).
func (rs *ResourceServer) clientAddr(r *http.Request) (addr string, forwarded bool) {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return host, false
	}
	peer = peer.Unmap()
	xff := r.Header.Values("X-Forwarded-For")
	if !rs.trusted(peer) {
		return peer.String(), len(xff) > 0
	}
	// Each proxy appends the address it received the request from: read
	// from the right, past the trusted proxies, to the first hop they did
	// not make themselves.
	client := peer
	for i := len(xff) - 1; i >= 0; i-- {
		hops := strings.Split(xff[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			a, ok := hopAddr(hops[j])
			if !ok {
				return client.String(), false // a hop that is no address: the last one known
			}
			client = a.Unmap()
			if !rs.trusted(client) {
				return client.String(), false
			}
		}
	}
	return client.String(), false
}

// trusted reports whether a is in Options.TrustedProxies.
func (rs *ResourceServer) trusted(a netip.Addr) bool {
	for _, p := range rs.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// hopAddr reads one hop of X-Forwarded-For: an address, or an address and
// a port (as some proxies write it).
func hopAddr(hop string) (netip.Addr, bool) {
	hop = strings.TrimSpace(hop)
	if a, err := netip.ParseAddr(hop); err == nil {
		return a, true
	}
	if ap, err := netip.ParseAddrPort(hop); err == nil {
		return ap.Addr(), true
	}
	return netip.Addr{}, false
}
