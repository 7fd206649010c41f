package jsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Losing the stream or the bucket. NATS can come back without them: an operator
// deleted them, or a server restarted on an empty directory, or one whose
// memory storage went with it. Without them every publish and every read fails
// for good, which the store would otherwise take for an outage and wait out.
// So an error that may mean they are gone (nobody answers a publish or a read,
// a publish is not acknowledged in time, or JetStream says the stream does not
// exist) makes the store check, at most once every checkEvery and one check at
// a time. Each stream is known by when it was created (StreamInfo.Created). A
// stream or bucket found gone twice, confirmWait apart, is made anew with the
// store's configuration, so that new requests are stored again; one made anew
// by another instance meanwhile is found so too, and so is it by a Replay that
// misses a message it holds. Either way every request the store knew at that
// moment is lost: its calls fail wrapping resume.ErrStoreLost (the engine ends
// it with that reason, see resume.Request) until its Delete, after which the
// store takes it as new.

const (
	checkEvery  = time.Second
	confirmWait = time.Second
)

// maybeGone reports whether err may mean that the stream or the bucket is gone.
func maybeGone(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders), errors.Is(err, errNoAck),
		errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrBucketNotFound):
		return true
	case errors.As(err, &apiErr):
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamNotFound
	}
	return false
}

// suspect starts a check of the stream and the bucket (checkStore) when err
// may mean that one is gone and the connection is up.
func (s *Store) suspect(err error) {
	if err == nil || !maybeGone(err) || s.js.Conn().Status() != nats.CONNECTED {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checking || s.closed || time.Since(s.checked) < checkEvery {
		return
	}
	s.checking = true
	s.bg.Go(s.checkStore)
}

// checkStore makes the stream and the bucket anew when they are gone, and
// marks every request known now as lost when they were (or another instance
// made them anew meanwhile).
func (s *Store) checkStore() {
	defer func() {
		s.mu.Lock()
		s.checking, s.checked = false, time.Now()
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), confirmWait+4*s.timeout)
	defer cancel()
	gone, seen := s.compare(ctx)
	if !gone && seen == nil {
		return
	}
	if gone { // twice, confirmWait apart: not a moment of a cluster's election
		t := time.NewTimer(confirmWait)
		defer t.Stop()
		<-t.C
		if gone, seen = s.compare(ctx); !gone && seen == nil {
			return
		}
	}
	n := s.loseAll()
	if !gone {
		s.identify(*seen)
		s.log(fmt.Errorf("jsstore: the stream or the bucket was made anew elsewhere; %d requests lost", n))
		return
	}
	_, err := s.js.CreateOrUpdateStream(ctx, s.streamCfg)
	if err == nil {
		_, err = s.js.CreateOrUpdateKeyValue(ctx, s.kvCfg)
	}
	if err != nil {
		s.log(fmt.Errorf("jsstore: the stream or the bucket is gone (%d requests lost); making them anew: %w", n, err))
		return
	}
	if _, seen := s.compare(ctx); seen != nil {
		s.identify(*seen)
	}
	s.log(fmt.Errorf("jsstore: the stream or the bucket was gone; made anew, %d requests lost", n))
}

// verify marks every request known now as lost when the stream or the bucket
// is not the one this store wrote to (gone, or made anew).
func (s *Store) verify(ctx context.Context) {
	if gone, seen := s.compare(ctx); gone || seen != nil {
		n := s.loseAll()
		if seen != nil {
			s.identify(*seen)
		}
		s.log(fmt.Errorf("jsstore: the stream or the bucket was made anew elsewhere; %d requests lost", n))
	}
}

// loseAll marks every request known now as lost, and drops what they have
// waiting to be sent; it returns how many it marked.
func (s *Store) loseAll() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reqs {
		if !r.lost {
			r.lost = true
			n++
		}
		for _, l := range r.held { // nothing of it goes to the stream made anew
			l.pend.drop()
		}
		r.unsent = nil
	}
	return n
}

// streams are the names of the stream and of the bucket's stream, in the order
// of Store.created.
func (s *Store) streams() [2]string { return [2]string{s.opts.Stream, "KV_" + s.opts.Bucket} }

// compare reports whether the stream or the bucket's stream does not exist
// (gone), and, when both exist and one is not the one this store wrote to, when
// each was created (seen; nil when both are the store's).
func (s *Store) compare(ctx context.Context) (gone bool, seen *[2]time.Time) {
	var created [2]time.Time
	for i, name := range s.streams() {
		st, err := s.js.Stream(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			gone = true
		case err != nil:
			return gone, nil // not answered: nothing known
		default:
			created[i] = st.CachedInfo().Created
		}
	}
	s.mu.Lock()
	same := created[0].Equal(s.created[0]) && created[1].Equal(s.created[1])
	s.mu.Unlock()
	if gone || same {
		return gone, nil
	}
	return false, &created
}

// identify records which stream and bucket the store writes to from now on.
func (s *Store) identify(created [2]time.Time) {
	s.mu.Lock()
	s.created = created
	s.mu.Unlock()
}

// log reports what the store did on its own, through Options.Logger.
func (s *Store) log(err error) {
	if s.opts.Logger != nil {
		s.opts.Logger.Error().Err(err).Msg("the store's stream or bucket")
	}
}

// lostErr returns the error of a call for request h when the store lost it,
// else nil.
func (s *Store) lostErr(h resume.TokenHash) error {
	s.mu.Lock()
	r := s.reqs[h]
	lost := r != nil && r.lost
	s.mu.Unlock()
	if lost {
		return fmt.Errorf("jsstore: request %s: %w", key(h)[:12], resume.ErrStoreLost)
	}
	return nil
}
