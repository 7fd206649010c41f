package cluster

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-resume/mcp-resume/resume"
)

// proxy is one client's handle, on this instance, on a request another
// instance owns (resume.Handle): Touch, Status, Attach, Detach and Cancel are
// calls to the owner. An Attach opens an inbox here (Listen) and the owner
// attaches the request to it: each message the owner writes is delivered to the
// inbox and written to the local sink, and the local write's result goes back to
// the owner as its sink's. Attachment, takeover, acks and timers are the
// owner's, unchanged. When the owner is lost, the proxy moves to the request's
// successor (failover): claimed here, or a proxy of the instance that claimed
// it; an attached proxy re-attaches its sink there.
type proxy struct {
	n         *Node
	id        []byte
	hash      resume.TokenHash
	principal string
	created   time.Time
	trace     resume.TraceContext
	gone      atomic.Bool // the client has the result, or the request went with its owner

	mu     sync.Mutex // guards the fields below
	owner  string
	status resume.Status // from the owner's last answer to a touch
	// The attachment through the owner, when the proxy is attached: sink gets what
	// the owner delivers to inbox; cursor is the last seq written to sink.
	sink       resume.Sink
	inbox      string
	closeInbox func()
	cursor     uint64
	unwatch    func() // the watch of the owner's lease, while attached
	// next, once the owner was lost, is what stands for the request now: the
	// request claimed here, or a proxy of the instance that claimed it.
	next resume.Handle
}

var _ resume.Handle = (*proxy)(nil)

// errUnreachable: the owner of a proxied request holds its lease but did not
// answer a call.
var errUnreachable = resume.ErrUnreachable

// proxy returns a proxy of rec, owned by a live instance.
func (n *Node) proxy(rec resume.Record) *proxy {
	return &proxy{n: n, id: rec.ID, hash: rec.Hash, principal: rec.Principal, created: rec.Created, trace: rec.Trace,
		owner: rec.Owner, status: resume.Status{State: rec.State}}
}

func (p *proxy) ID() []byte { return p.id }

func (p *proxy) Gone() bool { return p.gone.Load() }

// current returns what the proxy stands for now: the owner's request (nil, to
// reach through calls) or, once the owner was lost, its successor.
func (p *proxy) current() (resume.Handle, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next, p.owner
}

// call sends c to the owner. When no answer comes because the owner is gone, the
// proxy moves to the request's successor (failover) and reports it in next.
func (p *proxy) call(c PeerCall) (rep PeerReply, next resume.Handle, err error) {
	nx, owner := p.current()
	if nx != nil {
		return PeerReply{}, nx, nil
	}
	c.Hash = p.hash
	ctx := p.n.side.e.Context()
	rep, err = p.n.Call(ctx, owner, c)
	if err == nil {
		return rep, nil, rep.Error()
	}
	if p.n.Alive(ctx, owner) {
		return PeerReply{}, nil, fmt.Errorf("%w: %w", errUnreachable, err)
	}
	if nx := p.failover(true); nx != nil {
		return PeerReply{}, nx, nil
	}
	return PeerReply{}, nil, resume.ErrUnknown
}

// failover replaces a lost owner by the request's successor: claimed here, or
// proxied to the instance that claimed it. An attached proxy re-attaches its sink
// there after what it has written, so the client gets the rest without resuming.
//
// ownerLost says the caller has just found the owner's lease gone; otherwise (a
// watch that fired) resolve checks it again, in case an instance of that name is
// back already.
func (p *proxy) failover(ownerLost bool) resume.Handle {
	log := p.n.side.e.Logger()
	p.mu.Lock()
	if p.next != nil {
		nx := p.next
		p.mu.Unlock()
		return nx
	}
	owner := p.owner
	p.mu.Unlock()

	rec := resume.Record{Hash: p.hash, ID: p.id, Principal: p.principal, Created: p.created, Owner: owner, Trace: p.trace}
	nx, err := p.n.resolve(rec, ownerLost)
	if err != nil {
		log.Info().Err(err).Str("request", string(p.id)).Msg("the owner of a proxied request was lost, and the request with it")
		p.gone.Store(true)
		p.detach(nil)
		return nil
	}
	p.mu.Lock()
	if p.next != nil { // another failover won
		nx = p.next
		p.mu.Unlock()
		return nx
	}
	p.next = nx
	sink, cursor := p.sink, p.cursor
	p.mu.Unlock()
	p.detach(nil)
	if sink != nil {
		// The cursor says what was written to the client, not what it
		// acknowledged: the successor keeps the request's ack mode.
		if err := p.n.reattach(nx, sink, cursor); err != nil {
			log.Info().Err(err).Str("request", string(p.id)).Msg("re-attaching a proxied request after its owner was lost")
		}
	}
	return nx
}

// reattach attaches h to sink, which was written every message up to written,
// none of them acknowledged: a failover's attach (see resume.Host.AttachWritten).
func (n *Node) reattach(h resume.Handle, sink resume.Sink, written uint64) error {
	switch h := h.(type) {
	case *resume.Request:
		deliver, err := n.side.e.AttachWritten(h, sink, 0, written, resume.AttachModePlain)
		if err != nil {
			return err
		}
		deliver()
		return nil
	case *proxy:
		return h.attach(sink, 0, written, PeerReattach)
	}
	return h.Attach(sink, 0)
}

// detach closes the proxy's inbox and its watch of the owner, and returns the
// inbox's name; when sink is not nil, only if it is the proxy's sink.
func (p *proxy) detach(sink resume.Sink) (inbox string, ok bool) {
	p.mu.Lock()
	if sink != nil && p.sink != sink {
		p.mu.Unlock()
		return "", false
	}
	inbox, closeInbox, unwatch := p.inbox, p.closeInbox, p.unwatch
	p.sink, p.inbox, p.closeInbox, p.unwatch = nil, "", nil, nil
	p.mu.Unlock()
	if closeInbox != nil {
		closeInbox()
	}
	if unwatch != nil {
		unwatch()
	}
	return inbox, inbox != ""
}

func (p *proxy) Touch(ack uint64) error {
	p.mu.Lock()
	inbox := p.inbox
	p.mu.Unlock()
	rep, nx, err := p.call(PeerCall{Op: PeerTouch, Ack: ack, Inbox: inbox})
	if nx != nil {
		return nx.Touch(ack)
	}
	if errors.Is(err, errUnreachable) {
		// The owner holds its lease but did not answer (it may have just died):
		// the request counts as running, as last known, until the lease says.
		p.n.side.e.Logger().Debug().Err(err).Str("request", string(p.id)).Msg("the owner of a proxied request did not answer a touch")
		return nil
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.status = rep.Status
	var taken resume.Sink
	if rep.Detached && inbox != "" && p.inbox == inbox {
		taken = p.sink
	}
	p.mu.Unlock()
	if taken != nil {
		// Another client took the request over at its owner: the proxy's
		// sink gets nothing more (Attached says so).
		p.detach(taken)
	}
	return nil
}

// Created returns when the request started, as its record says.
func (p *proxy) Created() time.Time { return p.created }

func (p *proxy) Trace() resume.TraceContext { return p.trace }

func (p *proxy) Status() resume.Status {
	nx, _ := p.current()
	if nx != nil {
		return nx.Status()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

func (p *proxy) Attached(sink resume.Sink) bool {
	if nx, _ := p.current(); nx != nil {
		return nx.Attached(sink)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sink == sink
}

func (p *proxy) Attach(sink resume.Sink, ack uint64) error {
	return p.attach(sink, ack, ack, PeerAttach)
}

// AttachAcked and AttachAll ask the owner for its own: the replay window is
// the owner's.
func (p *proxy) AttachAcked(sink resume.Sink, ack uint64) error {
	return p.attach(sink, ack, ack, PeerAttachAcked)
}

func (p *proxy) AttachAll(sink resume.Sink) error { return p.attach(sink, 0, 0, PeerAttachAll) }

func (p *proxy) AttachFollow(sink resume.Sink, ack uint64) error {
	return p.attach(sink, ack, ack, PeerAttachFollow)
}

// attach is Attach, AttachAcked or AttachAll (op, with written == ack) or a
// failover's reattach (op PeerReattach, ack 0).
func (p *proxy) attach(sink resume.Sink, ack, written uint64, op PeerOp) error {
	if nx, _ := p.current(); nx != nil {
		switch op {
		case PeerReattach:
			return p.n.reattach(nx, sink, written)
		case PeerAttachAcked:
			return nx.AttachAcked(sink, ack)
		case PeerAttachAll:
			return nx.AttachAll(sink)
		case PeerAttachFollow:
			return nx.AttachFollow(sink, ack)
		}
		return nx.Attach(sink, ack)
	}
	e := p.n.side.e
	inbox, closeInbox := p.n.Listen(func(m resume.Message) error { return p.deliver(sink, m) })
	p.mu.Lock()
	// Messages may come before the owner's answer: the cursor counts from what
	// the client has.
	oldClose, oldWatch := p.closeInbox, p.unwatch
	p.sink, p.inbox, p.closeInbox, p.cursor, p.unwatch = sink, inbox, closeInbox, max(ack, written), nil
	p.mu.Unlock()
	if oldClose != nil {
		oldClose()
	}
	if oldWatch != nil {
		oldWatch()
	}
	c := PeerCall{Op: op, Ack: ack, Inbox: inbox}
	if op == PeerReattach {
		c.Ack = written
	}
	_, nx, err := p.call(c)
	if nx != nil {
		// The failover attached sink to the successor after what it was
		// written, which is not an acknowledgement: the client's own ack is
		// applied there now.
		if ack > 0 {
			if err := nx.Touch(ack); err != nil {
				e.Logger().Debug().Err(err).Str("request", string(p.id)).Msg("acknowledging to the successor of a lost owner")
			}
		}
		return nil
	}
	if err != nil {
		p.detach(sink)
		return err
	}
	_, owner := p.current()
	unwatch := p.n.Watch(owner, func() {
		if e.Enter() {
			defer e.Exit()
			p.failover(false)
		}
	})
	p.mu.Lock()
	if p.sink == sink && p.unwatch == nil {
		p.unwatch, unwatch = unwatch, nil
	}
	p.mu.Unlock()
	if unwatch != nil { // detached meanwhile
		unwatch()
	}
	return nil
}

// deliver writes a message the owner delivered to the proxy's inbox.
func (p *proxy) deliver(sink resume.Sink, m resume.Message) error {
	if err := sink.Write(p.n.side.e.Context(), m); err != nil {
		return err
	}
	p.mu.Lock()
	if p.sink == sink && m.Seq > p.cursor {
		p.cursor = m.Seq
	}
	p.mu.Unlock()
	if m.Kind == resume.KindResponse {
		p.gone.Store(true) // the client has the result; the owner keeps it for a while
		// Nothing comes after it: the proxy lets go of its inbox and its watch of
		// the owner, and the owner of the sink, as when the client's connection
		// closes (a long-lived one may carry many requests). A client that asks
		// again attaches anew. Not on the inbox's own delivery.
		if e := p.n.side.e; e.Enter() {
			go func() {
				defer e.Exit()
				p.Detach(sink)
			}()
		}
	}
	return nil
}

func (p *proxy) Detach(sink resume.Sink) {
	if nx, _ := p.current(); nx != nil {
		nx.Detach(sink)
		return
	}
	inbox, ok := p.detach(sink)
	if !ok {
		return
	}
	if _, nx, err := p.call(PeerCall{Op: PeerDetach, Inbox: inbox}); nx != nil {
		nx.Detach(sink)
	} else if err != nil {
		p.n.side.e.Logger().Debug().Err(err).Str("request", string(p.id)).Msg("detaching a proxied request")
	}
}

// Release leaves the request to its owner, which frees its result when its
// retention ends: it is not worth a message between instances.
func (p *proxy) Release() {}

func (p *proxy) Cancel() {
	_, nx, err := p.call(PeerCall{Op: PeerCancel})
	if nx != nil {
		nx.Cancel()
		return
	}
	if err != nil {
		p.n.side.e.Logger().Debug().Err(err).Str("request", string(p.id)).Msg("cancelling a proxied request")
	}
	p.gone.Store(true)
	p.detach(nil)
}
