package jsstore_test

import (
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// TestDeliveredInMemory: with DeliveredInMemory, a request that ended before
// any of it was written, and whose response then reached its client, costs
// the store nothing: no publish, no record, and a Delete that sends nothing to
// NATS; while it is held, Get and Replay answer from memory. One written to
// after its delivery is written as any other, and Close writes what is held
// in memory alone, which a later store then finds.
func TestDeliveredInMemory(t *testing.T) {
	ctx := t.Context()
	js, _ := startServer(t, t.TempDir(), false)
	// "At once" below: within the delay, on a loaded machine too.
	st, err := jsstore.New(ctx, js, &jsstore.Options{DeferRecords: true, DeliveredInMemory: true, FlushDelay: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	writes := recordWrites(t, js)
	// end runs a request to its response, and reports it delivered when
	// delivered says so.
	end := func(token string, delivered bool) (resume.TokenHash, resume.Record) {
		t.Helper()
		h := resume.HashToken(token)
		rec := resume.Record{Hash: h, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0)}
		if err := st.Put(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := st.Append(ctx, h, resume.Message{Seq: 1, Kind: resume.KindProgress, Data: []byte(`{"p":1}`)}); err != nil {
			t.Fatal(err)
		}
		if err := st.Discard(ctx, h, 1); err != nil { // delivered, without acks
			t.Fatal(err)
		}
		if err := st.Append(ctx, h, resume.Message{Seq: 2, Kind: resume.KindResponse, Data: []byte(`{"result":{}}`)}); err != nil {
			t.Fatal(err)
		}
		rec.State = resume.StateCompleted
		if err := st.Put(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if delivered {
			st.Delivered(h)
		}
		return h, rec
	}
	replayed := func(s *jsstore.Store, h resume.TokenHash) []uint64 {
		t.Helper()
		var seqs []uint64
		for m, err := range s.Replay(ctx, h, 0) {
			if err != nil {
				t.Fatalf("Replay: %v", err)
			}
			seqs = append(seqs, m.Seq)
		}
		return seqs
	}

	quick, _ := end("quick", true)
	acked, arec := end("acked", true)
	arec.AckMode = true // a client's first ack, after the delivery: written from now on
	if err := st.Put(ctx, arec); err != nil {
		t.Fatal(err)
	}
	other, _ := end("other", false) // not delivered: written behind, as before
	// The flush of the three runs once: when the other two are written, it has
	// passed the delivered one by.
	poll.Until(t, 10*time.Second, "the undelivered and the acknowledged requests' records written behind", func() bool { return writes() == 2 })
	for _, h := range []resume.TokenHash{other, acked} {
		if got, err := st.Get(ctx, h); err != nil || got.State != resume.StateCompleted {
			t.Fatalf("Get: %+v, %v", got, err)
		}
	}
	if err := st.Sweep(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := st.Sweep(ctx, acked); err != nil {
		t.Fatal(err)
	}
	if n := streamState(t, js).LastSeq; n != 2 {
		t.Errorf("the stream: %d messages published, want 2 (the two written requests' responses; nothing of the one delivered)", n)
	}
	if got, err := st.Get(ctx, quick); err != nil || got.State != resume.StateCompleted {
		t.Fatalf("Get of the request held in memory: %+v, %v", got, err)
	}
	if got := replayed(st, quick); len(got) != 1 || got[0] != 2 {
		t.Errorf("Replay of the request held in memory: %v, want [2] (its response)", got)
	}

	nc := js.Conn()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sent := nc.Stats().OutMsgs
	if err := st.Delete(ctx, quick); err != nil {
		t.Fatal(err)
	}
	if n := nc.Stats().OutMsgs - sent; n != 0 {
		t.Errorf("Delete of a request held in memory sent %d messages to NATS, want none", n)
	}
	if n := writes(); n != 2 {
		t.Errorf("the bucket: %d writes after the Delete, want 2", n)
	}

	// Close writes what is held in memory alone: a planned restart keeps it.
	kept, _ := end("kept", true)
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	later, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := later.Get(ctx, kept); err != nil || got.State != resume.StateCompleted {
		t.Errorf("a later store's Get of the request Close wrote: %+v, %v", got, err)
	}
	if got := replayed(later, kept); len(got) != 1 || got[0] != 2 {
		t.Errorf("a later store's Replay of the request Close wrote: %v, want [2]", got)
	}
	if _, err := later.Get(ctx, quick); err == nil {
		t.Errorf("a later store finds the request deleted from memory")
	}
}
