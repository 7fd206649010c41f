// Package reservoir keeps a uniform sample of a stream of values (reservoir
// sampling): a load test that asks about random ones of its many requests
// keeps a thousand of their tokens, not all of them, so that what it measures
// of a server does not count its own bookkeeping.
package reservoir

import (
	"math/rand/v2"
	"sync"
)

// Sample is a uniform sample of at most Size of the values added to it. It
// is safe for concurrent use.
type Sample[T any] struct {
	Size int

	mu   sync.Mutex
	seen int
	kept []T
}

// Add offers v to the sample.
func (s *Sample[T]) Add(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen++
	if len(s.kept) < s.Size {
		s.kept = append(s.kept, v)
	} else if i := rand.IntN(s.seen); i < s.Size {
		s.kept[i] = v
	}
}

// Random returns one of the sampled values at random; the zero value when
// none was added.
func (s *Sample[T]) Random() T {
	s.mu.Lock()
	defer s.mu.Unlock()
	var v T
	if len(s.kept) > 0 {
		v = s.kept[rand.IntN(len(s.kept))]
	}
	return v
}
