// Package cluster connects the engines of several mcp-resume instances over NATS.
// Node is an engine's resume.Cluster (serve.go): it resolves a request another
// instance owns to a proxy (proxy.go), whose calls go to the owner, or claims it
// from a lost owner; it answers the calls of other instances' proxies for the
// requests its engine owns, claims the requests of instances that depart, and
// forwards a client's answers to the instance that asked. Below that, it is the
// membership (leases), the calls between instances and the inboxes that carry
// an attached request's messages to the instance its client is connected to.
// resume.Cluster's doc tells who owns what. The node works on its engine
// through the resume.Host that the engine hands it in Bind.
//
// # Leases
//
// A JetStream KV bucket (Options.Bucket, default mcp-resume-leases; history 1,
// TTL Options.Lease, default 10s) holds one key per live instance: its name, with
// a random incarnation id as its value. Join creates the key, and waits while it
// exists: an instance of that name is alive, or died less than a lease ago. The
// node refreshes the key every Lease/3 by an update on its last revision; a
// refresh that finds the key gone or another incarnation's (a partition longer
// than the lease, then a process of the same name) logs an error, stops
// refreshing and closes Lost: the owner of the node must stop running its requests
// (mcp-resume serve shuts down and exits non-zero). Between the lapse and that
// refresh, up to Lease/3, the old owner may still write: its record writes are
// fenced (a Store's Put refuses a record another instance has claimed,
// ErrClaimed); its other writes are not. A message it appends to a request
// claimed meanwhile lands in the stream, unseen by the claimer, and comes back
// only when a later process reads that request from the store. A request it
// ends in that window (an ack, a cancel, an expiry) is deleted from the store,
// the claimer's copy with it, and replaced by its tombstone (written after the
// delete, so not fenced): the other instances answer expired or cancelled for
// it, the claimer serves it from memory until it ends, and the claimer's own
// later writes of it fail (ErrClaimed, logged). Close deletes the key.
//
// Every node lists the bucket every Lease/4 (one ordered consumer, the last value
// of each key). An instance in one listing and absent from the next, or there with
// another incarnation (a restart under the same name between two listings), has
// departed: Watch callbacks on it and the OnDeparted functions are called. Alive
// reads the key.
//
// # Timing
//
// A graceful leave is seen at the next listing, within Lease/4 and a round trip.
// A crashed instance is seen once its lease has lapsed and been removed, at the
// next listing: between Lease and Lease*1.25 after its last refresh (so from 2/3
// of a lease to 1.25 leases after the crash), plus the listing's round trip, plus
// the server's lateness in removing an expired entry (JetStream checks ages on a
// timer, against a clock it advances in steps: a few hundred milliseconds, see
// docs/testing.md). So with the default lease of 10s a crash is seen within
// about 13s. An entry is never
// removed early, and no clocks of two machines are compared: only the NATS
// server's ages the leases.
//
// A listing (an ordered consumer on the bucket's stream) can miss a key that is
// being refreshed at that moment, so a key missing from a listing is read again
// before its instance is judged departed.
//
// # Subjects
//
// An instance serves calls on <Options.Subject>.<name> (default mr.ctl.<name>):
// a NATS request carrying the caller's name, the PeerCall and how long the caller
// waits (the handler's context ends then), answered with the PeerReply (see
// codec.go). Each inbox is <Subject>.<name>.in.<16 random hex digits>; a Deliver
// is a request carrying the Message, answered with the text of deliver's error
// (empty for none). Calls and Delivers wait at most Options.CallTimeout; one to an
// instance or inbox that is gone fails at once (no responders), and one that the
// instance took but never answered because it died fails at the poll that finds
// its lease lapsed (about Lease after its last refresh), not at CallTimeout. A
// proxy attaching when its owner dies mid-call thus fails over within about the
// lease, like one attached before.
//
// # Trust
//
// The instances trust each other and NATS: a call's "from" is what the caller
// says, a PeerCall names a request by its token's hash, which any instance reads
// from the Store, and whoever may publish on <Subject>.> or write the bucket can
// act as any instance, deliver into any inbox, or fake and delete leases. Give only
// the instances permission to publish on <Subject>.> and $KV.<Bucket>.>, and keep
// NATS off untrusted networks (or use TLS and credentials).
package cluster
