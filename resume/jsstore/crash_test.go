package jsstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
)

// TestDeleteSurvivesKill (issue 24): requests deleted from the store stay deleted
// when the NATS server is killed (SIGKILL) right after, before it has written
// its stream state, and started again on its directory: Records, Get and
// Replay of a new store on it know only the requests that were not deleted,
// with their last record. The deleted ones had one record (processing), or had
// it replaced by their final state (completed), or replaced by a claim and then
// the final state, as a request of an engine does; with and without
// SyncAlways.
func TestDeleteSurvivesKill(t *testing.T) {
	for _, syncAlways := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync always %v", syncAlways), func(t *testing.T) {
			testDeleteSurvivesKill(t, syncAlways)
		})
	}
}

func testDeleteSurvivesKill(t *testing.T, syncAlways bool) {
	const n = 30 // per kind
	ctx := context.Background()
	dir := t.TempDir()
	proc := startNATSProcessOn(t, dir, syncAlways)
	nc, err := nats.Connect(proc.URL, nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(1700000000, 0).UTC()
	type req struct {
		h       resume.TokenHash
		last    resume.Record
		deleted bool
	}
	var reqs []*req
	for i := range 3 * n {
		kind := i % 3 // 0: processing; 1: completed; 2: claimed, then completed
		rec := resume.Record{Hash: resume.HashToken(fmt.Sprintf("token-%d", i)), ID: fmt.Appendf(nil, "%d", i), State: resume.StateProcessing, Created: created, Owner: "a"}
		if err := st.Put(ctx, rec); err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= 3; seq++ {
			if err := st.Append(ctx, rec.Hash, resume.Message{Seq: seq, Kind: resume.KindProgress, Key: "p", Data: fmt.Appendf(nil, "progress %d of %d", seq, i)}); err != nil {
				t.Fatal(err)
			}
		}
		if kind == 2 {
			if _, err := st.Claim(ctx, rec.Hash, "a", "b"); err != nil {
				t.Fatal(err)
			}
			rec.Owner = "b"
		}
		if kind > 0 {
			if err := st.Append(ctx, rec.Hash, resume.Message{Seq: 4, Kind: resume.KindResponse, Data: fmt.Appendf(nil, "result of %d", i)}); err != nil {
				t.Fatal(err)
			}
			rec.State = resume.StateCompleted
			if err := st.Put(ctx, rec); err != nil {
				t.Fatal(err)
			}
		}
		reqs = append(reqs, &req{h: rec.Hash, last: rec})
	}
	// Every other one deleted, as its client's acknowledgement or cancel does.
	for i, r := range reqs {
		if i%2 == 0 {
			if err := st.Delete(ctx, r.h); err != nil {
				t.Fatal(err)
			}
			r.deleted = true
		}
	}
	nc.Close()
	proc.kill(t)

	js2, _ := startServer(t, dir, syncAlways)
	st2, err := jsstore.New(ctx, js2, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[resume.TokenHash]resume.Record{}
	for rec, err := range st2.Records(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		listed[rec.Hash] = rec
	}
	var back int
	for i, r := range reqs {
		rec, listedOK := listed[r.h]
		got, err := st2.Get(ctx, r.h)
		msgs, rerr := replayErr(ctx, st2, r.h)
		if r.deleted {
			if listedOK || !errors.Is(err, resume.ErrNotFound) || !errors.Is(rerr, resume.ErrNotFound) {
				back++
				t.Errorf("request %d (kind %d), deleted before the kill: listed %v (%v), Get %v %v, Replay %d messages, %v",
					i, i%3, listedOK, rec.State, got, err, len(msgs), rerr)
			}
			continue
		}
		want := 3
		if r.last.State == resume.StateCompleted {
			want = 4
		}
		switch {
		case !listedOK || rec.State != r.last.State || rec.Owner != r.last.Owner:
			t.Errorf("request %d (kind %d): listed %v %+v, want %+v", i, i%3, listedOK, rec, r.last)
		case err != nil || got.State != r.last.State || got.Owner != r.last.Owner:
			t.Errorf("request %d (kind %d): Get %+v, %v, want %+v", i, i%3, got, err, r.last)
		case rerr != nil || len(msgs) != want:
			t.Errorf("request %d (kind %d): Replay %d messages, %v, want %d", i, i%3, len(msgs), rerr, want)
		}
	}
	if back > 0 {
		t.Errorf("%d of %d deleted requests were back after the kill", back, (len(reqs)+1)/2)
	}
}
