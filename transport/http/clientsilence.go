package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The client's Silence window (ClientOptions.Silence): a request whose answer,
// or whose body, carries nothing for that long is cancelled, its error a
// SilenceError.

// DefaultSilence is ClientOptions.Silence's window before a server announced
// its keepalive, and the least one for an answer's headers: 2.5 times the
// default keepalive of this project's servers (20 s).
const DefaultSilence = 50 * time.Second

// SilenceError is why a ClientConn ended when a stream carried nothing for its
// Silence window. It is an ErrStreamLost.
type SilenceError struct{ Window time.Duration }

func (e *SilenceError) Error() string {
	return fmt.Sprintf("no data for %s", e.Window.Round(time.Millisecond))
}

// Is makes a SilenceError an ErrStreamLost.
func (e *SilenceError) Is(target error) bool { return target == ErrStreamLost }

// window is the Silence bound of a stream whose answer announced keepalive ka
// (0: none; the server's own then, once it announced one); 0 for none.
func (c *ClientConn) window(ka time.Duration) time.Duration {
	switch {
	case c.silence < 0:
		return 0
	case c.silence > 0:
		return c.silence
	case !c.failOnLoss && !c.reportLoss:
		return 0
	}
	if ka <= 0 {
		ka = time.Duration(c.keepAlive.Load())
	}
	if ka > 0 {
		return ka * 5 / 2
	}
	if c.failOnLoss {
		return DefaultSilence
	}
	// A server that announced no keepalive may be silent for as long as a
	// tool runs (one that answers a POST with JSON sends nothing before the
	// result): a client that only reports a lost stream does not guess.
	return 0
}

// headerWindow is the Silence bound of the wait for an answer's headers: the
// server's own window, and no less than DefaultSilence unless Silence says
// so, since a server sends nothing before the answer to a request it answers
// only at its end (tasks/result, a gateway's prompts/get): a request's event
// stream starts at once, and its keepalive (the shorter one the client asks
// for) bounds it from then on.
func (c *ClientConn) headerWindow() time.Duration {
	w := c.window(0)
	if w > 0 && c.silence == 0 {
		w = max(w, DefaultSilence)
	}
	return w
}

// askKeepAlive asks for the client's keepalive on req's stream
// (ClientOptions.KeepAlive).
func (c *ClientConn) askKeepAlive(req *http.Request) {
	if c.keepAsk != "" {
		req.Header.Set(HeaderKeepAlive, c.keepAsk)
	}
}

// do makes an HTTP request bounded by the Silence window: its answer's headers
// must come within headerWindow, and then its body must carry a byte at least
// as often as its own window says, else the request is cancelled and its
// error (or the body's, silenceOf) says so.
func (c *ClientConn) do(req *http.Request) (*http.Response, error) {
	return c.watch(req, false)
}

// watch is do; with quiet, the body of the answer is a stream that may carry
// nothing for as long as the server has nothing to send (the standalone GET
// stream), bounded only once the server announced its keepalive.
func (c *ClientConn) watch(req *http.Request, quiet bool) (*http.Response, error) {
	w := c.headerWindow()
	// With ReportStreamLoss alone the window may come with this very answer
	// (its keepalive announcement), so its body is watched from then on.
	if w <= 0 && !(c.silence == 0 && c.reportLoss) {
		return c.client.Do(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	silent := &SilenceError{Window: w}
	var t *time.Timer
	if w > 0 {
		t = time.AfterFunc(w, func() { c.silenced(cancel, silent) })
	}
	resp, err := c.client.Do(req.WithContext(ctx))
	if t != nil {
		t.Stop()
	}
	if err != nil {
		cancel(nil)
		if errors.Is(context.Cause(ctx), silent) {
			return nil, silent
		}
		return nil, err
	}
	// The body's window: its own announcement's (a request's stream, at the
	// keepalive it asked for; the GET stream, at the server's own).
	var ka time.Duration
	if v, perr := strconv.ParseFloat(resp.Header.Get(HeaderKeepAlive), 64); perr == nil && v > 0 && v < maxAnnounced {
		ka = time.Duration(v * float64(time.Second))
		if ka > time.Duration(c.keepAlive.Load()) {
			c.keepAlive.Store(int64(ka))
		}
	}
	w = c.window(ka)
	silent.Window = w
	if quiet && c.silence == 0 && c.keepAlive.Load() == 0 {
		w = 0
	}
	body := &silentBody{ReadCloser: resp.Body, ctx: ctx, cancel: cancel, silent: silent, window: w}
	if w > 0 {
		body.timer = time.AfterFunc(w, func() { c.silenced(cancel, silent) })
	}
	resp.Body = body
	return resp, nil
}

// maxAnnounced bounds the keepalive (in seconds) a server may announce: a
// longer one is taken for none (and a Duration holds it).
const maxAnnounced = 24 * 60 * 60

// silenced ends a request that was silent for its window. The idle
// connections kept for reuse are closed too: what silenced one connection (a
// laptop's sleep, a NAT that forgot its flows, a network that changed) has
// most likely taken them with it, and a request sent on one of them would be
// silent in its turn.
func (c *ClientConn) silenced(cancel context.CancelCauseFunc, silent *SilenceError) {
	cancel(silent)
	c.client.CloseIdleConnections()
}

// silentBody is a response body whose request is cancelled when no byte comes
// for its window (none when it is 0: only Close cancels it).
type silentBody struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	silent *SilenceError
	window time.Duration
	timer  *time.Timer
}

func (b *silentBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.timer != nil {
		b.timer.Reset(b.window)
	}
	return n, err
}

func (b *silentBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// silenceOf is the SilenceError that ended body, or nil.
func silenceOf(body io.Reader) *SilenceError {
	if b, ok := body.(*silentBody); ok && errors.Is(context.Cause(b.ctx), b.silent) {
		return b.silent
	}
	return nil
}

// readAll reads a response body; a body cut short by the Silence window says
// so.
func readAll(body io.Reader) ([]byte, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		if silent := silenceOf(body); silent != nil {
			return b, silent
		}
	}
	return b, err
}
