package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcp-resume/mcp-resume/resume/internal/wire"

	"github.com/nats-io/nats.go"

	"github.com/mcp-resume/mcp-resume/resume"
)

// Listen opens an inbox, <Subject>.<Name>.in.<16 random hex digits>: random
// rather than counted, so that an inbox of an earlier process of the same name is
// never a later one's. nats.go runs a subscription's handler for one message at a
// time, so deliver sees the messages one by one in the order they arrived. close
// unsubscribes (draining) and waits until the server knows (Delivers fail after:
// no responders); it does not wait for a deliver already running, and a Deliver
// that reached the inbox before is answered that the inbox is closed. When the
// subscription cannot be made (the connection is closed, or the node), every
// Deliver to the inbox fails.
func (n *Node) Listen(deliver func(resume.Message) error) (inbox string, close func()) {
	inbox = n.opts.Subject + "." + n.opts.Name + ".in." + randomHex(8)
	var closed atomic.Bool
	sub, err := n.nc.Subscribe(inbox, func(m *nats.Msg) {
		var text string
		switch msg, err := wire.DecodeMessage(m.Data); {
		case closed.Load():
			text = "cluster: inbox closed"
		case err != nil:
			n.log.Warn().Err(err).Str("inbox", inbox).Msg("a malformed delivery")
			text = err.Error()
		default:
			if err := deliver(msg); err != nil {
				text = err.Error()
			}
		}
		n.respond(m, []byte(text))
	})
	if err == nil {
		// The server knows of the subscription once the flush returns. A flush
		// that a lost connection cuts short (nats.go fails it as if the
		// connection were closed) leaves the subscription in place: the client
		// sends it again first thing on its new connection, before what it
		// publishes next (the attach that makes Delivers come).
		if ferr := n.nc.FlushTimeout(n.opts.CallTimeout); ferr != nil && n.nc.IsClosed() {
			err = ferr
		}
	}
	if err != nil {
		n.log.Warn().Err(err).Str("inbox", inbox).Msg("opening an inbox failed")
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		return inbox, func() {}
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		_ = sub.Unsubscribe()
		return inbox, func() {}
	}
	n.inboxes[sub] = struct{}{}
	n.mu.Unlock()
	var once sync.Once
	return inbox, func() {
		once.Do(func() {
			closed.Store(true)
			n.mu.Lock()
			delete(n.inboxes, sub)
			n.mu.Unlock()
			// Drained, not unsubscribed: the messages the server sent before
			// it knew still reach the handler, which answers them closed. An
			// unsubscribed client drops them, and their senders wait
			// CallTimeout for an answer (an engine's drain, and the
			// notifications of the request's tool queued behind it).
			if sub.Drain() == nil { // fails only when the connection or the subscription is closed already
				// The server knows, so Delivers fail at once (no responders).
				_ = n.nc.FlushTimeout(n.opts.CallTimeout)
			}
		})
	}
}

// Deliver sends m to inbox and waits, at most CallTimeout and no longer than the
// inbox's instance holds its lease, for the result of its deliver: nil, or an
// error whose text is deliver's error's. An error of its own says that no answer
// came: the inbox is closed (nats.ErrNoResponders) or unreachable, its instance
// departed, or this node is closed (ErrClosed).
func (n *Node) Deliver(ctx context.Context, inbox string, m resume.Message) error {
	if n.isClosed() {
		return ErrClosed
	}
	owner := n.InboxOwner(inbox)
	if owner == "" {
		return fmt.Errorf("cluster: deliver to %q: not an inbox", inbox)
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.CallTimeout)
	defer cancel()
	ctx, done := n.awaiting(ctx, owner)
	defer done()
	r, err := n.nc.RequestWithContext(ctx, inbox, wire.EncodeMessage(m))
	if err != nil {
		return fmt.Errorf("cluster: deliver message %d to %s: %w", m.Seq, inbox, causeOf(ctx, err))
	}
	if len(r.Data) > 0 {
		return remoteError(r.Data)
	}
	return nil
}

// remoteError is a deliver's error, as its text.
type remoteError string

func (e remoteError) Error() string { return string(e) }

// InboxOwner returns the name of the instance that opened inbox, or "" when inbox
// is not an inbox's name.
func (n *Node) InboxOwner(inbox string) string {
	rest, ok := strings.CutPrefix(inbox, n.opts.Subject+".")
	if !ok {
		return ""
	}
	name, id, ok := strings.Cut(rest, ".in.")
	if !ok || !validName(name) || id == "" || strings.ContainsAny(id, ".*> \t\r\n") {
		return ""
	}
	return name
}
