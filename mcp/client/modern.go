package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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
		v, _ := json.Marshal(version)
		info, _ := json.Marshal(c.opts.ClientInfo)
		e.envelope = map[string]json.RawMessage{
			spec.MetaProtocolVersion:    v,
			spec.MetaClientCapabilities: c.modernCapabilities(),
			spec.MetaClientInfo:         info,
		}
	}
	c.era = e
}

// modernCapabilities is the clientCapabilities a modern request declares:
// the handlers the client has, and SEP-975 as the extension of the era, with
// the ack extension unless NoAckExtension.
func (c *Client) modernCapabilities() json.RawMessage {
	caps := map[string]any{
		"extensions": map[string]any{spec.ExtensionResumable: spec.ClientCapability{Extensions: c.extensions()}},
	}
	if c.opts.Sampling != nil {
		caps["sampling"] = map[string]any{}
	}
	if c.opts.Elicitation != nil {
		caps["elicitation"] = map[string]any{}
	}
	b, _ := json.Marshal(caps)
	return b
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
	cl := c.newCall(spec.MethodServerDiscover, nil)
	cl.internal = true
	c.obs.start(ctx, cl, "", c.era.version)
	params, err := encodeParams(nil, cl, false, c.era.envelope)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.calls[cl.key] = cl
	cl.sent, cl.link = true, l
	c.mu.Unlock()
	defer c.forget(cl)
	raw, err := exchange(ctx, l, cl, params)
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
	c.mu.Lock()
	c.init, c.caps = init, caps
	c.mu.Unlock()
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

// withEnvelope returns a notification's params with the envelope of the
// client's era in their _meta, when it is of the 2026-07-28 era; as they
// are otherwise.
func (c *Client) withEnvelope(params json.RawMessage) json.RawMessage {
	if !c.era.modern {
		return params
	}
	fields, err := paramFields(params)
	if err != nil {
		return params
	}
	p, err := encodeParams(fields, &call{}, false, c.era.envelope)
	if err != nil {
		return params
	}
	return p
}
