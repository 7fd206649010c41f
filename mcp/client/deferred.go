package client

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/spec"
)

// Deferred answers. A server that answers a tools/call still running after a
// while with a deferred answer (mcp-resume's --answer-within: a normal tool
// result that says the tool runs on and names the tool to call for its
// result, in _meta["io.mcp-resume/deferred"]) serves clients that stop
// waiting on their own clock. This client waits: Call follows the answer
// itself, calling the tool it names (the await tool) with the arguments it
// gives, again while that answers deferred, until the call's own result or
// an error; the await calls' progress goes to the Call's Progress, their
// questions to its handlers, their log messages to its OnLog. A caller that
// hands the answer on to a client that cannot wait either (a model) asks for
// it as it is with CallOptions.KeepDeferred.

// Deferred is a deferred answer: the tool to call for the result of a
// tools/call that still runs, and its arguments.
type Deferred struct {
	// Tool is the await tool the answer names.
	Tool string
	// Arguments are its arguments, a JSON object: they carry a handle of the
	// call, a secret (whoever holds it of the same principal gets the result,
	// or cancels the call).
	Arguments json.RawMessage
}

// DeferredOf reports whether res is a deferred answer, and what it names.
func DeferredOf(res *mcpgo.CallToolResult) (Deferred, bool) {
	if res == nil || res.Meta == nil {
		return Deferred{}, false
	}
	v, ok := res.Meta.AdditionalFields[spec.MetaDeferred]
	if !ok {
		return Deferred{}, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Deferred{}, false
	}
	d, err := parseDeferred(b)
	return d, err == nil
}

// deferredOf reads raw, a tools/call result, as a deferred answer: found is
// whether its _meta marks one, err what is wrong with one that names no tool
// to call.
func deferredOf(raw json.RawMessage) (d Deferred, found bool, err error) {
	meta, ok, _ := spec.Member(raw, "_meta")
	if !ok {
		return Deferred{}, false, nil
	}
	v, ok, _ := spec.Member(meta, spec.MetaDeferred)
	if !ok {
		return Deferred{}, false, nil
	}
	if d, err = parseDeferred(v); err != nil {
		return Deferred{}, true, &ProtocolError{Problem: "a deferred answer " + err.Error(), Raw: raw}
	}
	return d, true, nil
}

// parseDeferred reads the value of _meta["io.mcp-resume/deferred"].
func parseDeferred(v []byte) (Deferred, error) {
	var d struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(v, &d); err != nil {
		return Deferred{}, errors.New("that does not decode: " + err.Error())
	}
	var args map[string]json.RawMessage
	switch {
	case d.Tool == "":
		return Deferred{}, errors.New("that names no tool to call")
	case json.Unmarshal(d.Arguments, &args) != nil || args == nil:
		return Deferred{}, errors.New("whose arguments are not an object")
	}
	return Deferred{Tool: d.Tool, Arguments: d.Arguments}, nil
}

// fields are the params of the await call d names; with cancel, of the one
// that stops the call instead.
func (d Deferred) fields(cancel bool) map[string]json.RawMessage {
	args := json.RawMessage(d.Arguments)
	if cancel {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(d.Arguments, &m)
		m = maps.Clone(m)
		m["cancel"] = json.RawMessage("true")
		args, _ = json.Marshal(m)
	}
	return map[string]json.RawMessage{"name": quote(d.Tool), "arguments": args}
}

// Following a deferred answer: awaits are sent no oftener than minAwait (a
// server that answers an await deferred at once is not asked in a busy
// loop). An await is a wait: it carries no call key (a keyed copy sent again
// would find the first one's key, which ends with its connection), and one
// whose connection is lost is sent again as it is (Idempotent); one that
// failed without an answer about the call (refused before it looked, the
// server busy or going) is made again, up to maxAwaitFailures in a row,
// awaitPause apart.
const (
	minAwait         = 200 * time.Millisecond
	maxAwaitFailures = 5
	awaitPause       = time.Second
)

// awaitAgain reports whether err, an await call's, leaves the deferred call
// to be awaited again: the await was lost, or refused before it looked.
func awaitAgain(err error) bool {
	var e *spec.Error
	if errors.As(err, &e) {
		switch e.Reason {
		case spec.ReasonNotResumable, spec.ReasonDuplicateID, spec.ReasonTooManyRequests,
			spec.ReasonShuttingDown, spec.ReasonOwnerUnreachable:
			return true
		}
		return false
	}
	return errors.Is(err, ErrNotResumable)
}

// abandon stops the deferred call d names, best effort and bounded: its
// Call is over for its caller (ctx ended), and a deferred call would run on.
func (c *Client) abandon(ctx context.Context, op *operation, d Deferred, env map[string]json.RawMessage) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.ReconnectTimeout)
	defer cancel()
	_, _, _ = c.request(cctx, op, spec.MethodToolsCall, d.fields(true), nil, &CallOptions{Idempotent: true}, env)
}

// awaitTool is the tool fields calls when a tools/call goes in the 2026-07-28
// era (env), whose x-mcp-header annotations name its Mcp-Param-* headers; nil
// for none (a request of the session's era, a tool not listed).
func (c *Client) awaitTool(fields map[string]json.RawMessage, env map[string]json.RawMessage) (*mcpgo.Tool, error) {
	if env == nil || !c.era.modern {
		return nil, nil
	}
	return c.listedTool(fields)
}
