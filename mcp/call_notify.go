package mcp

import (
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// notifyDepth is how many notifications of one call mcp-go's channel holds
// before the tool waits for room (see announce); a detached request's holds one.
const notifyDepth = 16

// notifier carries one call's notifications from mcp-go's channel to the call
// (call.deliver) without a goroutine of its own while none is on the way: mcp-go
// calls UpgradeToSSEWhenReceiveNotification (announce) on the tool's goroutine
// right before each non-blocking send into the channel, so every send is known
// before it lands, and a drainer goroutine runs only while announced sends are
// not yet taken. A detached request whose tool notifies now and then (a
// countdown) thus holds a small channel and no goroutine between its
// notifications.
//
// A subscriptions/listen is the exception: mcp-go broadcasts to it (list
// changes) without announcing, so its drainer runs until the call ends.
//
// The channel itself goes when a detached request's drainer has taken every
// announced send (mcp-go asks the session for it at each send: the next
// announce makes a new one): a detached countdown holds it only while a
// notification is on the way. A detached request's channel holds one
// notification (its drainer only queues it), so the one made for each
// notification is small; the drainer runs on the server's pool, whose
// goroutines keep their grown stacks.
type notifier struct {
	mu       sync.Mutex
	ch       chan mcp.JSONRPCNotification // made on first use; nil again while a detached request's drainer is idle
	done     chan struct{}                // closed when sealed; made for a drainer or a wait for room that must wait, nil again with ch
	room     chan struct{}                // capacity 1: the drainer took a notification; made for a wait for room
	expected int                          // announced sends not yet taken
	sealed   bool                         // the handler returned: sends from now on are dropped
	draining bool                         // a drainer runs
	wg       sync.WaitGroup               // the drainer
}

// channel returns the channel mcp-go sends the call's notifications into, made
// on first use; nil once sealed (a send to it is dropped, as mcp-go does for a
// full channel).
func (n *notifier) channel(cl *call) chan<- mcp.JSONRPCNotification {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sealed {
		return nil
	}
	if n.ch == nil {
		n.ch = make(chan mcp.JSONRPCNotification, notifyDepth)
		if cl.kind.listen() && !n.draining {
			n.startLocked(cl)
		}
	}
	return n.ch
}

// doneLocked returns the channel closed when the notifier is sealed, made on
// first use.
func (n *notifier) doneLocked() chan struct{} {
	if n.done == nil {
		n.done = make(chan struct{})
	}
	return n.done
}

func (n *notifier) startLocked(cl *call) {
	n.draining = true
	n.wg.Add(1)
	cl.c.s.pool.run(func() { n.drain(cl) })
}

// announce is told that a send into the channel follows: it waits while the
// channel is full of announced sends (the back-pressure on a tool that notifies
// in a tight loop, which would otherwise lose most of a burst to mcp-go's
// non-blocking send), counts the send, and starts the drainer if none runs. The
// wait ends, and the send then goes as mcp-go sends it (dropped when full), when
// the call or its request ends, or the channel is sealed.
func (n *notifier) announce(cl *call) {
	n.mu.Lock()
	for !n.sealed {
		if n.ch == nil {
			// Made for this send: one deep for a request without a client,
			// read outside n.mu (the call's lock and the request's are not
			// taken under it).
			n.mu.Unlock()
			depth := notifyDepth
			if r := cl.request(); r != nil && r.Detached() {
				depth = 1
			}
			n.mu.Lock()
			if n.ch == nil {
				n.ch = make(chan mcp.JSONRPCNotification, depth)
			}
			continue
		}
		if n.expected < cap(n.ch) {
			break
		}
		if n.room == nil {
			n.room = make(chan struct{}, 1)
		}
		room, done := n.room, n.doneLocked()
		n.mu.Unlock()
		var ended <-chan struct{} // the request's end, once it is resumable
		if r := cl.request(); r != nil {
			ended = r.Context().Done()
		}
		select {
		case <-room:
		case <-done:
			return
		case <-cl.ctx.Done():
			return
		case <-ended:
			return
		}
		n.mu.Lock()
	}
	defer n.mu.Unlock()
	if n.sealed {
		return
	}
	n.expected++
	if !n.draining {
		n.startLocked(cl)
	}
}

// drain delivers the channel's notifications, in order, until no announced send
// is left to take (for a listen: until sealed) or the channel is sealed (seal
// delivers the rest).
func (n *notifier) drain(cl *call) {
	defer n.wg.Done()
	for {
		n.mu.Lock()
		if n.expected == 0 && !cl.kind.listen() {
			n.mu.Unlock()
			r := cl.request() // read outside n.mu: the call's lock and the request's are not taken under it
			idle := r != nil && r.Detached()
			n.mu.Lock()
			if n.expected == 0 {
				n.draining = false
				// Nobody waits for room either: no send is announced. A
				// detached request's channel goes; so does one made while
				// detached, once its client is back (the next is a full one).
				if len(n.ch) == 0 && (idle || cap(n.ch) < notifyDepth) {
					n.ch, n.done, n.room = nil, nil, nil
				}
				n.mu.Unlock()
				return
			}
		}
		ch := n.ch
		n.mu.Unlock()
		m, ok := n.take(ch)
		if !ok {
			return
		}
		n.mu.Lock()
		n.expected = max(0, n.expected-1)
		room := n.room
		n.mu.Unlock()
		if room != nil {
			select {
			case room <- struct{}{}:
			default: // told already
			}
		}
		cl.deliver(m)
	}
}

// take returns the drainer's next notification from ch, or ok false once the
// notifier is sealed (the drainer stops; seal delivers the rest). The send
// announced is usually in ch already (mcp-go sends right after announcing):
// only a drainer that must wait makes the channel that seal closes.
func (n *notifier) take(ch chan mcp.JSONRPCNotification) (_ mcp.JSONRPCNotification, ok bool) {
	select {
	case m := <-ch:
		return m, true
	default:
	}
	n.mu.Lock()
	if n.sealed {
		n.draining = false
		n.mu.Unlock()
		return mcp.JSONRPCNotification{}, false
	}
	done := n.doneLocked()
	n.mu.Unlock()
	select {
	case m := <-ch:
		return m, true
	case <-done:
		n.mu.Lock()
		n.draining = false
		n.mu.Unlock()
		return mcp.JSONRPCNotification{}, false
	}
}

// seal runs after the handler returned: the notifications it sent are delivered,
// in order, before its response. Notifications sent later (from goroutines the
// handler left behind) are dropped.
func (n *notifier) seal(cl *call) {
	n.mu.Lock()
	n.sealed = true
	if n.done != nil {
		close(n.done)
	}
	n.mu.Unlock()
	n.wg.Wait()
	if n.ch == nil {
		return
	}
	for {
		select {
		case m := <-n.ch:
			cl.deliver(m)
		default:
			return
		}
	}
}
