package jsstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// TestGetFromLeader: the record read through the bucket's leader (what a get
// that a lagging replica missed falls back to) is the record, at its revision;
// a deleted one and an unknown one are not found.
func TestGetFromLeader(t *testing.T) {
	js := embeddedJS(t)
	ctx := context.Background()
	s, err := New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := resume.HashToken("leader")
	rec := resume.Record{Hash: h, ID: []byte(`"x"`), State: resume.StateProcessing, Created: time.Unix(5, 0), Owner: "A"}
	if err := s.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.State = resume.StateCompleted
	if err := s.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, rev, err := s.getFromLeader(ctx, h)
	_, wantRev, werr := s.get(ctx, h)
	if err != nil || werr != nil || string(got.ID) != `"x"` || got.State != resume.StateCompleted || got.Owner != "A" || rev != wantRev {
		t.Fatalf("getFromLeader: %+v at %d, %v; want the completed record at %d (%v)", got, rev, err, wantRev, werr)
	}
	if err := s.Delete(ctx, h); err != nil {
		t.Fatal(err)
	}
	for _, k := range []resume.TokenHash{h, resume.HashToken("never")} {
		if got, _, err := s.getFromLeader(ctx, k); !errors.Is(err, resume.ErrNotFound) {
			t.Errorf("getFromLeader of a deleted or unknown record: %+v, %v; want ErrNotFound", got, err)
		}
	}
}
