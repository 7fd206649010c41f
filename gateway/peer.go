package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// errLost: the upstream connection ended (a child that exited, an HTTP upstream
// that went away) before the request's answer came.
var errLost = errors.New("gateway: the upstream connection ended")

// errNotSent: the request could not be written to the upstream (a child that
// is gone, an HTTP upstream that refused it or cannot be reached): the upstream
// never saw it, so it may be sent again on the next connection.
var errNotSent = errors.New("gateway: the request could not be sent to the upstream")

// errStreamLost: an HTTP upstream's event stream for the request broke and could
// not be taken up again.
var errStreamLost = errors.New("gateway: the upstream's event stream for the request broke")

// peer is one connection to the upstream, as its JSON-RPC client: requests with
// ids of its own and their answers matched to them; what the upstream sends of its
// own (notifications, requests) goes to the gateway with the id of the request
// whose stream carried it, when the transport tells.
type peer struct {
	conn   transport.Conn
	http   *httptransport.ClientConn // conn, when the upstream is Streamable HTTP
	prefix string                    // of every request id; new per connection
	// modern: the upstream speaks 2026-07-28 too (its server/discover says so):
	// tool calls carry their client's capabilities and go in that era, where a
	// question is the call's own input_required answer.
	modern bool
	// version is the protocol version the upstream answered initialize
	// with, for the spans of the requests sent in it.
	version string
	next    atomic.Uint64
	g       *Gateway

	mu      sync.Mutex
	pending map[string]*pending // by the request's raw id
	closed  bool

	done chan struct{} // closed when the reader returned
	err  error         // why; read after done
}

type pending struct {
	ch    chan reply // capacity 1
	empty int        // take-ups of its event stream in a row that delivered nothing
}

type reply struct {
	result json.RawMessage
	err    error
}

// maxEmptyTakeUps bounds the take-ups in a row of one request's event stream
// that deliver nothing: a silent one is closed after Options.StreamIdle, so a
// quiet call on an upstream that keeps its stream open survives this many idle
// windows (the default: 20 × 30 s) before it fails.
const maxEmptyTakeUps = 20

// takeUpDelay is waited before each take-up, so that an upstream that ends every
// taken-up stream at once is not asked in a tight loop.
const takeUpDelay = 200 * time.Millisecond

func newPeer(g *Gateway, conn transport.Conn, prefix string) *peer {
	p := &peer{conn: conn, prefix: prefix, g: g, pending: map[string]*pending{}, done: make(chan struct{})}
	p.http, _ = conn.(*httptransport.ClientConn)
	return p
}

// read reads the connection until it ends, then fails what is pending.
func (p *peer) read(ctx context.Context) {
	defer close(p.done)
	for {
		var in httptransport.Inbound
		var err error
		if p.http != nil {
			in, err = p.http.ReadInbound(ctx)
		} else {
			in.Msg, err = p.conn.Read(ctx)
		}
		if err != nil {
			var tl *transport.TooLargeError
			if errors.As(err, &tl) {
				p.g.log.Warn().Err(err).Msg("upstream message skipped")
				continue
			}
			// Out of service before the pending calls hear of it, so that a call
			// sent again waits for the next connection instead of this one.
			p.g.lost(p)
			p.fail(err)
			return
		}
		if in.Lost {
			p.streamLost(in)
			continue
		}
		m, derr := spec.Decode(in.Msg)
		if derr != nil {
			p.g.log.Warn().Str("error", derr.Message).Msg("undecodable message from the upstream")
			continue
		}
		switch m.Kind {
		case spec.KindResponse:
			p.answer(m)
		case spec.KindRequest:
			p.g.wg.Add(1)
			go func() {
				defer p.g.wg.Done()
				p.g.serverRequest(p, m, in.Via)
			}()
		case spec.KindNotification:
			p.g.notification(p, m, in.Via)
		}
	}
}

func (p *peer) answer(m *spec.Message) {
	p.mu.Lock()
	pd := p.pending[string(m.ID)]
	delete(p.pending, string(m.ID))
	p.mu.Unlock()
	if pd == nil {
		return
	}
	if m.Error != nil {
		e := &spec.Error{}
		if err := json.Unmarshal(m.Error, e); err != nil {
			e = spec.NewError(spec.CodeInternalError, "", "malformed error from the upstream")
		}
		pd.ch <- reply{err: e}
		return
	}
	pd.ch <- reply{result: m.Result}
}

// streamLost takes up a request's broken event stream with the upstream's own
// means (Last-Event-ID) when it offered them, or fails the request.
func (p *peer) streamLost(in httptransport.Inbound) {
	p.mu.Lock()
	pd := p.pending[string(in.Via)]
	if pd != nil {
		if in.Delivered > 0 {
			pd.empty = 0
		} else {
			pd.empty++
		}
	}
	retry := pd != nil && in.LastEventID != "" && pd.empty <= maxEmptyTakeUps
	if pd != nil && !retry {
		delete(p.pending, string(in.Via))
	}
	p.mu.Unlock()
	if pd == nil {
		return
	}
	if !retry {
		pd.ch <- reply{err: errStreamLost}
		return
	}
	p.g.wg.Add(1)
	go func() {
		defer p.g.wg.Done()
		if !backoff.Sleep(p.g.ctx, takeUpDelay) {
			return
		}
		if err := p.http.Resume(in.Via, in.LastEventID, p.g.opts.StreamIdle); err != nil {
			p.g.log.Debug().Err(err).Msg("taking up an upstream event stream")
			p.mu.Lock()
			gone := p.pending[string(in.Via)] == pd
			delete(p.pending, string(in.Via))
			p.mu.Unlock()
			if gone {
				pd.ch <- reply{err: errStreamLost}
			}
		}
	}()
}

// fail ends the peer: every pending request gets errLost.
func (p *peer) fail(err error) {
	p.mu.Lock()
	p.closed = true
	p.err = err
	pend := p.pending
	p.pending = map[string]*pending{}
	p.mu.Unlock()
	for _, pd := range pend {
		pd.ch <- reply{err: errLost}
	}
}

// newID returns a request id of this peer's.
func (p *peer) newID() spec.ID {
	return spec.ID(strconv.Quote(p.prefix + strconv.FormatUint(p.next.Add(1), 10)))
}

// call sends a request and waits for its answer. An error answer is a
// *spec.Error; the connection's end is errLost. When ctx ends first, the upstream
// is told (notifications/cancelled) and ctx's error returned. The request is
// traced and measured (exchange).
func (p *peer) call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return p.callID(ctx, p.newID(), method, params)
}

// callID is call with the request's id.
func (p *peer) callID(ctx context.Context, id spec.ID, method string, params json.RawMessage) (json.RawMessage, error) {
	return exchange(ctx, p, id, method, params, true)
}

// probe is call for a request the upstream may refuse outright without
// anything being wrong with the connection (a method of an era it does not
// speak, which a server of the 2025 era answers without a session): the
// connection stays in service.
func (p *peer) probe(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return exchange(ctx, p, p.newID(), method, params, false)
}

// send sends request id and waits for its answer, untraced (a tools/call's
// span is its caller's: upSpan). With renew, an HTTP upstream that refuses
// it or cannot be reached is taken out of service (its session may be gone).
func (p *peer) send(ctx context.Context, id spec.ID, method string, params json.RawMessage, renew bool) (json.RawMessage, error) {
	pd := &pending{ch: make(chan reply, 1)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errNotSent
	}
	p.pending[string(id)] = pd
	p.mu.Unlock()
	msg := spec.EncodeRequest(id, method, params)
	written := make(chan error, 1)
	if p.http != nil {
		// A POST's Write may last as long as the request (a server that
		// answers with a JSON body at the end): its answer, or its context's
		// end, is waited for meanwhile.
		// Not counted in g.wg: a peer taken out of service is not always
		// closed, and its POST ends with the request, its abort or the
		// connection's close, whichever comes first.
		go func() { written <- p.conn.Write(ctx, msg) }()
	} else {
		written <- p.conn.Write(ctx, msg)
	}
	for {
		select {
		case err := <-written:
			if err == nil {
				written = nil // the answer is to come
				continue
			}
			p.forget(id)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if p.http != nil && renew {
				// An HTTP upstream that refuses or cannot be reached: the session may be
				// gone (a restarted upstream answers 404). Start over with a new one.
				p.close()
			}
			return nil, fmt.Errorf("%w: %w", errNotSent, err)
		case r := <-pd.ch:
			return r.result, r.err
		case <-ctx.Done():
			if p.forget(id) {
				p.cancel(id, context.Cause(ctx))
			}
			return nil, ctx.Err()
		}
	}
}

// forget drops a pending request; it reports whether it was still pending.
func (p *peer) forget(id spec.ID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.pending[string(id)]
	delete(p.pending, string(id))
	return ok
}

// cancel tells the upstream to stop working on request id: a request of the
// 2026 era over HTTP by closing its stream, any other with
// notifications/cancelled, which carries the call's resume token when the
// upstream gave one (SEP-975 with this project's extension: it names the
// request wherever it is attached, a 2026 one that closing its stream only
// detached included).
func (p *peer) cancel(id spec.ID, cause error) {
	if p.http != nil {
		p.http.Abort(id)
	}
	reason := "cancelled"
	if cause != nil {
		reason = cause.Error()
	}
	cp := spec.CancelledParams{RequestID: id, Reason: reason}
	p.g.mu.Lock()
	if uc := p.g.calls[string(id)]; uc != nil && (uc.policySeen || uc.keyed) {
		cp.ResumeToken = uc.resumeToken
	}
	p.g.mu.Unlock()
	params, _ := json.Marshal(cp)
	p.notify(spec.MethodCancelled, params)
}

// notify sends a notification, best effort, off the caller's path when the
// upstream is slow to take it.
func (p *peer) notify(method string, params json.RawMessage) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	if err := p.conn.Write(ctx, spec.EncodeRequest(nil, method, params)); err != nil {
		p.g.log.Debug().Err(err).Str("method", method).Msg("notifying the upstream")
	}
}

// respond answers the upstream's request id.
func (p *peer) respond(id spec.ID, result json.RawMessage, err error) {
	var msg []byte
	if err != nil {
		var e *spec.Error
		if !errors.As(err, &e) {
			e = spec.NewError(spec.CodeInternalError, "", err.Error())
		}
		msg = spec.EncodeError(id, e)
	} else {
		msg = spec.EncodeResponse(id, result)
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	if werr := p.conn.Write(ctx, msg); werr != nil {
		p.g.log.Debug().Err(werr).Msg("answering the upstream")
	}
}

// close closes the connection; the reader then fails what is pending.
func (p *peer) close() {
	_ = p.conn.Close()
}
