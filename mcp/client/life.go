package client

import (
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/spec"
)

// A request's life in the client, as its guarded fields change: sent on a
// link, stranded when the link (or its stream) is lost, resumed on another,
// confirmed by its first message there, finished once. Each function below
// runs under Client.update.

// finish ends cl once with a result or an error.
func (cl *call) finish(result json.RawMessage, err error) {
	if cl.finished {
		return
	}
	cl.finished = true
	cl.result, cl.err = result, err
	if cl.done != nil {
		close(cl.done)
	}
	if cl.wake != nil {
		cl.wake()
	}
}

// accepted returns ResumeAccepted when a message of cl has just arrived on
// l, the link its unconfirmed resume went out on (nil otherwise), and marks
// the resume confirmed.
func (cl *call) accepted(l *link) func() {
	if !cl.unconfirmed || cl.link != l {
		return nil
	}
	cl.unconfirmed = false
	return cl.opts.ResumeAccepted
}

// resumeOn returns cl's requests/resume, sent on l now.
func (cl *call) resumeOn(l *link) []byte {
	cl.link, cl.resuming, cl.unconfirmed, cl.retries = l, true, true, 0
	if cl.span != nil {
		cl.span.AddEvent(mcptrace.EventResumeSent, trace.WithAttributes(mcptrace.Ack.Int64(int64(cl.lastSeq))))
	}
	return cl.resumeRequest()
}

// resumeRequest returns cl's requests/resume: its id, its token, the last
// sequence number it holds and the trace context of its span.
func (cl *call) resumeRequest() []byte {
	type meta struct {
		spec.RequestMeta
		TraceParent string `json:"traceparent,omitempty"`
		TraceState  string `json:"tracestate,omitempty"`
	}
	ack := cl.lastSeq
	b, _ := json.Marshal(struct {
		ResumeToken string `json:"resumeToken"`
		Meta        meta   `json:"_meta"`
	}{cl.policy.Token, meta{spec.RequestMeta{Ack: &ack}, cl.traceparent, cl.tracestate}})
	if cl.env != nil {
		// A request of the 2026-07-28 era is resumed in it.
		fields, _ := paramFields(json.RawMessage(b))
		b, _ = encodeParams(fields, &call{}, false, cl.env)
	}
	return spec.EncodeRequest(cl.id, spec.MethodResume, b)
}

// maxResumeRetries bounds how many times one resume the server did not take
// up (retryLater) is sent again on the same link.
const maxResumeRetries = 30

// retryLater takes up a resume of cl that the server answered e without
// taking it up, and with a retryAfter: the instance of a cluster that runs
// the request did not answer (owner_unreachable: it is claimed once its
// lease runs out), or the session spent its failed token checks
// (rate_limited). It returns how long to wait before the resume is sent
// again on the same link, or false, and the call ends with e, for any
// other error, or once the retries are spent.
func (cl *call) retryLater(e *spec.Error) (time.Duration, bool) {
	if e.Reason != spec.ReasonOwnerUnreachable && e.Reason != spec.ReasonRateLimited || cl.retries >= maxResumeRetries {
		return 0, false
	}
	cl.retries++
	return max(time.Duration(e.RetryAfter)*time.Second, time.Second), true
}

// strand is what became of a call whose stream or connection was lost
// (call.strand).
type strand int

const (
	strandFailed    strand = iota // ended: ErrNotResumable
	strandResent                  // to be sent again (run sends it)
	strandResumable               // waits to be resumed (requests/resume)
)

// maxUnsent bounds how often one request whose write failed (the server
// never got it) is sent again.
const maxUnsent = 3

// strand settles a call whose link, or whose stream on it, was lost (why)
// before its answer: a call the server made resumable waits to be resumed;
// one with a key but no policy yet is sent again with its key (the server
// attaches it to the call it runs, whose messages, numbered as before, it
// sends from the first); one the server never got (its write failed, or the
// server refused it: a session it forgot), an Idempotent one, are sent
// again; any other ends with ErrNotResumable: its outcome is unknown, and a
// tool call may not be safe to run twice.
func (cl *call) strand(why error) strand {
	switch {
	case cl.policy != nil:
		cl.link, cl.resuming, cl.unconfirmed = nil, false, false
		return strandResumable
	case cl.internal:
	case cl.callKey != "" && !cl.plain:
		return cl.sendAgain()
	case cl.unsent && cl.resends < maxUnsent:
		cl.unsent = false
		cl.resends++
		cl.lastSeq = 0
		return cl.sendAgain()
	case cl.opts.Idempotent:
		cl.lastSeq = 0
		return cl.sendAgain()
	}
	cl.finish(nil, fmt.Errorf("%w: request %s (%s): %v", ErrNotResumable, cl.id, cl.method, why))
	return strandFailed
}

// sendAgain makes cl a request to send again (run sends it).
func (cl *call) sendAgain() strand {
	cl.sent, cl.link = false, nil
	if cl.resend != nil {
		select {
		case cl.resend <- struct{}{}:
		default:
		}
	}
	if cl.wake != nil {
		cl.resendDue = true
		cl.wake()
	}
	return strandResent
}

// maxWait is how long cl, a resumable call, is tried without a message of
// it: its policy's maxWait, else def (the client's).
func (cl *call) maxWait(def time.Duration) time.Duration {
	if cl.policy != nil && cl.policy.MaxWait > 0 {
		return cl.policy.MaxWait
	}
	return def
}
