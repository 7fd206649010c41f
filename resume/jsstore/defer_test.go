package jsstore_test

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/internal/poll"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
)

// TestDeferRecords: with DeferRecords, a request that ends right after it
// started has one record write, its final state; one that runs on has its
// record written by itself soon after; Get gives a record not written yet; and
// messages delivered and discarded at once (a client without acks) never reach
// the stream.
func TestDeferRecords(t *testing.T) {
	ctx := t.Context()
	js, _ := startServer(t, t.TempDir(), false)
	// What the test does "at once" must fit in the delay on a loaded machine:
	// a request ended, messages discarded, before the store flushes.
	jsstore.SetFlushDelay(t, 2*time.Second)
	st, err := jsstore.New(ctx, js, &jsstore.Options{DeferRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	kvs, err := js.Stream(ctx, "KV_mcp-resume")
	if err != nil {
		t.Fatal(err)
	}
	writes := func() uint64 {
		info, err := kvs.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}

	quick := resume.HashToken("quick")
	rec := resume.Record{Hash: quick, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0)}
	if err := st.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(ctx, quick); err != nil || got.State != resume.StateProcessing {
		t.Fatalf("Get of a record not written yet: %+v, %v", got, err)
	}
	for seq := uint64(1); seq <= 3; seq++ { // delivered and discarded at once
		if err := st.Append(ctx, quick, resume.Message{Seq: seq, Kind: resume.KindProgress, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := st.Discard(ctx, quick, seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Append(ctx, quick, resume.Message{Seq: 4, Kind: resume.KindResponse, Data: []byte(`{"result":{}}`)}); err != nil {
		t.Fatal(err)
	}
	rec.State = resume.StateCompleted
	if err := st.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if n := writes(); n != 1 {
		t.Errorf("a request that ended at once: %d record writes, want 1 (its final state)", n)
	}
	if got, err := st.Get(ctx, quick); err != nil || got.State != resume.StateCompleted {
		t.Fatalf("Get after the final Put: %+v, %v", got, err)
	}
	msgs, err := js.Stream(ctx, "MCP_RESUME")
	if err != nil {
		t.Fatal(err)
	}
	info, err := msgs.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != 1 {
		t.Errorf("stream: %d messages published, want 1 (the response; the progress was discarded before it was sent)", info.State.LastSeq)
	}

	long := resume.HashToken("long")
	if err := st.Put(ctx, resume.Record{Hash: long, ID: []byte(`2`), State: resume.StateProcessing, Created: time.Unix(2, 0)}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "mcp-resume")
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the record of a running request written", func() bool {
		_, err := kv.Get(context.Background(), hex.EncodeToString(long[:]))
		return err == nil
	})

	// A request deleted before its record was written leaves nothing.
	gone := resume.HashToken("gone")
	if err := st.Put(ctx, resume.Record{Hash: gone, ID: []byte(`3`), State: resume.StateProcessing, Created: time.Unix(3, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, hex.EncodeToString(gone[:])); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("a request deleted before its record was written: %v, want no key", err)
	}
}
