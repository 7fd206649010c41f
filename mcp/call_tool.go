package mcp

import (
	"context"
	"runtime"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/resume"
)

// The tool of a call that is, or may become, a request of the engine runs on a
// goroutine of the server's tools pool, not on the worker that dispatched the
// call through mcp-go. While the request has a client, the worker waits for
// the tool and the call goes on as any other. Once it has none (its client
// went, or it is a task, or it runs again after a restart), or once it is a
// request while the process is tight of memory (resume.Options.MemoryTight),
// the worker leaves (runtime.Goexit): its stack, which holds mcp-go's dispatch frames (4.4 KB
// for HandleMessage alone, so 16 KB a parked goroutine), goes, and a detached
// request costs its tool's own goroutine. The tool's goroutine then finishes
// the call when the tool returns: it dispatches the call through mcp-go again
// (replay), where the core's middleware answers with the tool's result instead
// of running the tool, so that mcp-go's after-hooks, the middlewares outside
// the core's, multi round-trip fulfilment and output validation see the
// tool's result as they do for any call. What a hook or an outer middleware
// sees of such a call: its start twice (the dispatch, the replay), its end
// once, with the result (a deferred function of an outer middleware runs at
// the worker's leaving as well).

// toolRun is a call's tool running on the tools pool (call.running). cl,
// ctx, req, next and stop are set before the tool's goroutine starts and read
// by it alone; wake and leaving are safe anywhere; the rest is guarded by the
// call's lock.
type toolRun struct {
	// wake (a chan struct{} of capacity 1) wakes the worker waiting for
	// the tool: the tool returned, or the worker is to leave (leaving). A
	// worker that leaves lets it go (a nil channel from then on): a detached
	// request keeps its toolRun, not the 96 bytes of a channel nobody reads.
	wake atomic.Value

	cl   *call
	ctx  context.Context
	req  *mcp.CallToolRequest // until the tool starts: its own copy is the tool's then
	next server.ToolHandlerFunc
	stop func() // ends what ctx holds (a deadline of its own), once the tool returned

	out *toolResult // what the tool returned, once it did

	running bool        // its handler runs: Later may be called
	later   bool        // its handler called Later: its completion ends the run
	leaving atomic.Bool // the worker is to leave (safe anywhere, as wake is)
	ended   atomic.Bool // end ran
	left    bool        // the worker left: the tool's goroutine finishes the call
	replay  bool        // the result waits for the replay's middleware
	release func()      // with left: the tool's concurrency place, released as the tool returns
}

// toolResult is what a call's tool returned: its result and error, or what it
// panicked with (panicked again where mcp-go's recovery can take it).
type toolResult struct {
	res      *mcp.CallToolResult
	err      error
	panicked any
}

// give returns the tool's result, or panics as the tool did.
func (o *toolResult) give() (*mcp.CallToolResult, error) {
	if o.panicked != nil {
		panic(o.panicked)
	}
	return o.res, o.err
}

// detachable reports whether the call's tool runs on the tools pool: the call
// is a request of the engine, or may become one (its policy is Always or
// After).
func (cl *call) detachable() bool {
	return read(cl, func(l *callLife) bool { return l.req != nil || l.applied })
}

// runTool runs next, the tool, on the tools pool, and waits for its result
// while the call's request has a client; when it has none, the worker leaves
// and the tool's goroutine finishes the call (finishLeft). leave releases the
// tool's concurrency place; a worker that leaves hands it to the tool's
// goroutine.
//
// ctx ends with the call or its request, not with mcp-go's dispatch (the
// middleware made it so); stop ends what ctx holds, once the tool returned.
func (s *Server) runTool(ctx context.Context, stop func(), cl *call, req mcp.CallToolRequest, next server.ToolHandlerFunc, leave *func()) (*mcp.CallToolResult, error) {
	if m := req.Params.Meta; m != nil && m.AdditionalFields != nil && len(m.AdditionalFields) == 0 {
		// mcp-go's decoding leaves the map it read _meta into, empty once it
		// took the progress token out (about 280 bytes): the tool, which may
		// run for long, gets a Meta of its own without it.
		own := *m
		own.AdditionalFields = nil
		req.Params.Meta = &own
	}
	tr := &toolRun{cl: cl, ctx: ctx, req: &req, next: next, stop: stop, running: true}
	wake := make(chan struct{}, 1)
	tr.wake.Store(wake)
	cl.running.Store(tr)
	if r := cl.request(); r != nil && (cl.kind.task() || r.Detached() || s.eng.Tight()) {
		cl.leaveWorker()
	}
	s.wg.Add(1) // Close waits for the tool's goroutine
	s.tools.run(tr.run)
	for {
		<-wake
		var returned, left bool
		cl.update(func(l *callLife) {
			switch {
			case tr.out != nil: // the tool returned
				returned = true
			case tr.leaving.Load():
				tr.left, left = true, true
				tr.release, *leave = *leave, func() {}
			}
		})
		if left {
			tr.wake.Store((chan struct{})(nil))
			s.calls.Add(1) // the call runs on, on the tool's goroutine (finishLeft)
			runtime.Goexit()
		}
		if returned {
			break
		}
	}
	return tr.out.give()
}

// run runs the tool on a goroutine of the tools pool, and finishes the call
// when its worker left; a tool that answers later (Later) leaves that to its
// completion.
func (tr *toolRun) run() {
	var res *mcp.CallToolResult
	var err error
	var panicked any
	req := tr.req
	tr.req = nil // read by run alone
	func() {
		defer func() { panicked = recover() }()
		res, err = tr.next(tr.ctx, *req)
	}()
	var later bool
	tr.cl.update(func(*callLife) { later, tr.running = tr.later, false })
	if later && panicked == nil {
		return // its completion ends it (Later)
	}
	tr.end(res, err, panicked)
}

// end ends the tool's run with its result, once: the worker waiting for it
// gets it, or, when the worker left, the call is finished here. What the
// tool's context holds goes, and Close no longer waits for the tool.
func (tr *toolRun) end(res *mcp.CallToolResult, err error, panicked any) {
	if !tr.ended.CompareAndSwap(false, true) {
		return
	}
	cl := tr.cl
	defer cl.c.s.wg.Done()
	defer tr.stop()
	var finish bool
	cl.update(func(l *callLife) {
		tr.out = &toolResult{res: res, err: err, panicked: panicked}
		finish, tr.replay = tr.left, tr.left
		tr.ctx, tr.next = nil, nil // the tool's, no longer needed
	})
	tr.signal()
	if finish {
		cl.finishLeft(tr)
	}
}

// Later lets the handler of a tool whose result comes from elsewhere (a
// gateway's upstream, a job's callback) return before it has it, so that no
// goroutine waits for it meanwhile: it returns the function that answers the
// call, and the handler returns at once (what it returns is ignored). A
// detached call then holds no goroutine at all until complete is called:
// neither the tool's nor the dispatch's (Options.DetachTools).
//
// complete answers the call with the tool's result, as the handler's return
// would have; it is called once (later calls are ignored), from any
// goroutine, which it may keep for as long as the answer takes to go through
// mcp-go's dispatch and to the client: not from one that must not wait. Until
// then the call runs: it is cancelled, or ends with its request, as any call,
// and its context (the handler's) ends then; the handler's owner must still
// call complete (with the context's error, say). Close waits for it.
//
// ok is false, and complete nil, when the tool does not run on the server's
// tools pool (without DetachTools, a call no policy makes resumable, a
// replay), or once its handler returned: the handler then answers as usual.
func Later(ctx context.Context) (complete func(*mcp.CallToolResult, error), ok bool) {
	cs, isCall := server.ClientSessionFromContext(ctx).(*callSession)
	if !isCall {
		return nil, false
	}
	cl := cs.cl
	tr := cl.running.Load()
	if tr == nil {
		return nil, false
	}
	cl.update(func(*callLife) {
		if ok = tr.running; ok {
			tr.later = true
		}
	})
	if !ok {
		return nil, false
	}
	return func(res *mcp.CallToolResult, err error) { tr.end(res, err, nil) }, true
}

// signal wakes the worker waiting for the tool, if it does not wake already.
func (tr *toolRun) signal() {
	wake, _ := tr.wake.Load().(chan struct{})
	select {
	case wake <- struct{}{}: // never once the worker left (nil)
	default:
	}
}

// leaveWorker tells the worker waiting for the call's tool, if one does, that
// the call's request has no client: it leaves. It takes no lock of the
// call's: the engine tells of a detachment under it.
func (cl *call) leaveWorker() {
	if tr := cl.running.Load(); tr != nil {
		tr.leaving.Store(true)
		tr.signal()
	}
}

// replayed returns the tool's result to the replay's middleware (once), and
// reports whether this dispatch is the replay.
func (cl *call) replayed() (*mcp.CallToolResult, error, bool) {
	tr := cl.running.Load()
	if tr == nil { // no tool ran yet: every call but a replay, without a lock
		return nil, nil, false
	}
	replay := false
	cl.update(func(*callLife) { replay, tr.replay = tr.replay, false })
	if !replay {
		return nil, nil, false
	}
	res, err := tr.out.give()
	return res, err, true
}

// finishLeft finishes, on the tool's goroutine, a call whose worker left: its
// concurrency place goes, its result passes through mcp-go's dispatch again
// (replayed answers it), and the call ends as run ends it.
func (cl *call) finishLeft(tr *toolRun) {
	defer cl.c.s.calls.Add(-1)
	tr.release()
	cl.finish(cl.dispatch(cl.raw, false))
}

// toolObserver tells a call of its request's attachments: its worker leaves
// when the request loses its client. It passes every event on to the call's
// span's observer, when it has one. One pointer, so that the engine holds it
// as an Observer without an allocation of its own.
type toolObserver struct{ cl *call }

// next is the call's span's observer; nil for none.
func (o toolObserver) next() resume.Observer { return o.cl.span.observer() }

func (o toolObserver) Attached(ack uint64) {
	if n := o.next(); n != nil {
		n.Attached(ack)
	}
}

func (o toolObserver) Detached() {
	o.cl.leaveWorker()
	if n := o.next(); n != nil {
		n.Detached()
	}
}

func (o toolObserver) Delivered() {
	if n := o.next(); n != nil {
		n.Delivered()
	}
}

func (o toolObserver) Ended(cause error) {
	if n := o.next(); n != nil {
		n.Ended(cause)
	}
}
