package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// The 2026-07-28 era (Options.ProtocolVersion spec.Version2026): no
// initialize; the client asks server/discover which versions the server
// speaks, and every request it sends carries the envelope in params._meta
// (protocol version, client capabilities, client info). A server of the 2025
// era gets the initialize handshake instead, in the newest version of that
// era both speak.

// era is the protocol version a client speaks, decided by Connect's
// negotiation and kept for the client's life: every connection after the
// first speaks it too.
type era struct {
	version string
	modern  bool
	// envelope is what a modern request's _meta carries, by key.
	envelope map[string]json.RawMessage
}

// negotiate makes l, the client's first connection, speak the newest
// version both ends speak, and records the server's answer.
//
// [2026-07-28 lifecycle §Version negotiation] A client that sent a version
// the server does not support gets -32022 with the versions it does; it MAY
// retry with one of those.
func (c *Client) negotiate(ctx context.Context, l *link) error {
	want := c.opts.ProtocolVersion
	if !spec.IsModern(want) {
		c.setEra(want)
		return c.initialize(ctx, l)
	}
	for tries := 0; ; tries++ {
		c.setEra(want)
		res, err := c.discover(ctx, l)
		var e *spec.Error
		switch {
		case err == nil:
			v := newestCommon(res.SupportedVersions)
			switch {
			case v == "":
				return fmt.Errorf("client: the server speaks none of our protocol versions: it speaks %v", res.SupportedVersions)
			case spec.IsModern(v):
				c.setEra(v)
				c.discovered(v, res)
				return nil
			}
			c.setEra(v)
			return c.initialize(ctx, l)
		case errors.As(err, &e) && e.Code == spec.CodeUnsupportedVersion && tries == 0:
			v := newestCommon(e.Supported)
			if v == "" {
				return fmt.Errorf("client: the server speaks none of our protocol versions: %w", err)
			}
			if want = v; !spec.IsModern(v) {
				c.setEra(v)
				return c.initialize(ctx, l)
			}
		case !eraRefusal(err):
			return err
		default:
			// A server of the 2025 era: it knows no server/discover, or refuses
			// a request that names no session.
			c.setEra(spec.LegacyVersions[len(spec.LegacyVersions)-1])
			return c.initialize(ctx, l)
		}
	}
}

// eraRefusal reports whether err, a server/discover's failure, is how a
// server of the 2025 era refuses a request of the 2026 era: a JSON-RPC error
// (method not found, invalid request, a header it does not take), or an HTTP
// refusal other than one that asks for credentials.
func eraRefusal(err error) bool {
	var e *spec.Error
	var r *transport.RefusedError
	switch {
	case errors.As(err, &e):
		return true
	case errors.As(err, &r):
		return r.Code != 401 && r.Code != 403
	}
	return false
}

// newestCommon is the newest version of versions that the client speaks, or
// "".
func newestCommon(versions []string) string {
	for i := len(spec.Versions) - 1; i >= 0; i-- {
		if slices.Contains(versions, spec.Versions[i]) {
			return spec.Versions[i]
		}
	}
	return ""
}

// setEra makes version the client's protocol version. It is called by
// Connect's negotiation alone, before the client's other goroutines start.
func (c *Client) setEra(version string) {
	e := era{version: version, modern: spec.IsModern(version)}
	if e.modern {
		e.envelope = c.modernEnvelope(version)
	}
	c.era = e
}

// modernEnvelope is the envelope of the client's requests in version, of
// the 2026-07-28 era: the version, the client's capabilities and its info.
func (c *Client) modernEnvelope(version string) map[string]json.RawMessage {
	v, _ := json.Marshal(version)
	info, _ := json.Marshal(c.opts.ClientInfo)
	return map[string]json.RawMessage{
		spec.MetaProtocolVersion:    v,
		spec.MetaClientCapabilities: c.modernCapabilities(),
		spec.MetaClientInfo:         info,
	}
}

// modernCapabilities is the clientCapabilities a modern request declares:
// Options.Capabilities, the handlers the client has, and SEP-975 as the
// extension of the era, with the ack extension unless NoAckExtension (none
// with NoResumable).
func (c *Client) modernCapabilities() json.RawMessage {
	caps := c.capabilities()
	if !c.opts.NoResumable {
		ext, _ := caps["extensions"].(map[string]any)
		ext = maps.Clone(ext)
		if ext == nil {
			ext = map[string]any{}
		}
		ext[spec.ExtensionResumable] = spec.ClientCapability{Extensions: c.extensions()}
		caps["extensions"] = ext
	}
	b, _ := json.Marshal(caps)
	return b
}

// Modern reports whether the server of the current connection speaks the
// 2026-07-28 era: the client's own era, or what Options.Discover learned of
// it. A request with CallOptions.Envelope goes in that era when it does.
func (c *Client) Modern() bool { return c.modern.Load() }

// envelopeOf is the envelope of a Call's requests whose options give e (nil
// for none) and that ask for a task or not: nil for a request of the
// session's era (a client of the 2025 era, given no envelope or on a server
// that does not speak the 2026-07-28 era); else the client's era's, or e's
// capabilities and log level with the client's protocol version and info.
func (c *Client) envelopeOf(e *Envelope, asTask bool) map[string]json.RawMessage {
	if !c.era.modern && (e == nil || !c.modern.Load()) {
		return nil
	}
	base := c.era.envelope
	if !c.era.modern {
		base = c.modernBase
	}
	caps := base[spec.MetaClientCapabilities]
	if e != nil && e.Capabilities != nil {
		caps = c.declared(e.Capabilities, asTask)
	} else if asTask {
		caps = c.declared(caps, true)
	}
	if e == nil && !asTask && c.era.modern {
		return base // the client's own, shared by its requests: never changed
	}
	level := ""
	if e != nil {
		level = e.LogLevel
	}
	return c.envs.get(!c.era.modern, caps, level, func() map[string]json.RawMessage {
		env := make(map[string]json.RawMessage, len(base)+1)
		maps.Copy(env, base)
		env[spec.MetaClientCapabilities] = caps
		if level != "" {
			env[spec.MetaLogLevel], _ = json.Marshal(level)
		}
		return env
	})
}

// maxEnvelopes bounds the envelopes a client keeps for its requests to share
// (envelopes): past it they are let go, and made again as requests need them.
const maxEnvelopes = 64

// envelopes are the envelopes of a client's requests of the 2026-07-28 era
// that carry capabilities or a log level of their own, kept by what they are
// made of: the base they add to (the client's era's, or, on a client of the
// 2025 era, its modernBase), the capabilities, and the log level.
type envelopes struct {
	mu sync.Mutex
	m  map[string]map[string]json.RawMessage
}

// get returns the envelope of caps and level over the base (legacy: a 2025
// client's modernBase), made by build when none is kept.
func (es *envelopes) get(legacy bool, caps json.RawMessage, level string, build func() map[string]json.RawMessage) map[string]json.RawMessage {
	var buf [256]byte
	key := append(buf[:0], '0')
	if legacy {
		key[0] = '1'
	}
	key = strconv.AppendInt(key, int64(len(level)), 10) // the level's length first: no two pairs make one key
	key = append(append(append(key, ':'), level...), caps...)
	es.mu.Lock()
	env, ok := es.m[string(key)]
	es.mu.Unlock()
	if ok {
		return env
	}
	env = build()
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.m == nil || len(es.m) >= maxEnvelopes {
		es.m = map[string]map[string]json.RawMessage{}
	}
	es.m[string(key)] = env
	return env
}

// declared is caps, a clientCapabilities object of a 2026-07-28 request, as
// the client sends it: with the client's own SEP-975 declaration (none with
// NoResumable) in place of any it carries, and the Tasks extension exactly
// when the request asks for a task. Decoded only when there is something to
// change: most pass as they are.
func (c *Client) declared(caps json.RawMessage, asTask bool) json.RawMessage {
	resumable := bytes.Contains(caps, []byte(spec.CapabilityName)) // either form's name holds it
	tasks := bytes.Contains(caps, []byte(spec.ExtensionTasks))
	if c.opts.NoResumable && !resumable && tasks == asTask {
		return caps
	}
	var m map[string]any
	if json.Unmarshal(caps, &m) != nil || m == nil {
		m = map[string]any{}
	}
	ext, _ := m["extensions"].(map[string]any)
	if ext == nil {
		ext = map[string]any{}
	}
	delete(ext, spec.ExtensionTasks)
	delete(ext, spec.ExtensionResumable)
	if asTask {
		ext[spec.ExtensionTasks] = map[string]any{}
	}
	if !c.opts.NoResumable {
		ext[spec.ExtensionResumable] = spec.ClientCapability{Extensions: c.extensions()}
	}
	if len(ext) > 0 {
		m["extensions"] = ext
	} else {
		delete(m, "extensions")
	}
	if exp, ok := m["experimental"].(map[string]any); ok {
		delete(exp, spec.CapabilityName)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return caps
	}
	return b
}

// versionOf is the protocol version of a request sent with envelope env.
func (c *Client) versionOf(env map[string]json.RawMessage) string {
	if env == nil || c.era.modern {
		return c.ProtocolVersion()
	}
	return spec.Version2026
}

// speaksModern asks l's server/discover, on a connection initialized in the
// 2025 era, whether the server speaks the 2026-07-28 era too. A server of
// the 2025 era refuses it (method not found, or a refusal over HTTP), and
// the connection stays as it was.
func (c *Client) speaksModern(ctx context.Context, l *link) bool {
	res, err := c.discoverWith(ctx, l, c.modernBase)
	return err == nil && slices.Contains(res.SupportedVersions, spec.Version2026)
}

// discoverResult is a server/discover answer as the client reads it.
type discoverResult struct {
	SupportedVersions []string                 `json:"supportedVersions"`
	Capabilities      mcpgo.ServerCapabilities `json:"capabilities"`
	ServerInfo        *mcpgo.Implementation    `json:"serverInfo"`
	Instructions      string                   `json:"instructions"`
	Meta              *mcpgo.Meta              `json:"_meta"`
}

// discover sends server/discover on l, in the client's era, and returns the
// server's answer: a CLIENT span of its own when the client traces, an
// Operation when it measures.
func (c *Client) discover(ctx context.Context, l *link) (*discoverResult, error) {
	return c.discoverWith(ctx, l, c.era.envelope)
}

// discoverWith is discover with the envelope env.
func (c *Client) discoverWith(ctx context.Context, l *link, env map[string]json.RawMessage) (*discoverResult, error) {
	cl := c.newCall(spec.MethodServerDiscover, nil)
	cl.internal = true
	var version string
	_ = json.Unmarshal(env[spec.MetaProtocolVersion], &version)
	c.obs.start(ctx, cl, "", version)
	params, err := encodeParams(nil, cl, false, env)
	if err != nil {
		c.obs.end(cl, nil, err)
		return nil, err
	}
	raw, err := c.exchange(ctx, l, cl, params)
	c.obs.end(cl, raw, err)
	if err != nil {
		return nil, err
	}
	var res discoverResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, &ProtocolError{Problem: "server/discover result: " + err.Error(), Raw: raw}
	}
	return &res, nil
}

// discovered records what server/discover said, in the form initialize's
// answer has (InitializeResult), for a client that speaks version.
func (c *Client) discovered(version string, res *discoverResult) {
	init := &mcpgo.InitializeResult{ProtocolVersion: version, Capabilities: res.Capabilities, Instructions: res.Instructions}
	switch {
	case res.ServerInfo != nil:
		init.ServerInfo = *res.ServerInfo
	case res.Meta.ServerInfo() != nil:
		init.ServerInfo = *res.Meta.ServerInfo()
	}
	var caps *spec.ServerCapability
	if v, ok := res.Capabilities.Extensions[spec.ExtensionResumable]; ok {
		caps = decodeCapability(v)
	}
	c.update(func(st *state) { st.server.init, st.server.caps = init, caps })
}

// decodeCapability reads a server's SEP-975 advertisement, nil when it is
// not one.
func decodeCapability(v any) *spec.ServerCapability {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var sc spec.ServerCapability
	if json.Unmarshal(b, &sc) != nil {
		return nil
	}
	return &sc
}

// ProtocolVersion returns the protocol version the client speaks, as Connect
// negotiated it: of the 2026-07-28 era when the client asked for it and the
// server speaks it, else the one initialize agreed on.
func (c *Client) ProtocolVersion() string {
	if c.era.modern {
		return c.era.version
	}
	if r := c.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return c.era.version
}

// withEnvelope returns a notification's params with the 2026-07-28
// envelope env in their _meta; as they are for a nil env.
func withEnvelope(params json.RawMessage, env map[string]json.RawMessage) json.RawMessage {
	if env == nil {
		return params
	}
	fields, err := paramFields(params)
	if err != nil {
		return params
	}
	p, err := encodeParams(fields, &call{}, false, env)
	if err != nil {
		return params
	}
	return p
}
