package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// SessionOptions configures OpenSessions.
type SessionOptions struct {
	// Bucket names the KV bucket. Default "mcp-resume-sessions".
	Bucket string
	// TTL is how long an entry lasts unwritten (the bucket's TTL): its writer
	// writes it again while the session is in use. Default 10 minutes.
	TTL time.Duration
	// Timeout bounds one read or write (an earlier deadline of its context
	// wins). Default 2 seconds.
	Timeout time.Duration
	// MaxBytes bounds the bucket: a client that opens sessions without end
	// (as any client may where authentication is off) fills it to that, and
	// then a new session is not shared (a Put fails; the session goes on on
	// its instance) until entries expire. Default 64 MiB, some 100,000
	// sessions.
	MaxBytes int64
	// Memory keeps the bucket in memory instead of on disk.
	Memory bool
	// Replicas of the bucket, as Options.Replicas.
	Replicas int
}

// Sessions is a KV bucket where the instances of a cluster keep what their
// HTTP sessions' clients declared, so that any instance takes up a session
// another one started (mcp.SessionShare): a load balancer may send a client's
// next request to any of them. Keys are what the caller makes of a session id
// (a hash: the bucket never holds an id). Its methods are safe for concurrent
// use.
type Sessions struct {
	kv      jetstream.KeyValue
	ttl     time.Duration
	timeout time.Duration
}

// OpenSessions creates the bucket if needed (or updates its settings) and
// returns it. nc stays the caller's.
func OpenSessions(ctx context.Context, nc *nats.Conn, opts *SessionOptions) (*Sessions, error) {
	var o SessionOptions
	if opts != nil {
		o = *opts
	}
	if o.Bucket == "" {
		o.Bucket = "mcp-resume-sessions"
	}
	if o.TTL <= 0 {
		o.TTL = 10 * time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 64 << 20
	}
	kv, err := openBucket(ctx, nc, jetstream.KeyValueConfig{
		Bucket:      o.Bucket,
		Description: "mcp-resume: what each HTTP session's client declared, keyed by a hash of the session id",
		History:     1,
		TTL:         o.TTL,
		MaxBytes:    o.MaxBytes,
	}, o.Memory, o.Replicas)
	if err != nil {
		return nil, err
	}
	return &Sessions{kv: kv, ttl: o.TTL, timeout: o.Timeout}, nil
}

// TTL is how long an entry lasts unwritten.
func (s *Sessions) TTL() time.Duration { return s.ttl }

// Put writes key's entry.
func (s *Sessions) Put(ctx context.Context, key string, val []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.kv.Put(ctx, key, val)
	return err
}

// Get reads key's entry: nil, and no error, when there is none.
func (s *Sessions) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

// Delete removes key's entry (leaving no marker behind).
func (s *Sessions) Delete(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := s.kv.Purge(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return err
}

// Sessions opens the cluster's session bucket (OpenSessions) on the node's
// connection, with the node's storage and replicas, and entries lasting ttl.
func (n *Node) Sessions(ctx context.Context, ttl time.Duration) (*Sessions, error) {
	return OpenSessions(ctx, n.nc, &SessionOptions{TTL: ttl, Memory: n.opts.Memory, Replicas: n.opts.Replicas})
}
