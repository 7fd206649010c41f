// Package replicas decides the replica count of a stream (or a KV bucket's
// stream) that the JetStream store or a cluster node creates or updates: the
// count asked for, or, when none is, the count the stream has already, so that
// a process started without one does not scale a replicated stream down to one
// copy (JetStream takes a missing count for 1, also in an update).
package replicas

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Max is the most replicas JetStream keeps of a stream.
const Max = 5

// For returns the replica count to configure stream with, want when it is
// positive, else the count the stream has (1 when it does not exist), and the
// count the stream has now (0 when it does not exist).
func For(ctx context.Context, js jetstream.JetStream, stream string, want int) (use, had int, err error) {
	s, err := info(ctx, js, stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return 0, 0, fmt.Errorf("reading its configuration: %w", err)
	default:
		had = s.CachedInfo().Config.Replicas
	}
	use = want
	if use <= 0 {
		use = max(had, 1)
	}
	return use, had, nil
}

// tryTimeout bounds one request for a stream's configuration: JetStream drops
// API requests in flight while its cluster elects a leader (a fresh cluster, a
// server lost), and one asked again is answered by the new leader.
const tryTimeout = 2 * time.Second

// info reads stream's configuration, asking again each tryTimeout while the
// request goes unanswered, until ctx ends.
func info(ctx context.Context, js jetstream.JetStream, stream string) (jetstream.Stream, error) {
	for {
		try, cancel := context.WithTimeout(ctx, tryTimeout)
		s, err := js.Stream(try, stream)
		cancel()
		if ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders)) {
			return s, err
		}
	}
}

// Create runs create, a CreateOrUpdateStream or CreateOrUpdateKeyValue of a
// stream with use replicas that had had, asking again while JetStream answers
// that it cannot place the replicas yet, until ctx ends. A cluster that has just
// started (or elected a new meta leader) counts a server as offline until it has
// heard from it, and refuses the placement meanwhile: a process started beside
// its NATS servers (a compose file, a chart) would otherwise fail at start. A
// cluster with fewer servers than use fails at once. The error names both counts.
func Create[T any](ctx context.Context, use, had int, create func(context.Context) (T, error)) (T, error) {
	pause := 50 * time.Millisecond
	for {
		v, err := create(ctx)
		if err == nil || !offline(err) {
			if err != nil {
				err = Error(err, use, had)
			}
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, Error(err, use, had)
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// offline reports whether err is JetStream's refusal to place replicas because a
// server it needs is offline, or its cluster is not available yet: a state that
// passes on its own.
func offline(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case errNoPeers:
		return strings.Contains(apiErr.Description, "peer offline")
	case errClusterNotAvailable:
		return true
	}
	return false
}

// JetStream's error codes (nats-server's errors.json): JSClusterNoPeersErrF,
// whose description names its reasons, and JSClusterNotAvailErr.
const (
	errNoPeers             jetstream.ErrorCode = 10005
	errClusterNotAvailable jetstream.ErrorCode = 10008
)

// Error wraps err, the failure to create or update a stream with use replicas
// that had had (0: it did not exist), naming both counts when they differ.
func Error(err error, use, had int) error {
	switch had {
	case 0:
		return fmt.Errorf("creating it with %d replicas: %w", use, err)
	case use:
		return fmt.Errorf("updating it (%d replicas): %w", use, err)
	}
	return fmt.Errorf("changing its replicas from %d to %d: %w", had, use, err)
}
