package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// SessionShare keeps what the sessions of the instances of a cluster declared
// where every instance reads it (resume/cluster.Sessions), so that an instance
// takes up a session another one started (Server.Shared) when a load balancer
// sends the session's next request to it. Keys are a hash of the session id.
type SessionShare interface {
	// Put writes key's entry, which lasts TTL unless written again.
	Put(ctx context.Context, key string, val []byte) error
	// Get reads key's entry: nil, and no error, when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete removes key's entry.
	Delete(ctx context.Context, key string) error
	// TTL is how long an entry lasts unwritten.
	TTL() time.Duration
}

// sharedSession is a session's entry in a SessionShare: Parked's fields but
// its id (the key is the id's hash).
type sharedSession struct {
	Principal string                 `json:"principal,omitempty"`
	LimitKey  string                 `json:"limitKey,omitempty"`
	Transport string                 `json:"transport,omitempty"`
	Level     mcp.LoggingLevel       `json:"level,omitempty"`
	Info      mcp.Implementation     `json:"clientInfo"`
	Caps      mcp.ClientCapabilities `json:"capabilities"`
	Protocol  string                 `json:"protocolVersion"`
	Resumable bool                   `json:"resumable,omitempty"`
	Ack       bool                   `json:"ack,omitempty"`
}

// shareKey is session id's key in a SessionShare: the hex of its SHA-256 (a
// session id is a bearer of its session; the share never holds one).
func shareKey(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// share writes the session's entry, once it has answered initialize: before
// the answer goes out, so that the client's next request finds it wherever it
// lands. A failure is logged; the session goes on here.
func (c *connState) share() {
	sh := c.s.opts.Sessions
	if sh == nil || c.stateless || c.sess.id == "" {
		return
	}
	d := c.sess.get()
	val, err := json.Marshal(sharedSession{
		Principal: c.principal, LimitKey: c.att.limitKey, Transport: c.transport,
		Level: d.level, Info: d.info, Caps: d.caps, Protocol: d.protocol,
		Resumable: c.resumable.Load(), Ack: c.ackMode.Load(),
	})
	if err == nil {
		err = sh.Put(context.Background(), shareKey(c.sess.id), val)
	}
	if err != nil {
		c.logger().Warn().Err(err).Msg("the session is not shared with the cluster's other instances: a request of it sent to another one finds it unknown")
		return
	}
	c.sharedAt.Store(time.Now().UnixNano())
}

// keepShared writes the session's entry again when a third of its TTL has
// passed since it was last written, so that it outlives the share's TTL while
// the session is in use; the write runs beside the request.
func (c *connState) keepShared() {
	sh := c.s.opts.Sessions
	at := c.sharedAt.Load()
	if sh == nil || at == 0 || time.Since(time.Unix(0, at)) < sh.TTL()/3 {
		return
	}
	if c.sharedAt.CompareAndSwap(at, time.Now().UnixNano()) {
		c.wg.Go(c.share)
	}
}

// Shared returns session id of principal as another instance of the cluster
// shared it (SessionShare), ready for Unpark: a session this instance did not
// start, or no longer holds. remote is the address of the client asking for it
// now. It returns nil when the share has no such session (or none of that
// principal), or there is no share.
func (s *Server) Shared(ctx context.Context, id, principal, remote string) *Parked {
	sh := s.opts.Sessions
	if sh == nil || id == "" {
		return nil
	}
	val, err := sh.Get(ctx, shareKey(id))
	if err != nil {
		s.log.Warn().Err(err).Msg("reading a session from the cluster's share")
		return nil
	}
	var e sharedSession
	if val == nil || json.Unmarshal(val, &e) != nil || e.Principal != principal {
		return nil
	}
	return &Parked{
		id: id, principal: e.Principal, limitKey: e.LimitKey, remote: remote, transport: e.Transport,
		declared:    declared{level: e.Level, info: e.Info, caps: e.Caps, protocol: e.Protocol},
		initialized: true, resumable: e.Resumable, ackMode: e.Ack,
	}
}

// Unshare removes session id from the cluster's share (its client ended it).
func (s *Server) Unshare(ctx context.Context, id string) {
	if sh := s.opts.Sessions; sh != nil {
		if err := sh.Delete(ctx, shareKey(id)); err != nil {
			s.log.Warn().Err(err).Msg("removing a session from the cluster's share")
		}
	}
}
