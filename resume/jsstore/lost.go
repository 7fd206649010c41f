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
// exist) makes the store check, at most
// once every checkEvery and one check at a time. A stream or bucket found gone
// twice, confirmWait apart, is made anew with the store's configuration, so that
// new requests are stored again; every request the store knew at that moment is
// lost: its calls fail wrapping resume.ErrStoreLost (the engine ends it with
// that reason, see resume.Request), until its Delete, after which the store
// takes it as new.

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
// marks every request known now as lost.
func (s *Store) checkStore() {
	defer func() {
		s.mu.Lock()
		s.checking, s.checked = false, time.Now()
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), confirmWait+4*s.timeout)
	defer cancel()
	if !s.gone(ctx) {
		return
	}
	t := time.NewTimer(confirmWait)
	defer t.Stop()
	<-t.C
	if !s.gone(ctx) {
		return
	}
	s.mu.Lock()
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
	s.mu.Unlock()
	_, err := s.js.CreateOrUpdateStream(ctx, s.streamCfg)
	if err == nil {
		_, err = s.js.CreateOrUpdateKeyValue(ctx, s.kvCfg)
	}
	if err != nil {
		s.log(fmt.Errorf("jsstore: the stream or the bucket is gone (%d requests lost); making them anew: %w", n, err))
		return
	}
	s.log(fmt.Errorf("jsstore: the stream or the bucket was gone; made anew, %d requests lost", n))
}

// gone reports whether the stream or the bucket's stream does not exist.
func (s *Store) gone(ctx context.Context) bool {
	for _, name := range []string{s.opts.Stream, "KV_" + s.opts.Bucket} {
		if _, err := s.js.Stream(ctx, name); errors.Is(err, jetstream.ErrStreamNotFound) {
			return true
		}
	}
	return false
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
