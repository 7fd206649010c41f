package resume

import (
	"time"

	"github.com/rs/zerolog"
)

// Options configure an Engine. The zero value of each field means its default.
type Options struct {
	// MaxWait is how long a detached, processing request lives without a client
	// (reset by Touch and Attach). Default 10 minutes.
	MaxWait time.Duration
	// MinWait is the time a client should wait after a disconnect before it resumes;
	// advertised only. Default 0.
	MinWait time.Duration
	// Retention is how long a final response that no client has received is kept
	// after completion (reset by Touch and Attach). Default MaxWait.
	Retention time.Duration
	// DeliveredRetention is how long a final response is kept once it has been
	// written to an attached client, unacknowledged: long enough for a client whose
	// connection died with the response in its buffers to resume. Default one
	// minute, and never longer than Retention.
	DeliveredRetention time.Duration
	// TombstoneTTL is how long an ended request is remembered to answer "expired" or
	// "cancelled" instead of "not found". Default 1 hour.
	TombstoneTTL time.Duration
	// MaxTombstones bounds the tombstones kept; the oldest go first. Default 100,000.
	MaxTombstones int
	// MaxLive caps the running (processing) resumable requests; Start returns
	// ErrLimit past it. Default 10,000.
	MaxLive int
	// MemoryShort, when set, reports whether the process is short of memory:
	// while it is, Start returns ErrMemory, and a new call runs without a
	// resume policy as past MaxLive, so that requests outliving their clients
	// stop piling up before the process is killed for its memory. It is called
	// at every Start: it must be cheap.
	MemoryShort func() bool
	// MemoryTight, when set, reports whether the process is nearing the
	// point where MemoryShort would be: while it is, a request keeps the
	// newest progress of each token alone, as one whose client has been away
	// longer than ProgressHistory (whatever ProgressHistory is), so that what
	// superseded progress holds goes before new calls lose their resume
	// policy (and what else a caller of Engine.Tight lets go). It is called
	// as each progress message is queued: it must be cheap.
	MemoryTight func() bool
	// MaxLivePerPrincipal caps the running resumable requests of each principal
	// (StartOptions.Principal; requests without a principal are bounded by MaxLive
	// only); Start returns ErrLimit past it. Default 500; negative: no cap.
	MaxLivePerPrincipal int
	// MaxRetained caps the ended requests whose results are kept; past it the
	// oldest is released early (it answers expired). Default 100,000.
	MaxRetained int
	// QueueBytes is each request's byte budget for queued messages. Default 1 MiB.
	QueueBytes int
	// MaxBytes bounds the bytes of every request's queued messages together,
	// kept results included. Past it, the oldest kept results are released first
	// (they answer ErrEvicted); a running request that queues more has its
	// droppable messages dropped as its QueueBytes would drop them (older progress
	// of a token, then notifications, oldest first; never a response or a
	// server-to-client request); and Start returns ErrFull while the budget is
	// still used up. Default 1 GiB; negative: no bound.
	MaxBytes int64
	// MaxBytesPerPrincipal is MaxBytes for the requests of each principal
	// (StartOptions.Principal; requests without one are bounded by MaxBytes only):
	// past it, that principal's oldest kept results go, and its new requests get
	// ErrFull. Default MaxBytes/4; negative: no bound.
	MaxBytesPerPrincipal int64
	// ReplayWindowBytes and ReplayWindow bound what a request keeps of the
	// messages it delivered to a client that does not acknowledge (no ack
	// extension): the newest ReplayWindowBytes of them, for ReplayWindow after
	// the last. A client that acknowledges for the first time when it resumes
	// (Attach with an ack), or that retried its call (AttachAll), gets again
	// those after its ack, so what its lost connection held in buffers is not
	// lost. Defaults 32 KiB and one minute; a negative ReplayWindowBytes keeps
	// none.
	ReplayWindowBytes int
	ReplayWindow      time.Duration
	// ProgressHistory is how long a progress notification that a newer one of
	// the same token superseded stays queued: a client back within it gets
	// every value, one away longer the newest of each token (progress
	// reports a state; a detached countdown would otherwise queue every step
	// until its budget). Once the request has had no client for longer than
	// it, superseded progress goes at once: a detached request holds the
	// newest of each token alone. It is let go as the next progress of the
	// request is queued. Default 10 s; negative: kept until QueueBytes or
	// MaxBytes needs its room. While the process is tight on memory
	// (MemoryTight), none is kept.
	ProgressHistory time.Duration
	// Ended encodes the final response of a request that ended without its
	// handler's: cause is ErrRestarted, ErrOwnerLost or ErrStoreLost, seq the
	// response's sequence number. The protocol's layer supplies it (package mcp: the MCP
	// error with its reason); the default is a JSON-RPC 2.0 internal error
	// (-32603) with cause's text.
	Ended func(id []byte, seq uint64, cause error) []byte
	// OnLost, when set, is told of each request that was processing when the
	// process running it was lost, and that ends now with Ended's response:
	// at the recovery after a restart (cause ErrRestarted), or at the claim of
	// a lost instance's requests (ErrOwnerLost). rec is its record (its Trace:
	// where to report it). A restartable request runs again instead
	// (Restartable) and is not told of. Called during the recovery (in New,
	// or the claim), after the response is stored: it must return quickly and
	// not call the Engine.
	OnLost func(rec Record, cause error)
	// Cluster, when set, makes the engine one instance of several sharing its
	// Store (see Cluster). Nil: the engine owns every request in its Store.
	Cluster Cluster
	// OnRestartable is called, on a goroutine of its own, when requests to run
	// again are ready in Restartable after New has returned (claimed from a lost
	// instance). Recovery in New does not call it: the caller asks Restartable.
	OnRestartable func()
	// Logger receives the engine's logs. Nil means none.
	Logger *zerolog.Logger
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	def := func(d *time.Duration, val time.Duration) {
		if *d <= 0 {
			*d = val
		}
	}
	def(&v.MaxWait, 10*time.Minute)
	def(&v.Retention, v.MaxWait)
	def(&v.DeliveredRetention, time.Minute)
	v.DeliveredRetention = min(v.DeliveredRetention, v.Retention)
	def(&v.TombstoneTTL, time.Hour)
	if v.MaxTombstones <= 0 {
		v.MaxTombstones = 100_000
	}
	if v.MaxLive <= 0 {
		v.MaxLive = 10_000
	}
	if v.MaxLivePerPrincipal == 0 {
		v.MaxLivePerPrincipal = DefaultMaxLivePerPrincipal
	}
	if v.MaxRetained <= 0 {
		v.MaxRetained = 100_000
	}
	if v.QueueBytes <= 0 {
		v.QueueBytes = 1 << 20
	}
	if v.ReplayWindowBytes == 0 {
		v.ReplayWindowBytes = 32 << 10
	}
	def(&v.ReplayWindow, time.Minute)
	if v.ProgressHistory == 0 {
		v.ProgressHistory = 10 * time.Second
	}
	if v.MaxBytes == 0 {
		v.MaxBytes = 1 << 30
	}
	if v.MaxBytesPerPrincipal == 0 && v.MaxBytes > 0 {
		v.MaxBytesPerPrincipal = v.MaxBytes / 4
	}
	if v.Ended == nil {
		v.Ended = endedResponse
	}
	if v.Logger == nil {
		nop := zerolog.Nop()
		v.Logger = &nop
	}
	return v
}

// DefaultMaxLivePerPrincipal is Options.MaxLivePerPrincipal's default.
const DefaultMaxLivePerPrincipal = 500
