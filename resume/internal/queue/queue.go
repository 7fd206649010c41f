// Package queue holds the slice operation the outbox and the stores share to
// take an entry out of an ordered queue.
package queue

import "slices"

// Remove removes s[i] and returns s. The head, the entry a queue most often
// loses (the oldest, delivered), goes by reslicing, without a copy of the
// rest; its slot is zeroed so that the array keeps nothing alive.
func Remove[T any](s []T, i int) []T {
	if i == 0 {
		var zero T
		s[0] = zero
		return s[1:]
	}
	return slices.Delete(s, i, i+1)
}
