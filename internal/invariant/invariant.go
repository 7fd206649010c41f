// Package invariant says how thoroughly a guarded state checks itself after
// each change: the checks that visit every entry of a state run in test
// binaries only, and not in a run of benchmarks, whose figures are the
// code's own.
package invariant

import (
	"flag"
	"sync"
	"testing"
)

// Thorough reports whether a state's checks that visit every entry run: in a
// test binary that runs no benchmark.
var Thorough = sync.OnceValue(func() bool {
	if !testing.Testing() {
		return false
	}
	bench := flag.Lookup("test.bench")
	return bench == nil || bench.Value.String() == ""
})

// Guarded is a state of type S that goroutines share: one mutex guards it,
// and Update, the one way in, checks the state's invariants (its Check)
// after each change. The zero value holds S's zero value.
type Guarded[S any, P interface {
	*S
	Check()
}] struct {
	mu sync.Mutex
	s  S
}

// Update runs f on the state under the lock, then checks the state: Check
// panics on a broken invariant, a bug of the code that changed it, found at
// the change. f must not call Update.
func (g *Guarded[S, P]) Update(f func(st *S)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(&g.s)
	P(&g.s).Check()
}

// Locker returns the state's lock, for a sync.Cond that an Update's f waits
// on (the wait releases the lock meanwhile).
func (g *Guarded[S, P]) Locker() sync.Locker { return &g.mu }
