package resume

import (
	"slices"
	"testing"
)

// Requests whose hashes share their first eight bytes are each found by
// their own hash, and removing one leaves the others, wherever it is in its
// chain.
func TestLiveSetSharedKey(t *testing.T) {
	mk := func(last byte) *Request {
		r := &Request{}
		copy(r.hash[:], "samefirst8bytes")
		r.hash[31] = last
		return r
	}
	for _, drop := range []int{0, 1, 2} {
		var s liveSet
		rs := []*Request{mk(1), mk(2), mk(3)}
		other := &Request{hash: TokenHash{9}}
		for _, r := range append(slices.Clone(rs), other) {
			s.add(r)
		}
		if len(s.m) != 2 || s.len() != 4 {
			t.Fatalf("map holds %d keys, set %d requests; want 2 and 4", len(s.m), s.len())
		}
		s.remove(rs[drop])
		s.remove(rs[drop]) // removed already: nothing
		for i, r := range rs {
			want := r
			if i == drop {
				want = nil
			}
			if got := s.get(r.hash); got != want {
				t.Errorf("drop %d: get(hash %d) = %p, want %p", drop, i, got, want)
			}
		}
		if s.get(other.hash) != other || s.len() != 3 || len(s.all()) != 3 {
			t.Errorf("drop %d: other %p, len %d, all %d", drop, s.get(other.hash), s.len(), len(s.all()))
		}
		for _, r := range rs {
			s.remove(r)
		}
		s.remove(other)
		if len(s.m) != 0 || s.len() != 0 {
			t.Errorf("drop %d: emptied set holds %d keys, %d requests", drop, len(s.m), s.len())
		}
	}
}
