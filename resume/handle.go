package resume

import "time"

// Handle is a client's hold on a request, wherever it runs: the *Request itself
// on the instance that runs it, or, in a cluster, a proxy on another instance
// (package cluster) that forwards each call to the owner. Lookups return one.
// Its methods are safe for concurrent use, as a Request's are (a proxy guards
// what it knows of the owner with a lock of its own).
type Handle interface {
	// ID returns the request's JSON-RPC id, raw.
	ID() []byte
	// Status returns a snapshot of the request: for a proxy, as its owner
	// last told it (a Touch asks), or as the shared store's record says
	// before that (the state alone: nothing of what is queued).
	Status() Status
	// Created returns when the request started.
	Created() time.Time
	// Trace returns the request's trace context (Record.Trace).
	Trace() TraceContext
	// Gone reports whether the request has left the engine (see Request.Gone).
	Gone() bool
	// Attached reports whether sink is the request's current sink.
	Attached(sink Sink) bool
	// Touch resets the request's timers and applies ack when > 0.
	Touch(ack uint64) error
	// Attach attaches the request to sink, sending what comes after ack
	// (see Request.Attach).
	Attach(sink Sink, ack uint64) error
	// AttachAcked is Attach for a client that sent an acknowledgement, 0
	// included: the replay window after ack is written again (see
	// Request.AttachAcked).
	AttachAcked(sink Sink, ack uint64) error
	// AttachAll is Attach for a client that has seen nothing of the request:
	// every message it still holds is written (see Request.AttachAll).
	AttachAll(sink Sink) error
	// AttachFollow attaches a follower, for which written is delivered (see
	// Request.AttachFollow).
	AttachFollow(sink Sink, ack uint64) error
	// Detach detaches the request from sink, if sink is its current sink.
	Detach(sink Sink)
	// Cancel ends the request as cancelled.
	Cancel()
	// Release frees an ended request whose final response a client received:
	// see Request.Release.
	Release()
}

var _ Handle = (*Request)(nil)
