package mcp

import (
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// keyHolds are the keys (principal and key hash) of keyed calls in flight that
// are not requests of the engine (yet): a call sent again with one of them is
// refused, not run a second time.
type keyHolds struct {
	mu sync.Mutex
	m  map[string]*keyHold
}

// keyHold is a keyed call in flight that is not a request of the engine (yet).
type keyHold struct {
	// survives: the call becomes a request as its tool starts (Mode Always),
	// whether or not its connection is still there.
	survives bool
	gone     chan struct{} // closed when the hold is dropped
}

// keyWait bounds how long a keyed call sent again waits for the first copy,
// which will become a request, to be one.
const keyWait = 30 * time.Second

// hold records a keyed call of principal in flight and returns its hold, or
// returns nil and the hold of the call that has the key already.
func (ks *keyHolds) hold(principal, key string, survives bool) (h, other *keyHold) {
	k := keySlot(principal, key)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if o := ks.m[k]; o != nil {
		return nil, o
	}
	h = &keyHold{survives: survives, gone: make(chan struct{})}
	ks.m[k] = h
	return h, nil
}

// drop forgets a keyed call's hold; it reports whether it was still held.
func (ks *keyHolds) drop(principal, key string, h *keyHold) bool {
	k := keySlot(principal, key)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.m[k] != h {
		return false
	}
	delete(ks.m, k)
	close(h.gone)
	return true
}

func keySlot(principal, key string) string {
	h := resume.HashToken(key)
	return principal + "\x00" + string(h[:])
}

// heldBy reports whether h holds key.
func (ks *keyHolds) heldBy(principal, key string, h *keyHold) bool {
	k := keySlot(principal, key)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.m[k] == h
}
