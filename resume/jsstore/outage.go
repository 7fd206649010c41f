package jsstore

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
)

// Outages: waiting for the connection to NATS, and trying an operation again
// while NATS does not answer, for at most Options.OutageWait.

// connected waits until the connection is up, for at most Options.OutageWait.
func (s *Store) connected(ctx context.Context) error {
	nc := s.js.Conn()
	if nc.Status() == nats.CONNECTED {
		return nil
	}
	end := time.Now().Add(s.opts.OutageWait)
	for nc.Status() != nats.CONNECTED {
		if !s.await(ctx, end, 10*time.Millisecond) {
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case nc.IsClosed():
				return nats.ErrConnectionClosed
			case nc.Status() != nats.CONNECTED:
				return nats.ErrConnectionReconnecting
			}
		}
	}
	return nil
}

// retry runs op, a call to NATS that is safe to repeat, until it succeeds, fails
// otherwise than by NATS being unreachable, ctx ends, or Options.OutageWait has
// passed since retry was called, and returns its last error. Each try gets the
// client's default timeout unless ctx has an earlier deadline, and none goes past
// the OutageWait. No try is made while the client is reconnecting: it would keep
// the call in its reconnect buffer and send it when it is back, maybe after this
// one has given up (a message stored though Append failed). Between tries it
// waits for the connection to be up again, or a little more each time while NATS
// does not answer.
func (s *Store) retry(ctx context.Context, op func(ctx context.Context) error) error {
	l := backoff.Start(10*time.Millisecond, 500*time.Millisecond, s.opts.OutageWait, s.timeout)
	end := l.End()
	nc := s.js.Conn()
	var err error
	for {
		pause := l.Next()
		if st := nc.Status(); st == nats.RECONNECTING || st == nats.CONNECTING {
			if err == nil {
				err = nats.ErrConnectionReconnecting
			}
		} else {
			tctx, cancel := l.Try(ctx)
			err = op(tctx)
			cancel()
			s.suspect(err)
			if err == nil || ctx.Err() != nil || !unreachable(err) {
				return err
			}
		}
		if !s.await(ctx, end, pause) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
}

// unreachable reports whether err says that NATS did not answer: the connection
// is down or reconnecting, the call timed out, nobody serves the API (yet), or
// JetStream is not available (yet).
func unreachable(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrReconnectBufExceeded):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code == 503
	}
	return false
}

// await waits before another try: until the connection is up when it is not,
// else for pause; never past end. It reports whether to try again: false when ctx
// ended, end passed, or the connection is closed for good.
func (s *Store) await(ctx context.Context, end time.Time, pause time.Duration) bool {
	nc := s.js.Conn()
	wait := time.Until(end)
	var up chan nats.Status // nil while connected: wait out the pause
	if nc.Status() == nats.CONNECTED {
		wait = min(wait, pause)
	} else {
		up = nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
		defer nc.RemoveStatusListener(up)
		if st := nc.Status(); st == nats.CONNECTED || st == nats.CLOSED { // meanwhile
			return wait > 0 && st == nats.CONNECTED
		}
	}
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-up:
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return time.Now().Before(end) && !nc.IsClosed()
}
