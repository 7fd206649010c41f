package mcp

import (
	"errors"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// byToken is a request that names another by its token or id (getStatus,
// resume, a retry, the tasks/* requests): its span, its one answer, and its
// token check.
type byToken struct {
	c     *connState
	m     *spec.Message
	st    Stream
	sp    *reqSpan
	later bool // the handler answers later itself (and ends the span)
}

// answerByToken runs handler for m: the span opens, then the handler's
// result (or error) is the answer, written with the span's end, unless the
// handler said it answers later (attaching the request, whose messages
// come first). Every error exit of a handler is its return.
func (c *connState) answerByToken(m *spec.Message, st Stream, handler func(q *byToken) ([]byte, *spec.Error)) {
	q := &byToken{c: c, m: m, st: st, sp: spanOf(c, m, st)}
	res, e := handler(q)
	switch {
	case q.later:
	case e != nil:
		q.fail(e)
	default:
		c.reply(st, spec.EncodeResponse(m.ID, res))
		q.sp.end(nil)
	}
}

// fail answers the request with e and ends its span (for a handler that
// answers later).
func (q *byToken) fail(e *spec.Error) {
	q.c.replyError(q.st, q.m.ID, e)
	q.sp.end(e)
}

// answerLater tells answerByToken that the handler answers itself.
func (q *byToken) answerLater() { q.later = true }

// lookup is the token check (attachments.lookup), its span put in the found
// request's trace; a session past its limit of failed checks gets the
// rate_limited error (a *spec.Error) instead.
func (q *byToken) lookup(token string, id []byte) (resume.Handle, error) {
	r, wait, err := q.c.att.lookup(token, id)
	if wait > 0 {
		return nil, q.rateLimited(wait)
	}
	q.sp.within(r)
	return r, err
}

// badToken spends a failed check on a token that does not decode; e is the
// answer, or rate_limited past the limit.
func (q *byToken) badToken(e *spec.Error) *spec.Error {
	if wait := q.c.att.badToken(); wait > 0 {
		return q.rateLimited(wait)
	}
	return e
}

func (q *byToken) rateLimited(wait time.Duration) *spec.Error {
	q.c.debug().Stringer("retryAfter", wait).Msg("token check refused: rate limited")
	return rateLimitError(wait)
}

// refusal is err when lookup answered it itself (rate_limited), else nil.
func refusal(err error) *spec.Error {
	var se *spec.Error
	if errors.As(err, &se) {
		return se
	}
	return nil
}

// task finds the task m names (taskId): the task, or cancelled for a task
// that was cancelled (nothing else is kept of it), or the answer to give: an
// unknown task (a task id that does not decode spends a failed check), the
// rate limit.
func (q *byToken) task(m *spec.Message) (tid *taskID, r resume.Handle, cancelled bool, e *spec.Error) {
	unknown := spec.NewError(spec.CodeInvalidParams, spec.ReasonUnknownTask, "unknown task")
	tid, ok := decodeTaskID(m.Target())
	if !ok {
		return nil, nil, false, q.badToken(unknown)
	}
	r, err := q.lookup(tid.Token, tid.ID)
	switch {
	case refusal(err) != nil:
		return nil, nil, false, refusal(err)
	case errors.Is(err, resume.ErrCancelled):
		return tid, nil, true, nil
	case err != nil:
		return nil, nil, false, unknown
	}
	return tid, r, false, nil
}
