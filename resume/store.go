package resume

import (
	"context"
	"errors"
	"iter"
	"time"
)

// Kind classifies a queued message for retention and the byte budget.
type Kind uint8

const (
	// KindNotification is droppable under the byte budget (logs and other notifications).
	KindNotification Kind = iota + 1
	// KindProgress is coalesced under the byte budget: only the newest per Key stays.
	KindProgress
	// KindRequest is a server-to-client request: never dropped, kept until answered.
	KindRequest
	// KindResponse is the final response: never dropped, kept until acknowledged or
	// until the retention window ends.
	KindResponse
)

// retained reports whether a message of this kind stays queued after a successful
// write to a sink when the client does not acknowledge.
func (k Kind) retained() bool { return k == KindRequest || k == KindResponse }

// Message is one queued outgoing message of a request.
type Message struct {
	// Seq numbers the message within its request: 1, 2, 3, ... (above
	// Record.Epoch<<32 after a recovery); 0 for a message written outside any
	// outbox.
	Seq uint64
	// Kind says how the message is kept and dropped.
	Kind Kind
	// Key groups progress messages for coalescing (the progress token's JSON
	// text). The Store keeps it; the engine's replay from memory (no Store)
	// leaves it empty, as nothing reads it there.
	Key string
	// Data is the complete encoded message. A Store keeps it as given (it may keep the
	// slice itself); nobody modifies it after Append.
	Data []byte
	// Failed marks a final response (KindResponse) that ends its request as
	// failed (Request.Complete's failed): a restart that finds the response
	// without the final state reads the outcome here, not from Data.
	Failed bool
}

// State is where a request is in its lifecycle.
type State uint8

const (
	// StateProcessing: the handler runs; no final response yet.
	StateProcessing State = iota + 1
	// StateCompleted: the final response is queued (Request.Complete).
	StateCompleted
	// StateFailed: the final response, queued, is an error (Complete's
	// failed, or the engine's own: Options.Ended).
	StateFailed
	// StateCancelled: the request was cancelled, and left the engine.
	StateCancelled
	// StateExpired: the request ran out of time (MaxWait, its retention, its
	// ttl) or was released early, and left the engine.
	StateExpired
)

var stateNames = [...]string{"", "processing", "completed", "failed", "cancelled", "expired"}

// String returns the state's name: "processing", "completed", "failed",
// "cancelled" or "expired" ("unknown" for any other value).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Ended reports whether the request has a final response or was stopped.
func (s State) Ended() bool { return s != StateProcessing }

// endedErr is what a lookup of a request that ended in state s (a tombstone)
// answers: ErrCancelled for a cancelled one, ErrAcknowledged for one freed with
// its result (only the client's ack does that), ErrExpired for any other.
func (s State) endedErr() error {
	switch s {
	case StateCancelled:
		return ErrCancelled
	case StateCompleted, StateFailed: // freed by the client's ack of its response
		return ErrAcknowledged
	}
	return ErrExpired
}

// Record is the durable description of a request.
type Record struct {
	// Hash is the hash of the request's token: its key in the Store.
	Hash TokenHash
	// ID is the request's JSON-RPC id, raw.
	ID []byte
	// State is where the request is in its lifecycle as last stored.
	State State
	// Created is when the request started.
	Created time.Time
	// Payload, for a restartable request, is what its owner needs to run it again
	// after a restart (the raw JSON-RPC request); nil for the others.
	Payload []byte
	// Principal is who started the request (StartOptions.Principal), "" for none:
	// a recovered request stays bound to it.
	Principal string
	// Owner names the instance whose engine runs the request (Options.Cluster's
	// Self; "" for an engine without one). Only the owner writes the request's
	// messages and state; another instance serves a client through the owner (see
	// Cluster), and takes the request over (Store.Claim) once the owner is gone.
	Owner string
	// AckMode: the request keeps each message until the client acknowledges it
	// (StartOptions.AckMode, or a client's first ack). A recovered request keeps
	// its mode, so a failover or a resume without an ack loses nothing.
	AckMode bool
	// Epoch counts the runs of the request that were recovered while processing
	// (ended as restarted, or run again). The messages queued from run Epoch on
	// are numbered after Epoch<<32: a recovered request never reuses a sequence
	// number a client may hold, even one whose message left the store when it was
	// acknowledged or delivered.
	Epoch uint32
	// Acknowledged, on a tombstone (State expired), says the request was freed
	// because its client acknowledged the final response: lookups answer
	// ErrAcknowledged rather than ErrExpired.
	Acknowledged bool
	// Task: the request is a task (StartOptions.Task). A recovered task stays
	// one (run again as a task when restartable); a task's tombstone is stored
	// (see Engine.forget), so that a task that ended cancelled says so after a
	// restart.
	Task bool
	// TTL is the request's fixed lifetime from Created (StartOptions.TTL); 0
	// for none.
	TTL time.Duration
	// Deadline is when the request's handler must have ended
	// (StartOptions.Deadline); zero for none. Kept to the millisecond.
	Deadline time.Time
	// Trace is the trace context of the span that stands for the request
	// (StartOptions.Trace): what happens to the request later, on any
	// instance and after a restart, is traced in its trace. Zero for none.
	Trace TraceContext
}

// TraceContext is a W3C trace context (https://www.w3.org/TR/trace-context/):
// a traceparent and its tracestate. The engine keeps it with its request and
// never reads it.
type TraceContext struct {
	// Parent is the traceparent header's value: version, trace id, parent
	// span id, flags ("00-<32 hex>-<16 hex>-01"); "" for none.
	Parent string
	// State is the tracestate header's value; "" for none.
	State string
}

// IsZero reports whether tc holds no trace context.
func (tc TraceContext) IsZero() bool { return tc.Parent == "" && tc.State == "" }

// Observer is told what becomes of a request on the instance that runs it:
// package mcp's span of the request takes it as span events, and ends when
// the final response reaches a client, or when the request ends. Its methods
// are called with the request's lock held (Ended, from Engine.Close, without
// it): they return at once and never call the Request.
type Observer interface {
	// Attached: a client took the request up (a resume, a stream reconnect,
	// a call sent again with its key, a takeover), having acknowledged every
	// message up to ack. Not called for the attachment of Start.
	Attached(ack uint64)
	// Detached: the request lost its client (its stream closed, a write to
	// it failed) and runs on without one.
	Detached()
	// Delivered: the request's final response was written to a client. The
	// Observer's last call: the request lets go of it.
	Delivered()
	// Ended: the request left the engine (or, its store lost, ended without
	// its handler's response), cause its context's cause: ErrEnded,
	// ErrCancelled, ErrExpired, ErrClosed, ErrStoreLost. It may be called
	// more than once; the first cause is the one that counts.
	Ended(cause error)
}

// ErrNotFound is returned by a Store for a request it does not hold (never created,
// or deleted). It is never returned with partial data.
var ErrNotFound = errors.New("resume: request not found")

// ErrClaimed is returned by Store.Claim when the request's owner is no longer the
// one the caller saw: another instance claimed it first.
var ErrClaimed = errors.New("resume: request claimed by another instance")

// ErrUnreadable is wrapped by a Store's error for a record it holds but cannot
// decode: damaged, or written by a newer version of the Store's format.
var ErrUnreadable = errors.New("resume: stored record unreadable")

// Store holds requests' records and queued messages: in memory (memstore) or
// durably. The engine owns every request it starts; a Store only keeps what the
// engine writes and returns it.
//
// Contract (checked by package storetest, run against every implementation):
//   - All methods are safe for concurrent use. Calls for one request come from the
//     engine in a consistent order (Put before Append, nothing after Delete) but may
//     overlap with calls for the same request from a reader (Replay, Get).
//   - Put creates or replaces the record; it may keep rec.ID's bytes (nobody
//     modifies them after). Get returns a copy, or ErrNotFound. The engine puts a
//     request's record when it starts (processing) and again when it completes or
//     fails, right after appending its final response. Put does not replace a
//     record whose Owner is not rec.Owner: it returns ErrClaimed and changes
//     nothing (an instance whose request was claimed while it was cut off cannot
//     overwrite its successor's record). A store that writes the record of a new
//     request later (jsstore's DeferRecords, for a store no other instance
//     shares) returns nil at once and cannot report that.
//   - Append adds a message whose Seq is greater than every Seq appended before for
//     that request; Append for an unknown request returns ErrNotFound.
//   - Discard removes the named messages; numbers not held are ignored. This
//     Store's Replay never yields them again; a durable store may delete them
//     from storage later (in batches), but no later than the Put of the
//     request's final state or its Delete: a process that stops before may
//     leave a few to the next, which replays them (a client with acks has them
//     already).
//   - Append may return before the message is durable, or even sent (and a
//     message discarded before it was sent need never be); the Put of a final
//     state (completed, failed) and Delete wait for every message appended
//     before: what a later process finds of an ended request is exact.
//   - Replay yields, in ascending Seq, the messages held with Seq > after at the time
//     of the call, then stops. For an unknown request it yields one ErrNotFound.
//     A message appended during the iteration may or may not be yielded.
//   - Delete removes the record and every message; deleting twice is not an error.
//     A durable store keeps a deletion as it keeps a write: once Delete has
//     returned, no later process finds the request (Get, Records, Replay), even
//     after a crash; the engine answers an acknowledgement or a cancel only
//     after it. A crash during Delete may leave the request whole, or gone.
//
// Optional: a Store that outlives its process implements Lister, and one that
// instances share (Options.Cluster) Lister and Claimer:
//   - Records yields every record held, in no particular order, then stops; a
//     record put or deleted during the iteration may or may not be yielded. An
//     error wrapping ErrUnreadable stands for one record the Store cannot decode,
//     and the iteration goes on past it; any other error ends the iteration.
//     The engine calls it once, in New, to recover the requests a durable store
//     kept from an earlier process (see Engine), and again when an instance
//     sharing the store is lost (Cluster); it skips unreadable records, and leaves
//     them in the store.
//   - Claim moves a request to a new owner, atomically: it sets the record's
//     Owner to "to" and returns the record as it now is if its Owner was "from",
//     returns ErrClaimed (and changes nothing) if its Owner was anything else, and
//     ErrNotFound for a request it does not hold. Of many Claims racing from the
//     same owner, exactly one succeeds.
//
// A store shared by several instances (Options.Cluster) sees each request written by
// one engine at a time: its owner's, then its claimer's.
type Store interface {
	// Put creates or replaces a request's record; ErrClaimed, changing
	// nothing, when the stored record's Owner is not rec.Owner.
	Put(ctx context.Context, rec Record) error
	// Get returns a copy of a request's record, or ErrNotFound.
	Get(ctx context.Context, h TokenHash) (*Record, error)
	// Append adds a message numbered after every one appended before for the
	// request (ErrNotFound for an unknown request); it may return before the
	// message is durable.
	Append(ctx context.Context, h TokenHash, m Message) error
	// Discard removes the named messages; Replay never yields them again.
	Discard(ctx context.Context, h TokenHash, seqs ...uint64) error
	// Replay yields, in ascending Seq, the request's messages after the given
	// number, as held when called; one ErrNotFound for an unknown request.
	Replay(ctx context.Context, h TokenHash, after uint64) iter.Seq2[Message, error]
	// Delete removes the request's record and every message of it, for good:
	// no later process finds it once Delete has returned.
	Delete(ctx context.Context, h TokenHash) error
}

// Lister is a Store whose records outlive the process: New recovers the
// requests it lists (see Store's contract for Records). Without it, New
// recovers nothing.
type Lister interface {
	Store
	// Records yields every record held, in no particular order (an error
	// wrapping ErrUnreadable stands for one it cannot decode).
	Records(ctx context.Context) iter.Seq2[Record, error]
}

// Claimer is a Store that moves a request from one owner to another (see
// Store's contract for Claim): a cluster's claims of a lost instance's requests,
// and an engine without a Cluster taking over records a cluster left.
type Claimer interface {
	Store
	// Claim moves a request from owner from to owner to, atomically, and
	// returns its record as it now is; ErrClaimed when its owner was not from.
	Claim(ctx context.Context, h TokenHash, from, to string) (*Record, error)
}

// Sink is where a request's messages are written: a connection, or one stream of a
// connection (an SSE response on Streamable HTTP). Write gets the whole Message:
// its Data to send, its Seq (for transports that number their events, such as SSE
// event ids) and its Kind (a KindResponse ends a request's stream). Messages
// written outside any outbox have Seq 0.
// Write is called by one goroutine at a time per attachment, but different
// requests write to the same Sink concurrently, so a Sink's Write must be safe for
// concurrent use. It must not modify m.Data. A Write error detaches
// the request from the sink. A Sink must be comparable (a pointer, typically):
// Detach finds the attachment to end by equality. Package mcp's Stream is this
// interface.
type Sink interface {
	// Write sends m to the client (see Sink).
	Write(ctx context.Context, m Message) error
}

// FreshReplayer is a Store that can read a request's messages as its stream
// holds them now, for a request another instance of a cluster writes (Replay
// may answer from what this Store remembered when it first read it).
type FreshReplayer interface {
	// ReplayFresh is Replay of the request as stored now.
	ReplayFresh(ctx context.Context, h TokenHash, after uint64) iter.Seq2[Message, error]
}

// DeliveryWatcher is a Store told when a request's final response was first
// written to a client: jsstore's DeliveredInMemory then keeps a request that
// ended before any of it was written in memory alone. The engine calls it with
// the request's lock held; it returns at once.
type DeliveryWatcher interface {
	// Delivered: request h's final response was written to a client.
	Delivered(h TokenHash)
}
