package resume

import (
	"context"
	"errors"
)

// Several instances. Engines that share one Store (JetStream, with --nats-url) and
// are connected by Peers form a cluster, and a client may reach any instance:
//
//   - The engine that starts a request owns it (Record.Owner is its Peers.Self):
//     only the owner runs its handler, writes its messages and state, and keeps it
//     in memory. Everything else about the request is decided there.
//   - An engine that does not hold a request in memory looks its record up in the
//     Store (LookupAs). Found, with the right id and principal, and owned by a live
//     instance, the request is served through the owner: LookupAs returns a proxy
//     Request whose Touch, Status, Attach, Detach and Cancel are calls to the owner
//     (PeerCall). An Attach opens an inbox on this instance (Peers.Listen) and the
//     owner attaches the request to it: each message the owner writes is delivered
//     to the inbox and written to the local sink, and the local write's result goes
//     back to the owner as its sink's. Attachment, takeover, acks and timers are
//     the owner's, unchanged.
//   - When an owner's lease lapses (Peers.Watch, Peers.OnDeparted), its requests
//     are claimed (Store.Claim, one winner) and recovered by the claimer as after
//     a restart (recover.go), except that a request that was processing ends with
//     Options.Ended's response for ErrOwnerLost, or runs again if
//     restartable. A proxy attached at the time re-attaches its sink to the
//     claimed request, so the client gets the rest of the messages, then that
//     response, without resuming.
//   - An owner whose remote sink's instance is lost detaches the request from it
//     (its maxWait clock starts), as it would for a dropped connection.
//
// Peers is trusted: a PeerCall names a request by its token's hash, which any
// instance reads from the Store. Secure the NATS that carries it.

// Peers connects an engine to the other instances sharing its Store. Methods are
// safe for concurrent use.
type Peers interface {
	// Self names this instance: non-empty, and unique among the live instances.
	Self() string
	// Alive reports whether instance holds its lease now. It is false for "" and
	// when the answer cannot be had.
	Alive(ctx context.Context, instance string) bool
	// Call sends c to instance, whose handler (Handle) answers it. An error means
	// no answer came: the instance is gone or unreachable.
	Call(ctx context.Context, instance string, c PeerCall) (PeerReply, error)
	// Handle sets the handler of the calls other instances send this one. The
	// engine calls it once, in New.
	Handle(h func(ctx context.Context, from string, c PeerCall) PeerReply)
	// Listen opens an inbox on this instance, named uniquely in the cluster.
	// Messages Delivered to it are passed to deliver one at a time, in the order
	// they were delivered; deliver's error is Deliver's result. close closes the
	// inbox; Delivers to it fail after.
	Listen(deliver func(Message) error) (inbox string, close func())
	// Deliver passes m to inbox's deliver, on whichever instance opened it, and
	// returns deliver's error, or an error of its own when no answer came.
	Deliver(ctx context.Context, inbox string, m Message) error
	// InboxOwner names the instance that opened inbox.
	InboxOwner(inbox string) string
	// Watch calls lost once, on a goroutine of its own, when instance's lease
	// lapses (at once when it holds none). stop cancels the watch; it does not
	// wait for a lost already running.
	Watch(instance string, lost func()) (stop func())
	// OnDeparted calls fn, on a goroutine of its own, with the name of each
	// instance whose lease lapses while this one runs. The engine calls it once, in
	// New.
	OnDeparted(fn func(instance string))
}

// PeerOp is what a PeerCall asks of the owner of a request.
type PeerOp uint8

const (
	// PeerTouch: Request.Touch(Ack), and the request's Status in the reply.
	PeerTouch PeerOp = iota + 1
	// PeerAttach: Request.Attach to a sink that delivers to Inbox, with Ack.
	PeerAttach
	// PeerDetach: Request.Detach from the sink that delivers to Inbox.
	PeerDetach
	// PeerCancel: Request.Cancel.
	PeerCancel
	// PeerAnswer: Data is a client's response to a server-to-client request
	// this instance sent (Options.Answer).
	PeerAnswer
	// PeerReattach: as PeerAttach, but Ack is what a proxy whose owner was lost
	// wrote to its client, not the client's acknowledgement (see
	// Request.reattach). An instance older than this op fails it; the caller then
	// attaches with PeerAttach and Ack, as such an instance did itself.
	PeerReattach
)

// PeerCall is one call from an instance to another.
type PeerCall struct {
	Op    PeerOp
	Hash  TokenHash
	Ack   uint64
	Inbox string
	Data  []byte
}

// PeerReply answers a PeerCall.
type PeerReply struct {
	Status Status
	// Err is "" for success, or one of the peerErr codes.
	Err string
}

// The errors a PeerReply carries, by code, the most precise first: an ended
// request's error is also ErrEnded (endedError), and the code says what ended it.
var peerErrs = []struct {
	code string
	err  error
}{
	{"unknown", ErrUnknown}, {"cancelled", ErrCancelled}, {"expired", ErrExpired},
	// Newer codes: an instance that does not know them reads a failed call.
	{"acknowledged", ErrAcknowledged}, {"ack_ahead", ErrAckAhead},
	{"ended", ErrEnded}, {"closed", ErrClosed},
}

// errRemote: the owner answered with an error that has no code.
var errRemote = errors.New("resume: the owning instance failed the call")

// PeerError encodes err for a PeerReply.
func PeerError(err error) string {
	if err == nil {
		return ""
	}
	for _, p := range peerErrs {
		if errors.Is(err, p.err) {
			return p.code
		}
	}
	return "failed"
}

// Error decodes the reply's error: nil, one of the engine's errors, or a generic
// one.
func (p PeerReply) Error() error {
	if p.Err == "" {
		return nil
	}
	for _, e := range peerErrs {
		if e.code == p.Err {
			return e.err
		}
	}
	return errRemote
}
