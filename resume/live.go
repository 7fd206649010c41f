package resume

import "encoding/binary"

// liveSet holds the engine's live requests by their token's hash (guarded
// by Engine.mu). It keys them by the hash's first eight bytes, in a map a
// third of the size of one keyed by the whole hash, and chains the requests
// whose hashes share those bytes (Request.same): a client choosing its call
// keys can make such hashes, and finds only its own requests among them.
type liveSet struct {
	m map[uint64]*Request
	n int
}

func hashKey(h TokenHash) uint64 { return binary.LittleEndian.Uint64(h[:8]) }

// get returns the request of hash h; nil for none.
func (s *liveSet) get(h TokenHash) *Request {
	for r := s.m[hashKey(h)]; r != nil; r = r.same {
		if r.hash.equal(h) {
			return r
		}
	}
	return nil
}

// add adds r, whose hash the set does not hold.
func (s *liveSet) add(r *Request) {
	if s.m == nil {
		s.m = make(map[uint64]*Request)
	}
	k := hashKey(r.hash)
	r.same, s.m[k] = s.m[k], r
	s.n++
}

// remove removes r, when the set holds it.
func (s *liveSet) remove(r *Request) {
	k := hashKey(r.hash)
	first := s.m[k]
	if first == r {
		if r.same == nil {
			delete(s.m, k)
		} else {
			s.m[k] = r.same
		}
		r.same = nil
		s.n--
		return
	}
	for p := first; p != nil; p = p.same {
		if p.same == r {
			p.same, r.same = r.same, nil
			s.n--
			return
		}
	}
}

// len returns how many requests the set holds.
func (s *liveSet) len() int { return s.n }

// all returns every request the set holds.
func (s *liveSet) all() []*Request {
	reqs := make([]*Request, 0, s.n)
	for _, r := range s.m {
		for ; r != nil; r = r.same {
			reqs = append(reqs, r)
		}
	}
	return reqs
}
