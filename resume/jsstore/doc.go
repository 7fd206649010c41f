// Package jsstore is a resume.Store on NATS JetStream: queued messages and records
// survive the process (with a file-backed server) and live in one place that every
// instance connected to the same NATS can read.
//
// # Layout
//
// One stream (Options.Stream, default MCP_RESUME) holds every queued message, on a
// subject of its request: <Options.Subject>.<SHA-256 of the token, hex>. A message
// is stored as its kind, sequence number, coalescing key and data, in a stream
// message of its own or in a pack: one stream message holding several messages
// of its request, which the write-behind sends together (see Writes). Messages
// discarded from a pack that still holds others stay in it; the stream says
// which in a stream message of their numbers, written before the request's
// final state (and by Sweep), which a later process's index leaves out. A
// stream written before packs (a stream message per message) reads as it was.
// One KV bucket (Options.Bucket, default mcp-resume) holds the records, keyed by
// the same hex hash, one revision per key: each write rolls the key's earlier revision up
// (Nats-Rollup), under a history of 8 that the server's own limit never reaches.
//
// # Hygiene
//
// Nothing grows with the number of requests ever made: Discard deletes delivered
// messages, in batches (a run at the head of a queue in one subject purge; a
// pack once every message in it is discarded), Delete purges
// its key's subject from the bucket's stream and the request's subject from the
// stream (not when this store made the request and sent none of its messages:
// a quick call delivered within the write-behind costs one purge, not two), so
// no KV delete marker is left behind. Per-message TTLs are not used. As a safety
// net for what no process deletes (an instance that never comes back), the stream
// and the bucket age entries out after Options.MaxAge. Publishes carry a message id
// (hash and sequence numbers) so that the retries of a publish whose
// acknowledgement was lost, or sent while NATS was unreachable (for up to
// Options.OutageWait), are deduplicated; the deduplication window
// (Options.Duplicates) is short because JetStream keeps every id for that long.
//
// # What this process keeps
//
// For each request it has put or read, the store keeps the stream sequence of each
// queued message (numbers only, but for the newest 64, kept whole, and for those
// whose publish is not acknowledged yet): Discard deletes by stream sequence, and
// Replay starts at the first message wanted.
//
// # Writes
//
// Append does not wait for the stream, nor publish at once: a message waits up to
// flushDelay (1 ms), or until flushBatch (256) of its request wait, and is then
// published, with those of its request waiting beside it in one pack (up to
// packBytes, 64 KiB: one publish, acknowledgement and stored message for them
// all, which is what a request appending without pause, a task's progress,
// costs the stream), pipelined on the connection, in order, and acknowledged in
// the background, with at most maxInFlight (256) of the store's publishes in flight:
// a writer faster than the stream waits for it, and nothing that waits for an
// acknowledgement waits behind more than that (see window). While the connection
// is down nothing is published, and Append waits for it (Options.OutageWait).
// A message discarded before it was sent (delivered to a client attached
// without acks) is never sent, so a request streaming to such a client
// costs the stream nothing. With Options.DeferRecords a new request's record
// waits the same way (Get answers with it meanwhile), and one that ends first is
// written once, with its final state. A Discard batch, the Put of a final state,
// Delete, Sweep and Close send what waits and wait for its acknowledgements. The Put of a request's final
// state, Delete and Sweep wait for every message before them (sending again, with
// its message id, a publish whose acknowledgement failed); a Replay gives an
// unacknowledged message from the publish itself. A crash can lose what a running
// request published in its last moments; a finished request is stored exactly. A
// request of an earlier process is indexed on first use by reading its subject.
// One store instance per engine; engines of several processes share a stream and
// a bucket only as instances of a cluster (resume/cluster), each request owned by
// one of them (Record.Owner, Claim).
//
// # Losing the stream or the bucket
//
// NATS can come back without them (deleted, or a server restarted on an empty
// directory). The store notices (see lost.go), makes them anew, and reports
// every request it held as lost (resume.ErrStoreLost): nothing waits for a
// stream that is not there, and new requests are stored again.
//
// # Crashes
//
// Every deletion the store makes is one the server keeps across a crash of its
// process (SIGKILL), with or without sync always: a purge or a message deletion
// leaves a tombstone in the stream's files. A revision the server drops on its
// own for the history limit does not (nats-server's file store notes it only in
// its index, written every two minutes and at a clean shutdown): after a crash
// it is read again, and the history limit hides it again only behind a newer
// revision. With history 1 and Delete's purge of the newest revision, a deleted
// request came back after a crash as its record before the final state
// (processing: it failed as server_restarted, or ran again). Hence the rollups:
// the server never drops a revision on its own, and a deleted request stays
// deleted once Delete has returned, a crash right after it included.
package jsstore
