// Package memstore is the in-memory resume.Store: the default, for one process.
// Nothing survives a restart.
package memstore

import (
	"context"
	"iter"
	"slices"
	"sync"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/internal/queue"
)

// Store keeps records and messages in maps. The zero value is not usable; use New.
// It is safe for concurrent use (one lock guards it all).
type Store struct {
	mu   sync.Mutex // guards reqs and every request's fields
	reqs map[resume.TokenHash]*request
}

type request struct {
	rec   resume.Record
	msgs  []resume.Message  // ascending Seq
	first [1]resume.Message // msgs' array while it holds at most one (saves an allocation)
}

var (
	_ resume.Lister  = (*Store)(nil)
	_ resume.Claimer = (*Store)(nil)
)

// New returns an empty store.
func New() *Store { return &Store{reqs: make(map[resume.TokenHash]*request)} }

// Put creates or replaces a record.
func (s *Store) Put(_ context.Context, rec resume.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.reqs[rec.Hash]; ok {
		if r.rec.Owner != rec.Owner {
			return resume.ErrClaimed
		}
		r.rec = rec
		return nil
	}
	s.reqs[rec.Hash] = &request{rec: rec}
	return nil
}

// Get returns a copy of a record.
func (s *Store) Get(_ context.Context, h resume.TokenHash) (*resume.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reqs[h]
	if !ok {
		return nil, resume.ErrNotFound
	}
	rec := r.rec
	rec.ID = slices.Clone(rec.ID)
	return &rec, nil
}

// Append adds a message; it keeps m.Data without copying.
func (s *Store) Append(_ context.Context, h resume.TokenHash, m resume.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reqs[h]
	if !ok {
		return resume.ErrNotFound
	}
	if r.msgs == nil {
		r.msgs = r.first[:0]
	}
	r.msgs = append(r.msgs, m)
	return nil
}

// Discard removes messages by number.
func (s *Store) Discard(_ context.Context, h resume.TokenHash, seqs ...uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reqs[h]
	if !ok {
		return nil
	}
	for _, seq := range seqs {
		if i, found := r.find(seq); found {
			r.msgs = queue.Remove(r.msgs, i)
		}
	}
	if len(r.msgs) == 0 {
		r.msgs = nil
	}
	return nil
}

// Replay yields the messages after a sequence number, from a snapshot taken at the
// call.
func (s *Store) Replay(_ context.Context, h resume.TokenHash, after uint64) iter.Seq2[resume.Message, error] {
	return func(yield func(resume.Message, error) bool) {
		s.mu.Lock()
		r, ok := s.reqs[h]
		if !ok {
			s.mu.Unlock()
			yield(resume.Message{}, resume.ErrNotFound)
			return
		}
		i, _ := r.find(after + 1)
		snap := slices.Clone(r.msgs[i:])
		s.mu.Unlock()
		for _, m := range snap {
			if !yield(m, nil) {
				return
			}
		}
	}
}

// Delete removes a request.
func (s *Store) Delete(_ context.Context, h resume.TokenHash) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.reqs, h)
	return nil
}

// Records yields a snapshot of the records, taken at the call.
func (s *Store) Records(_ context.Context) iter.Seq2[resume.Record, error] {
	return func(yield func(resume.Record, error) bool) {
		s.mu.Lock()
		recs := make([]resume.Record, 0, len(s.reqs))
		for _, r := range s.reqs {
			rec := r.rec
			rec.ID = slices.Clone(rec.ID)
			recs = append(recs, rec)
		}
		s.mu.Unlock()
		for _, rec := range recs {
			if !yield(rec, nil) {
				return
			}
		}
	}
}

// Claim moves a record from one owner to another.
func (s *Store) Claim(_ context.Context, h resume.TokenHash, from, to string) (*resume.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reqs[h]
	if !ok {
		return nil, resume.ErrNotFound
	}
	if r.rec.Owner != from {
		return nil, resume.ErrClaimed
	}
	r.rec.Owner = to
	rec := r.rec
	rec.ID = slices.Clone(rec.ID)
	return &rec, nil
}

func (r *request) find(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(r.msgs, seq, func(m resume.Message, s uint64) int {
		switch {
		case m.Seq < s:
			return -1
		case m.Seq > s:
			return 1
		}
		return 0
	})
}
