package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/spec"
)

// CallOptions configure one call. Nil means none.
type CallOptions struct {
	// Progress receives the call's progress notifications, each exactly once and in
	// order across any number of resumes. It runs on the connection's reader
	// goroutine: it must not block for long.
	Progress func(Progress)
	// Policy is called when the server makes the call resumable (and again if a
	// later policy replaces the token).
	Policy func(Policy)
	// Resumed is called each time a resume of the call is sent on a new
	// connection, before what the server kept for it arrives; the server may
	// still refuse it (a *ResumeError).
	Resumed func()
	// ResumeAccepted is called once the server has taken up a resume of the call:
	// when the first message of the call arrives on the new connection (a
	// progress notification, or its final response when that is not a
	// *ResumeError), before it is handled. A call resumed while its tool sends
	// nothing is confirmed only by its response. Never called for a resume the
	// server refuses.
	ResumeAccepted func()
	// Idempotent says the call may run twice on the server: when its connection is
	// lost before the server made it resumable, it is sent again (same id) on the
	// next connection instead of failing with ErrNotResumable. For read-only tools.
	// A plain server's progress then starts again from the beginning.
	// (Unneeded with a server that takes call keys: see Resent.)
	Idempotent bool
	// Resent is called when a tools/call is sent again on a new connection
	// because the one it was sent on was lost before its policy came. The client
	// names every tools/call with a random key when the server takes keys
	// (io.mcp-resume/key): such a call is sent again with its key, and the server
	// attaches it to the call it already runs (or runs it, if the first never
	// arrived) instead of running the tool twice.
	Resent func()
}

// Progress is one notifications/progress of a call.
type Progress struct {
	Progress float64
	Total    float64 // 0 when the server gave none
	Message  string
	Seq      uint64 // io.mcp-resume/seq, 0 from a plain server
}

// Policy is what notifications/requests/resumePolicy said about a call.
type Policy struct {
	RequestID spec.ID
	Token     string // a secret: whoever holds it can resume or cancel the request
	MinWait   time.Duration
	MaxWait   time.Duration // 0 when the server named none
}

// call is one request of this client in flight.
type call struct {
	id       spec.ID
	key      string // string(id)
	method   string
	opts     CallOptions
	internal bool // initialize: belongs to one link, not resumed

	done    chan struct{} // closed by finishLocked
	resend  chan struct{} // an Idempotent or keyed call lost before its policy (capacity 1)
	callKey string        // the call's io.mcp-resume/key, "" for none
	header  http.Header   // HTTP headers of its own (Mcp-Param-*), nil for none
	plain   bool          // progress came before any policy: the server runs it plainly (guarded by Client.mu)
	result  json.RawMessage
	err     error

	// Guarded by Client.mu.
	finished bool
	sent     bool      // written on some link
	link     *link     // the link it was last sent or resumed on; nil while waiting to resume
	resuming bool      // its current link carries requests/resume, not the original
	retries  int       // times its resume on link was sent again (retryLaterLocked)
	policy   *Policy   // nil until the server makes it resumable
	lastSeq  uint64    // highest sequence number received
	heard    time.Time // when the server last showed this request alive, for maxWait

	// unconfirmed: the resume on link has had no message of the call back yet
	// (ResumeAccepted is due). Guarded by Client.mu.
	unconfirmed bool

	// span is the call's CLIENT span (nil when the client does not trace),
	// traceparent and tracestate its W3C trace context, sent with the call
	// and its resumes. began is when the call started, target what it names
	// (a tool, a prompt, a resource) and version the protocol version it went
	// in, for its span and its Operation (began is zero when the client
	// neither traces nor measures). Set before the call is sent.
	span                    trace.Span
	traceparent, tracestate string
	began                   time.Time
	target, version         string
}

func (c *Client) newCall(method string, opts *CallOptions) *call {
	id := spec.ID(strconv.Quote(c.prefix + strconv.FormatUint(c.nextID.Add(1), 10)))
	cl := &call{id: id, key: string(id), method: method, done: make(chan struct{}), resend: make(chan struct{}, 1)}
	if opts != nil {
		cl.opts = *opts
	}
	return cl
}

// acceptedLocked returns ResumeAccepted when a message of cl has just arrived on
// l, the link its unconfirmed resume went out on (nil otherwise), and marks the
// resume confirmed.
func acceptedLocked(cl *call, l *link) func() {
	if !cl.unconfirmed || cl.link != l {
		return nil
	}
	cl.unconfirmed = false
	return cl.opts.ResumeAccepted
}

// finishLocked ends cl once with a result or an error.
func (c *Client) finishLocked(cl *call, result json.RawMessage, err error) {
	if cl.finished {
		return
	}
	cl.finished = true
	cl.result, cl.err = result, err
	close(cl.done)
}

// forget removes cl from the calls in flight.
func (c *Client) forget(cl *call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finishLocked(cl, nil, ErrClosed)
	delete(c.calls, cl.key)
}

// CallTool calls a tool and returns its result, whatever happens to the
// connection in between: a call the server made resumable is resumed on a new
// connection after every loss until it ends or its maxWait passes. A tool that
// fails returns a result with IsError set, not an error. Cancelling ctx sends
// notifications/cancelled (with the resume token, which reaches the request even
// while it is detached) and returns ctx's error.
func (c *Client) CallTool(ctx context.Context, name string, args any, opts *CallOptions) (*mcpgo.CallToolResult, error) {
	params := map[string]any{"name": name}
	if args != nil {
		params["arguments"] = args
	}
	raw, err := c.Call(ctx, spec.MethodToolsCall, params, opts)
	if err != nil {
		return nil, err
	}
	res, err := mcpgo.ParseCallToolResult(&raw)
	if err != nil {
		return nil, &ProtocolError{Problem: "tools/call result: " + err.Error(), Raw: raw}
	}
	return res, nil
}

// Call sends a request and returns its result (raw JSON) or its error (a
// *spec.Error for a JSON-RPC error, a *ResumeError when a resume was refused, or
// one matching ErrNotResumable, ErrGaveUp, ErrClosed). params must encode as a
// JSON object or be nil. A tools/call, and any call with CallOptions.Progress,
// carries a progress token of its own. With Options.TracerProvider, the call
// is a CLIENT span below the span ctx carries, sent in its _meta; with
// Options.OnOperation, an Operation once it is over.
//
// A tools/call, prompts/get or resources/read that the server answers
// input_required (multi round-trip requests, 2026-07-28) has its questions
// answered by the Options' handlers and is sent again, as a new request with
// the answers and the server's requestState, until the server answers
// otherwise: Call returns that answer. A tools/call in the 2026-07-28 era
// carries, over Streamable HTTP, the Mcp-Param-* headers its tool's
// x-mcp-header annotations name, for a tool ListTools listed; a tool that
// ListTools left out for its invalid annotations is not called (an error
// matching ErrInvalidTool).
func (c *Client) Call(ctx context.Context, method string, params any, opts *CallOptions) (json.RawMessage, error) {
	fields, err := paramFields(params)
	if err != nil {
		return nil, fmt.Errorf("client: %s params: %w", method, err)
	}
	var tool *mcpgo.Tool
	if method == spec.MethodToolsCall && c.era.modern {
		if tool, err = c.listedTool(fields); err != nil {
			return nil, err
		}
	}
	for round := 1; ; round++ {
		res, err := c.request(ctx, method, maps.Clone(fields), tool, opts)
		if err != nil || !spec.RetriesInput(method) {
			return res, err
		}
		in, asked := spec.AskedInput(res)
		if !asked {
			return res, nil
		}
		if round == maxInputRounds {
			return nil, fmt.Errorf("client: %s: the server asked for input %d times in a row", method, round)
		}
		answers, err := c.fulfil(ctx, in)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			return nil, fmt.Errorf("client: %s: %w", method, err)
		}
		// [2026-07-28 MRTR] The retry carries the answers and the
		// requestState exactly as the server sent it; one that sent none gets
		// none back.
		fields = maps.Clone(fields)
		fields["inputResponses"], _ = json.Marshal(answers)
		delete(fields, "requestState")
		if state, found := member(res, "requestState"); found && string(state) != "null" {
			fields["requestState"] = bytes.Clone(state)
		}
	}
}

// maxInputRounds bounds the rounds of one call that the server answers
// input_required.
const maxInputRounds = 32

// request sends one request of method with params fields (a round of Call)
// and returns its result; tool, when not nil, is the tool a tools/call
// names, whose x-mcp-header annotations name its Mcp-Param-* headers.
func (c *Client) request(ctx context.Context, method string, fields map[string]json.RawMessage, tool *mcpgo.Tool, opts *CallOptions) (json.RawMessage, error) {
	cl := c.newCall(method, opts)
	if method == spec.MethodToolsCall && c.takesKeys() {
		cl.callKey = newCallKey()
	}
	if c.obs != nil {
		c.obs.start(ctx, cl, target(method, fields), c.ProtocolVersion())
	}
	p, err := encodeParams(fields, cl, method == spec.MethodToolsCall || cl.opts.Progress != nil, c.era.envelope)
	if err != nil {
		err = fmt.Errorf("client: %s params: %w", method, err)
		c.obs.end(cl, nil, err)
		return nil, err
	}
	if tool != nil {
		cl.header = paramHeaders(tool, p)
	}
	res, err := c.run(ctx, cl, spec.EncodeRequest(cl.id, method, p))
	c.obs.end(cl, res, err)
	return res, err
}

// run sends cl's request msg (again, when it must be) and waits for its end.
func (c *Client) run(ctx context.Context, cl *call, msg []byte) (json.RawMessage, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.calls[cl.key] = cl
	c.mu.Unlock()
	defer c.forget(cl)
	for {
		if err := c.send(ctx, cl, msg); err != nil {
			return nil, err
		}
		select {
		case <-cl.done:
			return cl.result, cl.err
		case <-cl.resend:
			if cl.span != nil {
				cl.span.AddEvent(mcptrace.EventResent)
			}
		case <-ctx.Done():
			c.cancelCall(cl, context.Cause(ctx))
			return nil, ctx.Err()
		}
	}
}

// send writes a call's request on the current link, waiting for one if needed.
// A failed write drops the link, whose loss settles the call: the server may have
// it, so it is not sent again unless the call is Idempotent.
func (c *Client) send(ctx context.Context, cl *call, msg []byte) error {
	for {
		l, err := c.current(ctx)
		if err != nil {
			return err
		}
		c.mu.Lock()
		if cl.finished {
			c.mu.Unlock()
			return nil
		}
		if c.link != l {
			c.mu.Unlock()
			continue // lost meanwhile
		}
		cl.sent, cl.link = true, l
		c.mu.Unlock()
		c.writeWith(l, msg, cl.header)
		return nil
	}
}

// takesKeys reports whether the server advertised call keys.
func (c *Client) takesKeys() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caps != nil && slices.Contains(c.caps.Extensions, spec.ExtensionKey)
}

// newCallKey returns a random call key: 256 bits, base64url (43 characters),
// never beginning with '-'. The key becomes the call's resume token, which
// `mcp-resume call -v` prints for `mcp-resume status ID TOKEN`, where a leading
// '-' would be taken for a flag.
func newCallKey() string {
	var b [32]byte
	for {
		_, _ = crand.Read(b[:])
		if k := base64.RawURLEncoding.EncodeToString(b[:]); k[0] != '-' {
			return k
		}
	}
}

// paramFields decodes params, which must encode as a JSON object or be nil,
// into its members; nil for nil params.
func paramFields(params any) (map[string]json.RawMessage, error) {
	if params == nil {
		return nil, nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	fields := map[string]json.RawMessage{}
	if string(b) != "null" {
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, fmt.Errorf("must be a JSON object: %w", err)
		}
	}
	return fields, nil
}

// encodeParams encodes a request's params (fields, nil for none), adding to
// its _meta the progress token (the call's id) when progress is wanted, the
// call's key when it has one, the trace context of its span when it is
// traced, and envelope's members (the 2026-07-28 envelope; nil for none).
// fields' _meta is replaced, its other members kept.
func encodeParams(fields map[string]json.RawMessage, cl *call, progress bool, envelope map[string]json.RawMessage) (json.RawMessage, error) {
	traced := cl.traceparent != ""
	if fields == nil && !progress && cl.callKey == "" && !traced && envelope == nil {
		return nil, nil
	}
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	if progress || cl.callKey != "" || traced || envelope != nil {
		meta := map[string]json.RawMessage{}
		if m, ok := fields["_meta"]; ok {
			if err := json.Unmarshal(m, &meta); err != nil {
				return nil, fmt.Errorf("_meta must be an object: %w", err)
			}
		}
		maps.Copy(meta, envelope)
		if progress {
			meta["progressToken"] = json.RawMessage(cl.id)
		}
		if cl.callKey != "" {
			meta[spec.MetaKey], _ = json.Marshal(cl.callKey)
		}
		if traced {
			meta["traceparent"], _ = json.Marshal(cl.traceparent)
			if cl.tracestate != "" {
				meta["tracestate"], _ = json.Marshal(cl.tracestate)
			} else {
				delete(meta, "tracestate") // the caller's, of another span
			}
		}
		fields["_meta"], _ = json.Marshal(meta)
	}
	return json.Marshal(fields)
}

// aborter is a connection that cancels a request of the 2026-07-28 era by
// closing its stream (Streamable HTTP).
type aborter interface {
	Abort(id []byte)
}

// cancelCall tells the server a call is abandoned, best effort: with its resume
// token when it has one, so that it reaches the request wherever it is attached.
// A call of the 2026-07-28 era over Streamable HTTP is cancelled by closing its
// stream, and told with notifications/cancelled only when it has a token (a
// server of that era that does not resume requests has no session to tell).
func (c *Client) cancelCall(cl *call, cause error) {
	c.mu.Lock()
	sent, l, on := cl.sent, c.link, cl.link
	var token string
	if cl.policy != nil {
		token = cl.policy.Token
	}
	c.mu.Unlock()
	if !sent {
		return
	}
	if c.era.modern && on != nil {
		if a, ok := on.conn.(aborter); ok {
			// [2026-07-28 transports] closing a request's stream cancels it.
			a.Abort(cl.id)
			if token == "" {
				return
			}
		}
	}
	if l == nil {
		if token == "" {
			return // nobody can reach it: its connection is gone and it was not resumable
		}
		ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
		defer cancel()
		var err error
		if l, err = c.current(ctx); err != nil {
			return
		}
	}
	reason := "cancelled by the client"
	if cause != nil {
		reason = cause.Error()
	}
	b, _ := json.Marshal(spec.CancelledParams{RequestID: cl.id, Reason: reason, ResumeToken: token})
	c.write(l, spec.EncodeRequest(nil, spec.MethodCancelled, c.withEnvelope(b)))
}

// Status asks the server for the state of a request by its id and resume token
// (requests/getStatus). The request may be another client's, or one left behind
// by an earlier process.
func (c *Client) Status(ctx context.Context, id spec.ID, token string) (*spec.GetStatusResult, error) {
	raw, err := c.Call(ctx, spec.MethodGetStatus, spec.GetStatusParams{RequestID: id, ResumeToken: token}, nil)
	if err != nil {
		return nil, err
	}
	var res spec.GetStatusResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, &ProtocolError{Problem: "getStatus result: " + err.Error(), Raw: raw}
	}
	return &res, nil
}

// Cancel cancels a request by its id and resume token (notifications/cancelled
// with the token, this project's extension), wherever it is attached: for
// example one a crashed process left running.
func (c *Client) Cancel(ctx context.Context, id spec.ID, token, reason string) error {
	l, err := c.current(ctx)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(spec.CancelledParams{RequestID: id, Reason: reason, ResumeToken: token})
	if err := l.conn.Write(ctx, spec.EncodeRequest(nil, spec.MethodCancelled, c.withEnvelope(b))); err != nil {
		return fmt.Errorf("client: cancel %s: %w", id, err)
	}
	return nil
}
