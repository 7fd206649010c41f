package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/mcp-resume/mcp-resume/spec"
)

// The client's side of a kept session (ClientOptions.Keep): a session shared by
// a client's ClientConns, answered from memory on initialize, and opened anew
// when the server forgot it.

// KeptSession is a session shared by the ClientConns of one client
// (ClientOptions.Keep). Its zero value holds none. It is safe for concurrent use.
type KeptSession struct {
	reopen   sync.Mutex // one ClientConn at a time opens a new session
	mu       sync.Mutex
	id       string
	protocol string
	init     []byte // the client's initialize request
	result   []byte // the server's answer to it
}

// ID returns the session kept, or "".
func (k *KeptSession) ID() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.id
}

// fromKept answers the client's initialize from the kept session, and drops the
// initialized notification that follows; it reports whether msg was handled.
func (c *ClientConn) fromKept(msg []byte) (bool, error) {
	m, derr := spec.Decode(msg)
	if derr != nil {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case m.Kind == spec.KindNotification && m.Method == "notifications/initialized" && c.keptInit:
		c.keptInit = false
		return true, nil
	case m.Kind != spec.KindRequest || m.Method != spec.MethodInitialize || c.session != "":
		return false, nil
	}
	k := c.keep
	k.mu.Lock()
	defer k.mu.Unlock()
	k.init = bytes.Clone(msg)
	if k.id == "" || k.result == nil {
		return false, nil
	}
	c.session, c.protocol, c.keptInit = k.id, k.protocol, true
	var res []byte
	if kr, derr := spec.Decode(k.result); derr == nil && kr.Kind == spec.KindResponse {
		res = spec.ReplaceResponseID(k.result, kr.ID, m.ID)
	}
	if res == nil {
		return false, nil
	}
	select {
	case c.in <- Inbound{Msg: res}:
	default:
		return true, errors.New("transport/http: read buffer full")
	}
	return true, nil
}

// keepSession records the session an initialize opened, with the server's
// answer, in the kept session, and delivers the answer.
func (c *ClientConn) keepSession(resp *http.Response, msg []byte, sid string) error {
	defer resp.Body.Close()
	b, err := readAll(resp.Body)
	if err != nil {
		return c.closedOr(err)
	}
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &r) == nil && r.Result.ProtocolVersion != "" {
		k := c.keep
		k.mu.Lock()
		k.id, k.protocol, k.init, k.result = sid, r.Result.ProtocolVersion, bytes.Clone(msg), bytes.Clone(b)
		k.mu.Unlock()
		c.mu.Lock()
		c.protocol = r.Result.ProtocolVersion
		c.mu.Unlock()
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return c.take(resp, msg, nil)
}

// reopen opens a new session with the client's initialize, after the server
// forgot the kept one (used, what the refused request went with), and makes it
// the kept session; when another request already did, it takes that one.
func (c *ClientConn) reopen(ctx context.Context, used string) error {
	k := c.keep
	k.reopen.Lock()
	defer k.reopen.Unlock()
	k.mu.Lock()
	if k.id != "" && k.id != used {
		id, protocol := k.id, k.protocol
		k.mu.Unlock()
		c.mu.Lock()
		c.session, c.protocol = id, protocol
		c.mu.Unlock()
		return nil
	}
	init := k.init
	k.id, k.result = "", nil
	k.mu.Unlock()
	if init == nil {
		return errors.New("transport/http: no initialize to open a new session with")
	}
	c.mu.Lock()
	c.session = ""
	c.mu.Unlock()
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url, bytes.NewReader(init))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := readAll(resp.Body)
	sid := resp.Header.Get(HeaderSessionID)
	if err != nil || resp.StatusCode != http.StatusOK || sid == "" {
		if sid != "" { // opened, but its answer was lost: end it rather than leave it idle
			c.deleteSession(sid)
		}
		return fmt.Errorf("transport/http: reopening the session: %s", resp.Status)
	}
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	_ = json.Unmarshal(b, &r)
	k.mu.Lock()
	k.id, k.protocol, k.result = sid, r.Result.ProtocolVersion, b
	k.mu.Unlock()
	c.mu.Lock()
	c.session, c.protocol = sid, r.Result.ProtocolVersion
	c.mu.Unlock()
	return c.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil, false)
}
