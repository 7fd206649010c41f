package cluster_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume/cluster"
	"github.com/mcp-resume/mcp-resume/testkit/jstest"
)

// The session bucket keeps an entry until it is deleted, answers nil for one
// it does not hold, and refuses new entries once it holds MaxBytes (a client
// opening sessions without end fills it no further), while the entries it
// holds stay readable.
func TestSessionsBucket(t *testing.T) {
	_, _, nc := jstest.Start(t, false)
	s, err := cluster.OpenSessions(t.Context(), nc, &cluster.SessionOptions{TTL: time.Minute, MaxBytes: 16 << 10, Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.TTL() != time.Minute {
		t.Errorf("TTL %v, want 1m", s.TTL())
	}
	val := bytes.Repeat([]byte("x"), 500)
	if err := s.Put(t.Context(), "k0", val); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(t.Context(), "k0"); err != nil || !bytes.Equal(got, val) {
		t.Fatalf("Get k0: %d bytes, %v", len(got), err)
	}
	if got, err := s.Get(t.Context(), "none"); err != nil || got != nil {
		t.Fatalf("Get of no entry: %q, %v; want nil, nil", got, err)
	}
	full := 0
	for i := 1; i < 100 && full == 0; i++ {
		if err := s.Put(t.Context(), fmt.Sprintf("k%d", i), val); err != nil {
			full = i
		}
	}
	if full == 0 {
		t.Fatal("100 entries of 500 bytes in a bucket of 16 KiB")
	}
	if got, err := s.Get(t.Context(), "k0"); err != nil || !bytes.Equal(got, val) {
		t.Fatalf("Get k0 once the bucket is full: %d bytes, %v", len(got), err)
	}
	if err := s.Delete(t.Context(), "k0"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(t.Context(), "k0"); err != nil || got != nil {
		t.Fatalf("Get after Delete: %q, %v", got, err)
	}
	if err := s.Delete(t.Context(), "k0"); err != nil {
		t.Errorf("Delete of no entry: %v", err)
	}
}
