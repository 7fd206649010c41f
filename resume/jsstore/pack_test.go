package jsstore_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/internal/wire"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
)

// packMsg is message seq of a test request.
func packMsg(seq uint64) resume.Message {
	return resume.Message{Seq: seq, Kind: resume.KindNotification, Data: fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/message","params":{"n":%d}}`, seq)}
}

// seqsOf returns the sequence numbers of msgs, checking each one's data.
func seqsOf(t *testing.T, msgs []resume.Message) []uint64 {
	t.Helper()
	var out []uint64
	for _, m := range msgs {
		if want := packMsg(m.Seq); m.Kind != want.Kind || string(m.Data) != string(want.Data) {
			t.Fatalf("message %d: %v %s, want %v %s", m.Seq, m.Kind, m.Data, want.Kind, want.Data)
		}
		out = append(out, m.Seq)
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for q := from; q <= to; q++ {
		out = append(out, q)
	}
	return out
}

// TestPacks: messages appended faster than the store flushes go to the stream
// in packs, several to a stream message; each reads back, from this store and
// from a new one (a restart), and a pack is deleted once every message in it
// is discarded. Messages discarded from a pack whose others are held stay in
// the stream until then, but a Sweep (as the Put of a final state) stores
// that they are discarded: a new store does not find them.
func TestPacks(t *testing.T) {
	ctx := t.Context()
	js, _ := startServer(t, t.TempDir(), false)
	// Nothing is flushed for the delay: only a full batch (256) goes at once.
	st, err := jsstore.New(ctx, js, &jsstore.Options{FlushDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := resume.HashToken("packed")
	if err := st.Put(ctx, resume.Record{Hash: h, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 300; seq++ {
		if err := st.Append(ctx, h, packMsg(seq)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, want []uint64, streamMsgs uint64) {
		t.Helper()
		if err := st.Sweep(ctx, h); err != nil {
			t.Fatal(err)
		}
		if got := seqsOf(t, replay(t, st, h)); !slices.Equal(got, want) {
			t.Errorf("%s: this store replays %v, want %v", what, got, want)
		}
		fresh, err := jsstore.New(ctx, js, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqsOf(t, replay(t, fresh, h)); !slices.Equal(got, want) {
			t.Errorf("%s: a new store replays %v, want %v", what, got, want)
		}
		if got := seqsOf(t, replay(t, fresh, h)); !slices.Equal(got, want) {
			t.Errorf("%s: a new store replays again %v, want %v", what, got, want)
		}
		if msgs, _ := usage(t, js, jsstore.Options{}); msgs != streamMsgs {
			t.Errorf("%s: %d stream messages, want %d", what, msgs, streamMsgs)
		}
	}
	// The first 256 in one pack (the batch), the other 44 in another (the
	// Sweep's flush).
	check("300 appended", seqRange(1, 300), 2)

	// 10 to 20 discarded: both packs stay, and a stream message says which
	// are discarded.
	if err := st.Discard(ctx, h, seqRange(10, 20)...); err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(seqRange(1, 9), seqRange(21, 300))
	check("10 to 20 discarded", want, 3)
	// Sweeping again stores nothing more.
	check("swept again", want, 3)

	// The rest of the first pack discarded, one by one: it goes.
	for _, q := range slices.Concat(seqRange(1, 9), seqRange(21, 256)) {
		if err := st.Discard(ctx, h, q); err != nil {
			t.Fatal(err)
		}
	}
	check("the first pack discarded", seqRange(257, 300), 2) // the second pack, and the stream message of discards

	// Every message discarded: one purge takes the packs and the discards'
	// stream message.
	for seq := uint64(301); seq <= 310; seq++ {
		if err := st.Append(ctx, h, packMsg(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Sweep(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := st.Discard(ctx, h, seqRange(257, 310)...); err != nil {
		t.Fatal(err)
	}
	check("every message discarded", nil, 0)

	if err := st.Delete(ctx, h); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := usage(t, js, jsstore.Options{}); msgs != 0 {
		t.Errorf("after Delete: %d stream messages, want 0", msgs)
	}
}

// TestOldFormat: a request stored as the store wrote every message before
// packs, one stream message each (more of them than a scan reads at once),
// reads back whole in a new store, which appends to it in packs; its final
// state stored, a new store reads both kinds.
func TestOldFormat(t *testing.T) {
	ctx := t.Context()
	js, _ := startServer(t, t.TempDir(), false)
	st, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := resume.HashToken("old")
	rec := resume.Record{Hash: h, ID: []byte(`1`), State: resume.StateProcessing, Created: time.Unix(1, 0)}
	if err := st.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	const old = 2500
	subj := "mr.msg." + hex.EncodeToString(h[:])
	for seq := uint64(1); seq <= old; seq++ {
		if _, err := js.PublishAsync(subj, wire.EncodeMessage(packMsg(seq)), jetstream.WithMsgID(fmt.Sprintf("%x.%d", h[:], seq))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("publishes not acknowledged within a minute")
	}

	st2, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := seqsOf(t, replay(t, st2, h)); !slices.Equal(got, seqRange(1, old)) {
		t.Fatalf("a new store replays %d messages (%v...), want %d", len(got), got[:min(len(got), 5)], old)
	}
	for seq := uint64(old + 1); seq <= old+100; seq++ {
		if err := st2.Append(ctx, h, packMsg(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st2.Discard(ctx, h, seqRange(1, 1000)...); err != nil { // the oldest, purged
		t.Fatal(err)
	}
	rec.State = resume.StateCompleted
	if err := st2.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	st3, err := jsstore.New(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := seqsOf(t, replay(t, st3, h)); !slices.Equal(got, seqRange(1001, old+100)) {
		t.Fatalf("after the final state, a new store replays %d messages (%v...), want %d to %d", len(got), got[:min(len(got), 5)], 1001, old+100)
	}
	if msgs, _ := usage(t, js, jsstore.Options{}); msgs >= old {
		t.Errorf("%d stream messages, want fewer than the %d stored one by one (the newest in packs)", msgs, old)
	}
	if err := st3.Delete(context.Background(), h); err != nil {
		t.Fatal(err)
	}
}
