package jsstore_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// TestDeferRecords: with DeferRecords, a request that ends right after it
// started has one record write, its final state, written behind (its final
// Put does not wait for the store) after its messages; one that runs on has
// its record written by itself soon after; Get gives a record not written
// yet; and messages delivered and discarded at once (a client without acks)
// never reach the stream.
func TestDeferRecords(t *testing.T) {
	ctx := t.Context()
	js, _ := startServer(t, t.TempDir(), false)
	// What the test does "at once" must fit in the delay on a loaded machine:
	// a request ended, messages discarded, before the store flushes.
	st, err := jsstore.New(ctx, js, &jsstore.Options{DeferRecords: true, FlushDelay: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	writes := recordWrites(t, js)

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
	if n := writes(); n != 0 {
		t.Errorf("a request that ended at once: %d record writes at its final Put, want 0 (written behind)", n)
	}
	if got, err := st.Get(ctx, quick); err != nil || got.State != resume.StateCompleted {
		t.Fatalf("Get after the final Put: %+v, %v", got, err)
	}
	poll.Until(t, 10*time.Second, "the final record written behind", func() bool { return writes() == 1 })
	if err := st.Sweep(ctx, quick); err != nil {
		t.Fatal(err)
	}
	if n := streamState(t, js).LastSeq; n != 1 {
		t.Errorf("stream: %d messages published, want 1 (the response; the progress was discarded before it was sent)", n)
	}
	kv0, err := js.KeyValue(ctx, "mcp-resume")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv0.Get(ctx, hex.EncodeToString(quick[:])); err != nil {
		t.Errorf("the record written behind: %v", err)
	}
	reader, err := jsstore.New(ctx, js, nil) // another process's view
	if err != nil {
		t.Fatal(err)
	}
	if got, err := reader.Get(ctx, quick); err != nil || got.State != resume.StateCompleted {
		t.Errorf("the record written behind, read back: %+v, %v; want the final state", got, err)
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

// TestDeleteBare: a request none of whose messages reached the stream (each
// delivered and discarded within the write-behind: a quick call of a client
// without acks) is deleted with one purge, of its record; one with a message
// sent is purged from the stream too. Either way nothing of it is left, for
// this store or a later one.
func TestDeleteBare(t *testing.T) {
	ctx := t.Context()
	js, _ := startServer(t, t.TempDir(), false)
	// A request of an earlier process, with a message stored, which a later one
	// runs again (a restartable call after a restart): see "again" below.
	earlier, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	again := resume.HashToken("again")
	if err := earlier.Put(ctx, resume.Record{Hash: again, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := earlier.Append(ctx, again, resume.Message{Seq: 1, Kind: resume.KindProgress, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := earlier.Sweep(ctx, again); err != nil { // stored by now
		t.Fatal(err)
	}

	// "At once" below: within the delay, on a loaded machine too.
	st, err := jsstore.New(ctx, js, &jsstore.Options{DeferRecords: true, FlushDelay: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	nc := js.Conn()
	purges, err := nc.SubscribeSync("$JS.API.STREAM.PURGE.*")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = purges.Unsubscribe() }()
	purged := func() map[string]int {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for {
			m, err := purges.NextMsg(0)
			if err != nil {
				return got
			}
			got[strings.TrimPrefix(m.Subject, "$JS.API.STREAM.PURGE.")]++
		}
	}
	run := func(token string, keep bool) resume.TokenHash {
		t.Helper()
		h := resume.HashToken(token)
		rec := resume.Record{Hash: h, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0)}
		if err := st.Put(ctx, rec); err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= 2; seq++ { // the policy, then the response
			if err := st.Append(ctx, h, resume.Message{Seq: seq, Kind: resume.KindResponse, Data: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if !keep {
				if err := st.Discard(ctx, h, seq); err != nil {
					t.Fatal(err)
				}
			}
		}
		rec.State = resume.StateCompleted
		if err := st.Put(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(ctx, h); err != nil {
			t.Fatal(err)
		}
		return h
	}

	quick := run("quick", false)
	if got := purged(); got["KV_mcp-resume"] != 1 || got["MCP_RESUME"] != 1 {
		t.Errorf("a request deleted before its record was written: purges %v, want its record's and its subject's (it never learned whether an earlier process left messages)", got)
	}
	// The same, deleted once its final record is written (the common case:
	// a result is kept a while): its record's purge alone.
	flushed := resume.HashToken("flushed")
	frec := resume.Record{Hash: flushed, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0)}
	if err := st.Put(ctx, frec); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, flushed, resume.Message{Seq: 1, Kind: resume.KindResponse, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := st.Discard(ctx, flushed, 1); err != nil {
		t.Fatal(err)
	}
	frec.State = resume.StateCompleted
	if err := st.Put(ctx, frec); err != nil {
		t.Fatal(err)
	}
	kvb, err := js.KeyValue(ctx, "mcp-resume")
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the final record written behind", func() bool {
		_, err := kvb.Get(context.Background(), hex.EncodeToString(flushed[:]))
		return err == nil
	})
	if err := st.Delete(ctx, flushed); err != nil {
		t.Fatal(err)
	}
	if got := purged(); got["KV_mcp-resume"] != 1 || got["MCP_RESUME"] != 0 {
		t.Errorf("a request with nothing sent: purges %v, want its record's alone", got)
	}
	kept := run("kept", true)
	if got := purged(); got["KV_mcp-resume"] != 1 || got["MCP_RESUME"] != 1 {
		t.Errorf("a request with messages sent: purges %v, want its record's and its messages'", got)
	}
	run("again", false) // nothing sent by this store, but its earlier message is in the stream
	if got := purged(); got["KV_mcp-resume"] != 1 || got["MCP_RESUME"] != 1 {
		t.Errorf("a request an earlier store wrote: purges %v, want its record's and its messages'", got)
	}
	// The same, the earlier record owned by another instance: this store's
	// final record, written behind, is refused when written (the record stays
	// the owner's), and the Delete that follows purges its messages.
	claimed := resume.HashToken("claimed")
	rec := resume.Record{Hash: claimed, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0), Owner: "A"}
	if err := earlier.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := earlier.Append(ctx, claimed, resume.Message{Seq: 1, Kind: resume.KindProgress, Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := earlier.Sweep(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	purged()
	rec.Owner = "B"
	if err := st.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.State = resume.StateCompleted
	if err := st.Put(ctx, rec); err != nil {
		t.Fatalf("the final Put of a request another instance owns, written behind: %v", err)
	}
	if err := st.Delete(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	if got := purged(); got["MCP_RESUME"] != 1 {
		t.Errorf("a request whose record another instance owns: purges %v, want its messages'", got)
	}

	if n := streamState(t, js).Msgs; n != 0 {
		t.Errorf("the stream holds %d messages after every request was deleted, want 0", n)
	}
	later, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []resume.TokenHash{quick, kept, again} {
		if _, err := later.Get(ctx, h); !errors.Is(err, resume.ErrNotFound) {
			t.Errorf("a later store's Get of a deleted request: %v, want not found", err)
		}
		for m, err := range later.Replay(ctx, h, 0) {
			if !errors.Is(err, resume.ErrNotFound) {
				t.Errorf("a later store's Replay of a deleted request: %+v, %v, want not found", m, err)
			}
		}
	}
}

// streamState is the state of the store's message stream now.
func streamState(t *testing.T, js jetstream.JetStream) jetstream.StreamState {
	t.Helper()
	msgs, err := js.Stream(t.Context(), "MCP_RESUME")
	if err != nil {
		t.Fatal(err)
	}
	info, err := msgs.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}
