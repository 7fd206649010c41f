package mcp

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// connState is one connection being served. It is the resume.Sink its attached
// requests write to.
type connState struct {
	s      *Server
	conn   transport.Conn
	ctx    context.Context // values only (mcp-go session); ends when the connection closes
	cancel context.CancelFunc
	sess   *connSession
	log    zerolog.Logger

	resumable atomic.Bool // the client advertised resumableRequests
	ackMode   atomic.Bool // ... with the ack extension

	mu       sync.Mutex                 // guards the fields below
	running  map[string]*call           // calls started here whose handler runs, by id text
	attached map[string]*resume.Request // resumable requests delivered here, by id text
	sweepAt  int                        // size of attached at which gone requests are swept out
	closed   bool

	wg sync.WaitGroup // goroutines owned by this connection (the session's pump)
}

var _ resume.Sink = (*connState)(nil)

// minSweep is the smallest size of a connection's attached map at which requests
// that are gone are swept out of it.
const minSweep = 64

func newConnState(s *Server, conn transport.Conn) *connState {
	ctx, cancel := context.WithCancel(context.Background())
	c := &connState{
		s: s, conn: conn, ctx: ctx, cancel: cancel,
		running:  make(map[string]*call),
		attached: make(map[string]*resume.Request),
		sweepAt:  minSweep,
	}
	c.sess = newConnSession(c, uuid.NewString())
	c.log = s.log.With().Str("session", c.sess.id).Logger()
	if err := s.srv.RegisterSession(ctx, c.sess); err != nil {
		c.log.Warn().Err(err).Msg("registering the session with mcp-go")
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.sess.pump(ctx)
	}()
	return c
}

// Write writes a message to the connection (resume.Sink).
func (c *connState) Write(ctx context.Context, msg []byte) error { return c.conn.Write(ctx, msg) }

// write writes a message the core produced; a failure means the connection is going
// away, and the reader will see it.
func (c *connState) write(msg []byte) {
	if err := c.conn.Write(c.ctx, msg); err != nil {
		c.log.Debug().Err(err).Msg("write failed")
	}
}

func (c *connState) writeError(id spec.ID, e *spec.Error) { c.write(spec.EncodeError(id, e)) }

// shutdown runs when the connection ends: requests made resumable here are detached
// (they live on for maxWait), the other calls are cancelled.
func (c *connState) shutdown() {
	_ = c.conn.Close()
	c.mu.Lock()
	c.closed = true
	running, attached := c.running, c.attached
	c.running, c.attached = nil, nil
	c.mu.Unlock()
	for _, r := range attached {
		r.Detach(c)
	}
	for _, cl := range running {
		cl.connectionLost()
	}
	c.s.srv.UnregisterSession(c.ctx, c.sess.id)
	c.cancel()
	c.wg.Wait()
}
