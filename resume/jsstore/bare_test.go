package jsstore

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// TestBareRepublished: a message that settle sends itself (appended after the
// flush that settle starts with, so no flush took it) makes its request no
// longer bare, and Delete purges it from the stream.
func TestBareRepublished(t *testing.T) {
	js := embeddedJS(t)
	ctx := t.Context()
	s, err := New(ctx, js, &Options{FlushDelay: time.Hour}) // nothing is sent but by the test
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	h := resume.HashToken("republished")
	if err := s.Put(ctx, resume.Record{Hash: h, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, h, resume.Message{Seq: 1, Kind: resume.KindProgress, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	p := s.reqs[h].held[0].pend
	s.mu.Unlock()
	s.republish(ctx, h, p) // as settle does for a message with no publish made
	if err := s.settle(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, h); err != nil {
		t.Fatal(err)
	}
	info, err := s.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("the stream holds %d messages after Delete, want 0", info.State.Msgs)
	}
}
