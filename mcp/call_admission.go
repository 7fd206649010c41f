package mcp

import "sync"

// admission counts the requests in flight of each principal, up to limit
// (Options.MaxConcurrentPerPrincipal; < 0: no limit).
type admission struct {
	limit    int
	mu       sync.Mutex
	inflight map[string]int // by principal (none: not in it)
}

// admit counts a new request of principal in flight, or returns false when
// principal already has MaxConcurrentPerPrincipal.
func (a *admission) admit(principal string) bool {
	if principal == "" || a.limit < 0 {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight[principal] >= a.limit {
		return false
	}
	a.inflight[principal]++
	return true
}

// release uncounts a request admit counted.
func (a *admission) release(principal string) {
	if principal == "" || a.limit < 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight[principal]--; a.inflight[principal] <= 0 {
		delete(a.inflight, principal)
	}
}
