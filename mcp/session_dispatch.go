package mcp

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/spec"
)

// dispatch handles one decoded message from the client; what answers it goes to st.
// It never blocks on a handler.
func (c *connState) dispatch(m *spec.Message, raw []byte, st Stream) {
	switch m.Kind {
	case spec.KindResponse:
		c.s.answers.route(c, m, raw)
	case spec.KindNotification:
		c.notification(m, raw)
	case spec.KindRequest:
		if env := m.Envelope(); env.Modern() {
			if c.s.closed.Load() {
				refuse(c, st, m, spec.ShuttingDown())
				return
			}
			c.modern(m, raw, st, env)
			return
		}
		if c.stateless {
			refuse(c, st, m, spec.NewError(spec.CodeInvalidParams, spec.ReasonEraMismatch,
				"a request without a session must carry its protocol version in params._meta[\""+spec.MetaProtocolVersion+"\"]"))
			return
		}
		c.request(m, raw, st)
	}
}

// refuse answers request m, received on st by c, with e, as its whole handling
// (traced).
func refuse(c *connState, st Stream, m *spec.Message, e *spec.Error) {
	sp := callSpanOf(c, m, st, false)
	c.replyError(st, m.ID, e)
	sp.refused(e)
}

func (c *connState) notification(m *spec.Message, raw []byte) {
	if m.Method == spec.MethodCancelled {
		c.calls.cancelled(m)
		return
	}
	// notifications/initialized and the rest: mcp-go's handlers, on the connection's
	// session. They are quick; ordering with later requests is kept.
	c.s.srv.HandleMessage(c.s.srv.WithContext(c.ctx, c.sess), raw)
}

func (c *connState) request(m *spec.Message, raw []byte, st Stream) {
	if c.s.closed.Load() {
		refuse(c, st, m, spec.ShuttingDown())
		return
	}
	c.keepShared()
	switch m.Method {
	case spec.MethodInitialize:
		c.initialize(m, raw, st)
	case spec.MethodGetStatus:
		c.att.getStatus(m, st)
	case spec.MethodResume:
		c.att.resume(m, st, 0, nil)
	case spec.MethodTasksGet, spec.MethodTasksCancel, methodTasksResult, methodTasksList, spec.MethodTasksStream:
		if !c.s.tasks { // mcp-go's own tasks, if the server has any
			c.calls.startCall(m, raw, st, nil)
			return
		}
		c.tasks.legacyTaskRequest(m, st)
	default:
		// server/discover and subscriptions/listen among them: mcp-go answers
		// that they need a 2026-era request.
		c.calls.startCall(m, raw, st, nil)
	}
}

// initialize runs the handshake through mcp-go, notes the client's capability and
// adds the server's advertisement. The version is mcp-go's to negotiate
// ([2025-11-25 lifecycle §Version Negotiation] If the server supports the
// requested protocol version, it MUST respond with the same version;
// otherwise, the server MUST respond with another protocol version it
// supports); the resumable-requests capability is advertised only to a
// client that declared it.
func (c *connState) initialize(m *spec.Message, raw []byte, st Stream) {
	sp := spanOf(c, m, st)
	var p struct {
		Capabilities struct {
			Resumable    json.RawMessage            `json:"resumableRequests"`
			Experimental map[string]json.RawMessage `json:"experimental"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(m.Params, &p) // mcp-go reports malformed params itself
	capRaw := p.Capabilities.Resumable
	if len(capRaw) == 0 {
		capRaw = p.Capabilities.Experimental[spec.CapabilityName]
	}
	var cc spec.ClientCapability
	if len(capRaw) > 0 && capRaw[0] == '{' && json.Unmarshal(capRaw, &cc) == nil {
		c.resumable.Store(true)
		for _, x := range cc.Extensions {
			if x == spec.ExtensionAck {
				c.ackMode.Store(true)
			}
		}
	}
	resp := c.s.srv.HandleMessage(c.s.srv.WithContext(c.ctx, c.sess), raw)
	c.debug().Bool("resumable", c.resumable.Load()).Msg("initialized")
	var patch func(any) any
	if c.resumable.Load() { // a plain client sees plain MCP
		patch = c.s.advertise
	}
	if c.s.tasks {
		if p := patch; p != nil {
			patch = func(r any) any { return advertiseTasks(p(r)) }
		} else {
			patch = advertiseTasks
		}
	}
	if _, failed := resp.(mcp.JSONRPCError); !failed {
		c.share()
	}
	c.reply(st, encodeReply(m.ID, resp, patch, 0))
	sp.endWith(resp)
}

// modern handles a request of the 2026-07-28 era: stateless, whatever session
// or connection it arrived on.
func (c *connState) modern(m *spec.Message, raw []byte, st Stream, env spec.Envelope) {
	if !spec.IsModern(env.Version) {
		refuse(c, st, m, spec.UnsupportedVersion(env.Version))
		return
	}
	switch m.Method {
	case spec.MethodGetStatus:
		c.att.getStatus(m, st)
	case spec.MethodResume:
		c.att.resume(m, st, 0, parseModern(env))
	case spec.MethodTasksGet, spec.MethodTasksUpdate, spec.MethodTasksCancel, spec.MethodTasksStream:
		c.tasks.taskRequest(m, st, parseModern(env))
	case spec.MethodSubscriptionsListen:
		if ids, others := taskListen(m.Params); len(ids) > 0 {
			mr := parseModern(env)
			if !mr.tasks() {
				refuse(c, st, m, errNeedsTasks("task notifications need the "+spec.ExtensionTasks+" extension in the request's capabilities"))
				return
			}
			if !others {
				c.tasks.listenTasks(m, st, mr, ids)
				return
			}
		}
		c.calls.startCall(m, raw, st, parseModern(env))
	default:
		if state, ok := ourState(m.Params); ok && spec.RetriesInput(m.Method) {
			c.calls.retry(m, st, state)
			return
		}
		c.calls.startCall(m, raw, st, parseModern(env))
	}
}
