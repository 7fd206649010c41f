package resume

import (
	"slices"
	"sync/atomic"
)

// The engine's bounds: running requests (MaxLive, MaxLivePerPrincipal), and the
// bytes of queued messages and kept results (MaxBytes, MaxBytesPerPrincipal,
// MaxRetained), with the trim that releases the oldest kept results.

// usage counts the bytes of queued messages and the kept results: of every
// request, or of one principal's.
type usage struct {
	bytes atomic.Int64
	refs  int // the requests counted in it (guarded by Engine.mu); a principal's goes at 0
	// retainQ holds the ended requests that keep their result, in the order
	// they ended, and may hold gone ones; retained counts those not gone
	// (guarded by Engine.mu).
	retainQ  []*Request
	retained int
}

// retain counts r, ended, among u's kept results. Called with Engine.mu held.
func (u *usage) retain(r *Request) {
	u.retained++
	u.retainQ = push(u.retainQ, r)
	if len(u.retainQ) > 2*u.retained+64 { // drop the gone ones, amortized
		u.retainQ = slices.DeleteFunc(u.retainQ, func(q *Request) bool { return q.gone.Load() })
	}
}

// release picks u's oldest kept results not picked yet, while more says there
// is more to release, and reports each to took. Called with Engine.mu held.
func (u *usage) release(more func() bool, took func(*Request)) {
	i := 0
	for ; i < len(u.retainQ) && more(); i++ {
		if v := u.retainQ[i]; !v.gone.Load() && !v.victim {
			v.victim = true
			took(v)
		}
	}
	// What was passed is picked or gone.
	clear(u.retainQ[:i]) // the array keeps no freed request alive
	u.retainQ = u.retainQ[i:]
}

// fullLocked says whether a new running request of principal would pass MaxLive
// or MaxLivePerPrincipal. Called with e.mu held.
func (e *Engine) fullLocked(principal string) bool {
	if e.running >= e.opts.MaxLive {
		return true
	}
	return principal != "" && e.opts.MaxLivePerPrincipal > 0 && e.runningBy[principal] >= e.opts.MaxLivePerPrincipal
}

// addRunningLocked adds d to the running counts. Called with e.mu held.
func (e *Engine) addRunningLocked(principal string, d int) {
	e.running += d
	if principal == "" {
		return
	}
	if n := e.runningBy[principal] + d; n > 0 {
		e.runningBy[principal] = n
	} else {
		delete(e.runningBy, principal)
	}
}

// leftProcessing records that r stopped processing: it ended with a result to
// keep (kept) or is being freed. Called with r.mu held.
func (e *Engine) leftProcessing(r *Request, kept bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.addRunningLocked(r.principal, -1)
	if !kept {
		return
	}
	e.retainLocked(r)
}

// retainLocked counts r, ended, among the requests whose results are kept
// (MaxRetained). Called with e.mu held.
func (e *Engine) retainLocked(r *Request) {
	r.inRetainQ = true
	e.all.retain(r)
	if r.use != nil {
		r.use.retain(r)
	}
}

// over says whether the byte budget of principal's requests, or of all, is
// used up.
func (e *Engine) over(principal string) bool {
	if e.opts.MaxBytes > 0 && e.all.bytes.Load() >= e.opts.MaxBytes {
		return true
	}
	if principal == "" || e.opts.MaxBytesPerPrincipal <= 0 {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.overLocked(principal)
}

// overFor is over for r's principal, without the engine's lock (r's usage is
// at hand): the check every Append makes. Called with r.mu held.
func (e *Engine) overFor(r *Request) bool {
	if e.opts.MaxBytes > 0 && e.all.bytes.Load() >= e.opts.MaxBytes {
		return true
	}
	return r.use != nil && e.opts.MaxBytesPerPrincipal > 0 && r.use.bytes.Load() >= e.opts.MaxBytesPerPrincipal
}

// overLocked is over, called with e.mu held.
func (e *Engine) overLocked(principal string) bool {
	if e.opts.MaxBytes > 0 && e.all.bytes.Load() >= e.opts.MaxBytes {
		return true
	}
	u := e.byPrincipal[principal]
	return u != nil && e.opts.MaxBytesPerPrincipal > 0 && u.bytes.Load() >= e.opts.MaxBytesPerPrincipal
}

// useLocked returns the usage a new live request of principal counts its bytes
// in (nil for ""), counting the request in it. Called with e.mu held.
func (e *Engine) useLocked(principal string) *usage {
	if principal == "" {
		return nil
	}
	u := e.byPrincipal[principal]
	if u == nil {
		u = &usage{}
		e.byPrincipal[principal] = u
	}
	u.refs++
	return u
}

// releaseUseLocked uncounts r from its principal's usage, which goes with its
// last request. Called with e.mu held.
func (e *Engine) releaseUseLocked(r *Request) {
	if u := r.use; u != nil {
		if u.refs--; u.refs <= 0 {
			delete(e.byPrincipal, r.principal)
		}
		r.use = nil
	}
}

// addBytes counts d more bytes of queued messages of r.
func (e *Engine) addBytes(r *Request, d int) {
	r.held.Add(int64(d))
	e.all.bytes.Add(int64(d))
	if r.use != nil {
		r.use.bytes.Add(int64(d))
	}
}

// trim releases the oldest kept results of principal (every principal's when
// everyone) while its byte budget is passed, then the oldest of all while more
// than MaxRetained are kept or the byte budget of all requests is passed. Each
// costs what it releases, not a scan of what is kept. It takes no request's
// lock while holding e.mu.
func (e *Engine) trim(principal string, everyone bool) {
	e.mu.Lock()
	var victims []*Request
	over := e.all.bytes.Load() - e.opts.MaxBytes // > 0: bytes to release
	if e.opts.MaxBytes <= 0 {
		over = 0
	}
	if per := e.opts.MaxBytesPerPrincipal; per > 0 {
		budget := func(u *usage) {
			d := u.bytes.Load() - per
			u.release(func() bool { return d > 0 }, func(v *Request) {
				victims = append(victims, v)
				d -= v.held.Load()
				over -= v.held.Load()
			})
		}
		if everyone {
			for _, u := range e.byPrincipal {
				budget(u)
			}
		} else if u := e.byPrincipal[principal]; principal != "" && u != nil {
			budget(u)
		}
	}
	e.all.release(func() bool { return e.all.retained-len(victims) > e.opts.MaxRetained || over > 0 }, func(v *Request) {
		victims = append(victims, v)
		over -= v.held.Load()
	})
	e.mu.Unlock()
	for _, v := range victims {
		v.mu.Lock()
		if !v.gone.Load() {
			v.evicted = true
			e.evicted.Add(1)
		}
		v.freeLocked(StateExpired)
		v.mu.Unlock()
	}
}
