package resume_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
)

// withEnded sets o's Options.Ended to one that names the cause in data.reason and
// the sequence number in data._meta.seq, as package mcp's does with its own
// names.
func withEnded(o *resume.Options) *resume.Options {
	if o == nil {
		o = &resume.Options{}
	}
	o.Ended = func(id []byte, seq uint64, cause error) []byte {
		reason := map[error]string{resume.ErrRestarted: "server_restarted", resume.ErrOwnerLost: "owner_lost", resume.ErrStopped: "server_stopped"}[cause]
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":%q,"data":{"reason":%q,"_meta":{"seq":%d}}}}`, id, cause, reason, seq)
	}
	return o
}

// restarted is the final response (withEnded's) of a request that was running when
// its process stopped, as a client reads it.
type restarted struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Code int `json:"code"`
		Data struct {
			Reason string            `json:"reason"`
			Meta   map[string]uint64 `json:"_meta"`
		} `json:"data"`
	} `json:"error"`
}

func (s *testSink) raw(i int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.msgs) {
		return nil
	}
	return s.msgs[i]
}

// TestRecover: an engine started on a store that holds the requests of an engine
// that stopped recovers them: a completed one resumes as it was, a running one ends
// failed with the server_restarted error as its response, an acknowledged one is
// gone.
func TestRecover(t *testing.T) {
	st := memstore.New()
	e1 := mustNew(t, st, withEnded(nil))
	done, tokDone := start(t, e1, `"done"`, nil)
	appendMsg(t, done, resume.KindProgress, "p")
	complete(t, done)
	running, tokRunning := start(t, e1, `7`, nil)
	appendMsg(t, running, resume.KindProgress, "p")
	appendMsg(t, running, resume.KindRequest, "") // an elicitation nobody will answer now
	acked, tokAcked := start(t, e1, `"acked"`, nil)
	wantErr(t, "Attach acknowledging the response", acked.Attach(newSink(), complete(t, acked)), resume.ErrAcknowledged)
	e1.Close()
	wantCause(t, running.Context(), resume.ErrClosed)

	e2 := mustNew(t, st, withEnded(nil))
	defer e2.Close()
	if n := e2.Live(); n != 2 {
		t.Fatalf("recovered %d requests, want 2", n)
	}
	if _, err := e2.Lookup(tokAcked, []byte(`"acked"`)); err == nil {
		t.Fatal("an acknowledged request came back")
	}

	r, err := e2.Lookup(tokDone, []byte(`"done"`))
	if err != nil {
		t.Fatalf("Lookup(done): %v", err)
	}
	if s := r.Status(); s.State != resume.StateCompleted || !s.HasPending || s.HasInput {
		t.Fatalf("done: status %+v", s)
	}
	sink := newSink()
	attach(t, r, sink, 0)
	wantSeqs(t, "done, replayed", sink.seqs(t), 1, 2)
	if got := sink.received(t)[1].kind; got != "response" {
		t.Fatalf("done: last message %s, want the response", got)
	}

	if _, err := e2.Lookup(tokRunning, []byte(`"7"`)); err == nil {
		t.Fatal("found with the wrong id")
	}
	r, err = e2.Lookup(tokRunning, []byte(`7`))
	if err != nil {
		t.Fatalf("Lookup(running): %v", err)
	}
	if s := r.Status(); s.State != resume.StateFailed || !s.HasPending || s.HasInput {
		t.Fatalf("running: status %+v, want failed, pending, no input", s)
	}
	sink = newSink()
	attach(t, r, sink, 0)
	if m := decode(t, sink.raw(0)); m.seq != 1 || m.kind != "progress" {
		t.Fatalf("running: first message %+v, want the progress", m)
	}
	// The response is the first message of the request's next epoch.
	var resp restarted
	if err := json.Unmarshal(sink.raw(1), &resp); err != nil {
		t.Fatalf("running: response %q: %v", sink.raw(1), err)
	}
	if string(resp.ID) != `7` || resp.Error.Code != -32602 ||
		resp.Error.Data.Reason != "server_restarted" || resp.Error.Data.Meta["seq"] != 1<<32+1 {
		t.Fatalf("running: response %s", sink.raw(1))
	}
	if sink.raw(2) != nil {
		t.Fatalf("running: more than two messages: %q", sink.raw(2))
	}

	// Acknowledged, both are gone from the engine and the store.
	for _, c := range []struct {
		tok, id string
		ack     uint64
	}{{tokDone, `"done"`, 2}, {tokRunning, `7`, 1<<32 + 1}} {
		r, err := e2.Lookup(c.tok, []byte(c.id))
		if err != nil {
			t.Fatalf("Lookup(%s): %v", c.id, err)
		}
		if err := r.Touch(c.ack); err != nil {
			t.Fatalf("Touch(%s): %v", c.id, err)
		}
		if !r.Gone() {
			t.Fatalf("%s: not gone after the ack of its response", c.id)
		}
	}
	n := 0
	for range st.Records(t.Context()) {
		n++
	}
	if n != 0 {
		t.Fatalf("%d records left in the store", n)
	}

	// A third engine finds nothing to recover.
	e3 := mustNew(t, st, withEnded(nil))
	defer e3.Close()
	if n := e3.Live(); n != 0 {
		t.Fatalf("third engine recovered %d requests", n)
	}
}

// A recovered request stays bound to its principal: found by it, and answered
// as unknown to anyone else, the running one (failed as restarted) and the
// completed one alike.
func TestRecoverPrincipal(t *testing.T) {
	st := memstore.New()
	e1 := mustNew(t, st, withEnded(nil))
	done, tokDone := start(t, e1, `1`, &resume.StartOptions{Principal: "alice"})
	complete(t, done)
	_, tokRunning := start(t, e1, `2`, &resume.StartOptions{Principal: "alice"})
	e1.Close()

	e2 := mustNew(t, st, withEnded(nil))
	defer e2.Close()
	for _, c := range []struct {
		tok, id string
	}{{tokDone, `1`}, {tokRunning, `2`}} {
		if _, err := e2.LookupAs(c.tok, []byte(c.id), "alice"); err != nil {
			t.Errorf("request %s as alice after the restart: %v", c.id, err)
		}
		for _, p := range []string{"", "bob"} {
			_, err := e2.LookupAs(c.tok, []byte(c.id), p)
			wantErr(t, "request "+c.id+" as "+p+" after the restart", err, resume.ErrUnknown)
		}
	}
}

// Restartable requests recovered past MaxLive: the first runs again, the other is
// failed as restarted, with what it had queued and the server_restarted response.
func TestRecoverRestartablePastMaxLive(t *testing.T) {
	st := memstore.New()
	e1 := mustNew(t, st, withEnded(nil))
	for _, id := range []string{`1`, `2`} {
		r, _ := start(t, e1, id, &resume.StartOptions{Payload: []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call"}`)})
		appendMsg(t, r, resume.KindProgress, "p")
	}
	e1.Close()

	e2 := mustNew(t, st, withEnded(&resume.Options{MaxLive: 1}))
	defer e2.Close()
	rerun := e2.Restartable()
	if len(rerun) != 1 || e2.Live() != 2 {
		t.Fatalf("%d to run again, %d live; want 1 and 2", len(rerun), e2.Live())
	}
	failed := 0
	for rec := range st.Records(t.Context()) {
		if rec.State == resume.StateFailed {
			failed++
			var kinds []resume.Kind
			for m, err := range st.Replay(t.Context(), rec.Hash, 0) {
				if err != nil {
					t.Fatal(err)
				}
				kinds = append(kinds, m.Kind)
			}
			if len(kinds) != 2 || kinds[0] != resume.KindProgress || kinds[1] != resume.KindResponse {
				t.Errorf("the failed one holds %v; want its progress, then the response", kinds)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d stored as failed; want 1", failed)
	}
}

// TestRecoverNumbersAfterAcked: the messages a recovered request queues next are
// numbered after every message of the earlier process, also those the client
// acknowledged (which left the store): a client resuming with its ack gets the
// restarted error, and the new run of a restartable request, whole.
func TestRecoverNumbersAfterAcked(t *testing.T) {
	st := memstore.New()
	e1 := mustNew(t, st, withEnded(nil))
	lost, tokLost := start(t, e1, `"lost"`, nil)
	rerun, tokRerun := start(t, e1, `"rerun"`, &resume.StartOptions{Payload: []byte(`{"rerun":1}`)})
	var acks [2]uint64
	for i, r := range []*resume.Request{lost, rerun} {
		for range 3 {
			appendMsg(t, r, resume.KindProgress, "p")
		}
		s := newSink()
		attach(t, r, s, 0)
		acks[i] = s.top(t)
		attach(t, r, newSink(), acks[i]) // the client acknowledges what it has
		r.Detach(nil)
	}
	e1.Close()

	e2 := mustNew(t, st, withEnded(nil))
	defer e2.Close()
	r, err := e2.Lookup(tokLost, []byte(`"lost"`))
	if err != nil {
		t.Fatal(err)
	}
	s := newSink()
	attach(t, r, s, acks[0])
	var rst restarted
	if err := json.Unmarshal(s.raw(0), &rst); err != nil || s.raw(1) != nil ||
		rst.Error.Data.Reason != "server_restarted" || rst.Error.Data.Meta["seq"] <= acks[0] {
		t.Fatalf("resume of a restarted request after ack %d: %s, want the restarted error numbered after it", acks[0], s.raw(0))
	}

	rs := e2.Restartable()
	if len(rs) != 1 {
		t.Fatalf("%d restartable, want 1", len(rs))
	}
	first := appendMsg(t, rs[0], resume.KindProgress, "p")
	resp := complete(t, rs[0])
	if first <= acks[1] || resp <= first {
		t.Fatalf("the new run numbers its messages %d, %d after the client's ack %d", first, resp, acks[1])
	}
	r, err = e2.Lookup(tokRerun, []byte(`"rerun"`))
	if err != nil {
		t.Fatal(err)
	}
	s = newSink()
	attach(t, r, s, acks[1])
	wantSeqs(t, "resume of the new run", s.seqs(t), first, resp)
}

// TestRecoverKeepsAckMode: a request in ack mode (from its start, or from a
// client's first ack, also one after it ended) is recovered in ack mode: what a resume without an ack
// writes stays queued until acknowledged, so a second resume gets it again.
func TestRecoverKeepsAckMode(t *testing.T) {
	st := memstore.New()
	e1 := mustNew(t, st, withEnded(nil))
	fromStart, tokStart := start(t, e1, `"start"`, &resume.StartOptions{AckMode: true, Payload: []byte(`{}`)})
	switched, tokSwitched := start(t, e1, `"switched"`, &resume.StartOptions{Payload: []byte(`{}`)})
	for _, r := range []*resume.Request{fromStart, switched} {
		appendMsg(t, r, resume.KindProgress, "a")
		appendMsg(t, r, resume.KindNotification, "")
	}
	attach(t, switched, newSink(), 1) // the client acknowledges the first
	// Switched by an ack that came after the request ended.
	ended, tokEnded := start(t, e1, `"ended"`, nil)
	appendMsg(t, ended, resume.KindProgress, "a")
	appendMsg(t, ended, resume.KindNotification, "")
	complete(t, ended)
	if err := ended.Touch(1); err != nil {
		t.Fatal(err)
	}
	e1.Close()

	e2 := mustNew(t, st, withEnded(nil))
	defer e2.Close()
	for _, c := range []struct {
		id, tok string
		want    []uint64
	}{{`"start"`, tokStart, []uint64{1, 2}}, {`"switched"`, tokSwitched, []uint64{2}}, {`"ended"`, tokEnded, []uint64{2, 3}}} {
		r, err := e2.Lookup(c.tok, []byte(c.id))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			s := newSink()
			attach(t, r, s, 0)
			wantSeqs(t, fmt.Sprintf("%s: resume %d without an ack", c.id, i+1), s.seqs(t), c.want...)
		}
	}
}

// TestRecoverOtherOwner: an engine without Peers on a store a cluster wrote (its
// records name an owner) takes every request over, so that its own writes of
// them pass the store's owner check: here the ack mode a client switches to is
// stored.
func TestRecoverOtherOwner(t *testing.T) {
	st := memstore.New()
	h := resume.HashToken("tok")
	ctx := t.Context()
	if err := st.Put(ctx, resume.Record{Hash: h, ID: []byte(`1`), State: resume.StateCompleted, Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	for seq, k := range []resume.Kind{resume.KindProgress, resume.KindResponse} {
		if err := st.Append(ctx, h, resume.Message{Seq: uint64(seq + 1), Kind: k, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	e := mustNew(t, st, withEnded(nil))
	defer e.Close()
	r, err := e.Lookup("tok", []byte(`1`))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Touch(1); err != nil { // the client's first ack switches to ack mode
		t.Fatal(err)
	}
	if got, err := st.Get(ctx, h); err != nil || got.Owner != "" || !got.AckMode {
		t.Fatalf("stored record after the ack: %+v, %v; want this engine's, in ack mode", got, err)
	}
}

// TestRecoverResponseWithoutFinalState: a process that stopped between storing a
// request's final response and its final state (the record still says
// processing) leaves the response to say how the request ended: one that
// Complete was told failed (a tool error, a JSON-RPC error: Message.Failed) is
// failed, never completed; the others are completed. (Issue 24: failed requests
// reported completed after a kill -9.)
func TestRecoverResponseWithoutFinalState(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed bool
		want   resume.State
	}{
		{"completed", false, resume.StateCompleted},
		{"failed", true, resume.StateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New()
			e1 := mustNew(t, st, withEnded(nil))
			r, tok := start(t, e1, `1`, nil)
			appendMsg(t, r, resume.KindProgress, "p")
			// The response reached the store, the final state did not.
			resp := resume.Message{Seq: 2, Kind: resume.KindResponse, Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), Failed: tc.failed}
			if err := st.Append(t.Context(), resume.HashToken(tok), resp); err != nil {
				t.Fatal(err)
			}
			e1.Close()

			e2 := mustNew(t, st, withEnded(nil))
			defer e2.Close()
			got, err := e2.Lookup(tok, []byte(`1`))
			if err != nil {
				t.Fatalf("Lookup after the restart: %v", err)
			}
			if s := got.Status(); s.State != tc.want || !s.HasPending {
				t.Fatalf("recovered as %s (pending %v), want %s with its response pending", s.State, s.HasPending, tc.want)
			}
			rec, err := st.Get(t.Context(), resume.HashToken(tok))
			if err != nil || rec.State != tc.want {
				t.Fatalf("stored record after the recovery: %+v, %v; want state %s", rec, err, tc.want)
			}
		})
	}
}

// New's context bounds the recovery: ended, New returns its error and no
// engine, and leaves what it did not recover in the store, for a later engine.
func TestRecoverCancelled(t *testing.T) {
	st := memstore.New()
	e1 := mustNew(t, st, withEnded(nil))
	r, tok := start(t, e1, `1`, nil)
	complete(t, r)
	e1.Close()

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if e, err := resume.New(ctx, st, withEnded(nil)); !errors.Is(err, context.Canceled) || e != nil {
		t.Fatalf("New with an ended context = %v, %v; want no engine, context.Canceled", e, err)
	}
	e2 := mustNew(t, st, withEnded(nil))
	defer e2.Close()
	if _, err := e2.Lookup(tok, []byte(`1`)); err != nil {
		t.Fatalf("the request a cancelled New left in the store: %v", err)
	}
}

// OnLost is told of the running request that recovery fails (with its record,
// its trace context included), not of the completed one, nor of the
// restartable one that runs again, which takes an Observer (Observe).
func TestRecoverOnLost(t *testing.T) {
	st := memstore.New()
	e1 := mustNew(t, st, withEnded(nil))
	done, _ := start(t, e1, `1`, &resume.StartOptions{Trace: tc})
	complete(t, done)
	start(t, e1, `2`, &resume.StartOptions{Trace: tc})
	start(t, e1, `3`, &resume.StartOptions{Trace: tc, Payload: []byte(`{"restartable":true}`)})
	e1.Close()

	type lost struct {
		rec   resume.Record
		cause error
	}
	var got []lost
	o := withEnded(nil)
	o.OnLost = func(rec resume.Record, cause error) { got = append(got, lost{rec, cause}) }
	e2 := mustNew(t, st, o)
	defer e2.Close()
	if len(got) != 1 || string(got[0].rec.ID) != `2` || got[0].rec.Trace != tc || !errors.Is(got[0].cause, resume.ErrRestarted) {
		t.Fatalf("OnLost told of %+v; want request 2 with its trace context, ErrRestarted", got)
	}
	rs := e2.Restartable()
	if len(rs) != 1 || rs[0].Trace() != tc {
		t.Fatalf("restartable %v", rs)
	}
	obs := &observed{}
	rs[0].Observe(obs)
	if err := rs[0].Attach(newSink(), 0); err != nil {
		t.Fatal(err)
	}
	if got := obs.got(); !slices.Equal(got, []string{"attached 0"}) {
		t.Errorf("the Observer set by Observe was told %v, want the attachment", got)
	}
}

// TestAbandon: the last step of a drain ends the requests still processing with
// the server_stopped response, stored: an attached client gets it at once, and
// the next engine on the store serves it to a resume. A restartable request is
// left to run again when keep says so, ended too when it does not; a request
// with its result is untouched.
func TestAbandon(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			st := memstore.New()
			e1 := mustNew(t, st, withEnded(nil))
			plain, tokPlain := start(t, e1, `"plain"`, nil)
			sink := newSink()
			attach(t, plain, sink, 0)
			appendMsg(t, plain, resume.KindProgress, "p")
			rerun, tokRerun := start(t, e1, `"rerun"`, &resume.StartOptions{Payload: []byte(`{"rerun":1}`)})
			done, _ := start(t, e1, `"done"`, nil)
			complete(t, done)

			ended, left := e1.Abandon(keep)
			wantEnded, wantLeft := 1, 1
			if !keep {
				wantEnded, wantLeft = 2, 0
			}
			if ended != wantEnded || left != wantLeft {
				t.Fatalf("Abandon(%v) = %d ended, %d left; want %d, %d", keep, ended, left, wantEnded, wantLeft)
			}
			if s := plain.Status().State; s != resume.StateFailed {
				t.Fatalf("the abandoned request is %v, want failed", s)
			}
			if s := done.Status().State; s != resume.StateCompleted {
				t.Fatalf("the completed request is %v after Abandon, want completed", s)
			}
			if _, err := plain.Append(resume.KindProgress, "", func(uint64) []byte { return []byte(`{}`) }); !errors.Is(err, resume.ErrEnded) {
				t.Fatalf("its handler's next message: %v, want ErrEnded", err)
			}
			var got restarted
			if err := json.Unmarshal(sink.raw(1), &got); err != nil || got.Error.Data.Reason != "server_stopped" || got.Error.Data.Meta["seq"] != 2 {
				t.Fatalf("the attached client got %s (%v), want the server_stopped response at seq 2", sink.raw(1), err)
			}
			e1.Close()

			e2 := mustNew(t, st, withEnded(nil))
			t.Cleanup(e2.Close)
			r, err := e2.Lookup(tokPlain, []byte(`"plain"`))
			if err != nil {
				t.Fatalf("the abandoned request after a restart: %v", err)
			}
			again := newSink()
			attach(t, r, again, 1)
			if err := json.Unmarshal(again.raw(0), &got); err != nil || got.Error.Data.Reason != "server_stopped" {
				t.Fatalf("resumed after a restart: %s (%v), want the server_stopped response", again.raw(0), err)
			}
			rs := e2.Restartable()
			if keep != (len(rs) == 1) {
				t.Fatalf("%d requests to run again, keep=%v", len(rs), keep)
			}
			if !keep {
				r, err := e2.Lookup(tokRerun, []byte(`"rerun"`))
				if err != nil || r.Status().State != resume.StateFailed {
					t.Fatalf("the restartable request abandoned without keep: %v", err)
				}
			}
			_ = rerun
		})
	}
}
