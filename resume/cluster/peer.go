package cluster

import (
	"errors"

	"github.com/mcp-resume/mcp-resume/resume"
)

// The calls between instances: what a proxy asks of the owner of a request,
// and an answer forwarded to the instance that asked the client (codec.go
// encodes them).

// PeerOp is what a PeerCall asks of the owner of a request.
type PeerOp uint8

const (
	// PeerTouch: Touch(Ack), and the request's Status in the reply; with an
	// Inbox, whether the request is still attached to it.
	PeerTouch PeerOp = iota + 1
	// PeerAttach: Attach to a sink that delivers to Inbox, with Ack.
	PeerAttach
	// PeerDetach: Detach from the sink that delivers to Inbox.
	PeerDetach
	// PeerCancel: Cancel.
	PeerCancel
	// PeerAnswer: Data is a client's response to a server-to-client request
	// this instance sent (Node.OnAnswer).
	PeerAnswer
	// PeerReattach: as PeerAttach, but Ack is what a proxy whose owner was lost
	// wrote to its client, not the client's acknowledgement (see
	// reattach).
	PeerReattach
	// PeerAttachAcked: as PeerAttach, for AttachAcked (Ack was the client's
	// explicit acknowledgement, 0 included: the replay window is written again).
	PeerAttachAcked
	// PeerAttachAll: as PeerAttach, for AttachAll (the client has seen nothing:
	// every message held, the replay window's included). Ack is 0.
	PeerAttachAll
	// PeerAttachFollow: as PeerAttach, for AttachFollow (a follower: what is
	// written to it is delivered).
	PeerAttachFollow
)

// PeerCall is one call from an instance to another.
type PeerCall struct {
	Op    PeerOp
	Hash  resume.TokenHash
	Ack   uint64
	Inbox string
	Data  []byte
}

// PeerReply answers a PeerCall.
type PeerReply struct {
	Status resume.Status
	// Detached, in the reply to a PeerTouch that named an Inbox, says that
	// the request is not attached to it (another client took it over).
	Detached bool
	// Err is "" for success, or one of the peerErr codes.
	Err string
}

// The errors a PeerReply carries, by code, the most precise first: an ended
// request's error is also ErrEnded (endedError), and the code says what ended it.
var peerErrs = []struct {
	code string
	err  error
}{
	{"unknown", resume.ErrUnknown}, {"cancelled", resume.ErrCancelled}, {"expired", resume.ErrExpired},
	{"acknowledged", resume.ErrAcknowledged}, {"ack_ahead", resume.ErrAckAhead},
	{"ended", resume.ErrEnded}, {"closed", resume.ErrClosed},
}

// errRemote: the owner answered with an error that has no code.
var errRemote = errors.New("cluster: the owning instance failed the call")

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
