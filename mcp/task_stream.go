package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// A task's events as a resumable stream (SEP-2694, draft): tasks/stream
// {taskId, after?} sends, as notifications/tasks/event on the request's
// stream, the task's events after the cursor (all it keeps, without one), then
// each new one as it comes, and answers with an empty result once the task has
// ended and its last event was sent. The events are the messages the engine
// keeps of the task, in its store when it has one: an event's seq is its
// message's sequence number less one (from 0), so that a cursor means the
// same on any connection and after a restart. A progress notification
// superseded while nobody read it, and a question once answered, are not kept:
// their numbers are skipped. A cursor older than the oldest event kept is
// answered events_gone (-32010) with the oldest one's seq.

// taskStreamKey names a task's stream among a connection's: one per task.
func taskStreamKey(tid *taskID) string { return string(tid.ID) + "\x00" + tid.Token }

// taskStream answers tasks/stream for the task tid, found as r, on st; done
// is the empty result that ends it, in its era's shape (doneResult2025,
// doneResult2026). sp, its span, lasts as long as the stream.
func (tk *sessionTasks) taskStream(m *spec.Message, st Stream, r resume.Handle, tid *taskID, done json.RawMessage, sp *reqSpan) {
	c := tk.c
	after, from, err := streamCursor(m.Params)
	if err != nil {
		c.replyError(st, m.ID, err)
		sp.end(err)
		return
	}
	var src eventSource
	if req, local := r.(*resume.Request); local {
		src = localEvents{req}
	} else {
		// Another instance owns it: its messages are read from the store they
		// share, without attaching (which would take the task over from its
		// client), and read again every storedPoll.
		src = storedEvents{h: r, store: c.s.eng.Store(), ctx: c.s.eng.Context(), hash: resume.HashToken(tid.Token)}
	}
	key := taskStreamKey(tid)
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.ctx))
	id := string(m.ID)
	var closed, open bool
	c.update(func(s *sessionState) {
		if closed = s.closed; closed {
			return
		}
		for _, ref := range s.taskStreams {
			if open = ref.task == key; open {
				return
			}
		}
		if s.taskStreams == nil {
			s.taskStreams = map[string]taskStreamRef{}
		}
		s.taskStreams[id] = taskStreamRef{task: key, cancel: cancel}
	})
	switch {
	case closed:
		cancel()
		sp.endCause(errConnectionLost)
		return
	case open:
		cancel()
		e := spec.NewError(spec.CodeInvalidParams, spec.ReasonStreamOpen, "this task's events are streamed on this connection already")
		c.replyError(st, m.ID, e)
		sp.end(e)
		return
	}
	// release lets go of the stream's place on the connection: before its
	// answer is written, so that a client that streams the task again once
	// answered is not refused stream_open by a stream that has ended.
	release := sync.OnceFunc(func() {
		cancel()
		c.update(func(s *sessionState) {
			if ref, ok := s.taskStreams[id]; ok && ref.task == key {
				delete(s.taskStreams, id)
			}
		})
	})
	c.s.wg.Go(func() {
		defer release()
		tk.streamEvents(ctx, &taskStreamReq{id: m.ID, st: st, src: src, tid: tid, after: after, from: from, done: done, release: release, sp: sp})
	})
}

// taskStreamRef is a tasks/stream running on a connection.
type taskStreamRef struct {
	task   string // taskStreamKey
	cancel context.CancelFunc
}

// streamCursor reads tasks/stream's after: from says one was given (a
// non-negative integer, the seq of the last event the client has).
func streamCursor(params json.RawMessage) (after uint64, from bool, _ *spec.Error) {
	raw, found, _ := spec.Member(params, "after")
	if !found || string(raw) == "null" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil || n == 1<<64-1 {
		return 0, false, spec.NewError(spec.CodeInvalidParams, spec.ReasonInvalidParams, "after must be the seq of an event: a non-negative integer")
	}
	return n, true, nil
}

// taskStreamReq is one tasks/stream being served: its request's id, where its
// events go (st), where they are read (src), the task, the cursor (from:
// after is one, the events after it are sent; else every one kept), the
// result that ends it (done), what lets go of its place on the connection
// (release) and its span (sp), which ends with it.
type taskStreamReq struct {
	id      spec.ID
	st      Stream
	src     eventSource
	tid     *taskID
	after   uint64
	from    bool
	done    json.RawMessage
	release func()
	sp      *reqSpan
}

// The empty results that end a tasks/stream, in each era's shape.
var (
	doneResult2025 = json.RawMessage(`{}`)
	doneResult2026 = json.RawMessage(`{"resultType":"complete"}`)
)

// streamEvents sends the task's events after the cursor, then each new one,
// until the task has ended (answered with the empty result) or ctx ends (the
// stream was cancelled, or its connection closed: the task runs on).
func (tk *sessionTasks) streamEvents(ctx context.Context, q *taskStreamReq) {
	c := tk.c
	id, st, r, tid, after, from, release, sp := q.id, q.st, q.src, q.tid, q.after, q.from, q.release, q.sp
	// gone ends the span of a stream that went away unanswered: its
	// connection closed, or the client cancelled it.
	gone := func() {
		if c.ctx.Err() != nil || ctx.Err() == nil {
			sp.endCause(errConnectionLost)
		} else {
			sp.endCause(errClientCancel)
		}
	}
	w := r.watch() // before the first read: nothing queued meanwhile is missed
	defer w.Stop()
	task := tid.encode()
	last := uint64(0) // the sequence number of the last message sent (or skipped by the cursor)
	if from {
		last = after + 1
		var oldest uint64 // the seq of the oldest message kept, 0 for none
		if kept, _, err := r.events(0); err == nil {
			for m, err := range kept {
				if err == nil {
					oldest = m.Seq
				}
				break
			}
		}
		if oldest > last+1 {
			e := spec.NewError(spec.CodeEventsGone, spec.ReasonEventsGone, "the events after this cursor are no longer kept; the oldest kept has earliestSeq")
			e.TaskID, e.EarliestSeq = task, oldest-1
			release()
			c.replyError(st, id, e)
			sp.end(e)
			return
		}
	}
	// sendOne sends m's event if m comes after last; it reports whether the
	// stream goes on, and whether m was the task's end.
	sendOne := func(m Message) (ok, end bool) {
		if m.Seq <= last {
			return true, false
		}
		last = m.Seq
		end = m.Kind == KindResponse
		ev, has := taskEvent(task, m)
		if !has {
			return true, end
		}
		if err := st.Write(ctx, Message{Kind: KindNotification, Data: ev}); err != nil {
			return false, end // the stream is gone; the task runs on
		}
		return true, end
	}
	// send sends the events of msgs after last (see sendOne).
	send := func(msgs []Message) (ok, end bool) {
		for _, m := range msgs {
			var e bool
			ok, e = sendOne(m)
			end = end || e
			if !ok {
				return false, end
			}
		}
		return true, end
	}
	finish := func() {
		release()
		c.reply(st, spec.EncodeResponse(id, q.done))
		sp.end(nil)
	}
	for {
		// What is kept, from the store or the task's outbox, sent as it is read.
		kept, ended, err := r.events(last)
		if kept == nil { // the task left the engine: err says how
			kept = func(func(Message, error) bool) {}
		}
		ok, end := true, false
		for m, rerr := range kept {
			if rerr != nil {
				err = rerr
				break
			}
			var e bool
			ok, e = sendOne(m)
			end = end || e
			if !ok {
				break
			}
		}
		if err != nil && !errors.Is(err, resume.ErrCancelled) {
			release()
			e := wireError(err)
			c.replyError(st, id, e)
			sp.end(e)
			return
		}
		switch {
		case !ok:
			gone()
			return
		case ended || end || err != nil: // completed, failed, or cancelled (nothing kept)
			finish()
			return
		}
		// Then what comes, as it comes, until the watcher falls behind (or the
		// task leaves the engine): then what is kept is read again.
		for reread := false; !reread; {
			select {
			case <-w.C():
			case <-ctx.Done():
				gone()
				return
			}
			got, lagged := w.Take()
			ok, end := send(got)
			switch {
			case !ok:
				gone()
				return
			case end:
				finish()
				return
			}
			reread = lagged || (len(got) == 0 && r.gone())
		}
	}
}

// taskEvent is the notifications/tasks/event of the task's message m, and
// whether it has one. Progress and logs, nearly every event, are framed around
// their params as they are, without decoding them.
func taskEvent(task string, m Message) ([]byte, bool) {
	var typ string
	var payload []byte
	switch m.Kind {
	case KindResponse:
		typ, payload = spec.EventTypeStatus, statusPayload(m.Data)
	case KindRequest:
		method := spec.StringMember(m.Data, "method")
		params, _, _ := spec.Member(m.Data, "params")
		b, err := json.Marshal(map[string]any{"method": method, "params": json.RawMessage(cmp.Or(string(params), "{}"))})
		if err != nil {
			return nil, false
		}
		typ, payload = spec.EventTypeInput, b
	default:
		switch spec.StringMember(m.Data, "method") {
		case spec.MethodProgress:
			typ = spec.EventTypeProgress
		case "notifications/message":
			typ = spec.EventTypeLog
		case spec.MethodTaskStatus:
			typ = spec.EventTypeStatus
		default:
			return nil, false
		}
		payload, _, _ = spec.Member(m.Data, "params")
		if len(payload) == 0 || payload[0] != '{' {
			payload = []byte("{}")
		}
	}
	// A task id is "tk1." and base64url: nothing in it to escape.
	b := make([]byte, 0, len(payload)+2*len(task)+192)
	b = append(b, `{"jsonrpc":"2.0","method":"`+spec.MethodTaskEvent+`","params":{"taskId":"`...)
	b = append(b, task...)
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, m.Seq-1, 10)
	b = append(b, `,"type":"`...)
	b = append(b, typ...)
	b = append(b, `","payload":`...)
	b = append(b, payload...)
	b = append(b, `,"_meta":{"`+spec.MetaRelatedTask+`":{"taskId":"`...)
	b = append(b, task...)
	b = append(b, `"}}}}`...)
	return b, true
}

// statusPayload is the payload of the status event of a task's final response:
// {status: completed|failed, statusMessage?}, as tasks/get says it.
func statusPayload(resp []byte) []byte {
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(resp, &msg)
	status := map[string]any{"status": "completed"}
	var res struct {
		IsError bool `json:"isError"`
	}
	switch {
	case msg.Error != nil:
		status["status"] = "failed"
		if s := statusMessage(msg.Error); s != "" {
			status["statusMessage"] = s
		}
	case json.Unmarshal(msg.Result, &res) == nil && res.IsError:
		status["status"] = "failed"
	}
	b, _ := json.Marshal(status)
	return b
}

// stopTaskStream ends the tasks/stream with request id on this connection, if
// one runs (notifications/cancelled): the task runs on. It reports whether one
// did.
func (tk *sessionTasks) stopTaskStream(id string) bool {
	var ref taskStreamRef
	var ok bool
	tk.c.update(func(st *sessionState) { ref, ok = st.taskStreams[id] })
	if ok {
		ref.cancel()
	}
	return ok
}

// eventSource is where a task's events are read from: the task itself, or the
// store of a cluster whose other instance runs it.
type eventSource interface {
	// events returns the messages kept after sequence number after, as they
	// are read, and whether the task had ended when asked (an error once it
	// left the engine).
	events(after uint64) (iter.Seq2[Message, error], bool, error)
	// watch follows what comes from now on.
	watch() eventWatch
	// gone reports whether the task left the engine.
	gone() bool
}

// eventWatch is a resume.Watcher, or what stands for one.
type eventWatch interface {
	C() <-chan struct{}
	Take() (msgs []Message, lagged bool)
	Stop()
}

type localEvents struct{ r *resume.Request }

func (l localEvents) events(after uint64) (iter.Seq2[Message, error], bool, error) {
	return l.r.Events(after)
}
func (l localEvents) watch() eventWatch { return l.r.Watch() }
func (l localEvents) gone() bool        { return l.r.Gone() }

// storedEvents reads a task another instance owns from the shared store.
type storedEvents struct {
	h     resume.Handle
	store resume.Store
	ctx   context.Context
	hash  resume.TokenHash
}

// storedPoll is how often a task another instance runs is read again.
const storedPoll = 250 * time.Millisecond

func (s storedEvents) events(after uint64) (iter.Seq2[Message, error], bool, error) {
	if s.h.Gone() {
		return nil, true, resume.ErrCancelled
	}
	_ = s.h.Touch(0)                    // asks the owner, which refreshes the status
	ended := s.h.Status().State.Ended() // before the read: its response is then among them
	replay := s.store.Replay
	if f, ok := s.store.(resume.FreshReplayer); ok {
		replay = f.ReplayFresh
	}
	return replay(s.ctx, s.hash, after), ended, nil
}

func (s storedEvents) gone() bool { return s.h.Gone() }

// watch ticks every storedPoll, each tick a lag: the store is read again.
func (s storedEvents) watch() eventWatch {
	p := &pollWatch{ch: make(chan struct{}, 1), done: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTicker(storedPoll)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				select {
				case p.ch <- struct{}{}:
				default:
				}
			case <-p.done:
				return
			}
		}
	})
	return p
}

type pollWatch struct {
	ch, done chan struct{}
	wg       sync.WaitGroup // the ticking goroutine
}

func (p *pollWatch) C() <-chan struct{}      { return p.ch }
func (p *pollWatch) Take() ([]Message, bool) { return nil, true }

// Stop ends the ticking and waits for it.
func (p *pollWatch) Stop() { close(p.done); p.wg.Wait() }
