package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcp-resume/mcp-resume/resume"
)

func (n *Node) callSubject(instance string) string { return n.opts.Subject + "." + instance }

// Handle sets the handler of the calls other instances send this one. Each call
// runs on a goroutine of its own, with a context that ends when the caller stops
// waiting or at Close; the reply goes back when the handler returns. Calls that
// come before Handle are answered "closed".
func (n *Node) Handle(h func(ctx context.Context, from string, c PeerCall) PeerReply) {
	n.mu.Lock()
	n.handler = h
	n.mu.Unlock()
}

// Call sends c to instance and waits for its reply, at most CallTimeout, and no
// longer than the instance holds its lease (see awaiting). The error says that
// no reply came: no such instance (nats.ErrNoResponders, at once), a timeout, the
// instance departed, or ErrClosed; a reply's own error is in PeerReply.Err.
func (n *Node) Call(ctx context.Context, instance string, c PeerCall) (PeerReply, error) {
	if n.isClosed() {
		return PeerReply{}, ErrClosed
	}
	if !validName(instance) {
		return PeerReply{}, fmt.Errorf("cluster: call to %q: not an instance name", instance)
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.CallTimeout)
	defer cancel()
	ctx, done := n.awaiting(ctx, instance)
	defer done()
	deadline, _ := ctx.Deadline()
	data := encodeCall(n.opts.Name, time.Until(deadline), c)
	m, err := n.nc.RequestWithContext(ctx, n.callSubject(instance), data)
	if err != nil {
		return PeerReply{}, fmt.Errorf("cluster: call (op %d) to %s: %w", c.Op, instance, causeOf(ctx, err))
	}
	r, err := decodeReply(m.Data)
	if err != nil {
		return PeerReply{}, fmt.Errorf("cluster: reply from %s: %w", instance, err)
	}
	return r, nil
}

// serve is the control subscription's handler: nats.go calls it for one message at
// a time, so it hands each call to a goroutine of its own.
func (n *Node) serve(m *nats.Msg) {
	c, err := decodeCall(m.Data)
	if err != nil {
		n.log.Warn().Err(err).Int("bytes", len(m.Data)).Msg("a malformed call")
		n.respond(m, encodeReply(PeerReply{Err: "failed"}))
		return
	}
	n.mu.Lock()
	h := n.handler
	ok := h != nil && n.goLocked(func() {
		budget := c.budget
		if budget <= 0 {
			budget = n.opts.CallTimeout
		}
		ctx, cancel := context.WithTimeout(n.ctx, budget)
		defer cancel()
		n.respond(m, encodeReply(h(ctx, c.from, c.c)))
	})
	n.mu.Unlock()
	if !ok {
		n.respond(m, encodeReply(PeerReply{Err: PeerError(resume.ErrClosed)}))
	}
}

// causeOf is err, a request's failure under ctx, or what ended ctx when that was
// a departure.
func causeOf(ctx context.Context, err error) error {
	if c := context.Cause(ctx); errors.Is(c, errDeparted) {
		return c
	}
	return err
}

func (n *Node) respond(m *nats.Msg, data []byte) {
	if err := m.Respond(data); err != nil {
		n.log.Debug().Err(err).Msg("replying failed")
	}
}

func (n *Node) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}
