// Package resume is the resumable-request engine: MCP-agnostic, with no I/O of its
// own besides its Store and the Sinks it is handed.
//
// # Seams
//
// The engine is local: it starts, runs and recovers the requests of this process.
// Start returns the *Request (the handler's side: Append, Complete, Context);
// lookups return a Handle (the client's side: Status, Touch, Attach, Detach,
// Cancel), the *Request itself or, with a Cluster (package cluster), a proxy of a
// request another instance owns. The Cluster works on the engine through the
// Host the engine hands it (Cluster.Bind), not through exported methods of
// Engine. The protocol's layer (package mcp) supplies the encoding of the
// responses the engine makes itself (Options.Ended) and maps its errors to wire
// errors. A Store needs Put, Get, Append, Discard, Replay and
// Delete; a durable one is also a Lister (recovery), a shared one a Claimer.
//
// # Lifecycle
//
// A request is started with Engine.Start, which draws a 256-bit token, keeps only its
// SHA-256 hash, and registers the request under that hash. The request runs on its own
// context (Request.Context), which only Cancel, expiry and Engine.Close end: never a
// connection. It is processing until Complete, then completed or failed; Cancel and
// expiry end it early as cancelled or expired. A request that ends leaves a tombstone
// (hash, id, final state) for Options.TombstoneTTL, so a late resume gets a precise
// answer instead of "not found".
//
// # Attachment
//
// A request is attached to at most one Sink (a connection's writer). Attach replaces
// the current sink (takeover: the old one gets nothing more); Detach, or a failed
// write, leaves it detached. (A re-Attach to the same sink while a write to it is in
// flight may deliver that one message twice; its sequence number tells the client.) A processing request that is detached starts its maxWait
// clock; Touch (requests/getStatus) and Attach (requests/resume) reset it. Expiry
// cancels the request's context and frees it.
//
// # Sequence numbers and the outbox
//
// Every outgoing message of a request gets the next sequence number (1, 2, 3, ...),
// which the caller's encode function writes into the message. Messages go to the
// Store first and reach the sink from there, in order, through one delivery loop per
// attachment (the "drain"), so replay after a resume and live delivery are the same
// code. Each attachment has a cursor: the highest number written to it.
//
// # Retention
//
// Without acknowledgements, intermediate messages (progress, logs, other
// notifications) written successfully to a sink count as delivered and are dropped.
// The final response and unanswered server-to-client requests stay until
// acknowledged, answered, or the retention window after completion ends, so a client
// that comes back after the work finished still gets its result. A client that acks
// (Attach or Touch with ack > 0, or an ack-mode request from the start) switches the
// request to ack mode: nothing is dropped on write, everything up to the ack is
// dropped on ack, and every message reaches the client exactly once across any
// number of disconnects. The mode is stored with the request (Record.AckMode), so a
// recovered request keeps it.
//
// # Stores
//
// Without a Store (New(ctx, nil, ...), what serve does without --data-dir or
// --nats-url) the engine keeps each queued message in its outbox, and nothing
// outlives the process. With one, the outbox indexes the messages and the Store
// holds them; memstore is a Store in memory, the reference for the contract
// (storetest) and for tests that look into a store.
//
// # Restarts
//
// A durable Store (package jsstore) outlives the process. New recovers what it holds
// (Store.Records, then Replay for each): a completed or failed request comes back
// resumable with its queued messages; one that was processing ends as failed with
// Options.Ended's response for ErrRestarted queued as its final response. The
// engine stores a request's final state right after its final response, and the
// response itself says whether it failed (Message.Failed), so a restart tells
// them apart. See recover.go.
//
// # When the Store fails
//
// A Store call that fails is not the end of a request: a message that could not
// be queued is dropped (logged), but a final response is tried again until the
// Store takes it, the request is cancelled, or the engine closes (the request
// stays processing meanwhile, and answers getStatus, resume and cancel). A
// Store that lost what it held of a request (a call fails wrapping
// ErrStoreLost) has it end as failed with Options.Ended's response for
// ErrStoreLost, kept in memory and stored anew: its client gets the reason, not
// a gap (Request.loseLocked).
//
// # Bounded memory
//
// Each request has a byte budget (Options.QueueBytes). Over it, queued progress
// messages are coalesced to the newest per progress token, then droppable
// notifications are dropped oldest first and counted; responses and
// server-to-client requests are never dropped. Options.MaxLive caps the number of
// live requests; Start returns ErrLimit past it.
package resume
