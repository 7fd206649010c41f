package replicas

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Create asks again while JetStream counts a peer offline or its cluster
// unavailable, and returns any other refusal at once, naming the counts.
func TestCreate(t *testing.T) {
	offlineErr := &jetstream.APIError{Code: 400, ErrorCode: errNoPeers,
		Description: "no suitable peers for placement, peer offline"}
	tooFew := &jetstream.APIError{Code: 400, ErrorCode: errNoPeers,
		Description: "no suitable peers for placement, insufficient resources"}
	unavailable := &jetstream.APIError{Code: 503, ErrorCode: errClusterNotAvailable,
		Description: "JetStream system temporarily unavailable"}
	for _, tc := range []struct {
		name  string
		errs  []error // the answers of the creates, then success
		tries int
		want  error
	}{
		{"offline then placed", []error{offlineErr, unavailable, offlineErr}, 4, nil},
		{"too few servers", []error{tooFew}, 1, tooFew},
		{"not JetStream's", []error{context.Canceled}, 1, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tries := 0
				v, err := Create(t.Context(), 3, 0, func(context.Context) (int, error) {
					tries++
					if tries <= len(tc.errs) {
						return 0, tc.errs[tries-1]
					}
					return 7, nil
				})
				if tries != tc.tries || !errors.Is(err, tc.want) || (err == nil && v != 7) {
					t.Fatalf("%d tries, %v, %v; want %d tries, error %v", tries, v, err, tc.tries, tc.want)
				}
				if err != nil && !strings.Contains(err.Error(), "creating it with 3 replicas") {
					t.Fatalf("error %q names no counts", err)
				}
			})
		})
	}
	// Offline for good: the last refusal once ctx ends.
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		tries := 0
		_, err := Create(ctx, 3, 3, func(context.Context) (int, error) { tries++; return 0, offlineErr })
		if !errors.Is(err, offlineErr) || time.Since(start) != 10*time.Second || tries < 10 || tries > 20 {
			t.Fatalf("%v after %v and %d tries; want the refusal after 10s", err, time.Since(start), tries)
		}
	})
}
